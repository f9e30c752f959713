// Package pages reads sites that publish no data API: their public HTML
// pages and the JSON endpoints their own front ends call. A site's
// operations are written once and run on every route the runner knows:
// the site itself (Direct) and web-unblocking services that fetch the same
// public URL through their own browsers and proxies (Zyte, ScraperAPI).
//
// # Writing a site
//
// A Site names the site, its public https origin and host names, the
// browser-like headers the direct route sends, the locale cookies every
// route sends, an optional hook that recognises block and challenge pages,
// and its Operations keyed by endpoint key (platform/id):
//
//	shop := &pages.Site{
//		Name:    "shop_example",                // the direct route's provider name
//		Origin:  "https://www.shop.example",
//		Hosts:   []string{"www.shop.example", "shop.example"},
//		Header:  pages.BrowserHeader("en-GB,en;q=0.9"),
//		Cookies: []*http.Cookie{{Name: "currency", Value: "GBP"}},
//		Blocked: pages.BlockedBody(htmldata.Challenge),
//		Operations: map[string]pages.Operation{
//			"shop/product": {Build: productRequest, Parse: parseProduct},
//		},
//	}
//
// An Operation's Build turns the call's parameters into a Request (GET or
// POST, a path on the site, its query, extra headers, an optional host and
// country, whether it is the site's JSON endpoint, and a POST's body and
// content type); Parse maps the Page that came back to the endpoint's data
// shape. Neither knows which route fetched the page.
//
// # Several fetches
//
// An operation that needs more than one fetch (a location text resolved
// through the site's typeahead, remembered with upstream.Call.Remembered,
// then the search page) has Run instead of Build and Parse:
//
//	"shop/search": {Run: func(ctx context.Context, c *upstream.Call, fetch pages.Fetch) (any, error) {
//		p, err := fetch(ctx, pages.Request{Path: "/api/suggest", Query: q, JSON: true})
//		…
//		p, err = fetch(ctx, pages.Request{Path: "/search/" + id})
//		…
//	}},
//
// Each fetch goes over the route the operation runs on and is checked and
// classified as a Build operation's request (see Faults); statuses given
// to a fetch are its own to handle, as Operation.Statuses are Parse's.
//
// # Credentials
//
// A site that takes an operator's key for its own API declares it in
// Site.Secrets: the direct route's provider declares them, so its calls
// read them with upstream.Call.Secret. The services' providers serve every
// site and carry no site's credentials: on their routes Secret answers "",
// so such a key must be optional, and the operation asks without it there.
//
// # Hosts
//
// A site that runs one host per country or language (a marketplace per
// country, say) declares them all in Hosts and names one per request in
// Request.Host; "" is the origin's. The public URL every route fetches is
// then https://<Host><Path>?<Query>, and Page.URL says so. Only declared
// hosts can be named: they are the operator's code, never a caller's
// value, so a Build that names another host is refused as the operation's
// bug (Malformed). Cookies that differ by host belong in the request's
// cookie header, not in Site.Cookies, which every host receives.
//
// # Routes
//
// Direct(site) is the site's own route: the provider is named after the
// site, its BaseURL is the origin (movable with MERIDIAN_UPSTREAM_<NAME>_URL
// like every provider's), and it sends the site's Header, the request's
// extra headers, the cookies and accept-encoding gzip, br (bodies are
// decoded here); a POST carries its body, content type and the site's
// origin as a page's fetch() does. A request for another host goes to https://<Host> while
// the base URL is the origin; a moved base URL (a proxy, a test server)
// keeps receiving every request, and one for another host than the
// origin's carries it in X-Forwarded-Host, so the default host's requests
// are exactly what they were. Zyte(sites...) and ScraperAPI(sites...) are
// one provider per service serving the operations of every site given; the
// page they fetch is always the public URL (the request's host or the
// origin, Path?Query), while the request goes to the service's base URL
// (movable too). Zyte API sends a POST as httpRequestMethod with
// httpRequestText (httpRequestBody, base64, when the body is not text) and
// the content type as a custom request header; ScraperAPI forwards the
// POST with its body and content type. A deployment lists them in
// route order in adapters.All(), for example Direct(shop), Zyte(shop,
// other), ScraperAPI(shop, other): an endpoint is then tried directly
// first, and through the services when the site blocks Meridian.
//
// # Faults
//
// The target's answer is classified the same way on every route: a page
// the Blocked hook recognises, or a JSON request answered by an HTML page
// with 403, 429 or 503, is Rejected (the runner fails over, it does not
// retry), except a 429 with Retry-After, which is RateLimited whatever its
// body; 404 and 410 are NotFound (definitive, never asked of another
// route) unless the operation lists the status in Statuses; other statuses
// follow upstream.StatusFault. A service's own answers follow its
// documentation: its rate limits and quotas are RateLimited (with its
// Retry-After), a refused key is Rejected with status 401 or 403 (so the
// route's cooldown counts it), a ban is Rejected, its 5xx is ServerError,
// an envelope that does not decode is Malformed. API keys never appear in
// a fault's reason.
//
// # Replay fixtures
//
// In replay mode each route has its own fixture folder: the direct route's
// is testdata/upstream/<site name>/ (the site's paths), Zyte API's is
// testdata/upstream/zyte_api/ (POST /v1/extract matching match.body.url,
// the public URL, which may be a path.Match pattern) and ScraperAPI's is
// testdata/upstream/scraperapi/ (GET / matching match.query.url). The
// services' fixtures tell hosts apart by their URL; the direct route's
// cannot, since the replay upstream matches no header: its fixtures answer
// for every host, and a test that needs each host's page puts a handler
// reading X-Forwarded-Host in front.
package pages

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Site is a site without a data API, and its operations.
type Site struct {
	// Name is the direct route's provider name (lowercase, digits and
	// underscores): it names MERIDIAN_UPSTREAM_<NAME>_URL and the replay
	// fixture folder testdata/upstream/<name>/.
	Name string
	// Origin is the public https origin, e.g. https://www.shop.example;
	// every route fetches Origin+Path (the direct route relative to its
	// possibly moved base URL).
	Origin string
	// Hosts are the site's own host names; the origin's host is always one.
	// RequestFor accepts URLs on these hosts only, and Request.Host names
	// one of them.
	Hosts []string
	// Header holds the direct route's browser-like defaults (see
	// BrowserHeader). The unblocking services send browsers' headers of
	// their own (their documentation warns that custom headers can break
	// ban avoidance), so a header the answer depends on belongs in
	// Request.Header and a cookie in Cookies.
	Header http.Header
	// Cookies are the locale or currency cookies the site needs, sent on
	// every route and to every host (as Cookie, or as Zyte API's
	// requestCookies for the fetched host).
	Cookies []*http.Cookie
	// Blocked recognises a block or challenge page (a captcha, a bot wall)
	// whatever its status; optional.
	Blocked func(*Page) (reason string, blocked bool)
	// Operations maps endpoint keys (platform/id) to operations.
	Operations map[string]Operation
	// Secrets are credentials the site's own API takes (an operator's
	// key for its front end's API, say), declared by the direct route's
	// provider only and read with upstream.Call.Secret. The unblocking
	// services serve every site and never carry a site's credentials: on
	// their routes Secret answers "". Make them optional (Required false)
	// unless the site cannot be read without them.
	Secrets []upstream.Secret
	// Protocol describes the direct route's protocol in words (the
	// provider's Protocol); "" keeps the generic description.
	Protocol string
}

