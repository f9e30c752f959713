package pipeline

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// Idempotent replay of direct GETs (spec 3.2, 4.10).
const (
	// MaxIdempotencyKey is the longest Idempotency-Key accepted.
	MaxIdempotencyKey = 255
	// IdempotencyRetention is how long a stored outcome replays.
	IdempotencyRetention = 24 * time.Hour
	// idempotencyLease bounds how long a claim outlives a request that
	// died mid-flight; it exceeds RequestTimeout, so it never lapses under
	// a request still running.
	idempotencyLease = 2 * time.Minute
	// RequestTimeout bounds a call under /v1 (and its billing writes run
	// after it within BillingTimeout each); see serveAPI.
	RequestTimeout = 90 * time.Second
)

// hasIdempotencyKey: the request asks for idempotent replay.
func hasIdempotencyKey(x *exchange) bool {
	return x.r.Method == http.MethodGet && strings.TrimSpace(x.r.Header.Get("idempotency-key")) != ""
}

// idemScope is what one Idempotency-Key claim is about.
type idemScope struct {
	// owner namespaces the keys: an account id, or the operator API's scope (shared/console).
	owner string
	// fingerprint is the canonical request the key is first used for.
	fingerprint string
	// secret, when set, seals the stored body (see seal): responses that
	// reveal a credential once are kept only in a form the retrying caller
	// alone can open.
	secret string
}

// idempotency claims a direct GET's Idempotency-Key (spec 3.2, 4.10).
func (p *Pipeline) idempotency(x *exchange, c *Call) (finish func(context.Context), handled bool) {
	if c.Sandbox || x.r.Method != http.MethodGet {
		return nil, false
	}
	return p.claimIdempotency(x, idemScope{
		owner:       c.Principal.AccountID,
		fingerprint: digest(c.Endpoint.Key() + "?" + c.Params.CacheKey() + "&dry_run=" + boolString(c.Params.DryRun)),
	})
}

// claimIdempotency claims the request's Idempotency-Key in scope. It
// answers the request itself (replay, 409 in progress, 422 reused or too
// long) and returns handled; or it returns a finish func to run after the
// call, which stores the outcome, or frees the key when the outcome is
// worth retrying (402, 409, 429, 5xx, or no answer at all) so a retry runs
// again. A store that cannot be reached lets the call proceed unprotected,
// saying so in x-idempotency-status: unavailable.
func (p *Pipeline) claimIdempotency(x *exchange, scope idemScope) (finish func(context.Context), handled bool) {
	raw := strings.TrimSpace(strings.Join(x.r.Header.Values("idempotency-key"), ","))
	if raw == "" || p.cfg.Idempotency == nil {
		return nil, false
	}
	if utf8.RuneCountInString(raw) > MaxIdempotencyKey {
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"Idempotency-Key is at most 255 characters.",
			map[string]any{"field": "Idempotency-Key", "reason": "too_long", "max_length": MaxIdempotencyKey}))
		return nil, true
	}
	key := digest(raw)
	now := p.cfg.Now()
	ctx := x.r.Context()
	rec, claimed, err := p.cfg.Idempotency.ClaimIdempotency(ctx, scope.owner, key, scope.fingerprint, x.requestID,
		now, now.Add(idempotencyLease), now.Add(IdempotencyRetention))
	switch {
	case err != nil:
		p.cfg.Logger.Warn("idempotency store unavailable", "request_id", x.requestID, "error", err.Error())
		x.w.Header().Set("X-Idempotency-Status", "unavailable")
		return nil, false
	// Spec 3.2: any second request while the first is in progress is 409,
	// whatever it asks for.
	case !claimed && rec.State != store.IdemStored:
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusConflict,
			"A request with this Idempotency-Key is still in progress; retry shortly with the same key.",
			map[string]any{"reason": "idempotency_in_progress"}))
		return nil, true
	case rec.Fingerprint != scope.fingerprint:
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"This Idempotency-Key was used for a different request; use a new key.",
			map[string]any{"field": "Idempotency-Key", "reason": "idempotency_key_reused"}))
		return nil, true
	case !claimed:
		p.replay(x, rec, sealKey(scope.secret, raw))
		return nil, true
	}
	x.w.capture = &bytes.Buffer{}
	return func(bg context.Context) {
		status, captured := x.w.status, x.w.capture.Bytes()
		// A replay is the stored JSON envelope (spec 4.10.2); a document
		// in another format (utility/llms markdown, free) is not kept, so
		// a retry runs again rather than replaying it as JSON. Nothing
		// written (a panic on its way to a 500) is not an outcome either.
		// A stream keeps its result event's envelope.
		notJSON := !strings.HasPrefix(x.w.Header().Get("Content-Type"), "application/json")
		if x.streamed != nil {
			status, captured, notJSON = x.streamed.status, x.streamed.body, false
		}
		if status == 0 || worthRetrying(status) || notJSON {
			if err := p.cfg.Idempotency.ReleaseIdempotency(bg, scope.owner, key, x.requestID); err != nil {
				p.cfg.Logger.Warn("idempotency key not freed; its lease will", "request_id", x.requestID, "error", err.Error())
			}
			return
		}
		// Bodies are kept gzip-compressed. One too large even so is kept as
		// a marker: a retry is refused rather than run (and charged) again.
		body := compress(captured)
		if scope.secret != "" {
			body = seal(sealKey(scope.secret, raw), body)
		}
		if len(body) > store.MaxCachedBytes {
			status, body = 0, nil
		}
		for attempt := 0; attempt < 3; attempt++ {
			err = p.cfg.Idempotency.CompleteIdempotency(bg, scope.owner, key, x.requestID, status, body, p.cfg.Now().Add(IdempotencyRetention))
			if err == nil || errors.Is(err, store.ErrNotFound) {
				break
			}
		}
		if err != nil {
			// The claim lapses with its lease; a retry then runs again.
			p.cfg.Logger.Error("idempotency record not written", "request_id", x.requestID, "error", err.Error())
		}
	}, false
}

