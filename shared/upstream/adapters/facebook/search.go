package facebook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// # People and event search: Facebook Scraper3 on RapidAPI
//
// The network's own search (/search/people/, /search/events/) answers only
// a signed-in session, and the Graph API has no public people or event
// search, so both searches go to a commercial provider with a published
// API: Facebook Scraper3 on RapidAPI (rapidapi.com/krasnoludkolo/api/
// facebook-scraper3), called with the operator's own RapidAPI key
// (MERIDIAN_RAPIDAPI_KEY). Its endpoints, as its RapidAPI listing
// documents them:
//
//	GET /search/people?query=…[&cursor=…] → {"results": [{"type": "search_profile", "profile_id", "name", "url",
//	    "is_verified", "profile_picture": {"uri", "width", "height", "scale"}}], "cursor": "…"}
//	GET /search/events?query=…[&cursor=…] → {"results": [{"type": "search_event", "event_id", "title", "url"}],
//	    "cursor": "…"}
//
// The cursor is the provider's own and is passed through unchanged; a page
// without one is the last. Event results carry no timing, place or flags
// (spec 2.7: null here; social_a/event reads one event in full).
//
// RapidAPI's proxy sits in front (docs.rapidapi.com, response headers):
// X-RapidAPI-Key and X-RapidAPI-Host authenticate; a refused key is 401,
// an application not subscribed to the API 403; a rate limit or a spent
// plan quota 429, with x-ratelimit-reset (seconds to the end of the rate
// window) and x-ratelimit-requests-reset (seconds to the quota's reset),
// which rest the route for that wait.

// RapidAPIKeySecret is the operator's RapidAPI application key.
const RapidAPIKeySecret = "MERIDIAN_RAPIDAPI_KEY"

// SearchName is the search route's provider name
// (MERIDIAN_UPSTREAM_FACEBOOK_SCRAPER3_URL, testdata/upstream/facebook_scraper3/).
const SearchName = "facebook_scraper3"

// rapidAPIHost names the API to RapidAPI's proxy; it stays the same when
// the base URL is moved (a proxy, a test server).
const rapidAPIHost = "facebook-scraper3.p.rapidapi.com"

// quotaWait rests the route after a spent plan quota when RapidAPI gives
// no reset: the quota lasts until the plan's period ends.
const quotaWait = time.Hour

// SearchProvider is the people and event search route.
func SearchProvider() *upstream.Provider {
	return &upstream.Provider{
		Name:  SearchName,
		Label: "data_provider_c", // a third-party service: never named in answers
		Protocol: "Facebook Scraper3 API on RapidAPI (JSON over HTTPS, X-RapidAPI-Key and X-RapidAPI-Host): " +
			"GET /search/people and /search/events with query and cursor",
		Docs:    "https://rapidapi.com/krasnoludkolo/api/facebook-scraper3",
		BaseURL: "https://" + rapidAPIHost,
		Secrets: []upstream.Secret{{
			Name:     RapidAPIKeySecret,
			Required: true,
			Doc: "The operator's RapidAPI application key (rapidapi.com > Apps > Authorization), subscribed to the " +
				"Facebook Scraper3 API; sent as X-RapidAPI-Key. The plan sets the monthly request quota and rate limit.",
		}},
		// The provider searches the network live; answers take seconds.
		AttemptTimeout: 15 * time.Second,
		Endpoints: map[string]upstream.Adapter{
			PeopleSearchEndpoint: searchPeople,
			EventSearchEndpoint:  searchEvents,
		},
	}
}

// PeopleSearch is the data of social_a/search-people (spec 2.7).
type PeopleSearch struct {
	Warnings []string `json:"_warnings,omitempty"`
	Count    int      `json:"count"`
	Cursor   *string  `json:"cursor"`
	Dropped  int      `json:"dropped"`
	HasMore  bool     `json:"has_more"`
	Items    []Person `json:"items"`
	Query    string   `json:"query"`
}

// Person is one people-search result.
type Person struct {
	AvatarURL *string `json:"avatar_url"`
	ID        string  `json:"id"`
	Name      *string `json:"name"`
	Platform  string  `json:"platform"`
	Type      string  `json:"type"`
	URL       *string `json:"url"`
	Verified  *bool   `json:"verified"`
}

// EventSearch is the data of social_a/events-search (spec 2.7).
type EventSearch struct {
	Warnings []string    `json:"_warnings"`
	Count    int         `json:"count"`
	Cursor   *string     `json:"cursor"`
	Dropped  int         `json:"dropped"`
	HasMore  bool        `json:"has_more"`
	Items    []EventItem `json:"items"`
	Query    string      `json:"query"`
}

