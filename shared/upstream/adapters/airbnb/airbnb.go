// Package airbnb serves lodging_marketplace/locations (places matching a
// text, with map place ids) from the location autocomplete the lodging
// marketplace's own web app calls while a visitor types a destination.
//
// # The source
//
// The search box of https://www.airbnb.com asks
//
//	GET /api/v2/autocompletes-personalized?user_input=<text>&num_results=<n>
//	    &locale=<tag>&language=<lang>&currency=<ISO 4217>&country=<ISO 3166>
//	    &key=<API key>&api_version=1.2.0&vertical_refinement=homes&region=-1
//	    &options=should_filter_by_vertical_refinement|hide_nav_results|should_show_stays|simple_search
//
// and gets {"autocomplete_terms": [...], "metadata": {...}}. Each term has
// display_name (what the dropdown shows, "Lisbon, Portugal"), id,
// suggestion_type (LOCATION for places), sub_title, location
// {location_name, country_code, google_place_id, types, bounding_box} and
// explore_search_params {place_id, query, params, refinement_paths}: the
// place id is a Google Maps place id, the one the site's own search takes
// as place_id. Errors are the site's v2 error object
// {"error_code", "error", "error_message"}; an unusable key is 400
// {"error": "invalid_key"}.
//
// # The key
//
// The endpoint refuses a request without an API key (400). The only key
// there is is the web app's own, which every page embeds for its scripts;
// Meridian never ships it and never lifts it from a page at run time (the
// issue's rule: a route runs on the operator's credentials or none). The
// route therefore needs MERIDIAN_AIRBNB_API_KEY, the operator's own
// credential for this interface, sent the way the web app sends it (the
// key query parameter and the X-Airbnb-API-Key header); without it the
// endpoint has no eligible route. No page of the site serves the
// suggestions without a key.
//
// # Mapping (spec 2.7)
//
// display_name ← display_name; name ← location.location_name;
// map_place_id ← location.google_place_id (else explore_search_params.
// place_id); country_code ← location.country_code; id ← id (a string or
// a number's exact digits). Empty strings are null. A term carrying none
// of the five is dropped and counted in dropped, with a warning; the
// source's suggestion_type and sub_title are kept as additional fields.
// The autocomplete has no paging: has_more is false when fewer rows than
// limit came back, unknown (null) otherwise.
package airbnb

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Name is the route's provider name (MERIDIAN_UPSTREAM_AIRBNB_URL,
// testdata/upstream/airbnb/).
const Name = "airbnb"

// Origin is the site's public origin.
const Origin = "https://www.airbnb.com"

// Endpoint is the operation's endpoint key.
const Endpoint = "lodging_marketplace/locations"

// Platform is the neutral platform id.
const Platform = "lodging_marketplace"

// KeySecret is the operator's API key for the site's web API.
const KeySecret = "MERIDIAN_AIRBNB_API_KEY"

// AutocompletePath is the web app's autocomplete endpoint.
const AutocompletePath = "/api/v2/autocompletes-personalized"

// Site is the autocomplete as a pages.Site: its direct route reads it with
// the browser-like headers of the site's own front end. It is not served
// through the unblocking services, which carry no site key.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.airbnb.com"},
		Header:  pages.BrowserHeader(""),
		Blocked: pages.BlockedBody(htmldata.Challenge),
		Operations: map[string]pages.Operation{
			// The site's error statuses are read here, not classified blindly:
			// a 404 from the API path means the endpoint moved, not that no
			// place matches.
			Endpoint: {Build: request, Parse: parse, Statuses: []int{400, 401, 403, 404, 420}},
		},
	}
}

// Provider is the direct route, eligible only with the operator's key.
func Provider() *upstream.Provider {
	p := pages.Direct(Site())
	p.Protocol = "The site's web-app location autocomplete (GET " + AutocompletePath + ", JSON) over HTTPS with browser-like headers, " +
		"on the operator's API key (key parameter and X-Airbnb-API-Key header)"
	p.Docs = Origin
	p.Secrets = []upstream.Secret{{
		Name:     KeySecret,
		Required: true,
		Doc: "The operator's own API key for the lodging marketplace's web API, sent as the key parameter and the " +
			"X-Airbnb-API-Key header of the location autocomplete. Meridian ships no key and reads none from the site's " +
			"pages; without one, lodging_marketplace/locations has no route (501).",
	}}
	return p
}