// Request is one fetch an operation asks for.
type Request struct {
	// Method is GET ("" means GET) or POST; no other is sent.
	Method string
	// Path is the escaped absolute path on the site, e.g. /p/123, without
	// query or fragment.
	Path  string
	Query url.Values
	// Host is the host name to fetch, one of the site's Hosts; "" is the
	// origin's. Another is refused (Malformed): the operation's bug.
	Host string
	// Header holds extra headers every route forwards to the site (a
	// referer, x-requested-with, an accept-language the answer depends on).
	// ScraperAPI forwards a POST with its body and content type alone (its
	// own header management stays), so a POST's Header reaches the site
	// there only when cookies make it send a whole header set.
	Header http.Header
	// DirectHeader adjusts the direct route's browser for this request,
	// over the site's Header: defaults a browser would vary (the
	// accept-language of the page's language, the sec-fetch-site of a
	// call to a sibling host). The services' browsers send their own;
	// only ScraperAPI, when it must send a whole header set (keep_headers),
	// sends the direct route's, these included.
	DirectHeader http.Header
	// Country is an ISO 3166-1 alpha-2 code the unblocking services fetch
	// from ("" lets them choose). The direct route fetches from where
	// Meridian runs.
	Country string
	// JSON asks for the site's own JSON endpoint rather than an HTML page:
	// accept is application/json.
	JSON bool
	// Body is a POST's body (a front end's JSON, say), sent as given; a
	// GET has none. ContentType names its media type and is required with
	// a body: the direct route sends it as content-type, Zyte API as a
	// custom request header, ScraperAPI with the forwarded POST.
	Body        []byte
	ContentType string
}

