package pages

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// A PublicFetcher reads pages whose URLs come from callers or from what
// sources answered (a profile's bio link, a link-in-bio page, a same-handle
// probe), not from an operator's site list: a logged-out GET with a
// browser's headers, no cookies and no credentials, only of URLs the URL
// safety policy finds public, each dialled over the policy's pinned client
// (every redirect is checked too), inside a time limit and a body cap.
//
// It has two fetches, apart by what they may cost:
//
//   - Fetch asks the site directly and nothing else: never a
//     web-unblocking service, whatever is configured. A fetch whose
//     target a caller chooses (a same-handle probe) uses it.
//   - FetchUnblocking is Fetch, and then, when a web-unblocking service is
//     configured (Zyte API, then ScraperAPI, the keys the pages routes
//     read), for the URLs Unblock accepts only (the services charge per
//     page, so the caller says which pages are worth it), a page whose own
//     site blocked the direct fetch is asked of the service.
//
// A block is what a site's block looks like, never text in a page: a
// transport failure (a reset is how some sites block), or 403, 429 or 503
// answered by a URL Unblock accepts (a redirect to a page Unblock does not
// accept, say a host the page's owner chose, is that host's answer, not
// the site's). A 2xx answer is never a block, whatever its text: a page's
// owner can write a challenge's title, ids or scripts into it, and that
// must not buy a paid fetch. None of the sites Unblock accepts is known to
// serve its block pages with 2xx (the page routes' per-site Blocked hooks,
// on a site's own hosts, are where such a site's markers belong).
//
// A site listed in Targets can be moved to a test server or a proxy by
// its MERIDIAN_UPSTREAM_<NAME>_URL (see FetchTarget).
//
// The public check runs first whichever route answers. In replay mode
// every page comes from the replay upstream's Zyte API fixtures
// (testdata/upstream/zyte_api/, matched on the page's URL), for both
// fetches, and nothing is fetched live.
//
// These fetches are the composite's own, outside the runner: no route
// cooldown, allowance or upstream trace records them.
type PublicFetcher struct {
	policy  *upstream.URLPolicy
	timeout time.Duration
	maxBody int
	client  *http.Client // the services' and the replay upstream's
	// replay, when set, answers every page of both fetches.
	replay *publicService
	// unblock and services are FetchUnblocking's alone.
	unblock  func(rawURL string) bool
	services []publicService
	// moved are the Targets whose base URL is set, dialled by standIns.
	moved    []movedTarget
	standIns *http.Client
}

// PublicFetchSettings configure NewPublicFetcher.
type PublicFetchSettings struct {
	// Policy guards every URL: the runner's (upstream.Runner.URLPolicy);
	// nil is upstream.DefaultURLPolicy().
	Policy *upstream.URLPolicy
	// Lookup reads the services' keys and base URLs as the runner's
	// Settings.Lookup does (MERIDIAN_ZYTE_API_KEY, MERIDIAN_SCRAPERAPI_KEY,
	// MERIDIAN_UPSTREAM_ZYTE_API_URL, MERIDIAN_UPSTREAM_SCRAPERAPI_URL);
	// nil fetches directly only.
	Lookup func(name string) (string, bool)
	// ReplayURL, when set, is the replay upstream: every page is asked of
	// its zyte_api fixtures, never of the live site.
	ReplayURL string
	// Unblock says which URLs FetchUnblocking may ask of a service after
	// the site blocked the direct fetch; nil lets none. It is asked of the
	// URL fetched and of the URL that answered (after redirects).
	Unblock func(rawURL string) bool
	// Timeout bounds one Fetch, service included; 0 is
	// DefaultPublicFetchTimeout.
	Timeout time.Duration
	// MaxBody caps a page's decoded body; 0 is DefaultPublicFetchMaxBody.
	MaxBody int
	// ServiceClient talks to the services; nil is a plain client.
	ServiceClient *http.Client
	// Targets are the sites whose base URL Lookup may move (see
	// FetchTarget); not in replay mode, where every page is replayed.
	Targets []FetchTarget
}

