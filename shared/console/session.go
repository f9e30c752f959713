package console

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
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
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
func servePage(x *pipeline.Exchange, path string) bool {
	if x.Request().Method != http.MethodGet && x.Request().Method != http.MethodHead {
		return false
	}
	var a Asset
	switch {
	case path == "/console" || path == "/console/":
		a = Page()
		x.Writer().Header().Set("Cache-Control", "no-store")
	case strings.HasPrefix(path, "/console/assets/"):
		var ok bool
		if a, ok = Lookup(strings.TrimPrefix(path, "/console/assets/")); !ok {
			x.Fail(registry404(path))
			return true
		}
		x.Writer().Header().Set("Cache-Control", "no-cache")
	default:
		return false
	}
	h := x.Writer().Header()
	h.Set("Content-Type", a.ContentType)
	h.Set("Content-Security-Policy", SecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Etag", a.ETag)
	if match := x.Request().Header.Get("if-none-match"); match != "" && match == a.ETag {
		x.Writer().WriteHeader(http.StatusNotModified)
		return true
	}
	x.Writer().WriteHeader(http.StatusOK)
	if x.Request().Method == http.MethodGet {
		_, _ = x.Writer().Write(a.Body)
	}
	return true
}

// consoleCredential is the console token of the request: Authorization:
// Bearer (API clients) or else the session cookie (the page).
func consoleCredential(r *http.Request) (token string, fromCookie bool) {
	if t := auth.Bearer(r); t != "" {
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
		return pipeline.Unauthorized("cross_site_request", "Changes made with the console's session cookie must come from the console page itself.")
	}
	given := r.Header.Get(CSRFHeader)
	if given == "" || subtle.ConstantTimeCompare([]byte(given), []byte(csrfToken(consoleToken))) != 1 {
		return pipeline.Unauthorized("csrf_token_invalid", "Changes made with the console's session cookie need the session's "+CSRFHeader+" header.")
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
		Secure: r.TLS != nil || envelope.ForwardedProto(r) == "https"}
	if token == "" {
		c.MaxAge = -1
	}
	return c
}

// consoleSession is /console/session: POST {"token": "mc_..."} signs in,
// GET says who is signed in (and the CSRF token), DELETE signs out.
func (c *Console) consoleSession(x *pipeline.Exchange) {
	switch x.Request().Method {
	case http.MethodPost:
		c.signIn(x)
	case http.MethodGet:
		token, fromCookie := consoleCredential(x.Request())
		if token == "" || !fromCookie {
			x.Fail(pipeline.Unauthorized("missing_console_token", "Not signed in: sign in with the console token."))
			return
		}
		acct, e := c.consoleAccount(x, token)
		if e != nil {
			http.SetCookie(x.Writer(), sessionCookie(x.Request(), ""))
			x.Fail(e)
			return
		}
		writeConsole(x, http.StatusOK, map[string]any{"account_id": acct.ID, "csrf_token": csrfToken(token)})
	case http.MethodDelete:
		if token, fromCookie := consoleCredential(x.Request()); fromCookie {
			if e := forged(x.Request(), token); e != nil {
				x.Fail(e)
				return
			}
		}
		http.SetCookie(x.Writer(), sessionCookie(x.Request(), ""))
		writeConsole(x, http.StatusOK, map[string]any{"signed_in": false})
	default:
		x.Fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "/console/session answers GET, POST and DELETE.",
			map[string]any{"reason": "method_not_allowed", "allowed_methods": []string{"GET", "POST", "DELETE"}}))
	}
}

func (c *Console) signIn(x *pipeline.Exchange) {
	// A sign-in from another site would put its own session in this
	// browser (login forgery): same origin and a JSON body only, which a
	// cross-site form cannot send.
	if crossSite(x.Request()) {
		x.Fail(pipeline.Unauthorized("cross_site_request", "Sign in from the console page itself."))
		return
	}
	if ct, _, _ := mime.ParseMediaType(x.Request().Header.Get("content-type")); ct != "application/json" {
		x.Fail(envelope.New(envelope.InvalidParameters, http.StatusBadRequest, "Send the console token as a JSON body: {\"token\": \"mc_...\"}.",
			map[string]any{"reason": "malformed_body"}))
		return
	}
	var body struct {
		Token string `json:"token"`
	}
	if e := readJSON(x.Request(), &body); e != nil {
		x.Fail(e)
		return
	}
	token := strings.TrimSpace(body.Token)
	if token == "" {
		x.Fail(envelope.FieldError("token", "missing", "token is the console token (mc_...)."))
		return
	}
	acct, e := c.consoleAccount(x, token)
	if e != nil {
		x.Fail(e)
		return
	}
	http.SetCookie(x.Writer(), sessionCookie(x.Request(), token))
	writeConsole(x, http.StatusOK, map[string]any{"account_id": acct.ID, "csrf_token": csrfToken(token)})
}

// consoleAccount authenticates a console token. Wrong tokens count toward
// the client's invalid-credential throttle, as wrong API keys do.
func (c *Console) consoleAccount(x *pipeline.Exchange, token string) (store.Account, *envelope.Error) {
	client := "console:" + auth.ClientOf(x.Request())
	if c.cfg.Throttle != nil {
		if wait, blocked := c.cfg.Throttle.Blocked(client); blocked {
			return store.Account{}, pipeline.RateLimited("invalid_key_attempts", wait, "Too many requests with invalid console tokens from this client.")
		}
	}
	acct, err := c.cfg.Store.AccountByConsoleToken(x.Request().Context(), auth.Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		c.invalidCredential(client)
		return store.Account{}, pipeline.Unauthorized("invalid_console_token", "The console token is not valid.")
	}
	if err != nil {
		return store.Account{}, c.internal(x, "console token lookup", err)
	}
	return acct, nil
}