// post reports whether r is a POST.
func (r Request) post() bool { return r.Method == http.MethodPost }

// method is r's HTTP method.
func (r Request) method() string {
	if r.post() {
		return http.MethodPost
	}
	return http.MethodGet
}

// Page is the target's answer, whichever route fetched it.
type Page struct {
	Status int
	Header http.Header
	// Body is decoded (gzip and br are undone).
	Body []byte
	// URL is the target's absolute public URL (after redirects when the
	// route reports them).
	URL string
}

// BlockedBody adapts a detector that reads only the body (such as
// htmldata.Challenge) to Site.Blocked.
func BlockedBody(detect func(body []byte) (reason string, blocked bool)) func(*Page) (string, bool) {
	return func(p *Page) (string, bool) { return detect(p.Body) }
}

// JSON decodes the body; a body that does not decode is Malformed.
func (p *Page) JSON(out any) error { return upstream.DecodeJSON(p.Body, out) }

// Operation is one endpoint on a site: one fetch (Build and Parse), or
// several (Run).
type Operation struct {
	// Build turns the call's parameters into the request to make; an error
	// ends the attempt (an upstream.InvalidParameterFault for a parameter
	// the site cannot take).
	Build func(c *upstream.Call) (Request, error)
	// Parse maps the page to the endpoint's data shape.
	Parse func(c *upstream.Call, p *Page) (any, error)
	// Statuses are non-2xx target statuses Parse handles itself (say a
	// search endpoint's 404 for no results); others are classified first.
	Statuses []int

	// Run, instead of Build and Parse, is an operation that needs several
	// fetches: a text resolved through the site's typeahead (remembered
	// with c.Remembered), then the page; a lookup, then a POST. Each
	// fetch goes over the route the operation runs on, and is checked and
	// classified as a Build/Parse operation's: the request's host and
	// form, then block and challenge pages and statuses (the fetch's
	// statuses are those it handles itself, as Statuses). The route stays
	// hidden from Run, as from Build and Parse.
	Run func(ctx context.Context, c *upstream.Call, fetch Fetch) (any, error)
}

// Fetch gets one page over the route a Run operation runs on, classified
// as every page is: a fault for a block, a challenge or a status other
// than 2xx and statuses.
type Fetch func(ctx context.Context, r Request, statuses ...int) (*Page, error)

// fetchFunc gets a request's page over one route. Failures of the route
// itself (its transport, its refusals, its envelope) are returned as
// faults; the target's answer, whatever its status, is the page.
type fetchFunc func(ctx context.Context, c *upstream.Call, s *Site, r Request) (*Page, error)