// Defaults of PublicFetchSettings.
const (
	DefaultPublicFetchTimeout = 8 * time.Second
	// DefaultPublicFetchMaxBody fits a link-in-bio page's Next.js payload
	// and a large profile page with room to spare.
	DefaultPublicFetchMaxBody = 4 << 20
)

// publicService is a configured web-unblocking service.
type publicService struct {
	name, base, key string
	fetch           func(f *PublicFetcher, ctx context.Context, s publicService, target string) (int, []byte, error)
}

// NewPublicFetcher builds a fetcher; its Fetch has the shape of
// handleprobe.FetchFunc, and it is a composite.PageFetcher.
func NewPublicFetcher(s PublicFetchSettings) *PublicFetcher {
	f := &PublicFetcher{policy: s.Policy, timeout: s.Timeout, maxBody: s.MaxBody, unblock: s.Unblock, client: s.ServiceClient}
	if f.policy == nil {
		f.policy = upstream.DefaultURLPolicy()
	}
	if f.timeout <= 0 {
		f.timeout = DefaultPublicFetchTimeout
	}
	if f.maxBody <= 0 {
		f.maxBody = DefaultPublicFetchMaxBody
	}
	if f.client == nil {
		f.client = &http.Client{Timeout: serviceAttemptTimeout}
	}
	zyte := publicService{name: ZyteName, fetch: (*PublicFetcher).viaZyte}
	scraper := publicService{name: ScraperAPIName, fetch: (*PublicFetcher).viaScraperAPI}
	switch {
	case s.ReplayURL != "":
		zyte.base, zyte.key = strings.TrimSuffix(s.ReplayURL, "/")+"/"+ZyteName, upstream.ReplaySecret
		f.replay = &zyte
	case s.Lookup != nil:
		f.moved, f.standIns = moveTargets(s.Targets, s.Lookup), standInClient()
		for _, c := range []struct {
			svc      publicService
			provider *upstream.Provider
		}{{zyte, Zyte()}, {scraper, ScraperAPI()}} {
			key, _ := s.Lookup(c.provider.Secrets[0].Name)
			if strings.TrimSpace(key) == "" {
				continue
			}
			c.svc.key, c.svc.base = key, c.provider.BaseURL
			if v, ok := s.Lookup(c.provider.BaseURLVar()); ok && v != "" {
				c.svc.base = v
			}
			c.svc.base = strings.TrimSuffix(c.svc.base, "/")
			f.services = append(f.services, c.svc)
		}
	}
	return f
}

// Services names the web-unblocking services FetchUnblocking asks, in
// order (in replay mode, the replay upstream's, which answers every page).
func (f *PublicFetcher) Services() []string {
	if f.replay != nil {
		return []string{f.replay.name}
	}
	var out []string
	for _, s := range f.services {
		out = append(out, s.name)
	}
	return out
}

// Fetch reads rawURL directly: the final status and the decoded body of
// any HTTP answer (a 404 is an answer, not an error), or an error: a URL
// the policy refuses (an InvalidParameter fault with code unsafe_url, never
// dialled), the time limit (Timeout), a body over the cap (Malformed), a
// transport failure. It never asks a web-unblocking service: the
// same-handle probe's fetch.
func (f *PublicFetcher) Fetch(ctx context.Context, rawURL string) (int, []byte, error) {
	return f.fetch(ctx, rawURL, false)
}

// FetchUnblocking reads rawURL as Fetch does and, when rawURL is one
// Unblock accepts and its site blocked the direct fetch (see
// PublicFetcher), asks the configured services in turn; when none
// answers, the site's own answer stands. Errors never carry a service's
// key.
func (f *PublicFetcher) FetchUnblocking(ctx context.Context, rawURL string) (int, []byte, error) {
	return f.fetch(ctx, rawURL, true)
}