func compress(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

func decompress(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 64<<20))
}

// worthRetrying outcomes are not kept: a retry with the same key should
// run again (after a top-up, a wait, or an upstream recovery).
func worthRetrying(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusConflict || status == http.StatusPaymentRequired
}

// replay answers with the stored status and body: no charge, no upstream
// call. x-request-id names the original request, as the body does.
func (p *Pipeline) replay(x *exchange, rec store.IdempotencyRecord, key []byte) {
	stored, err := rec.Body, error(nil)
	if key != nil && rec.Status != 0 {
		if stored, err = open(key, stored); err != nil {
			// Only the credential of the original request opens it.
			x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
				"The request with this Idempotency-Key completed under another credential; its response can only be replayed with the same one. Use a new key to run it again.",
				map[string]any{"field": "Idempotency-Key", "reason": "idempotency_result_not_kept", "original_request_id": rec.RequestID}))
			return
		}
	}
	var body []byte
	if err == nil {
		body, err = decompress(stored)
	}
	if rec.Status == 0 || err != nil {
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"The request with this Idempotency-Key completed, but its response was too large to keep for replay. It ran once; use a new key to run it again.",
			map[string]any{"field": "Idempotency-Key", "reason": "idempotency_result_not_kept", "original_request_id": rec.RequestID}))
		return
	}
	x.w.Header().Set("X-Request-Id", rec.RequestID)
	x.w.Header().Set("Content-Type", "application/json")
	x.w.Header().Set("X-Idempotent-Replay", "true")
	x.replayOf = rec.RequestID
	x.w.WriteHeader(rec.Status)
	_, _ = x.w.Write(body)
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// sealKey derives the key that seals a stored response: from the caller's
// credential (never stored) and the raw Idempotency-Key (stored only as a
// digest), so the record alone cannot be opened. Nil when not sealing.
func sealKey(secret, idempotencyKey string) []byte {
	if secret == "" {
		return nil
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), []byte(idempotencyKey), "meridian idempotent replay v1", 32)
	if err != nil {
		panic(err) // 32 bytes of SHA-256 output is always within bounds
	}
	return key
}

// seal encrypts b with AES-256-GCM under key: the nonce, then the sealed bytes.
func seal(key, b []byte) []byte {
	aead := gcm(key)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	return aead.Seal(nonce, nonce, b, nil)
}

func open(key, b []byte) ([]byte, error) {
	aead := gcm(key)
	if len(b) < aead.NonceSize() {
		return nil, errors.New("sealed record too short")
	}
	return aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], nil)
}

func gcm(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // key is always 32 bytes
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}