// locale is the request's locale settings, from the language parameter
// (en, en-GB, pt_PT): the site's locale tag, its language and a country
// for ranking (the tag's region, else US as the web app defaults).
type locale struct{ tag, language, country string }

func localeOf(raw string) locale {
	raw = strings.ReplaceAll(strings.TrimSpace(raw), "_", "-")
	if raw == "" {
		return locale{"en", "en", "US"}
	}
	parts := strings.Split(raw, "-")
	l := locale{language: strings.ToLower(parts[0]), country: "US"}
	l.tag = l.language
	if len(parts) > 1 && len(parts[1]) == 2 {
		l.country = strings.ToUpper(parts[1])
		l.tag += "-" + l.country
	}
	return l
}

// Query is the text as the site is asked it: trimmed, inner runs of
// white space made one space.
func Query(raw string) string { return strings.Join(strings.Fields(raw), " ") }

func limitOf(c *upstream.Call) int {
	n, err := strconv.Atoi(c.Param("limit"))
	if err != nil || n < 1 || n > 20 {
		return 10
	}
	return n
}

// request builds the autocomplete call the web app makes.
func request(c *upstream.Call) (pages.Request, error) {
	key := c.Secret(KeySecret)
	if key == "" {
		// A route without the operator's key (say a service route a
		// deployment listed by mistake) cannot ask.
		return pages.Request{}, &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusUnauthorized,
			Reason: "no API key is configured for the site's autocomplete"}
	}
	loc := localeOf(c.Param("language"))
	q := url.Values{}
	q.Set("user_input", Query(c.Param("query")))
	q.Set("num_results", strconv.Itoa(limitOf(c)))
	q.Set("locale", loc.tag)
	q.Set("language", loc.language)
	q.Set("currency", "USD")
	q.Set("country", loc.country)
	q.Set("key", key)
	q.Set("api_version", "1.2.0")
	q.Set("vertical_refinement", "homes")
	q.Set("region", "-1")
	q.Set("options", "should_filter_by_vertical_refinement|hide_nav_results|should_show_stays|simple_search")
	h := http.Header{}
	h.Set("X-Airbnb-API-Key", key)
	h.Set("Referer", Origin+"/")
	return pages.Request{Path: AutocompletePath, Query: q, Header: h, JSON: true}, nil
}

// Locations is the data of lodging_marketplace/locations (spec 2.7).
type Locations struct {
	Items    []Place  `json:"items"`
	Count    int      `json:"count"`
	HasMore  *bool    `json:"has_more"`
	Query    string   `json:"query"`
	Dropped  int      `json:"dropped"`
	Warnings []string `json:"_warnings,omitempty"`
}

// Place is one suggestion: the spec's five fields, then the source's
// suggestion type and subtitle (additional fields, spec 2.4).
type Place struct {
	CountryCode    *string `json:"country_code"`
	DisplayName    *string `json:"display_name"`
	MapPlaceID     *string `json:"map_place_id"`
	ID             *string `json:"id"`
	Name           *string `json:"name"`
	SuggestionType *string `json:"suggestion_type"`
	Subtitle       *string `json:"subtitle"`
}

// WarnDropped is the warning when suggestions carried nothing to return.
const WarnDropped = "Suggestions that carried no display name, name, map place id, country code or id were dropped; dropped counts them."

