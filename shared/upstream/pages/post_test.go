package pages

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// The quote endpoint: the site's front end POSTs a JSON body.
const (
	quoteBody = `{"sku":"42","qty":2}`
	quoteJSON = `{"price":9.5}`
)

var quoteURL = origin + "/api/quote?lang=en"

// postSite is the test site with a POST operation; its request body and
// content type come from the parameters.
func postSite() *Site {
	s := testSite()
	s.Cookies = nil
	s.Operations["pagestest/quote"] = Operation{
		Build: func(c *upstream.Call) (Request, error) {
			h := http.Header{}
			h.Set("Referer", origin+"/p/42")
			body, ct := []byte(quoteBody), "application/json"
			if c.Param("binary") != "" {
				body, ct = []byte{0xff, 0x00, 0xfe}, "application/octet-stream"
			}
			return Request{Method: http.MethodPost, Path: "/api/quote", Query: url.Values{"lang": {"en"}}, Header: h,
				DirectHeader: http.Header{"Accept-Language": {"de-DE,de;q=0.9"}}, JSON: true, Body: body, ContentType: ct}, nil
		},
		Parse: func(_ *upstream.Call, p *Page) (any, error) {
			var out map[string]any
			return out, p.JSON(&out)
		},
	}
	return s
}

// servePost gives every route the quote.
func (e *env) servePost() {
	var site replay.Fixture = answer(200, "application/json", quoteJSON)
	site.Match.Method, site.Match.Path = http.MethodPost, "/api/quote"
	e.add(siteName, "quote", site)
	e.add(ZyteName, "quote", zyteOK(quoteURL, 200, "application/json", quoteJSON))
	scraper := answer(200, "application/json", quoteJSON)
	scraper.Match.Method, scraper.Match.Path, scraper.Match.Query = http.MethodPost, "/", map[string]string{"url": quoteURL, "api_key": "*"}
	e.add(ScraperAPIName, "quote", scraper)
}

// A POST on each route: what the site, Zyte API and ScraperAPI receive.
func TestPostOnEveryRoute(t *testing.T) {
	e := newEnv(t)
	e.servePost()
	site := postSite()
	for _, p := range []*upstream.Provider{Direct(site), Zyte(site), ScraperAPI(site)} {
		out := e.runner(quick, p).Serve(context.Background(), "pagestest/quote", nil)
		if out.Fault != nil || out.Trace.ServedBy != p.Name || out.Data.(map[string]any)["price"] != 9.5 {
			t.Fatalf("%s: %+v", p.Name, out)
		}
	}

	// The site: the method, the body as given, its content type, and what
	// the page's own fetch() sends (its origin, cors, the referer), with
	// the direct route's own browser headers.
	d := e.requests(siteName)[0]
	if d.Method != http.MethodPost || d.Path != "/api/quote" || url.Values(d.Query).Get("lang") != "en" || string(d.Body) != quoteBody {
		t.Fatalf("direct request %s %s ?%v %s", d.Method, d.Path, d.Query, d.Body)
	}
	for k, want := range map[string]string{
		"Content-Type":    "application/json",
		"Origin":          origin,
		"Accept":          "application/json",
		"Sec-Fetch-Mode":  "cors",
		"Referer":         origin + "/p/42",
		"Accept-Language": "de-DE,de;q=0.9",
	} {
		if got := d.Header.Get(k); got != want {
			t.Errorf("direct %s = %q; want %q", k, got, want)
		}
	}

	// Zyte API: the method and the text body, the content type and the
	// request's headers as custom headers, none of the direct route's.
	var z struct {
		URL     string       `json:"url"`
		Method  string       `json:"httpRequestMethod"`
		Text    *string      `json:"httpRequestText"`
		Body    *string      `json:"httpRequestBody"`
		Headers []zyteHeader `json:"customHttpRequestHeaders"`
	}
	if err := json.Unmarshal(e.requests(ZyteName)[0].Body, &z); err != nil {
		t.Fatal(err)
	}
	want := []zyteHeader{{Name: "Accept", Value: "application/json"}, {Name: "Content-Type", Value: "application/json"}, {Name: "Referer", Value: origin + "/p/42"}}
	if z.URL != quoteURL || z.Method != http.MethodPost || z.Text == nil || *z.Text != quoteBody || z.Body != nil || !slices.Equal(z.Headers, want) {
		t.Errorf("zyte request %s", e.requests(ZyteName)[0].Body)
	}

	// ScraperAPI: the POST forwarded with its body and content type; its
	// own header management stays (no keep_headers without cookies).
	s := e.requests(ScraperAPIName)[0]
	q := url.Values(s.Query)
	if s.Method != http.MethodPost || s.Path != "/" || q.Get("url") != quoteURL || q.Get("api_key") != scraperKey || q.Has("keep_headers") ||
		string(s.Body) != quoteBody || s.Header.Get("Content-Type") != "application/json" || s.Header.Get("Referer") != "" {
		t.Errorf("scraperapi request %s %s ?%v %v %s", s.Method, s.Path, q, s.Header, s.Body)
	}
}

