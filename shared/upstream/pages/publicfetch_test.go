package pages

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// loopbackPolicy lets the fetcher reach httptest servers on 127.0.0.1,
// standing in for public sites, and nothing else on loopback.
func loopbackPolicy() *upstream.URLPolicy {
	return &upstream.URLPolicy{Resolver: net.DefaultResolver, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
}

// countingServer counts the requests it gets.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func unsafeURLFault(err error) bool {
	var f *upstream.Fault
	return errors.As(err, &f) && f.Kind == upstream.InvalidParameter && f.Code == "unsafe_url"
}

func TestPublicFetchRefusesPrivateAddresses(t *testing.T) {
	srv, hits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	f := NewPublicFetcher(PublicFetchSettings{}) // the default policy: loopback refused
	for _, raw := range []string{
		srv.URL + "/",
		"http://localhost:" + port + "/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]:" + port + "/",
		"file:///etc/passwd",
		"http://user:secret@93.184.215.14/",
	} {
		status, body, err := f.Fetch(context.Background(), raw)
		if !unsafeURLFault(err) || status != 0 || body != nil {
			t.Errorf("%s: %d, %q, %v; want an unsafe_url refusal", raw, status, body, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("a refused address was fetched %d times", hits.Load())
	}
}

func TestPublicFetchRefusesRedirectsToPrivateAddresses(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.0.0.1/admin", http.StatusFound)
	})
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy()})
	if _, _, err := f.Fetch(context.Background(), srv.URL+"/start"); !unsafeURLFault(err) {
		t.Fatalf("redirect to a private address: %v", err)
	}
}

func TestPublicFetchHeadersAndAnswers(t *testing.T) {
	var got http.Header
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		switch r.URL.Path {
		case "/gone":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, "no such page")
		default:
			w.Header().Set("content-encoding", "gzip")
			w.Header().Set("set-cookie", "session=abc")
			io.WriteString(w, gzipped(t, "<html>hello</html>"))
		}
	})
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy()})
	status, body, err := f.Fetch(context.Background(), srv.URL+"/page")
	if err != nil || status != 200 || string(body) != "<html>hello</html>" {
		t.Fatalf("page: %d %q %v", status, body, err)
	}
	if ua := got.Get("user-agent"); !strings.Contains(ua, "Chrome/"+ChromeVersion) {
		t.Errorf("user-agent %q", ua)
	}
	if got.Get("accept-encoding") != "gzip, br" || !strings.HasPrefix(got.Get("accept"), "text/html") || got.Get("sec-fetch-mode") != "navigate" {
		t.Errorf("headers %v", got)
	}
	// A second fetch sends no cookie the first answer set, and nothing
	// that identifies an account.
	status, body, err = f.Fetch(context.Background(), srv.URL+"/gone")
	if err != nil || status != http.StatusNotFound || string(body) != "no such page" {
		t.Fatalf("a 404 is an answer: %d %q %v", status, body, err)
	}
	for _, h := range []string{"cookie", "authorization", "proxy-authorization"} {
		if got.Get(h) != "" {
			t.Errorf("sent %s: %q", h, got.Get(h))
		}
	}
}

func TestPublicFetchBodyCap(t *testing.T) {
	const limit = 1024
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/fits":
			io.WriteString(w, strings.Repeat("a", limit))
		case "/over":
			io.WriteString(w, strings.Repeat("a", limit+1))
		case "/bomb": // small on the wire, over the cap decoded
			w.Header().Set("content-encoding", "gzip")
			io.WriteString(w, gzipped(t, strings.Repeat("0", 1<<20)))
		}
	})
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy(), MaxBody: limit})
	if _, body, err := f.Fetch(context.Background(), srv.URL+"/fits"); err != nil || len(body) != limit {
		t.Errorf("a body of the cap: %d bytes, %v", len(body), err)
	}
	for _, path := range []string{"/over", "/bomb"} {
		_, body, err := f.Fetch(context.Background(), srv.URL+path)
		var fault *upstream.Fault
		if !errors.As(err, &fault) || fault.Kind != upstream.Malformed || body != nil {
			t.Errorf("%s: %d bytes, %v; want a Malformed fault", path, len(body), err)
		}
	}
}

