// Package bookingdemand serves travel_booking/hotel, travel_booking/search-hotels
// and travel_booking/locations over Booking.com's Demand API for affiliate
// partners (version 3.1: JSON bodies POSTed with a bearer API key and the
// X-Affiliate-Id header), on the operator's own credentials:
//
//   - hotel: POST /3.1/accommodations/details (static content, rooms),
//     /3.1/accommodations/availability (every bookable product with its
//     cancellation, meal plan and payment terms and its price per stay) and
//     /3.1/accommodations/reviews/scores (the Wi-Fi score), at once.
//   - search-hotels: POST /3.1/accommodations/search by a destination id
//     (city, region, district, landmark, airport or country), then
//     /3.1/accommodations/details for the names, places and ratings the
//     search answer does not carry. Paging is the source's next_page token
//     (valid three hours), remembered per page so page N+1 costs one call.
//   - locations: version 3.1 has no text search of places
//     (/common/locations/cities filters by ids and country only). A numeric
//     city id is looked up there; free text needs the 3.2-Beta
//     /common/autocomplete, which Booking.com grants on request, so it is
//     used only when the operator says it has that access. Otherwise a text
//     query is left to the next route (the site's own autocomplete).
//
// Names behind the API's numeric codes (facilities, room and bed types,
// accommodation types, cities) come from /3.1/accommodations/constants and
// /3.1/common/locations/cities, remembered in the store.
package bookingdemand

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Configuration the provider reads.
const (
	// TokenSecret is the Demand API key, sent as a bearer token.
	TokenSecret = "MERIDIAN_BOOKING_DEMAND_TOKEN"
	// AffiliateSecret is the partner's affiliate id (X-Affiliate-Id).
	AffiliateSecret = "MERIDIAN_BOOKING_AFFILIATE_ID"
	// BookerCountrySetting is the booker country every price is asked for
	// (the source applies that country's tax-display rules); default gb.
	BookerCountrySetting = "MERIDIAN_BOOKING_DEMAND_BOOKER_COUNTRY"
	// AutocompleteSetting, when true, lets text queries use the 3.2-Beta
	// /common/autocomplete (granted to pilot partners on request).
	AutocompleteSetting = "MERIDIAN_BOOKING_DEMAND_AUTOCOMPLETE"
)

// Name is the provider's name: its fixtures folder and base URL variable.
const Name = "booking_demand"

const (
	detailsPath      = "/3.1/accommodations/details"
	availabilityPath = "/3.1/accommodations/availability"
	searchPath       = "/3.1/accommodations/search"
	scoresPath       = "/3.1/accommodations/reviews/scores"
	constantsPath    = "/3.1/accommodations/constants"
	citiesPath       = "/3.1/common/locations/cities"
	autocompletePath = "/3.2/common/autocomplete"
)

// defaultBookerCountry is the booker country when none is configured.
const defaultBookerCountry = "gb"

// platformName is the neutral platform every record names.
const platformName = "travel_booking"

// Provider is the Demand API provider; it needs the API key and the
// affiliate id.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name: Name,
		Protocol: "Booking.com Demand API v3.1 (JSON POST, bearer API key and X-Affiliate-Id): accommodations/details, " +
			"availability, search, reviews/scores and constants, common/locations/cities; the 3.2-Beta common/autocomplete " +
			"for text lookups where the partner has it",
		Docs:    "https://developers.booking.com/demand/docs/open-api/demand-api",
		BaseURL: "https://demandapi.booking.com",
		Secrets: []upstream.Secret{
			{Name: TokenSecret, Required: true, Doc: "The API key of a Booking.com Demand API affiliate partner account " +
				"(Partner Centre > Demand API > API keys), sent as Authorization: Bearer. Booking.com sets the " +
				"account's per-minute request limit; over it, every call is refused for a minute."},
			{Name: AffiliateSecret, Required: true, Doc: "The partner's numeric affiliate id, sent as X-Affiliate-Id " +
				"with every request; the links in answers carry it."},
			{Name: BookerCountrySetting, Doc: "Optional two-letter booker country (default gb): prices follow that " +
				"country's rules for showing taxes and fees, and text lookups rank its places first."},
			{Name: AutocompleteSetting, Doc: "Optional; true when Booking.com has granted the account the 3.2-Beta " +
				"/common/autocomplete: travel_booking/locations and search-hotels' location text then resolve here. " +
				"Without it they are left to the next route."},
		},
		Endpoints: map[string]upstream.Adapter{
			"travel_booking/hotel":         hotel,
			"travel_booking/search-hotels": searchHotels,
			"travel_booking/locations":     locations,
		},
	}
}

