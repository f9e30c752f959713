package pages

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
)

const deProductHTML = `<!doctype html><html><head><title>Wasserkocher</title></head><body><h1>Wasserkocher aus Stahl</h1></body></html>`

var deProductURL = "https://" + deHost + "/p/42"

// withHost is the product call's parameters for host ("" for the origin's).
func withHost(host string) map[string]string {
	return map[string]string{"id": "42", "host": host}
}

// Every route fetches the request's host: the services are asked for its
// public URL (Zyte API's cookies scoped to it), and the direct route with
// a moved base URL says it in X-Forwarded-Host, only when it is not the
// origin's.
func TestRequestHostOnEveryRoute(t *testing.T) {
	e := newEnv(t)
	// The replay upstream does not match headers: one page for both hosts.
	e.add(siteName, "product", sitePage("/p/42", nil, answer(200, "text/html", productHTML)))
	e.add(ZyteName, "product", zyteOK(productURL, 200, "text/html", productHTML))
	e.add(ZyteName, "product-de", zyteOK(deProductURL, 200, "text/html", deProductHTML))
	e.add(ScraperAPIName, "product", scraperFor(productURL, answer(200, "text/html", productHTML)))
	e.add(ScraperAPIName, "product-de", scraperFor(deProductURL, answer(200, "text/html", deProductHTML)))
	site := testSite()
	for _, p := range []*upstream.Provider{Direct(site), Zyte(site), ScraperAPI(site)} {
		r := e.runner(quick, p)
		for host, want := range map[string][2]string{
			"":                       {productURL, "Steel kettle"},
			"shop.pagestest.example": {productURL, "Steel kettle"}, // the origin's, named
			deHost:                   {deProductURL, "Wasserkocher aus Stahl"},
			"DE.pagestest.example.":  {deProductURL, "Wasserkocher aus Stahl"},
		} {
			out := r.Serve(context.Background(), "pagestest/product", withHost(host))
			if out.Fault != nil {
				t.Fatalf("%s host %q: %v", p.Name, host, out.Fault)
			}
			got := out.Data.(map[string]any)
			if got["url"] != want[0] || (p.Name != siteName && got["title"] != want[1]) {
				t.Errorf("%s host %q: data %v; want %v", p.Name, host, got, want)
			}
		}
	}

	direct := e.requests(siteName)
	if len(direct) != 4 {
		t.Fatalf("direct requests: %d", len(direct))
	}
	forwarded := 0
	for _, r := range direct {
		if r.Path != "/p/42" {
			t.Errorf("direct path %s", r.Path)
		}
		switch h := r.Header.Get("x-forwarded-host"); h {
		case "":
		case deHost:
			forwarded++
		default:
			t.Errorf("x-forwarded-host %q", h)
		}
	}
	if forwarded != 2 {
		t.Errorf("%d direct requests said the other host; want 2", forwarded)
	}

	for _, z := range e.requests(ZyteName) {
		var body zyteRequest
		if err := json.Unmarshal(z.Body, &body); err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(body.URL)
		if len(body.RequestCookies) != 1 || body.RequestCookies[0].Domain != u.Hostname() {
			t.Errorf("zyte %s: cookies %+v", body.URL, body.RequestCookies)
		}
	}
	urls := map[string]int{}
	for _, s := range e.requests(ScraperAPIName) {
		urls[url.Values(s.Query).Get("url")]++
	}
	if urls[productURL] != 2 || urls[deProductURL] != 2 {
		t.Errorf("scraperapi targets %v", urls)
	}
}

// hostTransport answers as each host would, recording what it was asked.
type hostTransport struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (h *hostTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r)
	h.mu.Unlock()
	body := productHTML
	if r.URL.Host == deHost {
		body = deProductHTML
	}
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/html"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r,
	}, nil
}

// With its base URL the origin, the direct route fetches the request's
// host itself, without X-Forwarded-Host.
func TestDirectFetchesTheHostWhenNotMoved(t *testing.T) {
	tr := &hostTransport{}
	r := upstream.NewRunner([]*upstream.Provider{Direct(testSite())}, upstream.Settings{
		Options: quick,
		Client:  &http.Client{Transport: tr},
	})
	for host, want := range map[string]string{"": "Steel kettle", deHost: "Wasserkocher aus Stahl"} {
		out := r.Serve(context.Background(), "pagestest/product", withHost(host))
		if out.Fault != nil || out.Data.(map[string]any)["title"] != want {
			t.Fatalf("host %q: %+v", host, out)
		}
	}
	got := []string{}
	for _, req := range tr.seen {
		got = append(got, req.URL.String()+" "+req.Header.Get("x-forwarded-host")+" "+req.Header.Get("cookie"))
	}
	// Map order: either host may go first.
	if len(got) != 2 || !containsAll(got, productURL+"  currency=GBP", deProductURL+"  currency=GBP") {
		t.Errorf("requests %q", got)
	}
}

func containsAll(got []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			return false
		}
	}
	return true
}

// A host the site does not declare is the operation's bug: no route
// fetches it.
func TestUndeclaredHostIsNeverFetched(t *testing.T) {
	tr := &hostTransport{}
	e := newEnv(t)
	e.serveAll()
	site := testSite()
	for _, p := range []*upstream.Provider{Direct(site), Zyte(site), ScraperAPI(site)} {
		for _, host := range []string{"evil.example", "shop.pagestest.example:8443", "127.0.0.1"} {
			out := e.runner(quick, p).Serve(context.Background(), "pagestest/product", withHost(host))
			if out.Fault == nil || out.Fault.Kind != upstream.Malformed || out.Trace.Attempts != 1 {
				t.Errorf("%s host %q: %+v", p.Name, host, out)
			}
		}
	}
	out := upstream.NewRunner([]*upstream.Provider{Direct(site)}, upstream.Settings{Options: quick, Client: &http.Client{Transport: tr}}).
		Serve(context.Background(), "pagestest/product", withHost("evil.example"))
	if out.Fault == nil || out.Fault.Kind != upstream.Malformed {
		t.Errorf("unmoved direct: %+v", out)
	}
	if n := len(e.replay.Requests()) + len(tr.seen); n != 0 {
		t.Errorf("%d requests for undeclared hosts", n)
	}
}
