package pages

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// The test-only site: a shop with an HTML product page, a JSON stock
// endpoint its front end calls, and a JSON search whose 404 means "no
// results". Fixtures are built here with replay.Server.Add, so that
// testdata/upstream stays for real providers.
const (
	siteName   = "pagestest_shop"
	origin     = "https://shop.pagestest.example"
	zyteKey    = "zk-test-6f1c2a"
	scraperKey = "sk-test-93b7d4"
	// deHost is the site's second host (a country site, say).
	deHost = "de.pagestest.example"
)

var title = regexp.MustCompile(`<h1>([^<]*)</h1>`)

func testSite() *Site {
	return &Site{
		Name:    siteName,
		Origin:  origin,
		Hosts:   []string{"pagestest.example", deHost},
		Header:  BrowserHeader("en-GB,en;q=0.9"),
		Cookies: []*http.Cookie{{Name: "currency", Value: "GBP"}},
		Blocked: BlockedBody(func(body []byte) (string, bool) {
			if bytes.Contains(body, []byte("Verify you are human")) {
				return "human verification", true
			}
			return "", false
		}),
		Operations: map[string]Operation{
			"pagestest/product": {
				Build: func(c *upstream.Call) (Request, error) {
					return Request{Path: "/p/" + url.PathEscape(c.Param("id")), Country: c.Param("country"), Host: c.Param("host")}, nil
				},
				Parse: func(_ *upstream.Call, p *Page) (any, error) {
					m := title.FindSubmatch(p.Body)
					if m == nil {
						return nil, upstream.MalformedFault("no product title")
					}
					return map[string]any{"title": string(m[1]), "url": p.URL}, nil
				},
			},
			"pagestest/stock": {
				Build: func(c *upstream.Call) (Request, error) {
					h := http.Header{}
					h.Set("x-requested-with", "XMLHttpRequest")
					return Request{Path: "/api/stock", Query: url.Values{"sku": {c.Param("id")}}, Header: h, JSON: true, Country: c.Param("country")}, nil
				},
				Parse: func(_ *upstream.Call, p *Page) (any, error) {
					var s struct {
						SKU     string `json:"sku"`
						InStock *bool  `json:"in_stock"`
					}
					if err := p.JSON(&s); err != nil {
						return nil, err
					}
					if s.InStock == nil {
						return nil, upstream.MalformedFault("no in_stock")
					}
					return map[string]any{"sku": s.SKU, "in_stock": *s.InStock}, nil
				},
			},
			"pagestest/search": {
				Build: func(c *upstream.Call) (Request, error) {
					return Request{Path: "/api/search", Query: url.Values{"q": {c.Param("query")}}, JSON: true}, nil
				},
				Parse: func(_ *upstream.Call, p *Page) (any, error) {
					if p.Status == http.StatusNotFound {
						return map[string]any{"items": []any{}}, nil
					}
					var out map[string]any
					return out, p.JSON(&out)
				},
				Statuses: []int{http.StatusNotFound},
			},
		},
	}
}

const (
	productHTML = `<!doctype html><html><head><title>Kettle</title></head><body><h1>Steel kettle</h1></body></html>`
	stockJSON   = `{"sku":"42","in_stock":true}`
	challenge   = `<!doctype html><html><head><title>Just a moment...</title></head><body>Verify you are human</body></html>`
)

// quick keeps retries short and routes out of cooldown unless a test asks.
// The call budget stays long enough for the services' own attempt timeout,
// which the runner keeps room for before it retries.
var quick = upstream.Options{
	AttemptTimeout: 2 * time.Second,
	Timeout:        20 * time.Second,
	BackoffBase:    time.Millisecond,
	BackoffMax:     5 * time.Millisecond,
	CooldownAfter:  1 << 30,
}

