// Package harvestapi serves professional_network/search-people and the
// professional_network/locations lookup over HarvestAPI's LinkedIn API
// (https://docs.harvest-api.com), a commercial provider with published
// request and response formats, on the operator's own API key.
//
// Why a commercial provider: the network's people search and its filter
// typeaheads are visible only to a signed-in session, and the network has
// no public API for them (its official APIs serve an organisation's own
// pages and ads, not member search). HarvestAPI runs the free people search
// on its own accounts and answers JSON:
//
//   - GET /linkedin/profile-search: search (keywords), title, firstName,
//     lastName, geoId (or location as text), currentCompany, pastCompany and
//     school (a company or school id or page URL), keywordsCompany and
//     keywordsSchool (text), industryId and page; it answers elements
//     (publicIdentifier, id, name, position, location.linkedinText,
//     linkedinUrl, photo, hidden) and pagination (totalPages,
//     totalElements, pageNumber, pageSize).
//   - GET /linkedin/geo-id-search: search (text); it answers elements of
//     geoId and title, the ids the people search's location filter takes.
//
// The search results carry no follower count and no verification mark, so
// followers and verified are null and _warnings says so. Profiles outside
// the searching account's network come back as an anonymous member
// (hidden): their name is the site's placeholder, so it is null. A
// search_url is decomposed into the same parameters (its one selected
// value per filter, as spec 4.6 requires); the profile-language filter has
// no parameter in this search and is reported in _warnings, not applied.
package harvestapi

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

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
)

// KeySecret is the operator's HarvestAPI key, sent as X-API-Key.
const KeySecret = "MERIDIAN_HARVESTAPI_KEY"

// attemptTimeout: the provider runs a live search on the site for each
// call (its concurrency queue included), slower than a database API.
const attemptTimeout = 20 * time.Second

// Provider is the HarvestAPI provider; it needs the operator's key.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:  "harvestapi",
		Label: "data_provider_a", // a third-party service: never named in answers
		Protocol: "HarvestAPI LinkedIn API (JSON, X-API-Key): profile search (GET /linkedin/profile-search) and " +
			"location id search (GET /linkedin/geo-id-search)",
		Docs:           "https://docs.harvest-api.com/linkedin-api-reference/profile/search",
		BaseURL:        "https://api.harvest-api.com",
		AttemptTimeout: attemptTimeout,
		Secrets: []upstream.Secret{{
			Name:     KeySecret,
			Required: true,
			Doc: "An API key of a HarvestAPI account (harvest-api.com > API keys), sent as X-API-Key. Each search page " +
				"and location lookup spends the account's credits; the plan sets its concurrency.",
		}},
		Endpoints: map[string]upstream.Adapter{
			"professional_network/search-people": searchPeople,
			"professional_network/locations":     locations,
		},
	}
}

const (
	searchPath = "/linkedin/profile-search"
	geoPath    = "/linkedin/geo-id-search"
)

// Fixed sentences of _warnings; they name neither the source nor the site.
const (
	warnCounters = "The source's search results carry no follower count and no verification mark: followers and verified " +
		"are null (unknown), not zero or false."
	warnLanguage = "The profile-language filter of search_url is not applied by the source's search: results are not limited " +
		"to that language."
	warnLocationText = "location is not a location id: the source matched the text to its first location suggestion; " +
		"take an id from professional_network/locations for an exact filter."
)

// warnHidden says how many rows are anonymous members.
func warnHidden(n int) string {
	rows := strconv.Itoa(n) + " of the results are"
	if n == 1 {
		rows = "1 of the results is"
	}
	return rows + " a member outside the searching account's network, shown anonymously: name, handle and URL " +
		"are not visible and are null."
}

// ---- requests and faults ----

func header(c *upstream.Call) http.Header {
	h := http.Header{}
	h.Set("X-API-Key", c.Secret(KeySecret))
	return h
}

// getJSON fetches path and decodes a 2xx body into out; failures are
// classified from the status and the error the body names.
func getJSON(ctx context.Context, c *upstream.Call, path string, q url.Values, out any) error {
	resp, err := c.GetJSON(ctx, path, q, header(c), out)
	if err == nil {
		return nil
	}
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err // transport, timeout or an unreadable 2xx body
	}
	return classify(f, errorText(resp.Body), c)
}

