// Package auth reads API keys from requests (spec 5) and defines the key
// source the pipeline authenticates against.
package auth

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
)

// Principal is who a valid key speaks for.
type Principal struct {
	AccountID string
	KeyID     string
	KeyPrefix string
	// KeyHash is the stored hash of the key (never the key): it names the
	// key's limits (store.Limits).
	KeyHash string
}

// LimitsID names the principal's per-key limits: the key's hash, or its id
// for a key source that keeps no hashes.
func (p Principal) LimitsID() string {
	if p.KeyHash != "" {
		return p.KeyHash
	}
	return p.KeyID
}

// ErrUnknownKey means the key is unrecognised, revoked or deleted; all three
// answer 401 invalid_api_key alike, so callers cannot probe key states.
var ErrUnknownKey = errors.New("auth: unknown key")

// KeySource authenticates a presented key. It must not cache positive
// answers across requests: revocation applies on the next request.
type KeySource interface {
	Authenticate(ctx context.Context, key string) (Principal, error)
}

// NoKeys is the key source of a deployment without a key store: every
// presented key is unknown.
type NoKeys struct{}

// Authenticate implements KeySource.
func (NoKeys) Authenticate(context.Context, string) (Principal, error) {
	return Principal{}, ErrUnknownKey
}

// WellFormed reports whether s has the shape of a Meridian key (spec 2.6:
// mn_ plus 43 base64url characters), so that malformed keys are refused
// without a store lookup. A loop rather than a regular expression: it
// runs on every request, more than once.
func WellFormed(s string) bool {
	const prefix = "mn_"
	if len(s) != len(prefix)+43 || !strings.HasPrefix(s, prefix) {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// QueryKeyParam is the query parameter keys must never travel in.
const QueryKeyParam = "api_key"

// Presented is where a request's key came from.
type Presented struct {
	Key string
	// FromBearer is true when the key came from Authorization: Bearer.
	FromBearer bool
	// BearerRefused is true when a Bearer key was sent where only x-api-key
	// is accepted.
	BearerRefused bool
}

// FromRequest reads the key from x-api-key, or from Authorization: Bearer
// where bearerAllowed.
func FromRequest(r *http.Request, bearerAllowed bool) Presented {
	if k := strings.TrimSpace(r.Header.Get("x-api-key")); k != "" {
		return Presented{Key: k}
	}
	token := Bearer(r)
	if token == "" {
		return Presented{}
	}
	if !bearerAllowed {
		return Presented{BearerRefused: true}
	}
	return Presented{Key: token, FromBearer: true}
}

// Bearer is the credential of the request's Authorization: Bearer header
// (an API key, or a console token), or "".
func Bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// secretLike matches anything that could be an API key (mn_) or a console
// token (mc_), or most of one.
var secretLike = regexp.MustCompile(`(mn|mc)_[A-Za-z0-9_-]{8,}`)

// Redact removes secret-shaped text from s before s is logged or echoed:
// a key pasted into a path or carried in an error never gets out.
// Text with neither prefix, as nearly every logged path, is returned as
// it is without running the expression.
func Redact(s string) string {
	if !strings.Contains(s, "mn_") && !strings.Contains(s, "mc_") {
		return s
	}
	return secretLike.ReplaceAllString(s, "${1}_[redacted]")
}

// ForLog redacts caller-supplied text, then bounds it to max bytes.
func ForLog(s string, max int) string {
	s = Redact(s)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// Hint is what logs may say about a key: its 7-character prefix and last
// 4 characters, as stored (spec 2.6). Anything else about it stays out.
func Hint(key string) string {
	if !WellFormed(key) {
		return "malformed"
	}
	return key[:7] + "…" + key[len(key)-4:]
}