// A body that is not text goes to Zyte API in base64; with cookies,
// ScraperAPI sends a whole header set along with the POST.
func TestPostBinaryBodyAndCookies(t *testing.T) {
	e := newEnv(t)
	e.servePost()
	site := postSite()
	site.Cookies = []*http.Cookie{{Name: "currency", Value: "GBP"}}
	for _, p := range []*upstream.Provider{Zyte(site), ScraperAPI(site)} {
		if out := e.runner(quick, p).Serve(context.Background(), "pagestest/quote", map[string]string{"binary": "1"}); out.Fault != nil {
			t.Fatalf("%s: %v", p.Name, out.Fault)
		}
	}
	var z map[string]any
	_ = json.Unmarshal(e.requests(ZyteName)[0].Body, &z)
	if _, text := z["httpRequestText"]; text || z["httpRequestBody"] != base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}) {
		t.Errorf("zyte binary body %v", z)
	}
	s := e.requests(ScraperAPIName)[0]
	if url.Values(s.Query).Get("keep_headers") != "true" || s.Header.Get("Cookie") != "currency=GBP" ||
		s.Header.Get("Content-Type") != "application/octet-stream" || string(s.Body) != "\xff\x00\xfe" {
		t.Errorf("scraperapi request ?%v %v %q", s.Query, s.Header, s.Body)
	}
}

// runSite is the test site with Run operations: the stock JSON, then the
// page of the SKU it names; and a search whose 404 one fetch handles.
func runSite(seen *[]int) *Site {
	s := testSite()
	s.Operations["pagestest/chain"] = Operation{Run: func(ctx context.Context, c *upstream.Call, fetch Fetch) (any, error) {
		p, err := fetch(ctx, Request{Path: "/api/stock", Query: url.Values{"sku": {c.Param("id")}}, JSON: true, Host: c.Param("host")})
		if err != nil {
			return nil, err
		}
		var st struct {
			SKU string `json:"sku"`
		}
		if err := p.JSON(&st); err != nil {
			return nil, err
		}
		p, err = fetch(ctx, Request{Path: "/p/" + st.SKU, Host: c.Param("host"), Method: c.Param("method")})
		if err != nil {
			return nil, err
		}
		m := title.FindSubmatch(p.Body)
		if m == nil {
			return nil, upstream.MalformedFault("no product title")
		}
		return map[string]any{"title": string(m[1]), "url": p.URL}, nil
	}}
	s.Operations["pagestest/missing"] = Operation{Run: func(ctx context.Context, c *upstream.Call, fetch Fetch) (any, error) {
		r := Request{Path: "/api/search", Query: url.Values{"q": {"none"}}, JSON: true}
		p, err := fetch(ctx, r, http.StatusNotFound) // handled here
		if err != nil {
			return nil, err
		}
		*seen = append(*seen, p.Status)
		_, err = fetch(ctx, r) // classified
		return nil, err
	}}
	return s
}