// parse maps the autocomplete's answer.
func parse(c *upstream.Call, p *pages.Page) (any, error) {
	if p.Status < 200 || p.Status > 299 {
		return nil, siteFault(p)
	}
	var body struct {
		Terms *[]json.RawMessage `json:"autocomplete_terms"`
		apiError
	}
	if err := decode(p.Body, &body); err != nil {
		return nil, upstream.MalformedFault("the autocomplete answer (%d bytes) is not JSON", len(p.Body))
	}
	if body.Terms == nil {
		if body.Error != "" || body.ErrorMessage != "" {
			return nil, siteFault(p) // an error object served with 200
		}
		return nil, upstream.MalformedFault("the autocomplete answer (%d bytes) has no autocomplete_terms", len(p.Body))
	}
	limit := limitOf(c)
	out := &Locations{Items: []Place{}, Query: Query(c.Param("query"))}
	for _, raw := range *body.Terms {
		var t map[string]any
		if err := decode(raw, &t); err != nil || t == nil {
			out.Dropped++ // not an object: nothing to read
			continue
		}
		place, ok := placeOf(t)
		if !ok {
			out.Dropped++
			continue
		}
		if len(out.Items) < limit {
			out.Items = append(out.Items, place)
		}
	}
	out.Count = len(out.Items)
	if out.Count+out.Dropped < limit {
		none := false
		out.HasMore = &none
	}
	if out.Dropped > 0 {
		out.Warnings = append(out.Warnings, WarnDropped)
	}
	return out, nil
}

// placeOf reads one term; ok is false when none of the five fields is there.
func placeOf(t map[string]any) (Place, bool) {
	loc, _ := t["location"].(map[string]any)
	explore, _ := t["explore_search_params"].(map[string]any)
	p := Place{
		DisplayName:    text(t["display_name"]),
		ID:             text(t["id"]),
		SuggestionType: text(t["suggestion_type"]),
		Subtitle:       text(t["sub_title"]),
		Name:           text(loc["location_name"]),
		CountryCode:    text(loc["country_code"]),
		MapPlaceID:     text(loc["google_place_id"]),
	}
	if p.MapPlaceID == nil {
		p.MapPlaceID = text(explore["place_id"])
	}
	if p.CountryCode != nil {
		cc := strings.ToUpper(*p.CountryCode)
		p.CountryCode = &cc
	}
	ok := p.DisplayName != nil || p.ID != nil || p.Name != nil || p.CountryCode != nil || p.MapPlaceID != nil
	return p, ok
}

// apiError is the site's v2 error object.
type apiError struct {
	ErrorCode    json.Number `json:"error_code"`
	Error        string      `json:"error"`
	ErrorMessage string      `json:"error_message"`
}

// siteFault classifies an error answer: a refused key is Rejected with
// 401 (every later call would meet it, so the route rests), the site's
// rate limit is RateLimited with its wait, an HTML page or another
// refusal is Rejected, and a 404 means the endpoint moved (Malformed,
// never "no such place").
func siteFault(p *pages.Page) *upstream.Fault {
	var e apiError
	_ = json.Unmarshal(p.Body, &e)
	what := strings.Trim(upstream.Clip(e.Error+": "+e.ErrorMessage, 160), ": ")
	lower := strings.ToLower(e.Error + " " + e.ErrorMessage)
	switch {
	case strings.Contains(lower, "key"):
		return &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusUnauthorized,
			Reason: "the site refused the configured API key (" + what + ")"}
	case p.Status == http.StatusNotFound:
		return upstream.MalformedFault("the autocomplete endpoint answered 404: it moved or changed")
	case p.Status == http.StatusTooManyRequests:
		f := upstream.StatusFault(p.Status, p.Header)
		f.Reason = "the site's rate limit"
		return f
	case p.Status >= 200 && p.Status <= 299:
		return &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: "the site answered an error object (" + what + ")"}
	}
	reason := "the site refused the request"
	if what != "" {
		reason += " (" + what + ")"
	}
	return &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: reason}
}

// decode is strict JSON with numbers kept exact.
func decode(b []byte, out any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(out); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

// text is a non-empty string, or a whole number's exact digits (ids come
// as either); nil otherwise.
func text(v any) *string {
	var s string
	switch t := v.(type) {
	case string:
		s = strings.TrimSpace(t)
	case json.Number:
		if strings.Trim(t.String(), "0123456789") != "" {
			return nil
		}
		s = t.String()
	}
	if s == "" {
		return nil
	}
	return &s
}
