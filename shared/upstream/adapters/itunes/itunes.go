// Package itunes serves app_store_a/app-info over the iTunes Search API's
// Lookup request (https://itunes.apple.com/lookup), which needs no
// credentials: ?id=<track id> or ?bundleId=<bundle id>, with country,
// lang (five-letter codename such as en_us) and entity=software.
//
// The lookup answers {"resultCount": n, "results": [...]}; the looked-up
// record comes first. Its numeric ids are decoded as json.Number and kept
// as strings, and fileSizeBytes, which the API sends as a string, is
// parsed with care. The lookup carries no related-app lists, so
// similar_apps and more_apps_by_developer stay absent and
// related_apps_included is false.
package itunes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Name is the provider's internal name (base URL variable, fixture folder).
const Name = "itunes_lookup"

// throttleWait is the wait suggested when the API refuses for its rate
// limit without saying how long: it documents roughly 20 calls a minute.
const throttleWait = time.Minute

// Provider is the iTunes Search API lookup.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     Name,
		Protocol: "iTunes Search API, Lookup request (JSON over HTTPS, no credentials)",
		Docs:     "https://performance-partners.apple.com/search-api",
		BaseURL:  "https://itunes.apple.com",
		Endpoints: map[string]upstream.Adapter{
			"app_store_a/app-info": appInfo,
		},
	}
}

// numericID tells a track id from a bundle id (the registry has already
// checked that app_id is one or the other).
var numericID = regexp.MustCompile(`^[0-9]+$`)

// lookupResponse is the Lookup answer.
type lookupResponse struct {
	ResultCount *json.Number      `json:"resultCount"`
	Results     []json.RawMessage `json:"results"`
}

// softwareResult holds the fields of a software record that are mapped.
type softwareResult struct {
	WrapperType string      `json:"wrapperType"`
	Kind        string      `json:"kind"`
	TrackID     json.Number `json:"trackId"`
	TrackName   *string     `json:"trackName"`
	BundleID    *string     `json:"bundleId"`
	TrackURL    *string     `json:"trackViewUrl"`

	ArtistID   json.Number `json:"artistId"`
	ArtistName *string     `json:"artistName"`
	SellerName *string     `json:"sellerName"`
	ArtistURL  *string     `json:"artistViewUrl"`
	SellerURL  *string     `json:"sellerUrl"`

	Price          *json.Number `json:"price"`
	FormattedPrice *string      `json:"formattedPrice"`
	Currency       *string      `json:"currency"`

	AverageUserRating                  *json.Number `json:"averageUserRating"`
	UserRatingCount                    *json.Number `json:"userRatingCount"`
	AverageUserRatingForCurrentVersion *json.Number `json:"averageUserRatingForCurrentVersion"`
	UserRatingCountForCurrentVersion   *json.Number `json:"userRatingCountForCurrentVersion"`

	Version      *string         `json:"version"`
	FileSize     json.RawMessage `json:"fileSizeBytes"` // a string in practice; a number is accepted too
	Description  *string         `json:"description"`
	ReleaseNotes *string         `json:"releaseNotes"`

	Genres             []string `json:"genres"`
	PrimaryGenreName   *string  `json:"primaryGenreName"`
	ScreenshotURLs     []string `json:"screenshotUrls"`
	IPadScreenshotURLs []string `json:"ipadScreenshotUrls"`
	ArtworkURL512      *string  `json:"artworkUrl512"`
	ArtworkURL100      *string  `json:"artworkUrl100"`

	ReleaseDate              *string  `json:"releaseDate"`
	CurrentVersionReleasedAt *string  `json:"currentVersionReleaseDate"`
	MinimumOSVersion         *string  `json:"minimumOsVersion"`
	ContentRating            *string  `json:"trackContentRating"`
	Languages                []string `json:"languageCodesISO2A"`
}