// A Run operation's fetches go over the route it runs on, and each is
// classified as a Build/Parse operation's page is.
func TestRunFetchesShareTheRouteAndItsVerdict(t *testing.T) {
	e := newEnv(t)
	e.serveAll()
	var seen []int
	site := runSite(&seen)
	for _, p := range []*upstream.Provider{Direct(site), Zyte(site), ScraperAPI(site)} {
		out := e.runner(quick, p).Serve(context.Background(), "pagestest/chain", params)
		if out.Fault != nil || out.Trace.ServedBy != p.Name {
			t.Fatalf("%s: %+v", p.Name, out)
		}
		if got := out.Data.(map[string]any); got["title"] != "Steel kettle" || got["url"] != productURL {
			t.Errorf("%s data = %v", p.Name, got)
		}
	}
	for _, name := range []string{siteName, ZyteName, ScraperAPIName} {
		if n := len(e.requests(name)); n != 2 {
			t.Errorf("%s received %d requests; want both fetches", name, n)
		}
	}

	// A challenge on the second fetch is the route's rejection: the runner
	// fails over, and the next route makes both fetches itself.
	e = newEnv(t)
	e.add(siteName, "stock", sitePage("/api/stock", map[string]string{"sku": "42"}, answer(200, "application/json", stockJSON)))
	e.add(siteName, "challenge", sitePage("/p/42", nil, answer(200, "text/html", challenge)))
	e.add(ZyteName, "stock", zyteOK(stockURL, 200, "application/json", stockJSON))
	e.add(ZyteName, "product", zyteOK(productURL, 200, "text/html", productHTML))
	out := e.runner(quick, Direct(site), Zyte(site)).Serve(context.Background(), "pagestest/chain", params)
	if out.Fault != nil || out.Trace.ServedBy != ZyteName {
		t.Fatalf("challenge: %+v", out)
	}
	if got := legs(t, out); !strings.Contains(got, `"served_by":"pagestest_shop","attempts":1,"ok":false,"status":200,"fault":"rejected"`) {
		t.Errorf("legs = %s", got)
	}
	if n := len(e.requests(ZyteName)); n != 2 {
		t.Errorf("zyte received %d requests", n)
	}

	// A fetch's own statuses are its to handle; the same answer to a fetch
	// that lists none is classified (404: not found, never failed over).
	e.add(siteName, "none", sitePage("/api/search", map[string]string{"q": "none"}, answer(404, "application/json", `{"error":"none"}`)))
	out = e.runner(quick, Direct(site), Zyte(site)).Serve(context.Background(), "pagestest/missing", nil)
	if out.Fault == nil || out.Fault.Kind != upstream.NotFound || len(out.Trace.Legs) != 1 || !slices.Equal(seen, []int{404}) {
		t.Errorf("missing: fault %v, legs %s, seen %v", out.Fault, legs(t, out), seen)
	}
}

// A Run operation's requests are checked and their hosts normalised as
// Build's are: a declared host in any case, never another, GET and POST
// only.
func TestRunRequestsAreChecked(t *testing.T) {
	e := newEnv(t)
	e.add(siteName, "stock", sitePage("/api/stock", map[string]string{"sku": "42"}, answer(200, "application/json", stockJSON)))
	e.add(siteName, "product", sitePage("/p/42", nil, answer(200, "text/html", productHTML)))
	site := runSite(new([]int))
	r := e.runner(quick, Direct(site))
	out := r.Serve(context.Background(), "pagestest/chain", map[string]string{"id": "42", "host": "DE.PAGESTEST.EXAMPLE."})
	if out.Fault != nil || out.Data.(map[string]any)["url"] != "https://"+deHost+"/p/42" {
		t.Fatalf("declared host: %+v", out)
	}
	for _, req := range e.requests(siteName) {
		if req.Header.Get(ForwardedHostHeader) != deHost {
			t.Errorf("request for %s without %s: %v", req.Path, ForwardedHostHeader, req.Header)
		}
	}
	n := len(e.replay.Requests())
	for _, bad := range []map[string]string{{"id": "42", "host": "evil.example"}, {"id": "42", "method": "PUT"}} {
		out := r.Serve(context.Background(), "pagestest/chain", bad)
		if out.Fault == nil || out.Fault.Kind != upstream.Malformed {
			t.Errorf("%v: fault %v; want malformed", bad, out.Fault)
		}
	}
	// The PUT's first fetch (a GET) was made; the PUT itself never was, nor anything for the other host.
	if got := e.replay.Requests()[n:]; len(got) != 1 || got[0].Path != "/api/stock" {
		t.Errorf("requests after the refusals: %+v", got)
	}
}