func headers(c *upstream.Call) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.Secret(TokenSecret))
	h.Set("X-Affiliate-Id", c.Secret(AffiliateSecret))
	return h
}

// bookerCountry is the configured booker country, lowercase as the API
// wants it.
func bookerCountry(c *upstream.Call) string {
	v := strings.ToLower(strings.TrimSpace(c.Secret(BookerCountrySetting)))
	if len(v) != 2 || v[0] < 'a' || v[0] > 'z' || v[1] < 'a' || v[1] > 'z' {
		return defaultBookerCountry
	}
	return v
}

func booker(c *upstream.Call) map[string]string {
	return map[string]string{"country": bookerCountry(c), "platform": "desktop"}
}

// autocompleteOn reports whether the operator enabled the 3.2-Beta lookup.
// Replay mode (the stand-in credentials, the fixtures as the source)
// has it, so every operation answers offline.
func autocompleteOn(c *upstream.Call) bool {
	if c.Secret(TokenSecret) == upstream.ReplaySecret {
		return true
	}
	switch strings.ToLower(strings.TrimSpace(c.Secret(AutocompleteSetting))) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// envelope is every Demand API answer: data, the paging token (top level
// in 3.1; in metadata in the newer guides) and, on failure, errors.
type envelope struct {
	RequestID string          `json:"request_id"`
	Data      json.RawMessage `json:"data"`
	NextPage  *string         `json:"next_page"`
	Metadata  *struct {
		NextPage     *string `json:"next_page"`
		TotalResults *int64  `json:"total_results"`
	} `json:"metadata"`
	Errors []apiError `json:"errors"`
}

type apiError struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

func (e *envelope) next() string {
	if e.NextPage != nil && *e.NextPage != "" {
		return *e.NextPage
	}
	if e.Metadata != nil && e.Metadata.NextPage != nil {
		return *e.Metadata.NextPage
	}
	return ""
}

func (e *envelope) total() *int64 {
	if e.Metadata != nil {
		return e.Metadata.TotalResults
	}
	return nil
}

// post sends body to path and decodes the answer's envelope; data is
// decoded into out unless it is null. A body without data is malformed:
// a changed answer must fail, never pass as an empty one.
func post(ctx context.Context, c *upstream.Call, path string, body any, fields map[string]string, out any) (*envelope, error) {
	resp, err := c.Post(ctx, path, headers(c), body)
	if err != nil {
		return nil, classify(resp, err, path, fields)
	}
	var env envelope
	if err := upstream.DecodeJSON(resp.Body, &env); err != nil {
		return nil, err
	}
	if len(env.Data) == 0 {
		if len(env.Errors) > 0 {
			return nil, &upstream.Fault{Kind: upstream.Rejected, Status: resp.Status,
				Reason: path + " answered only errors: " + describe(env.Errors)}
		}
		return nil, upstream.MalformedFault("%s answer has no data", path)
	}
	if out != nil && string(env.Data) != "null" {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return nil, upstream.MalformedFault("%s data is not the expected shape: %v", path, err)
		}
	}
	return &env, nil
}