// errorBody is what the provider answers next to (or instead of) its
// data: error is a message, or an object holding one; status echoes the
// HTTP status, as a number or a word.
type errorBody struct {
	Status json.RawMessage `json:"status"`
	Error  json.RawMessage `json:"error"`
}

// errorText is the error a body names ("" for none or an unreadable body).
func errorText(body []byte) string {
	var b errorBody
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	return message(b.Error)
}

func message(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var obj struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		if obj.Message != "" {
			return strings.TrimSpace(obj.Message)
		}
		if len(obj.Error) > 0 {
			return message(obj.Error)
		}
	}
	return ""
}

// noResource is the provider's answer when every account it searches with
// has used its hourly allowance on the site ("No available resource");
// the allowances reset on the hour.
const noResource = "no available resource"

// creditsWait rests the route when the account's credits are spent: they
// come back only when the operator tops up, which the runner's longest rest
// (an hour) stands for.
const creditsWait = time.Hour

// classify re-classifies a non-2xx answer (or, with status 0, a 2xx answer
// that is only an error) by what the provider documents. The key never
// reaches a reason: the provider's message is quoted with it removed.
func classify(f *upstream.Fault, msg string, c *upstream.Call) *upstream.Fault {
	msg = upstream.Clip(redact(msg, c.Secret(KeySecret)), 200)
	detail := func(s string) string {
		if msg == "" {
			return s
		}
		return s + ": " + msg
	}
	if strings.Contains(strings.ToLower(msg), noResource) {
		f.Kind, f.Reason = upstream.RateLimited, detail("the source's accounts are out of their hourly allowance")
		f.RetryAfter = max(c.Now.Truncate(time.Hour).Add(time.Hour).Sub(c.Now), time.Second)
		return f
	}
	switch s := f.Status; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		f.Kind, f.Reason = upstream.Rejected, detail("API key refused (is it valid?)")
	case s == http.StatusPaymentRequired:
		f.Kind, f.Reason, f.RetryAfter = upstream.RateLimited, detail("the account's credits are spent"), creditsWait
	case s == http.StatusTooManyRequests:
		f.Kind, f.Reason = upstream.RateLimited, detail("rate limited") // StatusFault read retry-after
	case s == http.StatusNotFound:
		// A search has nothing to be missing: a 404 is a wrong path or base
		// URL, not an answer about the caller's request.
		f.Kind, f.Reason = upstream.Rejected, detail("the source answered 404 to a search")
	case s >= 500:
		f.Reason = detail(http.StatusText(s))
	case s == 0:
		f.Kind, f.Reason = upstream.Malformed, detail("the answer is an error without data")
	default:
		f.Kind, f.Reason = upstream.Rejected, detail(http.StatusText(s))
	}
	return f
}

// redact removes the key from text the provider sends back.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[key]")
}

// bodyFault is the fault of a 2xx body that names an error and carries no
// data; its status is the one the body echoes, when it is a number.
func bodyFault(raw []byte, c *upstream.Call) *upstream.Fault {
	var b errorBody
	_ = json.Unmarshal(raw, &b)
	f := &upstream.Fault{}
	var n json.Number
	if json.Unmarshal(b.Status, &n) == nil {
		if s, err := strconv.Atoi(n.String()); err == nil && s >= 400 {
			f.Status = s
			f.Kind = upstream.StatusFault(s, http.Header{}).Kind
		}
	}
	return classify(f, message(b.Error), c)
}

// ---- values the source writes loosely ----

// text is a string the source may send as null or "": both are unknown.
var text = upstream.Trimmed

// place is a location the source writes as an object with its text
// (linkedinText) or, in places, as the text itself.
type place string