// adapter runs op over one route.
func adapter(s *Site, op Operation, get fetchFunc) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		fetch := s.fetcher(c, get)
		if op.Run != nil {
			return op.Run(ctx, c, fetch)
		}
		r, err := op.Build(c)
		if err != nil {
			return nil, err
		}
		p, err := fetch(ctx, r, op.Statuses...)
		if err != nil {
			return nil, err
		}
		return op.Parse(c, p)
	}
}

// fetcher is the Fetch of one attempt over one route: the request is
// checked, its host normalised, the page fetched and classified.
func (s *Site) fetcher(c *upstream.Call, get fetchFunc) Fetch {
	return func(ctx context.Context, r Request, statuses ...int) (*Page, error) {
		if err := r.check(); err != nil {
			return nil, err
		}
		var err error
		if r.Host, err = s.host(r.Host); err != nil {
			return nil, err
		}
		p, err := get(ctx, c, s, r)
		if err != nil {
			return nil, err
		}
		if err := s.verdict(r, p, statuses); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// verdict classifies the target's answer the same way on every route;
// statuses are the non-2xx ones the operation handles itself.
func (s *Site) verdict(r Request, p *Page, statuses []int) error {
	// The hook goes first: a challenge served as 404 must not become a
	// definitive "not found".
	if s.Blocked != nil {
		if reason, blocked := s.Blocked(p); blocked {
			return &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: "the site served a block or challenge page: " + reason}
		}
	}
	if (p.Status >= 200 && p.Status <= 299) || slices.Contains(statuses, p.Status) {
		return nil
	}
	// A rate limit that says when to come back is one, whatever its body;
	// other refusals of a JSON request in HTML are a challenge page.
	limited := p.Status == http.StatusTooManyRequests && p.Header.Get("retry-after") != ""
	if r.JSON && !limited && p.LooksHTML() && (p.Status == http.StatusForbidden || p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable) {
		return &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: "the site answered a JSON request with an HTML page (a challenge)"}
	}
	f := upstream.StatusFault(p.Status, p.Header)
	f.Reason = "the site answered " + strconv.Itoa(p.Status) + " " + f.Reason
	return f
}

// LooksHTML reports whether the answer is an HTML document (by its
// content type, or a body that starts with markup).
func (p *Page) LooksHTML() bool {
	if strings.Contains(strings.ToLower(p.Header.Get("content-type")), "html") {
		return true
	}
	return strings.HasPrefix(strings.TrimSpace(string(p.Body[:min(len(p.Body), 512)])), "<")
}

// check refuses a request no route can send: the operation's bug, an
// unusable answer (502), never the caller's.
func (r Request) check() error {
	switch r.Method {
	case "", http.MethodGet:
		if len(r.Body) > 0 || r.ContentType != "" {
			return upstream.MalformedFault("the operation built a GET with a body")
		}
	case http.MethodPost:
		if len(r.Body) > 0 && r.ContentType == "" {
			return upstream.MalformedFault("the operation built a POST body without a content type")
		}
		if strings.ContainsAny(r.ContentType, "\r\n") {
			return upstream.MalformedFault("the operation built an unusable content type %q", r.ContentType)
		}
	default:
		return upstream.MalformedFault("the operation built a %q request: GET and POST only", r.Method)
	}
	if !strings.HasPrefix(r.Path, "/") || strings.ContainsAny(r.Path, "?# \t\r\n") {
		return upstream.MalformedFault("the operation built an unusable path %q", r.Path)
	}
	if r.Country != "" && !countryCode.MatchString(r.Country) {
		return upstream.MalformedFault("the operation built an unusable country %q", r.Country)
	}
	return nil
}

var countryCode = regexp.MustCompile(`^[A-Za-z]{2}$`)

// host normalises a request's host: "" for the origin's (named or not),
// else one of the site's declared hosts. Another is the operation's bug,
// never fetched: hosts are the operator's, not the caller's.
func (s *Site) host(h string) (string, error) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || h == s.originHost() {
		return "", nil
	}
	if !slices.Contains(s.hosts(), h) {
		return "", upstream.MalformedFault("the operation built a host %q the site does not declare", h)
	}
	return h, nil
}

