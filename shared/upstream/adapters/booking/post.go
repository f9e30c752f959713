package booking

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// postReq is a JSON POST the site's own front end makes.
type postReq struct {
	host  string // "" for www.booking.com
	path  string
	query url.Values
	// header holds what the site's fetch sends beyond a browser's defaults
	// (its referer, its own x-booking-* headers).
	header http.Header
	body   []byte
	lang   string
}

// target is the public URL the request is for.
func (r postReq) target() string {
	host := r.host
	if host == "" {
		host = "www.booking.com"
	}
	t := "https://" + host + r.path
	if len(r.query) > 0 {
		t += "?" + r.query.Encode()
	}
	return t
}

// post sends r on f's route and classifies the site's answer as the pages
// layer classifies a page: a block fails over, 404 is definitive, other
// statuses follow upstream.StatusFault.
func (f fetcher) post(ctx context.Context, c *upstream.Call, r postReq) (*pages.Page, error) {
	var p *pages.Page
	var err error
	switch f.route {
	case zyte:
		p, err = postZyte(ctx, c, r)
	case scraperAPI:
		p, err = postScraperAPI(ctx, c, r)
	default:
		p, err = postDirect(ctx, c, r)
	}
	if err != nil {
		return nil, err
	}
	return p, verdict(p)
}

// verdict classifies a JSON answer of the site.
func verdict(p *pages.Page) error {
	if reason, ok := blocked(p); ok {
		return &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: "the site served a block or challenge page: " + reason}
	}
	if p.Status >= 200 && p.Status <= 299 {
		return nil
	}
	// A rate limit that says when to come back is one, whatever its body;
	// other refusals in HTML are a challenge page.
	limited := p.Status == http.StatusTooManyRequests && p.Header.Get("retry-after") != ""
	if !limited && looksHTML(p) && (p.Status == http.StatusForbidden || p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable) {
		return &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: "the site answered a JSON request with an HTML page (a challenge)"}
	}
	f := upstream.StatusFault(p.Status, p.Header)
	f.Reason = "the site answered " + strconv.Itoa(p.Status) + " " + f.Reason
	return f
}

// postDirect asks the site itself: the autocomplete host directly while the
// base URL is the origin, else the moved base URL with X-Forwarded-Host,
// as the pages layer does for GETs.
func postDirect(ctx context.Context, c *upstream.Call, r postReq) (*pages.Page, error) {
	h := pages.BrowserHeader(acceptLanguage(r.lang))
	// What the page's own fetch() sends, not a navigation.
	h.Set("accept", "application/json")
	h.Set("sec-fetch-dest", "empty")
	h.Set("sec-fetch-mode", "cors")
	h.Set("sec-fetch-site", "same-origin")
	if r.host != "" {
		h.Set("sec-fetch-site", "same-site")
	}
	h.Del("sec-fetch-user")
	h.Del("upgrade-insecure-requests")
	h.Set("origin", Origin)
	for k, vs := range r.header {
		h[k] = vs
	}
	call := c
	if r.host != "" {
		if sameOrigin(c.BaseURL, Origin) {
			moved := *c
			moved.BaseURL = "https://" + r.host
			call = &moved
		} else {
			h.Set(pages.ForwardedHostHeader, r.host)
		}
	}
	path := r.path
	if len(r.query) > 0 {
		path += "?" + r.query.Encode()
	}
	resp, err := call.Post(ctx, path, h, json.RawMessage(r.body))
	if resp == nil {
		return nil, err
	}
	// A non-2xx answer is still the site's: verdict classifies it.
	return &pages.Page{Status: resp.Status, Header: resp.Header, Body: resp.Body, URL: r.target()}, nil
}

// sameOrigin reports whether a base URL is the site's origin, not moved by
// MERIDIAN_UPSTREAM_BOOKING_URL.
func sameOrigin(base, origin string) bool {
	b, err1 := url.Parse(strings.TrimSuffix(base, "/"))
	o, err2 := url.Parse(strings.TrimSuffix(origin, "/"))
	return err1 == nil && err2 == nil && strings.EqualFold(b.Scheme, o.Scheme) && strings.EqualFold(b.Host, o.Host) &&
		b.Path == o.Path && b.RawQuery == "" && b.User == nil
}

// zyteRequest is a Zyte API HTTP request with a method and a text body
// (https://docs.zyte.com/zyte-api/usage/reference.html: httpRequestMethod,
// httpRequestText, customHttpRequestHeaders).
type zyteRequest struct {
	URL                      string       `json:"url"`
	HTTPResponseBody         bool         `json:"httpResponseBody"`
	HTTPResponseHeaders      bool         `json:"httpResponseHeaders"`
	HTTPRequestMethod        string       `json:"httpRequestMethod"`
	HTTPRequestText          string       `json:"httpRequestText"`
	CustomHTTPRequestHeaders []zyteHeader `json:"customHttpRequestHeaders,omitempty"`
}

type zyteHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type zyteResponse struct {
	URL                 string       `json:"url"`
	StatusCode          *int         `json:"statusCode"`
	HTTPResponseBody    *string      `json:"httpResponseBody"` // base64
	HTTPResponseHeaders []zyteHeader `json:"httpResponseHeaders"`
}

