package pages

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// ScraperAPIKeySecret holds the ScraperAPI key.
const ScraperAPIKeySecret = "MERIDIAN_SCRAPERAPI_KEY"

// ScraperAPIName is the ScraperAPI route's provider name.
const ScraperAPIName = "scraperapi"

// ScraperAPI is the ScraperAPI route for the operations of every site
// given: GET {base}/?api_key=KEY&url=TARGET answers with the target's own
// body, as documented at https://docs.scraperapi.com (Making requests, API
// status codes, Geotargeting, Custom headers); a POST goes to the same
// address with its body and content type, which the service forwards
// (Making POST/PUT requests).
func ScraperAPI(sites ...*Site) *upstream.Provider {
	return &upstream.Provider{
		Name:  ScraperAPIName,
		Label: "web_unblocker_b",
		Protocol: "ScraperAPI API endpoint: GET /?api_key=…&url=… answering with the target's body (POST with the body " +
			"for a site's POSTs); country_code for geotargeting, keep_headers to forward the site's headers and cookies",
		Docs:    "https://docs.scraperapi.com/responses-and-formats/api-status-codes",
		BaseURL: "https://api.scraperapi.com",
		Secrets: []upstream.Secret{{
			Name:     ScraperAPIKeySecret,
			Required: true,
			Doc: "A ScraperAPI key: sign up at scraperapi.com and copy the key from the dashboard. Requests are charged " +
				"in credits (200 and 404 answers only); when the plan's credits run out the service answers 403. Plans " +
				"below Business geotarget the US and EU only.",
		}},
		AttemptTimeout: serviceAttemptTimeout,
		Endpoints:      endpoints(sites, fetchScraperAPI),
	}
}

// fetchScraperAPI asks ScraperAPI for the public page.
func fetchScraperAPI(ctx context.Context, c *upstream.Call, s *Site, r Request) (*Page, error) {
	target := s.target(r)
	key := c.Secret(ScraperAPIKeySecret)
	q := url.Values{}
	q.Set("api_key", key)
	q.Set("url", target)
	if r.Country != "" {
		q.Set("country_code", strings.ToLower(r.Country))
	}
	var h http.Header
	keep := len(r.Header) > 0 || len(s.Cookies) > 0 || r.JSON
	if r.post() {
		// The service forwards a POST's body and content type itself; its
		// own headers stay unless cookies must go along.
		keep = len(s.Cookies) > 0 || r.Header.Get("cookie") != ""
	}
	if keep {
		// keep_headers makes the service send our headers instead of its
		// own, so they must be a whole, coherent browser's set. Without it
		// the service's header management applies, which its documentation
		// recommends whenever the answer does not depend on headers.
		q.Set("keep_headers", "true")
		h = browserHeader(s, r)
	}
	if r.post() {
		if h == nil {
			h = http.Header{}
		}
		if r.JSON {
			h.Set("accept", "application/json")
		}
		if r.ContentType != "" {
			h.Set("content-type", r.ContentType)
		}
	}
	resp, err := c.Send(ctx, r.method(), "/", q, h, r.Body)
	if resp == nil {
		// Transport faults carry no URL (upstream scrubs it): the key stays out.
		return nil, err
	}
	switch {
	case resp.Status >= 200 && resp.Status <= 299,
		// The target's "not found" is passed through (and charged).
		resp.Status == http.StatusNotFound, resp.Status == http.StatusGone:
		return page(resp.Status, resp.Header, resp.Body, target)
	}
	return nil, scraperAPIFault(resp, key)
}

// scraperAPIFault classifies the service's own statuses (API status codes:
// 401 bad key, 403 credits used up or a feature the plan lacks, 429 over
// the plan's concurrency, 500 no successful answer after retrying for up
// to 70 s, not charged and worth retrying).
func scraperAPIFault(resp *upstream.Response, key string) *upstream.Fault {
	f := upstream.StatusFault(resp.Status, resp.Header)
	what := ""
	switch resp.Status {
	case http.StatusUnauthorized:
		f.Kind, what = upstream.Rejected, "the API key was refused"
	case http.StatusForbidden:
		// The account's quota: rests the route for a Retry-After if one
		// comes, else counts towards its cooldown like any failing call.
		f.Kind, what = upstream.RateLimited, "out of API credits, or the plan does not allow the request"
		f.RetryAfter = retryAfter(resp.Header)
	case http.StatusTooManyRequests:
		f.Kind, what = upstream.RateLimited, "over the plan's concurrency limit"
	case http.StatusInternalServerError:
		what = "no successful answer from the site after its retries"
	case http.StatusBadRequest:
		f.Kind, what = upstream.Rejected, "the request was refused as invalid"
	default:
		what = http.StatusText(resp.Status)
	}
	f.Reason = "ScraperAPI: " + what
	if s := snippet(resp.Body, key); s != "" {
		f.Reason += ": " + s
	}
	return f
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), as
// upstream.StatusFault does for the statuses it knows to carry one.
func retryAfter(h http.Header) time.Duration {
	return upstream.StatusFault(http.StatusTooManyRequests, h).RetryAfter
}