// originHost is the origin's host name, normalised.
func (s *Site) originHost() string {
	if u, err := url.Parse(s.Origin); err == nil {
		return hostOf(u)
	}
	return ""
}

// base is the public origin r is fetched from: the origin, or https://Host.
func (s *Site) base(r Request) string {
	if r.Host != "" {
		return "https://" + r.Host
	}
	return strings.TrimSuffix(s.Origin, "/")
}

// target is the request's absolute public URL.
func (s *Site) target(r Request) string {
	t := s.base(r) + r.Path
	if len(r.Query) > 0 {
		t += "?" + r.Query.Encode()
	}
	return t
}

// RequestFor turns a URL on one of the site's hosts (a caller's product
// link, say) into a Request for its path and query; ok is false for any
// other URL.
func (s *Site) RequestFor(raw string) (r Request, ok bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || !slices.Contains(s.hosts(), hostOf(u)) {
		return Request{}, false
	}
	r.Path = u.EscapedPath()
	if r.Path == "" {
		r.Path = "/"
	}
	if q := u.Query(); len(q) > 0 {
		r.Query = q
	}
	return r, true
}

// hosts are the site's host names, the origin's included, normalised.
func (s *Site) hosts() []string {
	hs := []string{s.originHost()}
	for _, h := range s.Hosts {
		hs = append(hs, strings.TrimSuffix(strings.ToLower(h), "."))
	}
	return hs
}

func hostOf(u *url.URL) string { return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") }

var validName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// validate refuses a site no route can serve; constructors panic on it,
// since a site is code, not configuration.
func (s *Site) validate() error {
	if s == nil {
		return fmt.Errorf("pages: nil site")
	}
	if !validName.MatchString(s.Name) {
		return fmt.Errorf("pages: site name %q is not lowercase letters, digits and underscores", s.Name)
	}
	u, err := url.Parse(s.Origin)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("pages: site %s: origin %q is not a public https origin", s.Name, s.Origin)
	}
	if len(s.Operations) == 0 {
		return fmt.Errorf("pages: site %s has no operations", s.Name)
	}
	for key, op := range s.Operations {
		switch {
		case op.Run != nil && (op.Build != nil || op.Parse != nil || len(op.Statuses) > 0):
			return fmt.Errorf("pages: site %s: operation %s has Run and Build, Parse or Statuses: one or the other", s.Name, key)
		case op.Run == nil && (op.Build == nil || op.Parse == nil):
			return fmt.Errorf("pages: site %s: operation %s needs Build and Parse, or Run", s.Name, key)
		}
	}
	return nil
}

// endpoints builds one route's adapters for every operation of every site.
func endpoints(sites []*Site, fetch fetchFunc) map[string]upstream.Adapter {
	out := map[string]upstream.Adapter{}
	for _, s := range sites {
		if err := s.validate(); err != nil {
			panic(err)
		}
		for key, op := range s.Operations {
			if _, dup := out[key]; dup {
				panic(fmt.Sprintf("pages: endpoint %s is an operation of two sites", key))
			}
			out[key] = adapter(s, op, fetch)
		}
	}
	return out
}

// cookieHeader joins the site's cookies and a request's own Cookie value.
func cookieHeader(cookies []*http.Cookie, extra string) string {
	var parts []string
	for _, c := range cookies {
		if v := (&http.Cookie{Name: c.Name, Value: c.Value}).String(); v != "" {
			parts = append(parts, v)
		}
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	return strings.Join(parts, "; ")
}

// snippet is the start of a service's error body for a fault's reason,
// with the key scrubbed in case the service echoes it.
func snippet(body []byte, key string) string {
	s := string(body)
	if key != "" {
		// Before cutting, so that no part of the key survives the cut.
		s = strings.ReplaceAll(s, key, "[redacted]")
		s = strings.ReplaceAll(s, url.QueryEscape(key), "[redacted]")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = strings.ToValidUTF8(s[:160], "") + "…"
	}
	return s
}