// postZyte has Zyte API send the POST. Only the headers the answer depends
// on are given: Zyte sends a browser's own, and custom ones "can break the
// ban avoidance capabilities".
func postZyte(ctx context.Context, c *upstream.Call, r postReq) (*pages.Page, error) {
	target := r.target()
	body := zyteRequest{URL: target, HTTPResponseBody: true, HTTPResponseHeaders: true, HTTPRequestMethod: http.MethodPost, HTTPRequestText: string(r.body)}
	extra := r.header.Clone()
	if extra == nil {
		extra = http.Header{}
	}
	extra.Set("Content-Type", "application/json")
	extra.Set("Accept", "application/json")
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys) // deterministic bodies (fixtures match on them)
	for _, k := range keys {
		body.CustomHTTPRequestHeaders = append(body.CustomHTTPRequestHeaders, zyteHeader{Name: k, Value: strings.Join(extra[k], ",")})
	}
	key := c.Secret(pages.ZyteKeySecret)
	h := http.Header{}
	h.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(key+":")))
	resp, err := c.Post(ctx, "/v1/extract", h, body)
	if err != nil {
		if resp == nil {
			return nil, err
		}
		return nil, zyteFault(resp)
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
	// Zyte API has decompressed the body already.
	header.Del("content-encoding")
	header.Del("content-length")
	return &pages.Page{Status: *out.StatusCode, Header: header, Body: raw, URL: target}, nil
}

// zyteFault classifies Zyte API's own error answers as the pages layer
// does (https://docs.zyte.com/zyte-api/usage/errors.html): a refused key
// or a suspended account is Rejected with its status, limits are
// RateLimited, a ban (520) or a permanent download error (521) is
// Rejected, so the next route tries. The target's own statuses come as a
// 200 whose statusCode says so. The problem body is not quoted: only its
// type, which names the error class.
func zyteFault(resp *upstream.Response) *upstream.Fault {
	var problem struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(resp.Body, &problem)
	f := upstream.StatusFault(resp.Status, resp.Header)
	what := http.StatusText(resp.Status)
	switch {
	case resp.Status == http.StatusUnauthorized:
		f.Kind, what = upstream.Rejected, "the API key was refused"
	case resp.Status == http.StatusForbidden:
		f.Kind, what = upstream.Rejected, "the account is suspended or not allowed to make the request"
	case resp.Status == http.StatusTooManyRequests:
		f.Kind, what = upstream.RateLimited, "rate limited"
	case resp.Status == http.StatusServiceUnavailable && strings.HasPrefix(problem.Type, "/limits/"):
		f.Kind, what = upstream.RateLimited, "overloaded, rate limited"
	case resp.Status == 520, resp.Status == 521:
		f.Kind, what = upstream.Rejected, "no ban-free answer from the site"
	case resp.Status == http.StatusUnavailableForLegalReasons, resp.Status == http.StatusMisdirectedRequest,
		resp.Status == http.StatusBadRequest, resp.Status == http.StatusUnprocessableEntity:
		f.Kind, what = upstream.Rejected, "the request was refused"
	}
	f.Reason = "Zyte API: " + what
	if t := problem.Type; t != "" && len(t) <= 80 && !strings.ContainsAny(t, " \t\r\n") {
		f.Reason += " (" + t + ")"
	}
	return f
}

// postScraperAPI has ScraperAPI forward the POST: the body and its
// content type go to the service, which sends them on
// (https://docs.scraperapi.com/making-requests/making-post-put-requests).
func postScraperAPI(ctx context.Context, c *upstream.Call, r postReq) (*pages.Page, error) {
	target := r.target()
	key := c.Secret(pages.ScraperAPIKeySecret)
	q := url.Values{}
	q.Set("api_key", key)
	q.Set("url", target)
	h := http.Header{}
	h.Set("accept", "application/json")
	resp, err := c.Post(ctx, "/?"+q.Encode(), h, json.RawMessage(r.body))
	if resp == nil {
		return nil, err // transport faults carry no URL: the key stays out
	}
	switch {
	case resp.Status >= 200 && resp.Status <= 299, resp.Status == http.StatusNotFound, resp.Status == http.StatusGone:
		return &pages.Page{Status: resp.Status, Header: resp.Header, Body: resp.Body, URL: target}, nil
	}
	return nil, scraperAPIFault(resp)
}

// scraperAPIFault classifies ScraperAPI's own statuses (401 bad key, 403
// out of credits, 429 over the plan's concurrency, 500 no answer after its
// retries) as the pages layer does. Its error body is not quoted.
func scraperAPIFault(resp *upstream.Response) *upstream.Fault {
	f := upstream.StatusFault(resp.Status, resp.Header)
	what := http.StatusText(resp.Status)
	switch resp.Status {
	case http.StatusUnauthorized:
		f.Kind, what = upstream.Rejected, "the API key was refused"
	case http.StatusForbidden:
		f.Kind, what = upstream.RateLimited, "out of API credits, or the plan does not allow the request"
		f.RetryAfter = upstream.StatusFault(http.StatusTooManyRequests, resp.Header).RetryAfter
	case http.StatusTooManyRequests:
		f.Kind, what = upstream.RateLimited, "over the plan's concurrency limit"
	case http.StatusInternalServerError:
		what = "no successful answer from the site after its retries"
	case http.StatusBadRequest:
		f.Kind, what = upstream.Rejected, "the request was refused as invalid"
	}
	f.Reason = "ScraperAPI: " + what
	return f
}

// looksHTML reports whether an answer is an HTML document.
func looksHTML(p *pages.Page) bool {
	if strings.Contains(strings.ToLower(p.Header.Get("content-type")), "html") {
		return true
	}
	return strings.HasPrefix(strings.TrimSpace(string(p.Body[:min(len(p.Body), 512)])), "<")
}