func TestRequestCheck(t *testing.T) {
	for _, c := range []struct {
		r  Request
		ok bool
	}{
		{Request{Path: "/a"}, true},
		{Request{Path: "/a", Method: http.MethodGet}, true},
		{Request{Path: "/a", Method: http.MethodPost}, true},
		{Request{Path: "/a", Method: http.MethodPost, Body: []byte("{}"), ContentType: "application/json"}, true},
		{Request{Path: "/a", Method: http.MethodPost, Body: []byte("{}")}, false},                                    // no content type
		{Request{Path: "/a", Method: http.MethodPost, Body: []byte("{}"), ContentType: "text/plain\r\nx: y"}, false}, // header injection
		{Request{Path: "/a", Body: []byte("{}"), ContentType: "application/json"}, false},                            // a GET with a body
		{Request{Path: "/a", Method: "post"}, false},
		{Request{Path: "/a", Method: http.MethodPut}, false},
	} {
		if err := c.r.check(); (err == nil) != c.ok {
			t.Errorf("%+v: check = %v; want ok %v", c.r, err, c.ok)
		}
	}
}

// An operation is Build and Parse, or Run: never both, never neither.
func TestValidateOperations(t *testing.T) {
	build := func(*upstream.Call) (Request, error) { return Request{Path: "/"}, nil }
	parse := func(*upstream.Call, *Page) (any, error) { return nil, nil }
	run := func(context.Context, *upstream.Call, Fetch) (any, error) { return nil, nil }
	for name, c := range map[string]struct {
		op Operation
		ok bool
	}{
		"build and parse":     {Operation{Build: build, Parse: parse, Statuses: []int{404}}, true},
		"run":                 {Operation{Run: run}, true},
		"neither":             {Operation{}, false},
		"build without parse": {Operation{Build: build}, false},
		"run and build":       {Operation{Run: run, Build: build}, false},
		"run and parse":       {Operation{Run: run, Parse: parse}, false},
		"run and statuses":    {Operation{Run: run, Statuses: []int{404}}, false},
	} {
		s := testSite()
		s.Operations = map[string]Operation{"pagestest/op": c.op}
		if err := s.validate(); (err == nil) != c.ok {
			t.Errorf("%s: validate = %v; want ok %v", name, err, c.ok)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a route built from an invalid site did not panic")
		}
	}()
	s := testSite()
	s.Operations = map[string]Operation{"pagestest/op": {Run: run, Build: build, Parse: parse}}
	Zyte(s)
}

// A site's credentials are the direct route's only: its provider declares
// them and its calls read them; a service's calls never see them.
func TestSiteSecretsOnTheDirectRouteOnly(t *testing.T) {
	const keyName = "MERIDIAN_PAGESTEST_KEY"
	site := testSite()
	site.Secrets = []upstream.Secret{{Name: keyName, Doc: "the shop's own API key"}}
	site.Operations["pagestest/key"] = Operation{Run: func(_ context.Context, c *upstream.Call, _ Fetch) (any, error) {
		return c.Secret(keyName), nil
	}}
	direct, zyte, scraper := Direct(site), Zyte(site), ScraperAPI(site)
	if len(direct.Secrets) != 1 || direct.Secrets[0].Name != keyName {
		t.Errorf("direct secrets %v", direct.Secrets)
	}
	for _, p := range []*upstream.Provider{zyte, scraper} {
		if len(p.Secrets) != 1 || p.Secrets[0].Name == keyName {
			t.Errorf("%s secrets %v: its own key only", p.Name, p.Secrets)
		}
	}
	e := newEnv(t)
	e.vars[keyName] = "site-key-1"
	for p, want := range map[*upstream.Provider]string{direct: "site-key-1", zyte: "", scraper: ""} {
		out := e.runner(quick, p).Serve(context.Background(), "pagestest/key", nil)
		if out.Fault != nil || out.Data != want {
			t.Errorf("%s: data %v, fault %v; want %q", p.Name, out.Data, out.Fault, want)
		}
	}
}

// A 429 that says when to come back is a rate limit even in HTML; one
// that does not, answering a JSON call, is a challenge.
func TestJSONRateLimitWithRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.add(siteName, "limited", sitePage("/api/stock", map[string]string{"sku": "42"},
		answer(429, "text/html", `<html><body>Too many requests</body></html>`, "retry-after", "30")))
	out := e.runner(quick, Direct(testSite())).Serve(context.Background(), "pagestest/stock", params)
	if out.Fault == nil || out.Fault.Kind != upstream.RateLimited || out.Fault.RetryAfter.Seconds() != 30 {
		t.Errorf("fault %+v; want rate limited for 30s", out.Fault)
	}
}