// AppInfo is the data of app_store_a/app-info. Nullable fields have no
// omitempty: null says unknown. similar_apps and more_apps_by_developer
// are deliberately not fields: this source never supplies them.
type AppInfo struct {
	ID          *string    `json:"id"`
	BundleID    *string    `json:"bundle_id"`
	Name        *string    `json:"name"`
	URL         *string    `json:"url"`
	Developer   *Developer `json:"developer"`
	Price       *Price     `json:"price"`
	Rating      *Rating    `json:"rating"`
	Version     *string    `json:"version"`
	SizeBytes   *int64     `json:"size_bytes"`
	Description *string    `json:"description"`

	// Fields the spec holds without naming them (additional fields).
	Genres                   []string `json:"genres"`
	PrimaryGenre             *string  `json:"primary_genre"`
	Screenshots              []string `json:"screenshots"`
	IPadScreenshots          []string `json:"ipad_screenshots"`
	ReleaseNotes             *string  `json:"release_notes"`
	IconURL                  *string  `json:"icon_url"`
	ReleasedAt               *string  `json:"released_at"`
	CurrentVersionReleasedAt *string  `json:"current_version_released_at"`
	MinimumOSVersion         *string  `json:"minimum_os_version"`
	ContentRating            *string  `json:"content_rating"`
	Languages                []string `json:"languages"`

	RelatedAppsIncluded bool     `json:"related_apps_included"`
	Warnings            []string `json:"_warnings"`
}

// Developer is the app's seller or artist.
type Developer struct {
	ID      *string `json:"id"`
	Name    *string `json:"name"`
	URL     *string `json:"url"`
	Website *string `json:"website"`
}

// Price is the store price; Free is null when the price is unknown.
type Price struct {
	Amount    *json.Number `json:"amount"`
	Currency  *string      `json:"currency"`
	Free      *bool        `json:"free"`
	Formatted *string      `json:"formatted"`
}

// Rating is on the five-star scale; absent counters stay null.
type Rating struct {
	Average               *json.Number `json:"average"`
	Count                 *json.Number `json:"count"`
	CurrentVersionAverage *json.Number `json:"current_version_average"`
	CurrentVersionCount   *json.Number `json:"current_version_count"`
}

const noRelatedApps = "This source does not carry related apps: similar_apps and more_apps_by_developer are not included."

func appInfo(ctx context.Context, c *upstream.Call) (any, error) {
	appID := c.Param("app_id")
	q := url.Values{}
	if numericID.MatchString(appID) {
		q.Set("id", appID)
	} else {
		q.Set("bundleId", appID)
	}
	if country := c.Param("country"); country != "" {
		q.Set("country", strings.ToLower(country))
	}
	if lang := c.Param("language"); lang != "" {
		// The API spells languages as five-letter codenames: en_us, ja_jp.
		q.Set("lang", strings.ReplaceAll(strings.ToLower(lang), "-", "_"))
	}
	q.Set("entity", "software")

	var body lookupResponse
	resp, err := c.GetJSON(ctx, "/lookup", q, nil, &body)
	if err != nil {
		return nil, classify(resp, err)
	}
	if body.ResultCount == nil && body.Results == nil {
		return nil, upstream.MalformedFault("lookup answer has neither resultCount nor results")
	}
	if len(body.Results) == 0 {
		return nil, upstream.NotFoundFault("the lookup found no app for this id in this storefront")
	}
	// The looked-up record comes first; entity=software may append the
	// apps of a looked-up developer, which are not the record asked for.
	var app softwareResult
	if err := json.Unmarshal(body.Results[0], &app); err != nil {
		return nil, upstream.MalformedFault("lookup result is not the expected record: %v", err)
	}
	if app.WrapperType != "software" {
		return nil, upstream.NotFoundFault("the id names a " + safeKind(app.WrapperType) + " record, not an app")
	}
	return mapApp(app), nil
}