// EventItem is one event-search result. Timing, place and flags are
// always null: the search does not carry them (spec 2.7).
type EventItem struct {
	ID         string    `json:"id"`
	IsCanceled *bool     `json:"is_canceled"`
	IsOnline   *bool     `json:"is_online"`
	IsPast     *bool     `json:"is_past"`
	Location   *Location `json:"location"`
	Name       *string   `json:"name"`
	Platform   string    `json:"platform"`
	StartsAt   *string   `json:"starts_at"`
	Type       string    `json:"type"`
	URL        *string   `json:"url"`
	WhenText   *string   `json:"when_text"`
}

// WarnSearchNoTiming says what event search results lack.
const WarnSearchNoTiming = "Event search results carry no timing, place or flags; those fields are null. Read one event in full with social_a/event."

// searchPage is the provider's answer: results and the next page's cursor.
type searchPage struct {
	Results []json.RawMessage
	Cursor  any
}

// body is an answer's top level; results is read apart, so that a null
// list (no results) is told from a missing one (another shape).
type body struct {
	Results json.RawMessage `json:"results"`
	Cursor  any             `json:"cursor"`
	// Error bodies the provider or the proxy send: RapidAPI's proxy uses
	// message (and messages for an unreachable API).
	Message  any `json:"message"`
	Messages any `json:"messages"`
	Error    any `json:"error"`
}

type picture struct {
	URI string `json:"uri"`
}

type personResult struct {
	Type       string   `json:"type"`
	ProfileID  flexID   `json:"profile_id"`
	ID         flexID   `json:"id"`
	Name       string   `json:"name"`
	URL        string   `json:"url"`
	IsVerified any      `json:"is_verified"`
	Picture    *picture `json:"profile_picture"`
}

type eventResult struct {
	Type            string `json:"type"`
	EventID         flexID `json:"event_id"`
	ID              flexID `json:"id"`
	Title           string `json:"title"`
	Name            string `json:"name"`
	URL             string `json:"url"`
	DayTimeSentence string `json:"day_time_sentence"`
}

// flexID is an id the provider may write as a string or a number; a
// number keeps its exact digits.
type flexID string

func (f *flexID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexID(strings.TrimSpace(s))
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		if d := n.String(); strings.Trim(d, "0123456789") == "" {
			*f = flexID(d)
			return nil
		}
	}
	*f = "" // null, or not an id: the result is dropped
	return nil
}

func searchPeople(ctx context.Context, c *upstream.Call) (any, error) {
	page, err := search(ctx, c, "/search/people")
	if err != nil {
		return nil, err
	}
	out := PeopleSearch{Query: c.Param("query"), Items: []Person{}}
	for _, raw := range page.Results {
		var r personResult
		if json.Unmarshal(raw, &r) != nil {
			out.Dropped++
			continue
		}
		id := string(r.ProfileID)
		if id == "" {
			id = string(r.ID)
		}
		if id == "" {
			out.Dropped++
			continue
		}
		p := Person{ID: id, Name: text(r.Name), URL: text(r.URL), Platform: Platform, Type: resultType(r.Type, "person")}
		p.Verified = boolOf(r.IsVerified)
		if r.Picture != nil {
			p.AvatarURL = text(r.Picture.URI)
		}
		out.Items = append(out.Items, p)
	}
	out.Count = len(out.Items)
	out.Cursor, out.HasMore = next(page.Cursor)
	return out, nil
}

func searchEvents(ctx context.Context, c *upstream.Call) (any, error) {
	page, err := search(ctx, c, "/search/events")
	if err != nil {
		return nil, err
	}
	out := EventSearch{Query: c.Param("query"), Items: []EventItem{}, Warnings: []string{WarnSearchNoTiming}}
	for _, raw := range page.Results {
		var r eventResult
		if json.Unmarshal(raw, &r) != nil {
			out.Dropped++
			continue
		}
		id := string(r.EventID)
		if id == "" {
			id = string(r.ID)
		}
		if !numeric(id) {
			out.Dropped++
			continue
		}
		name := text(r.Title)
		if name == nil {
			name = text(r.Name)
		}
		// The canonical page, which social_a/event reads, whatever link
		// form the result had.
		u := Origin + "/events/" + id + "/"
		out.Items = append(out.Items, EventItem{ID: id, Name: name, URL: &u, Platform: Platform,
			Type: resultType(r.Type, "event"), WhenText: text(r.DayTimeSentence)})
	}
	out.Count = len(out.Items)
	out.Cursor, out.HasMore = next(page.Cursor)
	return out, nil
}

