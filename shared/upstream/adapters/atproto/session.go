package atproto

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// expiryMargin: an access token this close to its expiry is replaced
// before use rather than sent and refused.
const expiryMargin = time.Minute

// sessions caches the access token of the configured account across calls,
// so that a call costs one XRPC query and not also a sign-in (the PDS
// limits createSession to a few dozen per account and hour).
//
// Sessions are renewed with a fresh createSession, not with
// com.atproto.server.refreshSession: that method takes no input and the PDS
// refuses any request body ("A request body was provided when none was
// expected"), while upstream.Call.Post always sends a JSON body.
type sessions struct {
	// lock is a mutex whose waiters give up when their attempt's context
	// ends; it also makes concurrent calls share one sign-in.
	lock chan struct{}
	// byAccount holds the session per base URL and credentials, so that a
	// provider configured twice (another runner, rotated secrets) never
	// sends a token to a service that did not issue it.
	byAccount map[[sha256.Size]byte]session
}

type session struct {
	accessJwt string
	expires   time.Time // from the token's exp claim; zero when unknown
}

func newSessions() *sessions {
	return &sessions{lock: make(chan struct{}, 1), byAccount: map[[sha256.Size]byte]session{}}
}

// get makes an XRPC query under the session: it signs in when there is no
// usable token, and when the upstream refuses the token (expired or
// revoked early) it signs in again once and repeats the query.
func (s *sessions) get(ctx context.Context, c *upstream.Call, path string, query url.Values) (*upstream.Response, error) {
	identifier, password := c.Secret(IdentifierVar), c.Secret(AppPasswordVar)
	if identifier == "" || password == "" {
		return nil, &upstream.Fault{Kind: upstream.Rejected, Reason: "the account identifier or app password is not configured"}
	}
	account := sha256.Sum256([]byte(c.BaseURL + "\x00" + identifier + "\x00" + password))
	token, err := s.token(ctx, c, account, identifier, password, "")
	if err != nil {
		return nil, err
	}
	resp, err := c.Get(ctx, path, query, bearer(token))
	if !tokenRefused(resp, err) {
		return resp, err
	}
	if token, err = s.token(ctx, c, account, identifier, password, token); err != nil {
		return nil, err
	}
	return c.Get(ctx, path, query, bearer(token))
}

// tokenRefused reports whether a failed query says the access token is no
// longer good: 400 ExpiredToken or InvalidToken, or 401.
func tokenRefused(resp *upstream.Response, err error) bool {
	if err == nil || resp == nil {
		return false
	}
	if resp.Status == http.StatusUnauthorized {
		return true
	}
	e, ok := readXRPCError(resp)
	return resp.Status == http.StatusBadRequest && ok && (e.Name == "ExpiredToken" || e.Name == "InvalidToken")
}

// token returns a usable access token for the account: the cached one
// unless it is stale (the token the caller saw refused) or about to
// expire, else a new session's.
func (s *sessions) token(ctx context.Context, c *upstream.Call, account [sha256.Size]byte, identifier, password, stale string) (string, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return "", &upstream.Fault{Kind: upstream.Timeout, Reason: "no session before the deadline"}
	}
	defer func() { <-s.lock }()

	if cur, ok := s.byAccount[account]; ok && cur.accessJwt != stale &&
		(cur.expires.IsZero() || c.Now.Add(expiryMargin).Before(cur.expires)) {
		return cur.accessJwt, nil
	}
	delete(s.byAccount, account)
	fresh, err := createSession(ctx, c, identifier, password)
	if err != nil {
		return "", err
	}
	s.byAccount[account] = fresh
	return fresh.accessJwt, nil
}

// createSession signs in with com.atproto.server.createSession.
func createSession(ctx context.Context, c *upstream.Call, identifier, password string) (session, error) {
	resp, err := c.Post(ctx, createSessionPath, nil, map[string]string{"identifier": identifier, "password": password})
	if err != nil {
		return session{}, sessionFault(resp, err, c.Now, identifier, password)
	}
	var out struct {
		AccessJwt string `json:"accessJwt"`
		Active    *bool  `json:"active"`
		Status    string `json:"status"`
	}
	if err := upstream.DecodeJSON(resp.Body, &out); err != nil {
		return session{}, err
	}
	if out.AccessJwt == "" {
		return session{}, upstream.MalformedFault("the session answer carries no access token")
	}
	if out.Active != nil && !*out.Active {
		// A deactivated, suspended or taken-down account gets a narrow
		// token that the AppView does not serve.
		return session{}, &upstream.Fault{Kind: upstream.Rejected, Status: resp.Status, Reason: "the configured account is not active (status " + safeStatus(out.Status) + ")"}
	}
	return session{accessJwt: out.AccessJwt, expires: tokenExpiry(out.AccessJwt)}, nil
}

// sessionFault classifies a failed sign-in. 401 AuthenticationRequired
// (wrong identifier or password), 400 AuthFactorTokenRequired (a main
// password with e-mail two-factor) and 400 AccountTakedown are Rejected,
// as the status says; the reason never repeats the credentials.
func sessionFault(resp *upstream.Response, err error, now time.Time, identifier, password string) error {
	err = classify(resp, err, now)
	var f *upstream.Fault
	if !errors.As(err, &f) {
		return err
	}
	if e, ok := readXRPCError(resp); ok && e.Name == "AuthFactorTokenRequired" {
		f.Reason = "sign-in asks for a second factor: configure an app password, which does not"
	}
	if strings.Contains(f.Reason, identifier) || strings.Contains(f.Reason, password) {
		f.Reason = "the session was refused"
	}
	f.Reason = "createSession: " + f.Reason
	return f
}

// safeStatus keeps an account status readable in a reason.
func safeStatus(s string) string {
	if s == "" || len(s) > 32 || strings.ContainsFunc(s, func(r rune) bool { return r < 'a' || r > 'z' }) {
		return "unknown"
	}
	return s
}

// tokenExpiry reads the exp claim of an access JWT, without verifying it
// (only its issuer can, and only its issuer needs to): it lets a token be
// replaced before the upstream refuses it. Zero when it cannot be read.
func tokenExpiry(jwt string) time.Time {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil {
		return time.Time{}
	}
	exp, err := claims.Exp.Int64()
	if err != nil || exp <= 0 {
		return time.Time{}
	}
	return time.Unix(exp, 0)
}