// classify re-reads the API's error answers: it refuses for its rate
// limit with 403 and an empty body, and states bad parameters in a 400
// body {"errorMessage": "Invalid value(s) for key(s): [country]"}.
func classify(resp *upstream.Response, err error) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil {
		return err
	}
	switch {
	case resp.Status == http.StatusForbidden && len(strings.TrimSpace(string(resp.Body))) == 0:
		return &upstream.Fault{Kind: upstream.RateLimited, Status: resp.Status, RetryAfter: throttleWait,
			Reason: "refused with an empty 403, the lookup's rate-limit answer"}
	case resp.Status == http.StatusTooManyRequests && f.RetryAfter == 0:
		f.RetryAfter = throttleWait
	case resp.Status == http.StatusBadRequest:
		var e struct {
			ErrorMessage string `json:"errorMessage"`
		}
		if json.Unmarshal(resp.Body, &e) == nil && e.ErrorMessage != "" {
			f.Reason = upstream.Clip(e.ErrorMessage, 200)
			// The caller's value, not the source, is at fault: say which.
			for key, param := range map[string]string{"[country]": "country", "[lang]": "language"} {
				if strings.Contains(e.ErrorMessage, key) {
					return upstream.InvalidParameterFault(param, "not_accepted_by_source",
						param+" is not a value the store accepts.")
				}
			}
		}
	}
	return f
}

func mapApp(a softwareResult) *AppInfo {
	out := &AppInfo{
		ID:          upstream.NumberID(a.TrackID),
		BundleID:    a.BundleID,
		Name:        a.TrackName,
		URL:         a.TrackURL,
		Version:     a.Version,
		Description: a.Description,

		Genres:                   a.Genres,
		PrimaryGenre:             a.PrimaryGenreName,
		Screenshots:              a.ScreenshotURLs,
		IPadScreenshots:          a.IPadScreenshotURLs,
		ReleaseNotes:             a.ReleaseNotes,
		IconURL:                  firstNonNil(a.ArtworkURL512, a.ArtworkURL100),
		ReleasedAt:               a.ReleaseDate,
		CurrentVersionReleasedAt: a.CurrentVersionReleasedAt,
		MinimumOSVersion:         a.MinimumOSVersion,
		ContentRating:            a.ContentRating,
		Languages:                a.Languages,

		RelatedAppsIncluded: false,
		Warnings:            []string{noRelatedApps},
	}
	out.Developer = &Developer{
		ID:      upstream.NumberID(a.ArtistID),
		Name:    firstNonNil(a.ArtistName, a.SellerName),
		URL:     a.ArtistURL,
		Website: a.SellerURL,
	}
	out.Price = &Price{Amount: a.Price, Currency: a.Currency, Formatted: a.FormattedPrice}
	if a.Price != nil {
		free := isZero(*a.Price)
		out.Price.Free = &free
	}
	out.Rating = &Rating{
		Average:               a.AverageUserRating,
		Count:                 a.UserRatingCount,
		CurrentVersionAverage: a.AverageUserRatingForCurrentVersion,
		CurrentVersionCount:   a.UserRatingCountForCurrentVersion,
	}
	size, ok := parseSize(a.FileSize)
	out.SizeBytes = size
	if !ok {
		out.Warnings = append(out.Warnings, "The source's file size could not be read as a byte count; size_bytes is null.")
	}
	return out
}

// parseSize reads fileSizeBytes: a decimal string ("52142080") in the
// API, a bare number accepted too. Absent is unknown (ok); present but not
// a whole non-negative byte count is null and not ok.
func parseSize(raw json.RawMessage) (size *int64, ok bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		text = string(raw) // a bare JSON number
	}
	n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	if err != nil || n < 0 {
		return nil, false
	}
	return &n, true
}

// isZero says whether a price is zero; "0", "0.0" and "0.00" all are.
func isZero(n json.Number) bool {
	f, err := n.Float64()
	return err == nil && f == 0
}

func firstNonNil(values ...*string) *string {
	for _, v := range values {
		if v != nil && *v != "" {
			return v
		}
	}
	return nil
}

// safeKind names a wrapper type in a reason without echoing arbitrary text.
func safeKind(wrapperType string) string {
	switch wrapperType {
	case "artist", "collection", "track", "audiobook":
		return wrapperType
	}
	return "non-app"
}