// resultType is the provider's result type without its "search_" prefix
// ("search_event" is "event"); a profile is a person.
func resultType(t, fallback string) string {
	t = strings.TrimPrefix(strings.TrimSpace(t), "search_")
	switch t {
	case "":
		return fallback
	case "profile", "user":
		return "person"
	}
	return t
}

// next is the next page's cursor, passed through unchanged; a page
// without one is the last.
func next(v any) (*string, bool) {
	s, ok := v.(string)
	if !ok || strings.TrimSpace(s) == "" {
		return nil, false
	}
	return &s, true
}

// search calls one search endpoint and decodes its page.
func search(ctx context.Context, c *upstream.Call, path string) (*searchPage, error) {
	q := url.Values{"query": {c.Param("query")}}
	cursor := c.Param("cursor")
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	h := http.Header{}
	h.Set("X-RapidAPI-Key", c.Secret(RapidAPIKeySecret))
	h.Set("X-RapidAPI-Host", rapidAPIHost)
	resp, err := c.Get(ctx, path, q, h)
	if err != nil {
		return nil, classify(resp, err, cursor != "", c.Now)
	}
	var b body
	if err := upstream.DecodeJSON(resp.Body, &b); err != nil {
		return nil, err
	}
	if b.Results == nil {
		if msg := message(b.Message, b.Messages, b.Error); msg != "" {
			return nil, &upstream.Fault{Kind: upstream.Rejected, Status: resp.Status,
				Reason: "the provider answered without results: " + upstream.Clip(msg, 200)}
		}
		return nil, upstream.MalformedFault("the answer has no results list (%d-byte body)", len(resp.Body))
	}
	page := &searchPage{Cursor: b.Cursor}
	if string(b.Results) != "null" {
		if err := json.Unmarshal(b.Results, &page.Results); err != nil {
			return nil, upstream.MalformedFault("the answer's results are not a list (%d-byte body)", len(resp.Body))
		}
	}
	return page, nil
}

// classify re-reads a non-2xx answer: the proxy's and the provider's
// refusals, and rate limits with their waits. A search never answers
// "not found": a 404 is the route's problem, not the caller's.
func classify(resp *upstream.Response, err error, withCursor bool, now time.Time) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var b body
	_ = upstream.DecodeJSON(resp.Body, &b) // an unreadable body keeps the status classification
	msg := upstream.Clip(message(b.Message, b.Messages, b.Error), 200)
	switch f.Status {
	case http.StatusTooManyRequests:
		f.Kind = upstream.RateLimited
		f.RetryAfter = rateLimitWait(resp.Header, msg, now)
		f.Reason = "rate limited: " + msg
	case http.StatusUnauthorized:
		f.Reason = "RapidAPI key refused (is it valid?): " + msg
	case http.StatusForbidden:
		f.Reason = "forbidden (is the application subscribed to the API?): " + msg
	case http.StatusNotFound:
		f.Kind = upstream.Rejected
		f.Reason = "the provider has no such endpoint: " + msg
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		if withCursor {
			return upstream.InvalidParameterFault("cursor", "rejected_by_source",
				"cursor was refused by the source; pass back the cursor of the previous page unchanged")
		}
		f.Reason = "bad request: " + msg
	default:
		if msg != "" {
			f.Reason = http.StatusText(f.Status) + ": " + msg
		}
	}
	return f
}

// rateLimitWait is how long a 429 rests the route: retry-after when
// given; for a spent quota, until it resets (an hour when unsaid); for
// the rate window, until it ends.
func rateLimitWait(h http.Header, msg string, now time.Time) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("retry-after"))); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if lower := strings.ToLower(msg); strings.Contains(lower, "quota") {
		if d := seconds(h.Get("x-ratelimit-requests-reset"), now); d > 0 {
			return d
		}
		return quotaWait
	}
	return seconds(h.Get("x-ratelimit-reset"), now)
}

// seconds reads a reset header: seconds from now, or (as RapidAPI's
// documentation allows) a Unix timestamp.
func seconds(v string, now time.Time) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	if n > 1_000_000_000 {
		return upstream.UntilUnix(v, now)
	}
	return time.Duration(n) * time.Second
}

// message is the first string among a body's message fields.
func message(vs ...any) string {
	for _, v := range vs {
		switch t := v.(type) {
		case string:
			if t != "" {
				return t
			}
		case map[string]any:
			if s, _ := t["message"].(string); s != "" {
				return s
			}
		}
	}
	return ""
}
