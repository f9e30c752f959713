package tiktok

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// tokenPath is the OAuth endpoint that issues client access tokens.
const tokenPath = "/v2/oauth/token/"

// tokenMargin: a token this close to its expiry is replaced before use
// rather than sent and refused.
const tokenMargin = 5 * time.Minute

// defaultTokenLife is a client access token's documented life, used when
// an answer omits expires_in.
const defaultTokenLife = 2 * time.Hour

// tokens caches the client access token of each configured client, so that
// a call costs its Research API requests and not also a token request.
type tokens struct {
	// lock is a mutex whose waiters give up when their attempt's context
	// ends; concurrent calls share one token request.
	lock chan struct{}
	// byClient holds a token per base URL and credentials, so that a token
	// never goes to a service that did not issue it (a moved base URL,
	// rotated secrets).
	byClient map[[sha256.Size]byte]token
}

type token struct {
	value   string
	expires time.Time
}

func newTokens() *tokens {
	return &tokens{lock: make(chan struct{}, 1), byClient: map[[sha256.Size]byte]token{}}
}

// get returns a usable token: the cached one unless it is stale (the one
// the caller just saw refused) or about to expire, else a new one.
func (t *tokens) get(ctx context.Context, c *upstream.Call, stale string) (string, error) {
	key, secret := c.Secret(ClientKeySecret), c.Secret(ClientSecretSecret)
	if key == "" || secret == "" {
		return "", &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusUnauthorized, Reason: "the research client key or secret is not configured"}
	}
	client := sha256.Sum256([]byte(c.BaseURL + "\x00" + key + "\x00" + secret))
	select {
	case t.lock <- struct{}{}:
	case <-ctx.Done():
		return "", &upstream.Fault{Kind: upstream.Timeout, Reason: "no client access token before the deadline"}
	}
	defer func() { <-t.lock }()
	if cur, ok := t.byClient[client]; ok && cur.value != stale && c.Now.Add(tokenMargin).Before(cur.expires) {
		return cur.value, nil
	}
	delete(t.byClient, client)
	fresh, err := fetchToken(ctx, c, key, secret)
	if err != nil {
		return "", err
	}
	t.byClient[client] = fresh
	return fresh.value, nil
}

// tokenAnswer is the token endpoint's answer: the token, or an OAuth error
// (https://developers.tiktok.com/doc/oauth-error-handling).
type tokenAnswer struct {
	AccessToken      string      `json:"access_token"`
	ExpiresIn        json.Number `json:"expires_in"`
	TokenType        string      `json:"token_type"`
	Error            string      `json:"error"`
	ErrorDescription string      `json:"error_description"`
	LogID            string      `json:"log_id"`
}

// fetchToken asks for a client access token with the client-credentials
// grant. A refusal of the credentials (invalid_client and the like, with
// or without a 4xx) is Rejected with status 401, so that the route's
// cooldown counts it: every later call would meet it too.
func fetchToken(ctx context.Context, c *upstream.Call, key, secret string) (token, error) {
	form := url.Values{"client_key": {key}, "client_secret": {secret}, "grant_type": {"client_credentials"}}
	resp, err := c.PostForm(ctx, tokenPath, http.Header{"cache-control": {"no-cache"}}, form)
	if resp == nil { // no answer at all: the fault says why
		return token{}, err
	}
	status, header, body := resp.Status, resp.Header, resp.Body
	var a tokenAnswer
	decodeErr := upstream.DecodeJSON(body, &a)
	reason := func() string {
		s := strings.Trim(a.Error+": "+upstream.Clip(a.ErrorDescription, 200), ": ")
		if s == "" {
			s = "HTTP " + strconv.Itoa(status)
		}
		if a.LogID != "" {
			s += " (log_id " + upstream.Clip(a.LogID, 64) + ")"
		}
		return s
	}
	switch {
	case status == http.StatusTooManyRequests:
		return token{}, &upstream.Fault{Kind: upstream.RateLimited, Status: status, RetryAfter: quotaWait(header, c.Now),
			Reason: "token request rate limited: " + reason()}
	case status >= 500:
		return token{}, &upstream.Fault{Kind: upstream.ServerError, Status: status, Reason: "the token endpoint failed: " + reason()}
	case a.Error != "" || status >= 400:
		return token{}, &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusUnauthorized,
			Reason: "the client credentials were refused: " + reason()}
	case decodeErr != nil:
		return token{}, decodeErr
	case a.AccessToken == "":
		return token{}, upstream.MalformedFault("the token answer carries no access_token")
	}
	life := defaultTokenLife
	if s, err := a.ExpiresIn.Int64(); err == nil && s > 0 {
		life = time.Duration(s) * time.Second
	}
	return token{value: a.AccessToken, expires: c.Now.Add(life)}, nil
}