func (p *place) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*p = place(s)
		return nil
	}
	var obj struct {
		LinkedinText string `json:"linkedinText"`
		Text         string `json:"text"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	*p = place(firstNonEmpty(obj.LinkedinText, obj.Text))
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// count reads a number the source may send as null or with a fraction.
func count(n *json.Number) *int64 {
	if n == nil {
		return nil
	}
	if v, err := n.Int64(); err == nil {
		return &v
	}
	if f, err := n.Float64(); err == nil && f >= 0 {
		v := int64(f)
		return &v
	}
	return nil
}

// ---- professional_network/search-people ----

// profileShort is one search result as the provider documents it.
type profileShort struct {
	ID               upstream.FlexID `json:"id"`
	PublicIdentifier string          `json:"publicIdentifier"`
	Name             string          `json:"name"`
	FirstName        string          `json:"firstName"`
	LastName         string          `json:"lastName"`
	Position         string          `json:"position"`
	Headline         string          `json:"headline"`
	Location         *place          `json:"location"`
	LinkedinURL      string          `json:"linkedinUrl"`
	Photo            string          `json:"photo"`
	Hidden           *bool           `json:"hidden"`
}

type pagination struct {
	TotalPages    *json.Number `json:"totalPages"`
	TotalElements *json.Number `json:"totalElements"`
	PageNumber    *json.Number `json:"pageNumber"`
	PageSize      *json.Number `json:"pageSize"`
	// TotalResultCount is the site's own result count, which some answers
	// carry beside (or instead of) totalElements.
	TotalResultCount *json.Number `json:"totalResultCount"`
}

type searchBody struct {
	Elements   *[]profileShort `json:"elements"`
	Pagination *pagination     `json:"pagination"`
}

// People is the data of professional_network/search-people.
type People struct {
	Items    []Person `json:"items"`
	Count    int      `json:"count"`
	Cursor   *string  `json:"cursor"`
	HasMore  *bool    `json:"has_more"`
	Total    *int64   `json:"total"`
	Page     int      `json:"page"`
	Query    *string  `json:"query"`
	Warnings []string `json:"_warnings"`
}

// Person is one result.
type Person struct {
	ID        *string `json:"id"`
	Handle    *string `json:"handle"`
	Name      *string `json:"name"`
	URL       *string `json:"url"`
	Headline  *string `json:"headline"`
	Location  *string `json:"location"`
	AvatarURL *string `json:"avatar_url"`
	Followers *int64  `json:"followers"`
	Verified  *bool   `json:"verified"`
}

// anonymousName is the placeholder the site shows for a member outside the
// searching account's network.
const anonymousName = "LinkedIn Member"

// searchPeople runs one page of the people search. The registry has
// checked a search_url already (one value per filter, keywords present);
// cursor stays null because the endpoint pages with page (spec 4.6 gives it
// no cursor parameter).
func searchPeople(ctx context.Context, c *upstream.Call) (any, error) {
	q, page, warnings, err := searchQuery(c)
	if err != nil {
		return nil, err
	}
	var body searchBody
	resp, err := c.Get(ctx, searchPath, q, header(c))
	if err != nil {
		var f *upstream.Fault
		if errors.As(err, &f) && resp != nil && f.Status != 0 {
			return nil, classify(f, errorText(resp.Body), c)
		}
		return nil, err
	}
	if err := upstream.DecodeJSON(resp.Body, &body); err != nil {
		return nil, err
	}
	if body.Elements == nil {
		if errorText(resp.Body) != "" {
			return nil, bodyFault(resp.Body, c)
		}
		return nil, upstream.MalformedFault("profile search answer (%d bytes) has no elements", len(resp.Body))
	}
	out := People{Items: make([]Person, 0, len(*body.Elements)), Page: page, Query: text(q.Get("search"))}
	hidden := 0
	for _, e := range *body.Elements {
		p := person(e)
		if e.Hidden != nil && *e.Hidden {
			hidden++
		}
		out.Items = append(out.Items, p)
	}
	out.Count = len(out.Items)
	if pg := body.Pagination; pg != nil {
		out.Total = count(pg.TotalElements)
		if out.Total == nil {
			out.Total = count(pg.TotalResultCount)
		}
		if n := count(pg.PageNumber); n != nil && *n > 0 {
			out.Page = int(*n)
		}
		if pages := count(pg.TotalPages); pages != nil {
			more := int64(out.Page) < *pages && out.Count > 0
			out.HasMore = &more
		}
	}
	if out.Count == 0 {
		none := false
		out.HasMore = &none
	}
	out.Warnings = append([]string{warnCounters}, warnings...)
	if hidden > 0 {
		out.Warnings = append(out.Warnings, warnHidden(hidden))
	}
	return out, nil
}

func person(e profileShort) Person {
	p := Person{
		ID: text(string(e.ID)), Handle: text(e.PublicIdentifier),
		Name:     text(firstNonEmpty(e.Name, strings.TrimSpace(e.FirstName+" "+e.LastName))),
		Headline: text(firstNonEmpty(e.Position, e.Headline)), AvatarURL: text(e.Photo), URL: text(e.LinkedinURL),
	}
	if e.Location != nil {
		p.Location = text(string(*e.Location))
	}
	if p.URL == nil && p.Handle != nil {
		u := "https://www.linkedin.com/in/" + url.PathEscape(*p.Handle) + "/"
		p.URL = &u
	}
	if e.Hidden != nil && *e.Hidden {
		if p.Name != nil && strings.EqualFold(*p.Name, anonymousName) {
			p.Name = nil // the placeholder is no name
		}
		if p.URL != nil && !profileURL(*p.URL) {
			p.URL = nil // an anonymous row links to a search, not to the member
		}
	}
	return p
}

// profileURL reports whether u is a member's profile page (/in/<handle>).
func profileURL(u string) bool {
	parsed, err := url.Parse(u)
	return err == nil && strings.HasPrefix(parsed.Path, "/in/")
}

var (
	digitsOnly = regexp.MustCompile(`^[0-9]{1,19}$`)
	// urnID is an id written as a URN (urn:li:geo:103644278,
	// urn:li:fsd_company:1441): its number is the id.
	urnID = regexp.MustCompile(`^urn:li:[A-Za-z_]+:([0-9]{1,19})$`)
)

// idOf is v's numeric id when it is one (digits or a URN), else "".
func idOf(v string) string {
	v = strings.TrimSpace(v)
	if digitsOnly.MatchString(v) {
		return v
	}
	if m := urnID.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return ""
}

// pageURL reports whether v is a company or school page of the site: the
// provider takes those where it takes ids.
func pageURL(v string) bool {
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host != "linkedin.com" && !strings.HasSuffix(host, ".linkedin.com") {
		return false
	}
	p := strings.ToLower(u.Path)
	return strings.HasPrefix(p, "/company/") || strings.HasPrefix(p, "/school/")
}

// pick is the caller's parameter, else what the search_url says.
func pick(c *upstream.Call, param string, fromURL string) string {
	if v := strings.TrimSpace(c.Param(param)); v != "" {
		return v
	}
	return fromURL
}

// searchQuery maps the validated parameters, and a search_url decomposed
// under spec 4.6, to the provider's search parameters. The caller's own
// parameters win over the URL's values. It returns the page asked for and
// the warnings the mapping itself needs.
func searchQuery(c *upstream.Call) (q url.Values, page int, warnings []string, err error) {
	var s registry.PeopleSearch
	if raw := c.Param("search_url"); raw != "" {
		var reason, msg string
		if s, reason, msg = registry.ReadPeopleSearchURL(raw); reason != "" {
			// Validation refuses such a URL before any charge; this is the
			// same answer should an adapter ever see one.
			return nil, 0, nil, upstream.InvalidParameterFault("search_url", reason, msg)
		}
	}
	q = url.Values{}
	set := func(name, v string) {
		if v = strings.TrimSpace(v); v != "" {
			q.Set(name, v)
		}
	}
	set("search", pick(c, "query", s.Keywords))
	set("title", pick(c, "title", s.Text[registry.TextTitle]))
	set("firstName", s.Text[registry.TextFirstName])
	set("lastName", s.Text[registry.TextLastName])
	set("keywordsCompany", s.Text[registry.TextCompany])
	set("keywordsSchool", s.Text[registry.TextSchool])

	if v := pick(c, "location", s.Filters[registry.FilterLocation]); v != "" {
		if id := idOf(v); id != "" {
			q.Set("geoId", id)
		} else {
			q.Set("location", v)
			warnings = append(warnings, warnLocationText)
		}
	}
	if v := pick(c, "current_company", s.Filters[registry.FilterCurrentCompany]); v != "" {
		switch id := idOf(v); {
		case id != "":
			q.Set("currentCompany", id)
		case pageURL(v):
			q.Set("currentCompany", v)
		default: // a name: the site's company text field matches current companies
			q.Set("keywordsCompany", v)
		}
	}
	if v := pick(c, "past_company", s.Filters[registry.FilterPastCompany]); v != "" {
		switch id := idOf(v); {
		case id != "":
			q.Set("pastCompany", id)
		case pageURL(v):
			q.Set("pastCompany", v)
		default:
			return nil, 0, nil, upstream.InvalidParameterFault("past_company", "invalid_company",
				"past_company must be a numeric company id or the URL of a company page; the source has no text match on past companies.")
		}
	}
	if v := pick(c, "school", s.Filters[registry.FilterSchool]); v != "" {
		switch id := idOf(v); {
		case id != "":
			q.Set("school", id)
		case pageURL(v):
			q.Set("school", v)
		default: // a name: the site's school text field
			q.Set("keywordsSchool", v)
		}
	}
	if v := pick(c, "industry", s.Filters[registry.FilterIndustry]); v != "" {
		id := idOf(v)
		if id == "" {
			return nil, 0, nil, upstream.InvalidParameterFault("industry", "invalid_industry",
				"industry must be a numeric industry id from professional_network/industries.")
		}
		q.Set("industryId", id)
	}
	if s.Filters[registry.FilterLanguage] != "" {
		warnings = append(warnings, warnLanguage)
	}
	page = 1
	if v := c.Param("page"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 {
			return nil, 0, nil, upstream.InvalidParameterFault("page", "invalid_page", "page must be a whole number from 1.")
		}
		page = n
	} else if s.Page > 0 {
		page = s.Page
	}
	q.Set("page", strconv.Itoa(page))
	if q.Get("search") == "" {
		// query or search_url is required and a search_url has keywords,
		// so this is a blank query: the source would search filters alone.
		return nil, 0, nil, upstream.InvalidParameterFault("query", "missing_keywords", "query must not be blank.")
	}
	return q, page, warnings, nil
}

// ---- professional_network/locations ----

type geoBody struct {
	Elements *[]struct {
		GeoID upstream.FlexID `json:"geoId"`
		Title string          `json:"title"`
	} `json:"elements"`
}

// Lookup is the data of the lookups (professional_network/locations).
type Lookup struct {
	Items    []Entry  `json:"items"`
	Count    int      `json:"count"`
	HasMore  *bool    `json:"has_more"`
	Query    *string  `json:"query"`
	Warnings []string `json:"_warnings,omitempty"`
}

// Entry is one id and its name.
type Entry struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	Type *string `json:"type"`
}

// locations maps text to the location ids of the search's location filter
// through the site's own location typeahead (the provider's geo id search).
// It has no page size, so limit cuts its list.
func locations(ctx context.Context, c *upstream.Call) (any, error) {
	query := strings.TrimSpace(c.Param("query"))
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 10
	}
	var body geoBody
	if err := getJSON(ctx, c, geoPath, url.Values{"search": {query}}, &body); err != nil {
		return nil, err
	}
	if body.Elements == nil {
		return nil, upstream.MalformedFault("geo id search answer has no elements")
	}
	out := Lookup{Items: []Entry{}, Query: &query}
	for _, e := range *body.Elements {
		id := text(string(e.GeoID))
		if id != nil && idOf(*id) != "" {
			n := idOf(*id) // a URN (urn:li:geo:…) is its number
			id = &n
		}
		if id == nil {
			continue // a suggestion without an id cannot filter anything
		}
		if len(out.Items) == limit {
			more := true
			out.HasMore = &more
			break
		}
		out.Items = append(out.Items, Entry{ID: id, Name: text(e.Title)})
	}
	if out.HasMore == nil {
		none := false // the typeahead has no further page
		out.HasMore = &none
	}
	out.Count = len(out.Items)
	return out, nil
}
