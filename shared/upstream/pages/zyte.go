package pages

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream"
)

// ZyteKeySecret holds the Zyte API key.
const ZyteKeySecret = "MERIDIAN_ZYTE_API_KEY"

// ZyteName is the Zyte API route's provider name.
const ZyteName = "zyte_api"

// serviceAttemptTimeout bounds one attempt through an unblocking service:
// they retry bans on their side (a Zyte API request "can take tens of
// seconds"; ScraperAPI retries for up to 70 s), so the default 10 s is
// short, while the call's 25 s must still leave the next route a chance.
const serviceAttemptTimeout = 15 * time.Second

// Zyte is the Zyte API route for the operations of every site given: each
// target URL is fetched with an HTTP request (httpResponseBody), as
// documented at https://docs.zyte.com/zyte-api/usage/reference.html; a
// POST names its method (httpRequestMethod), its body (httpRequestText,
// or httpRequestBody in base64 when it is not text) and its content type
// (a custom request header).
func Zyte(sites ...*Site) *upstream.Provider {
	return &upstream.Provider{
		Name:  ZyteName,
		Label: "web_unblocker_a",
		Protocol: "Zyte API HTTP requests: POST /v1/extract (JSON) with httpResponseBody and httpResponseHeaders, " +
			"httpRequestMethod and httpRequestText or httpRequestBody for a site's POSTs, " +
			"HTTP Basic auth with the API key as user name, geolocation for country targeting",
		Docs:    "https://docs.zyte.com/zyte-api/usage/reference.html",
		BaseURL: "https://api.zyte.com",
		Secrets: []upstream.Secret{{
			Name:     ZyteKeySecret,
			Required: true,
			Doc: "A Zyte API key: sign up at zyte.com, then copy the key from the Zyte dashboard > Zyte API > API access. " +
				"Zyte charges successful responses only (rate-limiting and error responses are free); set a spending " +
				"limit there, since reaching it suspends the key (403) until it is raised.",
		}},
		AttemptTimeout: serviceAttemptTimeout,
		Endpoints:      endpoints(sites, fetchZyte),
	}
}

// zyteRequest is the part of the /v1/extract request body Meridian uses.
type zyteRequest struct {
	URL                 string `json:"url"`
	HTTPResponseBody    bool   `json:"httpResponseBody"`
	HTTPResponseHeaders bool   `json:"httpResponseHeaders"`
	// HTTPRequestMethod is POST for a POST (GET is the default); its body
	// is HTTPRequestText when text, else HTTPRequestBody (base64).
	HTTPRequestMethod string `json:"httpRequestMethod,omitempty"`
	HTTPRequestText   string `json:"httpRequestText,omitempty"`
	HTTPRequestBody   string `json:"httpRequestBody,omitempty"`
	// Geolocation is an ISO 3166-1 alpha-2 code in upper case.
	Geolocation              string       `json:"geolocation,omitempty"`
	CustomHTTPRequestHeaders []zyteHeader `json:"customHttpRequestHeaders,omitempty"`
	// RequestCookies carries cookies: the Cookie header cannot be set
	// through customHttpRequestHeaders.
	RequestCookies []zyteCookie `json:"requestCookies,omitempty"`
}

type zyteHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type zyteCookie struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Domain string `json:"domain"`
}

// zyteResponse is the part of a 200 answer Meridian reads.
type zyteResponse struct {
	URL                 string       `json:"url"`
	StatusCode          *int         `json:"statusCode"`
	HTTPResponseBody    *string      `json:"httpResponseBody"` // base64
	HTTPResponseHeaders []zyteHeader `json:"httpResponseHeaders"`
}

// zyteProblem is an error answer: RFC 7807 problem JSON whose type is a
// relative reference such as /download/temporary-error.
type zyteProblem struct {
	Type  string `json:"type"`
	Title string `json:"title"`
}