func TestPublicFetchTimeout(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy(), Timeout: 150 * time.Millisecond})
	start := time.Now()
	_, _, err := f.Fetch(context.Background(), srv.URL+"/slow")
	var fault *upstream.Fault
	if !errors.As(err, &fault) || fault.Kind != upstream.Timeout {
		t.Fatalf("err = %v; want a Timeout fault", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s", took)
	}
	// The caller's own deadline counts too.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy()}).Fetch(ctx, srv.URL+"/slow"); !errors.As(err, &fault) || fault.Kind != upstream.Timeout {
		t.Errorf("caller's deadline: %v", err)
	}
}

// zyteStub answers /v1/extract as Zyte API does, with the page given.
func zyteStub(t *testing.T, key string, page string) (*httptest.Server, *atomic.Int64, *[]string) {
	t.Helper()
	var asked []string
	srv, n := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		user, _, _ := r.BasicAuth()
		var req zyteRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		asked = append(asked, req.URL)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/extract" || user != key || !req.HTTPResponseBody {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"type":"/auth/key-not-found","title":"Authentication Key Not Found","detail":"key `+user+`"}`)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"url": req.URL, "statusCode": 200,
			"httpResponseBody": base64.StdEncoding.EncodeToString([]byte(page))})
	})
	return srv, n, &asked
}

func TestPublicFetchUnblocksThroughAService(t *testing.T) {
	site, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("cf-mitigated", "challenge")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><title>Access denied</title></html>")
	})
	zyte, zyteHits, asked := zyteStub(t, zyteKey, "<html>the page</html>")
	env := map[string]string{ZyteKeySecret: zyteKey, Zyte().BaseURLVar(): zyte.URL}
	f := NewPublicFetcher(PublicFetchSettings{
		Policy:  loopbackPolicy(),
		Lookup:  func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Unblock: func(u string) bool { return strings.Contains(u, "/bio/") },
	})
	if got := f.Services(); len(got) != 1 || got[0] != ZyteName {
		t.Fatalf("services %v", got)
	}
	status, body, err := f.FetchUnblocking(context.Background(), site.URL+"/bio/ana")
	if err != nil || status != 200 || string(body) != "<html>the page</html>" {
		t.Fatalf("unblocked page: %d %q %v", status, body, err)
	}
	if len(*asked) != 1 || (*asked)[0] != site.URL+"/bio/ana" {
		t.Errorf("Zyte API was asked for %v", *asked)
	}
	// A URL Unblock does not accept keeps the site's own answer.
	status, _, err = f.FetchUnblocking(context.Background(), site.URL+"/other")
	if err != nil || status != http.StatusForbidden || zyteHits.Load() != 1 {
		t.Errorf("not unblocked: %d %v, service asked %d times", status, err, zyteHits.Load())
	}
	// A refused URL goes to no service either.
	if _, _, err := f.FetchUnblocking(context.Background(), "http://10.0.0.1/bio/x"); !unsafeURLFault(err) || zyteHits.Load() != 1 {
		t.Errorf("refused URL: %v, service asked %d times", err, zyteHits.Load())
	}
	// Nothing configured: direct only.
	if got := NewPublicFetcher(PublicFetchSettings{Lookup: func(string) (string, bool) { return "", false }}).Services(); len(got) != 0 {
		t.Errorf("services without keys: %v", got)
	}
}