// fetch is Fetch, and with unblocking FetchUnblocking.
func (f *PublicFetcher) fetch(ctx context.Context, rawURL string, unblocking bool) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if f.replay != nil {
		return f.replayed(ctx, rawURL)
	}
	if m := f.movedTo(rawURL); m != nil {
		return f.fetchMoved(ctx, m, rawURL)
	}
	u, err := f.policy.Check(ctx, rawURL)
	if err != nil {
		return 0, nil, refusal(err)
	}
	target := u.String()
	a := f.direct(ctx, target)
	if !unblocking || len(f.services) == 0 || f.unblock == nil || ctx.Err() != nil || !a.blocked() || !f.unblock(rawURL) || !f.unblock(a.from) {
		return a.status, a.body, a.err
	}
	if s, b, serr := f.viaServices(ctx, f.services, target); serr == nil {
		return s, b, nil
	}
	return a.status, a.body, a.err // the site's own answer stands
}

// replayed asks the replay upstream; nothing is dialled, so no DNS.
func (f *PublicFetcher) replayed(ctx context.Context, rawURL string) (int, []byte, error) {
	u, err := f.policy.CheckOffline(rawURL)
	if err != nil {
		return 0, nil, refusal(err)
	}
	return f.viaServices(ctx, []publicService{*f.replay}, u.String())
}

// directAnswer is a site's own answer to a direct fetch.
type directAnswer struct {
	status int
	body   []byte
	err    error
	// from is the URL that answered, after redirects (or whose fetch
	// failed).
	from string
}

// blocked reports what a site's block looks like: a transport failure or
// timeout of the site (a reset is how some sites block), or a blocking
// status (403, 429, 503). A refused URL or a body over the cap is not, and
// neither is any 2xx answer, whatever its text says (see PublicFetcher).
func (a directAnswer) blocked() bool {
	if a.err != nil {
		var f *upstream.Fault
		return errors.As(a.err, &f) && (f.Kind == upstream.Transport || f.Kind == upstream.Timeout)
	}
	switch a.status {
	case http.StatusForbidden, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return true
	}
	return false
}

// direct asks the site itself over the policy's pinned client.
func (f *PublicFetcher) direct(ctx context.Context, target string) directAnswer {
	return f.directWith(ctx, f.policy.Client(), target, "")
}

// directWith asks target over client; forwardedHost, when set, is the
// host the request is for (target is a moved site's base URL).
func (f *PublicFetcher) directWith(ctx context.Context, client *http.Client, target, forwardedHost string) directAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return directAnswer{err: refusal(err), from: target}
	}
	req.Header = BrowserHeader("")
	// Set by hand so br is offered as a browser would; decode undoes it.
	req.Header.Set("accept-encoding", "gzip, br")
	if forwardedHost != "" {
		req.Header.Set(ForwardedHostHeader, forwardedHost)
	}
	res, err := client.Do(req)
	if err != nil {
		from := target
		var u *url.Error
		if errors.As(err, &u) && u.URL != "" {
			from = u.URL // the redirect that failed
		}
		return directAnswer{err: fetchFault(ctx, err), from: from}
	}
	defer res.Body.Close()
	a := directAnswer{from: res.Request.URL.String()}
	raw, err := f.read(ctx, res.Body, f.maxBody)
	if err != nil {
		a.err = err
		return a
	}
	body, err := upstream.DecodeContent(raw, res.Header.Get("content-encoding"))
	if err != nil {
		a.err = err
		return a
	}
	if len(body) > f.maxBody {
		a.err = tooLarge(f.maxBody)
		return a
	}
	a.status, a.body = res.StatusCode, body
	return a
}

// read reads at most limit bytes; a longer body is Malformed.
func (f *PublicFetcher) read(ctx context.Context, r io.Reader, limit int) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fetchFault(ctx, err)
	}
	if len(raw) > limit {
		return nil, tooLarge(limit)
	}
	return raw, nil
}

