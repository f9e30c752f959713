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
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"html"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
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
	// gzipped: body is gzip-encoded (Redoc's bundle); plain decodes it
	// once for a client that does not accept gzip.
	gzipped bool
	plain   func() []byte
}

var (
	assets = load()
	// pageSource is web/index.html: sections between <!--built--> and
	// <!--/built--> show with the bundle, <!--unbuilt--> ones without it;
	// {{NONCE}} and {{VERSION}} are filled in per answer. (A plain
	// replacer: html/template would keep every exported method of the
	// binary alive through its reflection, megabytes in every function.)
	pageSource = mustRead("web/index.html")
)

func mustRead(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err) // embedded
	}
	return string(b)
}

// renderPage is the page for one answer.
func renderPage(nonce string, built bool) []byte {
	keep, drop := "built", "unbuilt"
	if !built {
		keep, drop = drop, keep
	}
	s := pageSource
	for {
		start := strings.Index(s, "<!--"+drop+"-->")
		end := strings.Index(s, "<!--/"+drop+"-->")
		if start < 0 || end < start {
			break
		}
		s = s[:start] + s[end+len("<!--/"+drop+"-->"):]
	}
	return []byte(strings.NewReplacer("<!--"+keep+"-->", "", "<!--/"+keep+"-->", "",
		"{{NONCE}}", nonce, "{{VERSION}}", html.EscapeString(RedocVersion())).Replace(s))
}

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
		a := asset{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		if a.gzipped = strings.HasSuffix(file, ".gz"); a.gzipped {
			a.plain = sync.OnceValue(func() []byte {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					panic(err) // written by scripts/docs-assets.sh and tested
				}
				plain, err := io.ReadAll(zr)
				if err != nil {
					panic(err)
				}
				return plain
			})
		}
		out[name] = a
	}
	add("docs.js", "web/docs.js", "")
	add("docs.css", "web/docs.css", "")
	add(BundleName, "redoc/"+BundleName+".gz", "")
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

// Page is the reference page as the pipeline serves it (pipeline.Reference).
type Page struct{}

func (Page) Serves(method, path string) bool                  { return Serves(method, path) }
func (Page) ServeHTTP(w http.ResponseWriter, r *http.Request) { ServeHTTP(w, r) }

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
		body := a.body
		if a.gzipped {
			h.Set("Vary", "Accept-Encoding")
			if acceptsGzip(r) {
				h.Set("Content-Encoding", "gzip")
			} else {
				body = a.plain()
			}
		}
		h.Set("Etag", a.etag)
		if match := r.Header.Get("if-none-match"); match != "" && match == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
		return
	}
	nonce := newNonce()
	body := renderPage(nonce, Built())
	h.Set("Content-Security-Policy", SecurityPolicy(nonce))
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store") // the nonce is this response's
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// acceptsGzip says whether the client takes a gzip-encoded answer.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// newNonce is a fresh CSP nonce: 128 random bits.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