func TestPublicFetchServiceErrorsHideTheKey(t *testing.T) {
	scraper, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "failed for api_key="+r.URL.Query().Get("api_key"))
	})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, base := range []string{scraper.URL, closed.URL} {
		env := map[string]string{ScraperAPIKeySecret: scraperKey, ScraperAPI().BaseURLVar(): base}
		f := NewPublicFetcher(PublicFetchSettings{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		_, _, err := f.viaServices(context.Background(), f.services, "https://linktr.ee/ana")
		if err == nil || strings.Contains(err.Error(), scraperKey) {
			t.Errorf("%s: err %v", base, err)
		}
	}
}

func TestPublicFetchReplayNeverFetchesLive(t *testing.T) {
	replay, _, asked := zyteStub(t, upstream.ReplaySecret, "<html>recorded</html>")
	mux := http.NewServeMux()
	mux.Handle("/"+ZyteName+"/", http.StripPrefix("/"+ZyteName, replay.Config.Handler))
	front := httptest.NewServer(mux)
	defer front.Close()
	f := NewPublicFetcher(PublicFetchSettings{ReplayURL: front.URL})
	// A public address literal: the policy's check needs no DNS, and the
	// replay upstream answers for it.
	status, body, err := f.Fetch(context.Background(), "http://93.184.215.14/ana")
	if err != nil || status != 200 || string(body) != "<html>recorded</html>" {
		t.Fatalf("replayed page: %d %q %v", status, body, err)
	}
	if len(*asked) != 1 || (*asked)[0] != "http://93.184.215.14/ana" {
		t.Errorf("replay asked for %v", *asked)
	}
	if _, _, err := f.Fetch(context.Background(), "http://127.0.0.1/x"); !unsafeURLFault(err) {
		t.Errorf("replay mode still checks the URL: %v", err)
	}
}

// paidServices configures both web-unblocking services as counting stubs
// (Zyte API answering page) and returns their request counters.
func paidServices(t *testing.T, page string) (func(string) (string, bool), *atomic.Int64, *atomic.Int64) {
	t.Helper()
	zyte, zyteHits, _ := zyteStub(t, zyteKey, page)
	scraper, scraperHits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, page) })
	env := map[string]string{
		ZyteKeySecret: zyteKey, Zyte().BaseURLVar(): zyte.URL,
		ScraperAPIKeySecret: scraperKey, ScraperAPI().BaseURLVar(): scraper.URL,
	}
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }, zyteHits, scraperHits
}

