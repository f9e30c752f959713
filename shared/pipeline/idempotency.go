package pipeline

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	// after it within billingTimeout each); see serveAPI.
	RequestTimeout = 90 * time.Second
)

// hasIdempotencyKey: the request asks for idempotent replay.
func hasIdempotencyKey(x *exchange) bool {
	return x.r.Method == http.MethodGet && strings.TrimSpace(x.r.Header.Get("idempotency-key")) != ""
}

// idempotency claims the request's Idempotency-Key. It answers the
// request itself (replay, 409 in progress, 422 reused or too long) and
// returns handled; or it returns a finish func to run after the call,
// which stores the outcome, or frees the key when the outcome is worth
// retrying (402, 409, 429, 5xx) so a retry runs again. A store that cannot
// be reached lets the call proceed unprotected, saying so in
// x-idempotency-status: unavailable.
func (p *Pipeline) idempotency(x *exchange, c *Call) (finish func(), handled bool) {
	raw := strings.TrimSpace(strings.Join(x.r.Header.Values("idempotency-key"), ","))
	if raw == "" || p.cfg.Idempotency == nil || c.Sandbox || x.r.Method != http.MethodGet {
		return nil, false
	}
	if utf8.RuneCountInString(raw) > MaxIdempotencyKey {
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"Idempotency-Key is at most 255 characters.",
			map[string]any{"field": "Idempotency-Key", "reason": "too_long", "max_length": MaxIdempotencyKey}))
		return nil, true
	}
	key := digest(raw)
	fingerprint := digest(c.Endpoint.Key() + "?" + c.Params.CacheKey() + "&dry_run=" + boolString(c.Params.DryRun))
	now := p.cfg.Now()
	ctx := x.r.Context()
	rec, claimed, err := p.cfg.Idempotency.ClaimIdempotency(ctx, c.Principal.AccountID, key, fingerprint, x.requestID,
		now, now.Add(idempotencyLease), now.Add(IdempotencyRetention))
	switch {
	case err != nil:
		p.cfg.Logger.Warn("idempotency store unavailable", "request_id", x.requestID, "error", err.Error())
		x.w.Header().Set("x-idempotency-status", "unavailable")
		return nil, false
	case rec.Fingerprint != fingerprint:
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"This Idempotency-Key was used for a different request; use a new key.",
			map[string]any{"field": "Idempotency-Key", "reason": "idempotency_key_reused"}))
		return nil, true
	case !claimed && rec.State == store.IdemStored:
		p.replay(x, rec)
		return nil, true
	case !claimed:
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusConflict,
			"A request with this Idempotency-Key is still in progress; retry shortly with the same key.",
			map[string]any{"reason": "idempotency_in_progress"}))
		return nil, true
	}
	x.w.capture = &bytes.Buffer{}
	return func() {
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), billingTimeout)
		defer cancel()
		status := x.w.status
		// A replay is the stored JSON envelope (spec 4.10.2); a document
		// in another format (utility/llms markdown, free) is not kept, so
		// a retry runs again rather than replaying it as JSON.
		notJSON := !strings.HasPrefix(x.w.Header().Get("content-type"), "application/json")
		if worthRetrying(status) || notJSON {
			if err := p.cfg.Idempotency.ReleaseIdempotency(bg, c.Principal.AccountID, key, x.requestID); err != nil {
				p.cfg.Logger.Warn("idempotency key not freed; its lease will", "request_id", x.requestID, "error", err.Error())
			}
			return
		}
		// Bodies are kept gzip-compressed. One too large even so is kept as
		// a marker: a retry is refused rather than run (and charged) again.
		body := compress(x.w.capture.Bytes())
		if len(body) > store.MaxCachedBytes {
			status, body = 0, nil
		}
		for attempt := 0; attempt < 3; attempt++ {
			err = p.cfg.Idempotency.CompleteIdempotency(bg, c.Principal.AccountID, key, x.requestID, status, body, p.cfg.Now().Add(IdempotencyRetention))
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
func (p *Pipeline) replay(x *exchange, rec store.IdempotencyRecord) {
	body, err := decompress(rec.Body)
	if rec.Status == 0 || err != nil {
		x.fail(envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"The request with this Idempotency-Key completed, but its response was too large to keep for replay. It ran once; use a new key to run it again.",
			map[string]any{"field": "Idempotency-Key", "reason": "idempotency_result_not_kept", "original_request_id": rec.RequestID}))
		return
	}
	rec.Body = body
	var original struct {
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(rec.Body, &original) == nil && original.RequestID != "" {
		x.w.Header().Set("x-request-id", original.RequestID)
	}
	x.w.Header().Set("content-type", "application/json")
	x.w.Header().Set("x-idempotent-replay", "true")
	x.replayOf = rec.RequestID
	x.w.WriteHeader(rec.Status)
	_, _ = x.w.Write(rec.Body)
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
