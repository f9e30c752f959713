package pages

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"

	"github.com/meridian-data/meridian/shared/upstream"
)

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil || w.Close() != nil {
		t.Fatal(err)
	}
	return b.String()
}

func brotlied(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := brotli.NewWriter(&b)
	if _, err := io.WriteString(w, s); err != nil || w.Close() != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestCompressedBodiesAreDecoded(t *testing.T) {
	e := newEnv(t)
	e.add(siteName, "gzip", sitePage("/p/42", nil, answer(200, "text/html", gzipped(t, productHTML), "content-encoding", "gzip")))
	e.add(siteName, "br", sitePage("/api/stock", map[string]string{"sku": "42"}, answer(200, "application/json", brotlied(t, stockJSON), "content-encoding", "br")))
	e.add(siteName, "zstd", sitePage("/p/43", nil, answer(200, "text/html", "(\xb5/\xfd", "content-encoding", "zstd")))
	e.add(siteName, "broken", sitePage("/p/44", nil, answer(200, "text/html", "not gzip at all", "content-encoding", "gzip")))
	r := e.runner(quick, Direct(testSite()))
	if out := r.Serve(context.Background(), "pagestest/product", params); out.Fault != nil || out.Data.(map[string]any)["title"] != "Steel kettle" {
		t.Errorf("gzip page: %+v", out)
	}
	if out := r.Serve(context.Background(), "pagestest/stock", params); out.Fault != nil || out.Data.(map[string]any)["in_stock"] != true {
		t.Errorf("br JSON: %+v", out)
	}
	for _, id := range []string{"43", "44"} {
		out := r.Serve(context.Background(), "pagestest/product", map[string]string{"id": id})
		if out.Fault == nil || out.Fault.Kind != upstream.Malformed {
			t.Errorf("product %s: fault = %v; want malformed", id, out.Fault)
		}
	}
}

func TestDecodeCapsTheDecodedBody(t *testing.T) {
	big := strings.Repeat("a", upstream.MaxBody+1)
	if _, err := upstream.DecodeContent([]byte(gzipped(t, big)), "gzip"); err == nil {
		t.Error("a body that decodes past MaxBody is refused")
	}
	both := gzipped(t, brotlied(t, "twice"))
	if got, err := upstream.DecodeContent([]byte(both), "br, gzip"); err != nil || string(got) != "twice" {
		t.Errorf("decode(br, gzip) = %q, %v", got, err)
	}
}

// Every route's base URL moves like any provider's: plain-http servers
// answering as the site and the services would.
func TestBaseURLsAreMovable(t *testing.T) {
	site := testSite()
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/p/42" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("content-type", "text/html")
		_, _ = io.WriteString(w, "<h1>Moved kettle</h1>")
	}))
	defer direct.Close()
	zyte := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != zyteKey || pass != "" {
			w.Header().Set("content-type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"/auth/key-not-found","title":"Authentication Key Not Found","status":401}`)
			return
		}
		var req zyteRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/extract" || json.NewDecoder(r.Body).Decode(&req) != nil || !req.HTTPResponseBody {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"url": req.URL, "statusCode": 200,
			"httpResponseBody":    base64.StdEncoding.EncodeToString([]byte("<h1>Kettle via Zyte</h1>")),
			"httpResponseHeaders": []zyteHeader{{Name: "content-type", Value: "text/html"}},
		})
	}))
	defer zyte.Close()
	scraper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/" || q.Get("api_key") != scraperKey || q.Get("url") != productURL {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("content-type", "text/html")
		_, _ = io.WriteString(w, "<h1>Kettle via ScraperAPI</h1>")
	}))
	defer scraper.Close()

	vars := map[string]string{
		"MERIDIAN_UPSTREAM_PAGESTEST_SHOP_URL": direct.URL,
		"MERIDIAN_UPSTREAM_ZYTE_API_URL":       zyte.URL,
		"MERIDIAN_UPSTREAM_SCRAPERAPI_URL":     scraper.URL,
		ZyteKeySecret:                          zyteKey,
		ScraperAPIKeySecret:                    scraperKey,
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for p, want := range map[*upstream.Provider]string{
		Direct(site):     "Moved kettle",
		Zyte(site):       "Kettle via Zyte",
		ScraperAPI(site): "Kettle via ScraperAPI",
	} {
		out := upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{Lookup: lookup, Options: quick}).
			Serve(context.Background(), "pagestest/product", params)
		if out.Fault != nil || out.Data.(map[string]any)["title"] != want {
			t.Errorf("%s: %+v", p.Name, out)
		}
	}
	// Without its key a service is not a route at all.
	delete(vars, ZyteKeySecret)
	if upstream.NewRunner([]*upstream.Provider{Zyte(site)}, upstream.Settings{Lookup: lookup}).Eligible("pagestest/product") {
		t.Error("Zyte API is eligible without MERIDIAN_ZYTE_API_KEY")
	}
}