// env is a replay upstream with every route of the test site pointed at it.
type env struct {
	t      *testing.T
	replay *replay.Server
	vars   map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := replay.New()
	base, stop, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return &env{t: t, replay: s, vars: map[string]string{
		"MERIDIAN_UPSTREAM_PAGESTEST_SHOP_URL": base + "/" + siteName,
		"MERIDIAN_UPSTREAM_ZYTE_API_URL":       base + "/" + ZyteName,
		"MERIDIAN_UPSTREAM_SCRAPERAPI_URL":     base + "/" + ScraperAPIName,
		ZyteKeySecret:                          zyteKey,
		ScraperAPIKeySecret:                    scraperKey,
	}}
}

func (e *env) runner(opts upstream.Options, providers ...*upstream.Provider) *upstream.Runner {
	lookup := func(k string) (string, bool) { v, ok := e.vars[k]; return v, ok }
	return upstream.NewRunner(providers, upstream.Settings{Lookup: lookup, Options: opts})
}

func (e *env) add(provider, name string, fx replay.Fixture) {
	e.t.Helper()
	if err := e.replay.Add(provider, name, fx); err != nil {
		e.t.Fatal(err)
	}
}

// requests are what provider received.
func (e *env) requests(provider string) []replay.Request {
	var out []replay.Request
	for _, r := range e.replay.Requests() {
		if r.Provider == provider {
			out = append(out, r)
		}
	}
	return out
}

// answer is a verbatim HTTP answer.
func answer(status int, contentType, body string, headers ...string) replay.Fixture {
	var fx replay.Fixture
	fx.Response.Status = status
	fx.Response.Headers = map[string]string{"content-type": contentType}
	for i := 0; i+1 < len(headers); i += 2 {
		fx.Response.Headers[headers[i]] = headers[i+1]
	}
	fx.Response.BodyText = &body
	return fx
}

// sitePage is the site's own answer at path (and query).
func sitePage(path string, query map[string]string, fx replay.Fixture) replay.Fixture {
	fx.Match.Method, fx.Match.Path, fx.Match.Query = http.MethodGet, path, query
	return fx
}

// zyteFor matches a Zyte API request for target.
func zyteFor(target string, fx replay.Fixture) replay.Fixture {
	fx.Match.Method, fx.Match.Path = http.MethodPost, "/v1/extract"
	fx.Match.Body = map[string]json.RawMessage{"url": mustJSON(target)}
	return fx
}

// zyteOK is Zyte API's 200 relaying the target's answer.
func zyteOK(target string, status int, contentType, body string) replay.Fixture {
	env, _ := json.Marshal(map[string]any{
		"url":                 target,
		"statusCode":          status,
		"httpResponseBody":    base64.StdEncoding.EncodeToString([]byte(body)),
		"httpResponseHeaders": []map[string]string{{"name": "Content-Type", "value": contentType}, {"name": "Content-Encoding", "value": "br"}},
	})
	return zyteFor(target, answer(http.StatusOK, "application/json", string(env)))
}

// zyteProblemAt is one of Zyte API's documented error answers.
func zyteProblemAt(target string, status int, typ, title string, headers ...string) replay.Fixture {
	body, _ := json.Marshal(map[string]any{"type": typ, "title": title, "status": status, "detail": title + "."})
	return zyteFor(target, answer(status, "application/problem+json", string(body), headers...))
}

