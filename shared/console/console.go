// Package console is the console (spec 3.1): the web page (one HTML page,
// its stylesheet and its script, embedded in the binary; nothing is loaded
// from another origin), its session (a sign-in cookie and CSRF token), the
// console API the page speaks (/console/…: an account's keys, usage,
// ledger, status and monitors) and the operator API (/admin: accounts and
// grants). The pipeline serves it as a pipeline.Surface, so each request
// has the pipeline's request id, log line and Idempotency-Key handling.
// It may touch accounts and keys, grant credits (operator) and read the
// ledger, usage and status figures; it runs no paid call.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"path"
	"strings"
)

//go:embed web
var files embed.FS

// Asset is one embedded file, ready to serve.
type Asset struct {
	Body        []byte
	ContentType string
	// ETag is a strong validator of the body (a hash), so a browser
	// revalidates instead of downloading again.
	ETag string
}

var assets = load()

func load() map[string]Asset {
	entries, err := files.ReadDir("web")
	if err != nil {
		panic(err)
	}
	out := make(map[string]Asset, len(entries))
	for _, e := range entries {
		body, err := files.ReadFile("web/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(e.Name()))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[e.Name()] = Asset{Body: body, ContentType: ct, ETag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return out
}

// Page is the console's HTML page.
func Page() Asset { return assets["index.html"] }

// Lookup finds the file the page loads by name (app.js, app.css, …).
func Lookup(name string) (Asset, bool) {
	if name == "index.html" || strings.ContainsAny(name, "/\\") {
		return Asset{}, false
	}
	a, ok := assets[name]
	return a, ok
}

// SecurityPolicy is the page's Content-Security-Policy: scripts, styles,
// images and requests from the page's own origin only; no framing, no
// plugins, forms post back to the origin.
const SecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