// fetchZyte asks Zyte API for the public page.
func fetchZyte(ctx context.Context, c *upstream.Call, s *Site, r Request) (*Page, error) {
	target := s.target(r)
	body := zyteRequest{
		URL:                 target,
		HTTPResponseBody:    true,
		HTTPResponseHeaders: true,
		Geolocation:         strings.ToUpper(r.Country),
	}
	// Only what the answer depends on: Zyte sends a browser's headers of
	// its own, and custom ones "can break the ban avoidance capabilities".
	extra := r.Header.Clone()
	if extra == nil {
		extra = http.Header{}
	}
	if r.JSON && extra.Get("accept") == "" {
		extra.Set("accept", "application/json")
	}
	if r.post() {
		body.HTTPRequestMethod = http.MethodPost
		switch {
		case len(r.Body) == 0:
		case textual(r.ContentType) && utf8.Valid(r.Body):
			body.HTTPRequestText = string(r.Body)
		default:
			body.HTTPRequestBody = base64.StdEncoding.EncodeToString(r.Body)
		}
		if r.ContentType != "" {
			extra.Set("content-type", r.ContentType)
		}
	}
	cookieLine := extra.Get("cookie")
	extra.Del("cookie")
	for _, k := range sortedKeys(extra) {
		// Zyte sends only the last of repeated names; a comma list is one value.
		body.CustomHTTPRequestHeaders = append(body.CustomHTTPRequestHeaders, zyteHeader{Name: k, Value: strings.Join(extra[k], ",")})
	}
	// The cookies are for the host fetched, whichever of the site's it is.
	domain := ""
	if u, err := url.Parse(s.base(r)); err == nil {
		domain = u.Hostname()
	}
	cookies := append([]*http.Cookie(nil), s.Cookies...)
	if cookieLine != "" {
		parsed, _ := http.ParseCookie(cookieLine)
		cookies = append(cookies, parsed...)
	}
	for _, ck := range cookies {
		d := ck.Domain
		if d == "" {
			d = domain
		}
		body.RequestCookies = append(body.RequestCookies, zyteCookie{Name: ck.Name, Value: ck.Value, Domain: d})
	}

	key := c.Secret(ZyteKeySecret)
	h := http.Header{}
	h.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(key+":")))
	resp, err := c.Post(ctx, "/v1/extract", h, body)
	if err != nil {
		if resp == nil {
			return nil, err
		}
		return nil, zyteFault(resp, key)
	}
	var out zyteResponse
	if err := upstream.DecodeJSON(resp.Body, &out); err != nil {
		return nil, err
	}
	if out.StatusCode == nil || out.HTTPResponseBody == nil {
		return nil, upstream.MalformedFault("Zyte API answered without statusCode or httpResponseBody")
	}
	raw, err := base64.StdEncoding.DecodeString(*out.HTTPResponseBody)
	if err != nil {
		return nil, upstream.MalformedFault("Zyte API's httpResponseBody is not base64: %v", err)
	}
	header := http.Header{}
	for _, hv := range out.HTTPResponseHeaders {
		header.Add(hv.Name, hv.Value)
	}
	// Zyte API has already decompressed the body; its Content-Encoding
	// "should not be used to decompress httpResponseBody".
	header.Del("content-encoding")
	header.Del("content-length")
	if out.URL != "" {
		target = out.URL // after redirects
	}
	return &Page{Status: *out.StatusCode, Header: header, Body: raw, URL: target}, nil
}

// zyteFault classifies an unsuccessful answer by its documented status and
// problem type (https://docs.zyte.com/zyte-api/usage/errors.html and the
// reference's responses). A target's own 4xx or 5xx is not one of these:
// Zyte API relays it as a 200 whose statusCode says so.
func zyteFault(resp *upstream.Response, key string) *upstream.Fault {
	var p zyteProblem
	_ = json.Unmarshal(resp.Body, &p) // no problem object: "the HTTP status code should be used"
	f := upstream.StatusFault(resp.Status, resp.Header)
	what := ""
	switch {
	case resp.Status == http.StatusUnauthorized:
		// /auth/not-valid, /auth/key-not-found.
		f.Kind, what = upstream.Rejected, "the API key was refused"
	case resp.Status == http.StatusForbidden:
		// /auth/account-suspended: trial credit or spending limit used up.
		f.Kind, what = upstream.Rejected, "the account is suspended or not allowed to make the request"
	case resp.Status == http.StatusTooManyRequests:
		// /limits/over-user-limit, over-domain-limit, over-org-domain-limit.
		f.Kind, what = upstream.RateLimited, "rate limited"
	case resp.Status == http.StatusServiceUnavailable && (strings.HasPrefix(p.Type, "/limits/") || strings.HasSuffix(p.Type, "/over-global-limit")):
		// Overloaded: documented as a rate-limiting response, with Retry-After.
		f.Kind, what = upstream.RateLimited, "overloaded, rate limited"
	case resp.Status == 520:
		// /download/temporary-error: no ban-free response in a reasonable time.
		f.Kind, what = upstream.Rejected, "no ban-free answer from the site (a ban)"
	case resp.Status == 521:
		// /download/internal-error: a permanent download error for this target.
		f.Kind, what = upstream.Rejected, "a permanent download error"
	case resp.Status == http.StatusUnavailableForLegalReasons:
		// /download/domain-forbidden: Zyte does not serve this domain.
		f.Kind, what = upstream.Rejected, "the domain is forbidden"
	case resp.Status == http.StatusMisdirectedRequest:
		// /website/domain-unreachable: documented as not to be retried.
		f.Kind, what = upstream.Rejected, "the domain is unreachable"
	case resp.Status == http.StatusBadRequest || resp.Status == http.StatusUnprocessableEntity:
		// /request/invalid, /request/invalid-json, /request/unprocessable.
		f.Kind, what = upstream.Rejected, "the request was refused as invalid"
	default:
		// 500 /server/internal and /server/timed-out: retried as server errors.
		what = http.StatusText(resp.Status)
	}
	f.Reason = "Zyte API: " + what
	if p.Type != "" {
		f.Reason += " (" + snippet([]byte(p.Type), key) + ")"
	}
	return f
}

// textual reports whether a media type is text Zyte API can take as
// httpRequestText (UTF-8): text/*, JSON, XML and form bodies.
func textual(contentType string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	mt = strings.TrimSpace(mt)
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/x-www-form-urlencoded" ||
		mt == "application/graphql"
}

// sortedKeys keeps request bodies deterministic (fixtures match on them).
func sortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