// scraperFor matches a ScraperAPI request for target.
func scraperFor(target string, fx replay.Fixture) replay.Fixture {
	fx.Match.Method, fx.Match.Path, fx.Match.Query = http.MethodGet, "/", map[string]string{"url": target, "api_key": "*"}
	return fx
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

var (
	productURL = origin + "/p/42"
	stockURL   = origin + "/api/stock?sku=42"
	params     = map[string]string{"id": "42", "country": "gb"}
)

// serveAll gives every route the product page and the stock JSON.
func (e *env) serveAll() {
	e.add(siteName, "product", sitePage("/p/42", nil, answer(200, "text/html; charset=utf-8", productHTML)))
	e.add(siteName, "stock", sitePage("/api/stock", map[string]string{"sku": "42"}, answer(200, "application/json", stockJSON)))
	e.add(ZyteName, "product", zyteOK(productURL, 200, "text/html; charset=utf-8", productHTML))
	e.add(ZyteName, "stock", zyteOK(stockURL, 200, "application/json", stockJSON))
	e.add(ScraperAPIName, "product", scraperFor(productURL, answer(200, "text/html; charset=utf-8", productHTML)))
	e.add(ScraperAPIName, "stock", scraperFor(stockURL, answer(200, "application/json", stockJSON)))
}

func legs(t *testing.T, out upstream.Outcome) string {
	t.Helper()
	b, err := json.Marshal(out.Trace.Legs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEveryRouteServesEveryOperation(t *testing.T) {
	e := newEnv(t)
	e.serveAll()
	site := testSite()
	for _, p := range []*upstream.Provider{Direct(site), Zyte(site), ScraperAPI(site)} {
		r := e.runner(quick, p)
		out := r.Serve(context.Background(), "pagestest/product", params)
		if out.Fault != nil || out.Trace.ServedBy != p.Name {
			t.Fatalf("%s product: %+v", p.Name, out)
		}
		if got := out.Data.(map[string]any); got["title"] != "Steel kettle" || got["url"] != productURL {
			t.Errorf("%s product data = %v", p.Name, got)
		}
		out = r.Serve(context.Background(), "pagestest/stock", params)
		if out.Fault != nil || out.Trace.ServedBy != p.Name {
			t.Fatalf("%s stock: %+v", p.Name, out)
		}
		if got := out.Data.(map[string]any); got["sku"] != "42" || got["in_stock"] != true {
			t.Errorf("%s stock data = %v", p.Name, got)
		}
	}

	// The direct route: a browser's headers, its cookies, and compressed
	// bodies offered; the JSON call looks like the page's own fetch.
	direct := e.requests(siteName)
	if len(direct) != 2 {
		t.Fatalf("direct requests: %+v", direct)
	}
	page, call := direct[0].Header, direct[1].Header
	for k, want := range map[string]string{
		"User-Agent":      "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" + ChromeVersion + ".0.0.0 Safari/537.36",
		"Accept-Language": "en-GB,en;q=0.9",
		"Accept-Encoding": "gzip, br",
		"Cookie":          "currency=GBP",
		"Sec-Fetch-Mode":  "navigate",
	} {
		if got := page.Get(k); got != want {
			t.Errorf("page request %s = %q; want %q", k, got, want)
		}
	}
	if !strings.HasPrefix(page.Get("accept"), "text/html,") {
		t.Errorf("page accept = %q", page.Get("accept"))
	}
	if call.Get("accept") != "application/json" || call.Get("x-requested-with") != "XMLHttpRequest" ||
		call.Get("sec-fetch-mode") != "cors" || call.Get("upgrade-insecure-requests") != "" || call.Get("cookie") != "currency=GBP" {
		t.Errorf("JSON call headers = %v", call)
	}

	// Zyte API: Basic auth with the key as user name, the public URL, the
	// country as geolocation, cookies as requestCookies.
	zyte := e.requests(ZyteName)
	if len(zyte) != 2 {
		t.Fatalf("zyte requests: %+v", zyte)
	}
	if got := zyte[0].Header.Get("authorization"); got != "Basic "+base64.StdEncoding.EncodeToString([]byte(zyteKey+":")) {
		t.Errorf("zyte authorization = %q", got)
	}
	var body struct {
		URL                 string       `json:"url"`
		HTTPResponseBody    bool         `json:"httpResponseBody"`
		HTTPResponseHeaders bool         `json:"httpResponseHeaders"`
		Geolocation         string       `json:"geolocation"`
		Headers             []zyteHeader `json:"customHttpRequestHeaders"`
		Cookies             []zyteCookie `json:"requestCookies"`
	}
	if err := json.Unmarshal(zyte[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.URL != productURL || !body.HTTPResponseBody || !body.HTTPResponseHeaders || body.Geolocation != "GB" || len(body.Headers) != 0 ||
		len(body.Cookies) != 1 || body.Cookies[0] != (zyteCookie{Name: "currency", Value: "GBP", Domain: "shop.pagestest.example"}) {
		t.Errorf("zyte product body = %s", zyte[0].Body)
	}
	body.Headers = nil
	if err := json.Unmarshal(zyte[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	wantHeaders := []zyteHeader{{Name: "Accept", Value: "application/json"}, {Name: "X-Requested-With", Value: "XMLHttpRequest"}}
	if body.URL != stockURL || len(body.Headers) != 2 || body.Headers[0] != wantHeaders[0] || body.Headers[1] != wantHeaders[1] {
		t.Errorf("zyte stock body = %s", zyte[1].Body)
	}
	if strings.Contains(string(zyte[1].Body), "User-Agent") {
		t.Error("the browser defaults are the direct route's; Zyte API sends its own")
	}

	// ScraperAPI: key and target in the query, the country in lower case,
	// and (the site needs cookies) keep_headers with a browser's set.
	scraper := e.requests(ScraperAPIName)
	if len(scraper) != 2 {
		t.Fatalf("scraperapi requests: %+v", scraper)
	}
	q := url.Values(scraper[1].Query)
	if q.Get("api_key") != scraperKey || q.Get("url") != stockURL || q.Get("country_code") != "gb" || q.Get("keep_headers") != "true" {
		t.Errorf("scraperapi query = %v", q)
	}
	if h := scraper[1].Header; h.Get("accept") != "application/json" || h.Get("cookie") != "currency=GBP" || !strings.Contains(h.Get("user-agent"), "Chrome/") {
		t.Errorf("scraperapi forwarded headers = %v", h)
	}
}

func TestScraperAPIKeepsItsOwnHeadersWhenNoneMatter(t *testing.T) {
	e := newEnv(t)
	e.serveAll()
	site := testSite()
	site.Cookies = nil
	out := e.runner(quick, ScraperAPI(site)).Serve(context.Background(), "pagestest/product", map[string]string{"id": "42"})
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	q := url.Values(e.requests(ScraperAPIName)[0].Query)
	if q.Has("keep_headers") || q.Has("country_code") {
		t.Errorf("query = %v; want neither keep_headers nor country_code", q)
	}
}

func TestDirectChallengeFailsOverToZyte(t *testing.T) {
	e := newEnv(t)
	e.add(siteName, "challenge", sitePage("/p/42", nil, answer(403, "text/html", challenge, "server", "cloudflare")))
	e.add(ZyteName, "product", zyteOK(productURL, 200, "text/html", productHTML))
	e.add(ScraperAPIName, "product", scraperFor(productURL, answer(200, "text/html", productHTML)))
	site := testSite()
	out := e.runner(quick, Direct(site), Zyte(site), ScraperAPI(site)).Serve(context.Background(), "pagestest/product", params)
	if out.Fault != nil || out.Trace.ServedBy != ZyteName || out.Trace.Attempts != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	if got := legs(t, out); got != `[{"served_by":"pagestest_shop","attempts":1,"ok":false,"status":403,"fault":"rejected"},{"served_by":"zyte_api","attempts":1,"ok":true}]` {
		t.Errorf("legs = %s", got)
	}
	if n := len(e.requests(ScraperAPIName)); n != 0 {
		t.Errorf("scraperapi called %d times after Zyte answered", n)
	}
}

func TestChallengesWithoutAnErrorStatusFailOver(t *testing.T) {
	e := newEnv(t)
	// A challenge served as 200 (the hook knows it), and a JSON call
	// answered by an HTML 429 (no hook needed).
	e.add(siteName, "challenge", sitePage("/p/42", nil, answer(200, "text/html", challenge)))
	e.add(siteName, "wall", sitePage("/api/stock", map[string]string{"sku": "42"}, answer(429, "text/html", `<html><body>Access denied</body></html>`)))
	e.serveAll()
	site := testSite()
	r := e.runner(quick, Direct(site), Zyte(site))
	for endpoint, status := range map[string]string{"pagestest/product": `"status":200`, "pagestest/stock": `"status":429`} {
		out := r.Serve(context.Background(), endpoint, params)
		if out.Fault != nil || out.Trace.ServedBy != ZyteName {
			t.Fatalf("%s: %+v", endpoint, out)
		}
		if got := legs(t, out); !strings.Contains(got, status+`,"fault":"rejected"`) {
			t.Errorf("%s legs = %s", endpoint, got)
		}
	}
}

func TestZyteBanFailsOverToScraperAPI(t *testing.T) {
	e := newEnv(t)
	e.add(ZyteName, "ban", zyteProblemAt(productURL, 520, "/download/temporary-error", "Website Ban", "retry-after", "5"))
	e.add(ScraperAPIName, "product", scraperFor(productURL, answer(200, "text/html", productHTML)))
	site := testSite()
	out := e.runner(quick, Zyte(site), ScraperAPI(site)).Serve(context.Background(), "pagestest/product", params)
	if out.Fault != nil || out.Trace.ServedBy != ScraperAPIName {
		t.Fatalf("outcome = %+v", out)
	}
	if got := legs(t, out); got != `[{"served_by":"zyte_api","attempts":1,"ok":false,"status":520,"fault":"rejected"},{"served_by":"scraperapi","attempts":1,"ok":true}]` {
		t.Errorf("legs = %s", got)
	}
}

func TestTargetNotFoundIsDefinitiveOnEveryRoute(t *testing.T) {
	site := testSite()
	for _, tc := range []struct {
		name   string
		setup  func(e *env)
		routes []*upstream.Provider
		spare  string // the route that must not be asked
	}{
		{"direct", func(e *env) {
			e.add(siteName, "missing", sitePage("/p/42", nil, answer(404, "text/html", "<h1>Not here</h1>")))
		}, []*upstream.Provider{Direct(site), Zyte(site)}, ZyteName},
		{"zyte", func(e *env) {
			e.add(ZyteName, "missing", zyteOK(productURL, 410, "text/html", "<h1>Gone</h1>"))
		}, []*upstream.Provider{Zyte(site), ScraperAPI(site)}, ScraperAPIName},
		{"scraperapi", func(e *env) {
			e.add(ScraperAPIName, "missing", scraperFor(productURL, answer(404, "text/html", "<h1>Not here</h1>")))
		}, []*upstream.Provider{ScraperAPI(site), Zyte(site)}, ZyteName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tc.setup(e)
			e.serveAll() // the spare route would answer
			out := e.runner(quick, tc.routes...).Serve(context.Background(), "pagestest/product", params)
			if out.Fault == nil || out.Fault.Kind != upstream.NotFound || out.Error().Status != http.StatusNotFound {
				t.Fatalf("outcome = %+v", out)
			}
			if n := len(e.requests(tc.spare)); n != 0 || len(out.Trace.Legs) != 1 {
				t.Errorf("a definitive not found was asked of %s (%d requests); legs %s", tc.spare, n, legs(t, out))
			}
		})
	}
}

func TestStatusesTheOperationParses(t *testing.T) {
	e := newEnv(t)
	e.add(siteName, "none", sitePage("/api/search", map[string]string{"q": "teapot"}, answer(404, "application/json", `{"error":"no results"}`)))
	out := e.runner(quick, Direct(testSite())).Serve(context.Background(), "pagestest/search", map[string]string{"query": "teapot"})
	if out.Fault != nil {
		t.Fatalf("a 404 the operation handles itself is not a fault: %v", out.Fault)
	}
	if got, _ := json.Marshal(out.Data); string(got) != `{"items":[]}` {
		t.Errorf("data = %s", got)
	}
}

func TestServiceLimits(t *testing.T) {
	site := testSite()
	for _, tc := range []struct {
		name       string
		provider   *upstream.Provider
		fixture    replay.Fixture
		wantStatus int
		retryAfter time.Duration
	}{
		{"zyte 429", Zyte(site), zyteProblemAt(productURL, 429, "/limits/over-user-limit", "Over User Requests Limit", "retry-after", "7"), 429, 7 * time.Second},
		{"zyte 503 overloaded", Zyte(site), zyteProblemAt(productURL, 503, "/limits/over-global-limit", "Global Requests Limit Reached", "retry-after", "4"), 503, 4 * time.Second},
		{"scraperapi 429", ScraperAPI(site), scraperFor(productURL, answer(429, "text/plain", "You have exceeded your concurrency limit.", "retry-after", "9")), 429, 9 * time.Second},
		{"scraperapi 403 credits", ScraperAPI(site), scraperFor(productURL, answer(403, "text/plain", "You have used up all your API credits.")), 403, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.add(tc.provider.Name, "limit", tc.fixture)
			out := e.runner(quick, tc.provider).Serve(context.Background(), "pagestest/product", params)
			f := out.Fault
			if f == nil || f.Kind != upstream.RateLimited || f.Status != tc.wantStatus || f.RetryAfter != tc.retryAfter || out.Trace.Attempts != 1 {
				t.Fatalf("fault = %+v (attempts %d)", f, out.Trace.Attempts)
			}
			want := ""
			if tc.retryAfter > 0 {
				want = strconv.Itoa(int(tc.retryAfter.Seconds()))
			}
			if e := out.Error(); e.Status != http.StatusTooManyRequests || e.Header.Get("retry-after") != want {
				t.Errorf("error = %d retry-after %q; want 429 %q", e.Status, e.Header.Get("retry-after"), want)
			}
		})
	}
}

func TestBadKeyIsRejectedAndRestsTheRoute(t *testing.T) {
	site := testSite()
	opts := quick
	opts.CooldownAfter = 1
	for _, tc := range []struct {
		provider *upstream.Provider
		fixture  replay.Fixture
	}{
		{Zyte(site), zyteProblemAt(productURL, 401, "/auth/key-not-found", "Authentication Key Not Found")},
		{ScraperAPI(site), scraperFor(productURL, answer(401, "text/plain", "Unauthorized request, please make sure your API key is valid."))},
	} {
		t.Run(tc.provider.Name, func(t *testing.T) {
			e := newEnv(t)
			e.add(tc.provider.Name, "bad-key", tc.fixture)
			r := e.runner(opts, tc.provider)
			out := r.Serve(context.Background(), "pagestest/product", params)
			if out.Fault == nil || out.Fault.Kind != upstream.Rejected || out.Fault.Status != http.StatusUnauthorized {
				t.Fatalf("fault = %+v", out.Fault)
			}
			again := r.Serve(context.Background(), "pagestest/product", params)
			if n := len(e.requests(tc.provider.Name)); n != 1 || again.Skipped <= 0 || again.Error().Status != http.StatusServiceUnavailable {
				t.Errorf("after a refused key the route still ran (%d requests, skipped %v)", n, again.Skipped)
			}
		})
	}
}

func TestServiceServerErrorsAreRetried(t *testing.T) {
	site := testSite()
	for _, tc := range []struct {
		provider *upstream.Provider
		fixture  replay.Fixture
	}{
		{Zyte(site), zyteProblemAt(productURL, 500, "/server/internal", "Internal Server Error")},
		{ScraperAPI(site), scraperFor(productURL, answer(500, "text/plain", "Request failed. You will not be charged for this request."))},
	} {
		t.Run(tc.provider.Name, func(t *testing.T) {
			e := newEnv(t)
			e.add(tc.provider.Name, "failed", tc.fixture)
			out := e.runner(quick, tc.provider).Serve(context.Background(), "pagestest/product", params)
			if out.Fault == nil || out.Fault.Kind != upstream.ServerError || out.Trace.Attempts != upstream.DefaultMaxAttempts {
				t.Fatalf("outcome = %+v", out)
			}
		})
	}
}

func TestZyteEnvelopesThatDoNotDecode(t *testing.T) {
	site := testSite()
	for name, body := range map[string]string{
		"not json":       `<html>proxy error</html>`,
		"no body":        `{"url":"` + productURL + `","statusCode":200}`,
		"no status":      `{"url":"` + productURL + `","httpResponseBody":"PGgxPmE8L2gxPg=="}`,
		"bad base64":     `{"url":"` + productURL + `","statusCode":200,"httpResponseBody":"not base64!"}`,
		"trailing bytes": `{"url":"` + productURL + `","statusCode":200,"httpResponseBody":""} {}`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.add(ZyteName, "envelope", zyteFor(productURL, answer(200, "application/json", body)))
			out := e.runner(quick, Zyte(site)).Serve(context.Background(), "pagestest/product", params)
			if out.Fault == nil || out.Fault.Kind != upstream.Malformed {
				t.Fatalf("fault = %+v", out.Fault)
			}
		})
	}
}

func TestAPIKeysNeverReachAFault(t *testing.T) {
	// Keys shorter than the runner's redaction threshold: only this
	// package can keep them out of reasons.
	const zk, sk = "Zq9", "Sx7"
	site := testSite()
	for _, tc := range []struct {
		name     string
		provider *upstream.Provider
		fixture  replay.Fixture
	}{
		{"scraperapi echoes the key", ScraperAPI(site), scraperFor(productURL, answer(401, "text/plain", "Invalid API key: api_key=Sx7 is not valid"))},
		{"scraperapi 500 with the key in its body", ScraperAPI(site), scraperFor(productURL, answer(500, "text/plain", "Request for ?api_key=Sx7&url=x failed"))},
		{"scraperapi connection reset", ScraperAPI(site), func() replay.Fixture {
			fx := scraperFor(productURL, answer(200, "text/html", productHTML))
			fx.Fault = "reset"
			return fx
		}()},
		{"zyte problem", Zyte(site), zyteProblemAt(productURL, 401, "/auth/key-not-found", "Authentication Key Zq9 Not Found")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.vars[ZyteKeySecret], e.vars[ScraperAPIKeySecret] = zk, sk
			e.add(tc.provider.Name, "fault", tc.fixture)
			out := e.runner(quick, tc.provider).Serve(context.Background(), "pagestest/product", params)
			if out.Fault == nil {
				t.Fatal("no fault")
			}
			trace, _ := json.Marshal(out.Trace)
			for _, leak := range []string{out.Fault.Reason, out.Fault.Error(), string(trace)} {
				if strings.Contains(leak, zk) || strings.Contains(leak, sk) {
					t.Errorf("a key leaked: %s", leak)
				}
			}
		})
	}
}

func TestRequestFor(t *testing.T) {
	site := testSite()
	for raw, want := range map[string]string{
		"https://shop.pagestest.example/p/42?colour=red": "/p/42?colour=red",
		"http://PAGESTEST.example./p/a%2Fb":              "/p/a%2Fb",
		"https://shop.pagestest.example":                 "/",
		"https://evil.example/p/42":                      "",
		"https://user@shop.pagestest.example/p/42":       "",
		"ftp://shop.pagestest.example/p/42":              "",
		"not a url at all":                               "",
	} {
		r, ok := site.RequestFor(raw)
		got := ""
		if ok {
			got = r.Path
			if len(r.Query) > 0 {
				got += "?" + r.Query.Encode()
			}
		}
		if got != want {
			t.Errorf("RequestFor(%q) = %q; want %q", raw, got, want)
		}
	}
}

func TestConstructorsRefuseUnusableSites(t *testing.T) {
	mustPanic := func(name string, build func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		build()
	}
	other := testSite()
	other.Name = "pagestest_other"
	mustPanic("an endpoint on two sites", func() { Zyte(testSite(), other) })
	for name, change := range map[string]func(*Site){
		"name": func(s *Site) { s.Name = "Shop-1" },
		"http": func(s *Site) { s.Origin = "http://shop.pagestest.example" },
		"path": func(s *Site) { s.Origin = origin + "/en" },
		"no parse": func(s *Site) {
			s.Operations["pagestest/product"] = Operation{Build: s.Operations["pagestest/product"].Build}
		},
		"no op":     func(s *Site) { s.Operations = nil },
		"no origin": func(s *Site) { s.Origin = "" },
	} {
		s := testSite()
		change(s)
		mustPanic(name, func() { Direct(s) })
	}
}