// viaServices asks each of services in turn until one answers.
func (f *PublicFetcher) viaServices(ctx context.Context, services []publicService, target string) (int, []byte, error) {
	var errs []error
	for _, s := range services {
		status, body, err := s.fetch(f, ctx, s, target)
		if err == nil {
			return status, body, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return 0, nil, &upstream.Fault{Kind: upstream.Rejected, Reason: "no web-unblocking service is configured"}
	}
	return 0, nil, errors.Join(errs...)
}

// viaZyte fetches target through Zyte API's /v1/extract, as the Zyte
// route does for a site's GET (see fetchZyte).
func (f *PublicFetcher) viaZyte(ctx context.Context, s publicService, target string) (int, []byte, error) {
	payload, err := json.Marshal(zyteRequest{URL: target, HTTPResponseBody: true, HTTPResponseHeaders: true})
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/extract", bytes.NewReader(payload))
	if err != nil {
		return 0, nil, upstream.MalformedFault("cannot build the Zyte API request")
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("accept", "application/json")
	req.Header.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(s.key+":")))
	res, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fetchFault(ctx, err)
	}
	defer res.Body.Close()
	// base64 grows a body by a third; the envelope adds headers.
	raw, err := f.read(ctx, res.Body, f.maxBody/3*4+64<<10)
	if err != nil {
		return 0, nil, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, nil, zyteFault(&upstream.Response{Status: res.StatusCode, Header: res.Header, Body: raw}, s.key)
	}
	var out zyteResponse
	if err := upstream.DecodeJSON(raw, &out); err != nil {
		return 0, nil, err
	}
	if out.StatusCode == nil || out.HTTPResponseBody == nil {
		return 0, nil, upstream.MalformedFault("Zyte API answered without statusCode or httpResponseBody")
	}
	body, err := base64.StdEncoding.DecodeString(*out.HTTPResponseBody)
	if err != nil {
		return 0, nil, upstream.MalformedFault("Zyte API's httpResponseBody is not base64: %v", err)
	}
	if len(body) > f.maxBody {
		return 0, nil, tooLarge(f.maxBody)
	}
	return *out.StatusCode, body, nil
}

// viaScraperAPI fetches target through ScraperAPI's GET endpoint, as the
// ScraperAPI route does for a site's GET (see fetchScraperAPI): the
// service's own headers, the target's body and status.
func (f *PublicFetcher) viaScraperAPI(ctx context.Context, s publicService, target string) (int, []byte, error) {
	q := url.Values{}
	q.Set("api_key", s.key)
	q.Set("url", target)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/?"+q.Encode(), nil)
	if err != nil {
		return 0, nil, upstream.MalformedFault("cannot build the ScraperAPI request")
	}
	res, err := f.client.Do(req)
	if err != nil {
		return 0, nil, fetchFault(ctx, err) // scrubbed: the URL holds the key
	}
	defer res.Body.Close()
	raw, err := f.read(ctx, res.Body, f.maxBody)
	if err != nil {
		return 0, nil, err
	}
	switch {
	case res.StatusCode >= 200 && res.StatusCode <= 299, res.StatusCode == http.StatusNotFound, res.StatusCode == http.StatusGone:
		body, err := upstream.DecodeContent(raw, res.Header.Get("content-encoding"))
		if err != nil {
			return 0, nil, err
		}
		if len(body) > f.maxBody {
			return 0, nil, tooLarge(f.maxBody)
		}
		return res.StatusCode, body, nil
	}
	return 0, nil, scraperAPIFault(&upstream.Response{Status: res.StatusCode, Header: res.Header, Body: raw}, s.key)
}

// refusal is the error of a URL the policy refuses.
func refusal(err error) error {
	msg := "the URL cannot be used"
	var r *upstream.URLRefusedError
	if errors.As(err, &r) {
		msg = r.Message
	}
	return upstream.InvalidParameterFault("", "unsafe_url", "The URL is not fetched: "+msg)
}

func tooLarge(limit int) error {
	return upstream.MalformedFault("the page is larger than %d bytes", limit)
}

// fetchFault classifies a failure to get an answer as the runner does: a
// refusal by the policy (a redirect to a private address), the deadline,
// or a transport failure whose reason leaves out the URL (a service's
// URL carries its key).
func fetchFault(ctx context.Context, err error) error {
	var refused *upstream.URLRefusedError
	if errors.As(err, &refused) {
		return refusal(refused)
	}
	var netErr net.Error
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return &upstream.Fault{Kind: upstream.Timeout, Reason: "no answer before the deadline"}
	}
	reason := err.Error()
	var u *url.Error
	if errors.As(err, &u) {
		reason = u.Op + ": " + u.Err.Error()
	}
	return &upstream.Fault{Kind: upstream.Transport, Reason: reason}
}