// Fetch is the same-handle probe's fetch: direct only. However the site
// blocks it, and whatever Unblock accepts, no paid service is asked.
func TestPublicFetchDirectNeverAsksAService(t *testing.T) {
	site, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cf":
			w.Header().Set("cf-mitigated", "challenge")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<html><head><title>Just a moment...</title></head><body><div id="challenge-running"></div></body></html>`)
		case "/limited":
			w.WriteHeader(http.StatusTooManyRequests)
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/reset":
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
		}
	})
	lookup, zyteHits, scraperHits := paidServices(t, "<html>the page</html>")
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy(), Lookup: lookup, Unblock: func(string) bool { return true }})
	if got := f.Services(); len(got) != 2 {
		t.Fatalf("services %v", got)
	}
	for path, want := range map[string]int{"/cf": 403, "/limited": 429, "/down": 503, "/reset": 0} {
		status, body, err := f.Fetch(context.Background(), site.URL+path)
		if status != want || string(body) == "<html>the page</html>" || (want == 0) != (err != nil) {
			t.Errorf("%s: %d %q %v; want the site's own answer %d", path, status, body, err, want)
		}
	}
	if zyteHits.Load() != 0 || scraperHits.Load() != 0 {
		t.Fatalf("a direct fetch asked the paid services: Zyte API %d, ScraperAPI %d", zyteHits.Load(), scraperHits.Load())
	}
}

// A 2xx answer is never a block, whatever its text says: a caller can put
// a challenge's title, ids, scripts or an Akamai reference in a page of its
// own (a link-in-bio page), and that must not buy a paid fetch. Neither
// does a challenge page served with a status sites do not block with.
func TestPublicFetchUnblockingIgnoresChallengeTextOn200(t *testing.T) {
	bodies := map[string]string{
		"/title":      `<html><head><title>Just a moment...</title></head><body><a href="https://ana.example/">shop</a></body></html>`,
		"/ids":        `<html><body><div id="cf-challenge-running"></div><div id="challenge-running">cf-chl</div><a href="https://ana.example/">shop</a></body></html>`,
		"/script":     `<html><body><script>window._cf_chl_opt={cvId:'3'};</script><form action="/?__cf_chl_f_tk=x"></form></body></html>`,
		"/akamai":     `<html><head><title>Access Denied</title></head><body>You don't have permission. Reference #18.4f1c2a.1700000000.1a2b3c. Powered and protected by Akamai</body></html>`,
		"/captcha":    `<html><body><div class="g-recaptcha"></div>captcha</body></html>`,
		"/datadome":   `<html><body><script src="https://geo.captcha-delivery.com/captcha/"></script></body></html>`,
		"/perimeterx": `<html><body><div id="px-captcha"></div></body></html>`,
	}
	site, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("status") == "404" {
			w.WriteHeader(http.StatusNotFound)
		}
		io.WriteString(w, bodies[r.URL.Path])
	})
	lookup, zyteHits, scraperHits := paidServices(t, "<html>the page</html>")
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy(), Lookup: lookup, Unblock: func(string) bool { return true }})
	for path, page := range bodies {
		for _, query := range []string{"", "?status=404"} {
			status, body, err := f.FetchUnblocking(context.Background(), site.URL+path+query)
			want := 200
			if query != "" {
				want = 404
			}
			if err != nil || status != want || string(body) != page {
				t.Errorf("%s%s: %d %q %v; want the site's own page", path, query, status, body, err)
			}
		}
	}
	if zyteHits.Load() != 0 || scraperHits.Load() != 0 {
		t.Fatalf("challenge text asked the paid services: Zyte API %d, ScraperAPI %d", zyteHits.Load(), scraperHits.Load())
	}
}

// A block counts only from the page Unblock accepted: when that page
// redirects to another site (a host its owner chose) and that site
// blocks, the answer stands and no service is asked.
func TestPublicFetchUnblockingOnlyForTheAcceptedPagesOwnBlock(t *testing.T) {
	elsewhere, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("cf-mitigated", "challenge")
		w.WriteHeader(http.StatusForbidden)
	})
	site, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bio/moved":
			http.Redirect(w, r, elsewhere.URL+"/landing", http.StatusFound)
		case "/bio/renamed":
			http.Redirect(w, r, "/bio/ana", http.StatusMovedPermanently)
		default:
			w.Header().Set("cf-mitigated", "challenge")
			w.WriteHeader(http.StatusForbidden)
		}
	})
	lookup, zyteHits, _ := paidServices(t, "<html>the page</html>")
	f := NewPublicFetcher(PublicFetchSettings{Policy: loopbackPolicy(), Lookup: lookup,
		Unblock: func(u string) bool { return strings.Contains(u, "/bio/") }})
	if status, _, err := f.FetchUnblocking(context.Background(), site.URL+"/bio/moved"); err != nil || status != http.StatusForbidden {
		t.Fatalf("redirected elsewhere: %d %v", status, err)
	}
	if zyteHits.Load() != 0 {
		t.Fatalf("another site's block asked Zyte API %d times", zyteHits.Load())
	}
	// A redirect within the accepted pages still counts.
	status, body, err := f.FetchUnblocking(context.Background(), site.URL+"/bio/renamed")
	if err != nil || status != 200 || string(body) != "<html>the page</html>" || zyteHits.Load() != 1 {
		t.Fatalf("redirected within the pages: %d %q %v, Zyte API asked %d times", status, body, err, zyteHits.Load())
	}
}
