package apidocs

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/internal/devscripts"
)

func get(t *testing.T, path string) *httptest.ResponseRecorder {
	t.Helper()
	if !Serves(http.MethodGet, path) {
		t.Fatalf("%s is not the reference's", path)
	}
	rec := httptest.NewRecorder()
	ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test"+path, nil))
	return rec
}

// The page and its files: own-origin policy with a fresh nonce per page,
// the nonce handed to Redoc, and no other origin named anywhere in it.
func TestPageAndFiles(t *testing.T) {
	a, b := get(t, "/docs"), get(t, "/docs/")
	if a.Code != 200 || a.Header().Get("content-type") != "text/html; charset=utf-8" || a.Header().Get("cache-control") != "no-store" {
		t.Fatalf("%d %v", a.Code, a.Header())
	}
	csp := a.Header().Get("content-security-policy")
	if csp == b.Header().Get("content-security-policy") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "http") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("policy %q", csp)
	}
	nonce := strings.SplitN(strings.SplitN(csp, "'nonce-", 2)[1], "'", 2)[0]
	if !strings.Contains(a.Body.String(), `<meta property="csp-nonce" content="`+nonce+`">`) {
		t.Errorf("the page does not carry its nonce %s", nonce)
	}
	for _, name := range []string{"docs.js", "docs.css"} {
		r := get(t, "/docs/assets/"+name)
		if r.Code != 200 || r.Header().Get("etag") == "" || r.Body.Len() == 0 {
			t.Errorf("%s: %d", name, r.Code)
		}
		if strings.Contains(r.Body.String(), "https://") {
			t.Errorf("%s names another origin", name)
		}
	}
	for _, p := range []string{"/docs/assets/nope.js", "/docs/assets/../apidocs.go", "/docs/errors", "/docs/x"} {
		if Serves(http.MethodGet, p) {
			t.Errorf("%s is served by the page", p)
		}
	}
	if Serves(http.MethodPost, "/docs") {
		t.Error("POST /docs")
	}
	if Built() {
		// Plain to a client that does not take gzip; gzip-encoded, the
		// same script, to one that does.
		plain := get(t, "/docs/assets/"+BundleName)
		if plain.Code != 200 || !strings.HasPrefix(plain.Header().Get("content-type"), "text/javascript") ||
			plain.Header().Get("content-encoding") != "" || plain.Header().Get("vary") != "Accept-Encoding" || plain.Body.Len() < 1<<20 {
			t.Errorf("bundle: %d %v, %d bytes", plain.Code, plain.Header(), plain.Body.Len())
		}
		req := httptest.NewRequest(http.MethodGet, "http://api.test/docs/assets/"+BundleName, nil)
		req.Header.Set("Accept-Encoding", "br, gzip;q=0.8")
		zipped := httptest.NewRecorder()
		ServeHTTP(zipped, req)
		zr, err := gzip.NewReader(zipped.Body)
		if err != nil || zipped.Header().Get("content-encoding") != "gzip" {
			t.Fatalf("gzip bundle: %v %v", zipped.Header(), err)
		}
		if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, plain.Body.Bytes()) {
			t.Errorf("the gzipped bundle is not the plain one: %v", err)
		}
		if bundle := plain.Body.Bytes(); bytes.Contains(bundle, []byte("cdn.redoc.ly/redoc/logo")) {
			t.Error("the bundle still loads Redocly's logo from its CDN")
		}
		if RedocVersion() == "" || !strings.Contains(a.Body.String(), "/docs/assets/docs.js") {
			t.Error("version or script missing")
		}
	}
}

// Without Redoc's bundle (a fresh clone, built without make), the page
// says how to build it.
func TestPageWithoutTheBundle(t *testing.T) {
	b := bytes.NewBuffer(renderPage("n", false))
	for _, want := range []string{"scripts/docs-assets.sh", "make run, make build, make test", "/openapi.json"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the page without the bundle does not say %q", want)
		}
	}
	if strings.Contains(b.String(), "docs.js") || strings.Contains(b.String(), "<!--") || strings.Contains(b.String(), "{{") {
		t.Error("the page without the bundle loads its script, or keeps a marker")
	}
	if built := string(renderPage("n", true)); !strings.Contains(built, `content="n"`) || strings.Contains(built, "missing") ||
		strings.Contains(built, "<!--") || strings.Contains(built, "{{") {
		t.Error("the page with the bundle keeps the other section or a marker")
	}
}

// make run, make build, make test and make check-build fetch Redoc first.
func TestMakeTargetsFetchTheBundle(t *testing.T) {
	root, err := devscripts.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no make: CI runs make test, so it has one")
		}
		t.Skip("no make (set CI=true to fail instead)")
	}
	for _, target := range []string{"run", "build", "check-build", "test"} {
		cmd := exec.Command("make", "--no-print-directory", "-n", target)
		cmd.Dir = root
		// Under make test this runs inside a make: its flags would make the
		// child print "Entering directory" lines.
		for _, kv := range os.Environ() {
			if name, _, _ := strings.Cut(kv, "="); name != "MAKEFLAGS" && name != "MAKELEVEL" && name != "MFLAGS" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make -n %s: %v", target, err)
		}
		first := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
		if !strings.HasPrefix(first, "scripts/docs-assets.sh") {
			t.Errorf("make %s does not fetch the bundle first: %q", target, first)
		}
	}
}
