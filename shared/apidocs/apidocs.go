// Package apidocs is the API reference page (GET /docs): Redoc renders the
// deployment's own /openapi.json in the browser, so the page and the
// document cannot disagree, with a small "try it" beside it that sends the
// reader's key to this deployment only. Everything is embedded: the page,
// its script and stylesheet (web/) and Redoc's standalone bundle (redoc/,
// fetched from npm at a pinned version by scripts/docs-assets.sh before
// every build; gitignored). Nothing is loaded from another origin.
package apidocs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"html/template"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed web redoc
var files embed.FS

// BundleName is Redoc's standalone bundle under /docs/assets/.
const BundleName = "redoc.standalone.js"

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string // a strong validator: the body's hash
}

var (
	assets = load()
	page   = template.Must(template.ParseFS(files, "web/index.html"))
)

func load() map[string]asset {
	out := map[string]asset{}
	add := func(name, file, contentType string) {
		body, err := files.ReadFile(file)
		if err != nil {
			return // Redoc not fetched: the page says how to
		}
		if contentType == "" {
			contentType = mime.TypeByExtension(path.Ext(name))
		}
		sum := sha256.Sum256(body)
		out[name] = asset{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	add("docs.js", "web/docs.js", "")
	add("docs.css", "web/docs.css", "")
	add(BundleName, "redoc/"+BundleName, "")
	add("redoc-LICENSE.txt", "redoc/LICENSE", "text/plain; charset=utf-8")
	return out
}

// Built reports whether Redoc's bundle is in this binary.
func Built() bool {
	_, ok := assets[BundleName]
	return ok
}

// RedocVersion is the version of the embedded bundle ("" without it).
func RedocVersion() string {
	v, err := files.ReadFile("redoc/VERSION")
	if err != nil {
		return ""
	}
	return strings.Fields(string(v) + " ")[0]
}

// Serves reports whether method and path are the reference page's: the
// page at /docs and /docs/, its files at /docs/assets/NAME.
func Serves(method, p string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	if p == "/docs" || p == "/docs/" {
		return true
	}
	name, ok := strings.CutPrefix(p, "/docs/assets/")
	_, known := assets[name]
	return ok && known
}

// SecurityPolicy is the page's Content-Security-Policy: scripts, styles,
// fonts, images and requests from the page's own origin only. Redoc writes
// its styles into <style> elements carrying the response's nonce (it reads
// it from the csp-nonce meta tag), sets a few style attributes, and embeds
// its fonts and icons as data: URLs; nothing else is inline.
func SecurityPolicy(nonce string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-" + nonce + "'; style-src-attr 'unsafe-inline'; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

// ServeHTTP answers a request Serves accepted.
func ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	p := r.URL.EscapedPath()
	if name, ok := strings.CutPrefix(p, "/docs/assets/"); ok {
		a := assets[name]
		h.Set("Content-Security-Policy", SecurityPolicy(newNonce()))
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("Etag", a.etag)
		if match := r.Header.Get("if-none-match"); match != "" && match == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(a.body)
		}
		return
	}
	nonce := newNonce()
	var body bytes.Buffer
	if err := page.Execute(&body, map[string]any{"Nonce": nonce, "Built": Built(), "Version": RedocVersion()}); err != nil {
		panic(err) // the template is embedded and tested
	}
	h.Set("Content-Security-Policy", SecurityPolicy(nonce))
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store") // the nonce is this response's
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body.Bytes())
	}
}

// newNonce is a fresh CSP nonce: 128 random bits.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
