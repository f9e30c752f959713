package pipeline

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/console"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// The console web page and its session. The page signs in with the console
// token once: the token then lives in an HttpOnly, SameSite=Strict cookie
// (Secure over https), never in a URL or in the page's storage. The console
// API accepts that cookie as it accepts Authorization: Bearer, and a change
// made with the cookie must also carry the session's x-csrf-token and come
// from the page's own origin: a cross-site form or script cannot make one.

// SessionCookie names the console's session cookie.
const SessionCookie = "meridian_console"

// CSRFHeader carries the session's anti-forgery token on every change.
const CSRFHeader = "x-csrf-token"

// csrfToken is derived from the session's console token, so it needs no
// storage and only a holder of the token (or a page it signed in) knows it.
func csrfToken(consoleToken string) string {
	m := hmac.New(sha256.New, []byte(consoleToken))
	m.Write([]byte("meridian console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// servePage answers the page and its files; false when path is the API's.
func servePage(x *exchange, path string) bool {
	if x.r.Method != http.MethodGet && x.r.Method != http.MethodHead {
		return false
	}
	var a console.Asset
	switch {
	case path == "/console" || path == "/console/":
		a = console.Page()
		x.w.Header().Set("Cache-Control", "no-store")
	case strings.HasPrefix(path, "/console/assets/"):
		var ok bool
		if a, ok = console.Lookup(strings.TrimPrefix(path, "/console/assets/")); !ok {
			x.fail(registry404(path))
			return true
		}
		x.w.Header().Set("Cache-Control", "no-cache")
	default:
		return false
	}
	h := x.w.Header()
	h.Set("Content-Type", a.ContentType)
	h.Set("Content-Security-Policy", console.SecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Etag", a.ETag)
	if match := x.r.Header.Get("if-none-match"); match != "" && match == a.ETag {
		x.w.WriteHeader(http.StatusNotModified)
		return true
	}
	x.w.WriteHeader(http.StatusOK)
	if x.r.Method == http.MethodGet {
		_, _ = x.w.Write(a.Body)
	}
	return true
}

// consoleCredential is the console token of the request: Authorization:
// Bearer (API clients) or else the session cookie (the page).
func consoleCredential(r *http.Request) (token string, fromCookie bool) {
	if t := bearerToken(r); t != "" {
		return t, false
	}
	if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		return c.Value, true
	}
	return "", false
}

// crossSite reports a request that a browser says (or whose Origin shows)
// came from another site. Requests from non-browsers carry neither header.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("sec-fetch-site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	if origin := r.Header.Get("origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return true
		}
	}
	return false
}

// forged refuses a change made with the session cookie that does not prove
// it comes from the console page: same origin and the session's CSRF token.
func forged(r *http.Request, consoleToken string) *envelope.Error {
	if crossSite(r) {
		return unauthorized("cross_site_request", "Changes made with the console's session cookie must come from the console page itself.")
	}
	given := r.Header.Get(CSRFHeader)
	if given == "" || subtle.ConstantTimeCompare([]byte(given), []byte(csrfToken(consoleToken))) != 1 {
		return unauthorized("csrf_token_invalid", "Changes made with the console's session cookie need the session's "+CSRFHeader+" header.")
	}
	return nil
}

func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sessionCookie sets (or, with an empty token, clears) the session cookie:
// scoped to /console, HttpOnly, SameSite=Strict, Secure when served over
// https (API Gateway says so in x-forwarded-proto), ending with the browser
// session.
func sessionCookie(r *http.Request, token string) *http.Cookie {
	c := &http.Cookie{Name: SessionCookie, Value: token, Path: "/console", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || forwardedProto(r) == "https"}
	if token == "" {
		c.MaxAge = -1
	}
	return c
}

// consoleSession is /console/session: POST {"token": "mc_..."} signs in,
// GET says who is signed in (and the CSRF token), DELETE signs out.
func (p *Pipeline) consoleSession(x *exchange) {
	switch x.r.Method {
	case http.MethodPost:
		p.signIn(x)
	case http.MethodGet:
		token, fromCookie := consoleCredential(x.r)
		if token == "" || !fromCookie {
			x.fail(unauthorized("missing_console_token", "Not signed in: sign in with the console token."))
			return
		}
		acct, e := p.consoleAccount(x, token)
		if e != nil {
			http.SetCookie(x.w, sessionCookie(x.r, ""))
			x.fail(e)
			return
		}
		writeConsole(x, http.StatusOK, map[string]any{"account_id": acct.ID, "csrf_token": csrfToken(token)})
	case http.MethodDelete:
		if token, fromCookie := consoleCredential(x.r); fromCookie {
			if e := forged(x.r, token); e != nil {
				x.fail(e)
				return
			}
		}
		http.SetCookie(x.w, sessionCookie(x.r, ""))
		writeConsole(x, http.StatusOK, map[string]any{"signed_in": false})
	default:
		x.fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "/console/session answers GET, POST and DELETE.",
			map[string]any{"reason": "method_not_allowed", "allowed_methods": []string{"GET", "POST", "DELETE"}}))
	}
}

func (p *Pipeline) signIn(x *exchange) {
	// A sign-in from another site would put its own session in this
	// browser (login forgery): same origin and a JSON body only, which a
	// cross-site form cannot send.
	if crossSite(x.r) {
		x.fail(unauthorized("cross_site_request", "Sign in from the console page itself."))
		return
	}
	if ct, _, _ := mime.ParseMediaType(x.r.Header.Get("content-type")); ct != "application/json" {
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusBadRequest, "Send the console token as a JSON body: {\"token\": \"mc_...\"}.",
			map[string]any{"reason": "malformed_body"}))
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if e := readJSON(x.r, &body); e != nil {
		x.fail(e)
		return
	}
	token := strings.TrimSpace(body.Token)
	if token == "" {
		x.fail(fieldError("token", "missing", "token is the console token (mc_...)."))
		return
	}
	acct, e := p.consoleAccount(x, token)
	if e != nil {
		x.fail(e)
		return
	}
	http.SetCookie(x.w, sessionCookie(x.r, token))
	writeConsole(x, http.StatusOK, map[string]any{"account_id": acct.ID, "csrf_token": csrfToken(token)})
}

// consoleAccount authenticates a console token. Wrong tokens count toward
// the client's invalid-credential throttle, as wrong API keys do.
func (p *Pipeline) consoleAccount(x *exchange, token string) (store.Account, *envelope.Error) {
	client := "console:" + clientOf(x.r)
	if p.cfg.Throttle != nil {
		if wait, blocked := p.cfg.Throttle.Blocked(client); blocked {
			return store.Account{}, rateLimited("invalid_key_attempts", wait, "Too many requests with invalid console tokens from this client.")
		}
	}
	acct, err := p.cfg.Store.AccountByConsoleToken(x.r.Context(), auth.Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		p.invalidKey(client)
		return store.Account{}, unauthorized("invalid_console_token", "The console token is not valid.")
	}
	if err != nil {
		return store.Account{}, p.internal(x, "console token lookup", err)
	}
	return acct, nil
}