// rateLimitRest is how long the source blocks a partner over its limit
// when the 429 gives no retry-after: "for a duration of 1 minute".
const rateLimitRest = time.Minute

// classify reads a refusal's status and error ids. fields maps the source's
// parameter names to the caller's, so a value the source refuses is a 422
// naming the caller's field.
func classify(resp *upstream.Response, err error, path string, fields map[string]string) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var body envelope
	_ = upstream.DecodeJSON(resp.Body, &body) // an unreadable body keeps the status classification
	detail := describe(body.Errors)
	switch {
	case f.Status == http.StatusTooManyRequests:
		if f.RetryAfter <= 0 {
			f.RetryAfter = rateLimitRest
		}
		f.Reason = "rate limited: " + detail
	case f.Status == http.StatusUnauthorized:
		f.Reason = "API key or affiliate id refused: " + detail
	case f.Status == http.StatusForbidden:
		f.Reason = "forbidden (affiliate id, or no access to " + path + "): " + detail
	case f.Status == http.StatusBadRequest || f.Status == http.StatusUnprocessableEntity:
		for _, e := range body.Errors {
			if field := namedField(e.Message, fields); field != "" {
				return upstream.InvalidParameterFault(field, "rejected_by_source",
					field+" was refused by the source: "+upstream.Clip(e.Message, 300))
			}
		}
		f.Reason = "bad request to " + path + ": " + detail
	default:
		if detail != "" {
			f.Reason = http.StatusText(f.Status) + ": " + detail
		}
	}
	return f
}

// namedField finds the caller's field behind a source message such as
// "Parameter 'checkin' is missing." or "Invalid value for guests.children".
func namedField(message string, fields map[string]string) string {
	m := strings.ToLower(message)
	// Longest names first, so guests.number_of_rooms wins over rooms.
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, name := range names {
		for _, quoted := range []string{"'" + name + "'", "\"" + name + "\"", "`" + name + "`", " " + name + " ", " " + name + ".", " " + name + ","} {
			if strings.Contains(" "+m+" ", quoted) {
				return fields[name]
			}
		}
	}
	return ""
}

func describe(errs []apiError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, strings.Trim(e.ID+": "+e.Message, ": "))
	}
	return upstream.Clip(strings.Join(parts, "; "), 300)
}

// refused leaves a request to the next route: this source cannot serve it
// (a text it cannot resolve, a sort it does not have), which says nothing
// about the request itself.
func refused(reason string) *upstream.Fault {
	return &upstream.Fault{Kind: upstream.Rejected, Reason: reason}
}

// translated is the API's TranslatedString: one text per requested
// language, with "fallback" when the text has no translation.
type translated map[string]*string

// in is the text in lang, else the fallback, else British or American
// English, else any language (the first by tag, so answers are stable).
func (t translated) in(lang string) *string {
	for _, k := range []string{lang, "fallback", "en-gb", "en-us"} {
		if v := t[k]; v != nil && strings.TrimSpace(*v) != "" {
			return v
		}
	}
	keys := make([]string, 0, len(t))
	for k, v := range t {
		if v != nil && strings.TrimSpace(*v) != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	return t[keys[0]]
}

// remember resolves key through the runner's memory (shared by every
// instance), namespaced and bounded.
func remember(ctx context.Context, c *upstream.Call, kind, key string, ttl time.Duration, resolve func(context.Context) (string, error)) (string, error) {
	return c.Remembered(ctx, kind+"|"+key, ttl, resolve)
}

// digest is a short stable name for a request body (page tokens' keys).
func digest(v any) string {
	raw, _ := json.Marshal(v) // maps marshal with sorted keys
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:12])
}

// idString is an id the API sends as a number, kept exactly.
func idString(n json.Number) *string { return upstream.NumberID(n) }

func text(s string) *string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return &s
}

func upper(p *string) *string {
	if p == nil {
		return nil
	}
	s := strings.ToUpper(*p)
	return &s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
