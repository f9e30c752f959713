package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// Credits is a credit amount; a nil *Credits marshals as null, meaning a
// charge is pending reconciliation (spec 2.1).
type Credits = int64

// Success is the envelope of spec 2.1.
type Success struct {
	Success          bool     `json:"success"`
	Platform         string   `json:"platform"`
	Endpoint         string   `json:"endpoint"`
	Data             any      `json:"data"`
	CreditsUsed      *Credits `json:"credits_used"`
	CreditsRemaining *Credits `json:"credits_remaining,omitempty"`
	RequestID        string   `json:"request_id"`
	Cached           bool     `json:"cached"`
	Synthetic        bool     `json:"synthetic,omitempty"`
	Degraded         *bool    `json:"degraded,omitempty"`
}

// ErrorBody is the inner error object of spec 2.2.
type ErrorBody struct {
	Type    Type           `json:"type"`
	Message string         `json:"message"`
	Status  int            `json:"status"`
	DocURL  string         `json:"doc_url"`
	Details map[string]any `json:"details,omitempty"`
}

// Failure is the envelope of spec 2.2.
type Failure struct {
	Success          bool      `json:"success"`
	Error            ErrorBody `json:"error"`
	CreditsUsed      *Credits  `json:"credits_used"`
	CreditsRemaining *Credits  `json:"credits_remaining,omitempty"`
	RequestID        string    `json:"request_id"`
}

// Amount returns a pointer for the credit fields.
func Amount(c Credits) *Credits { return &c }

// NewFailure builds the error envelope; every failure reports credits_used
// 0, or null while its refund is pending.
func NewFailure(e *Error, requestID, docBase string) Failure {
	f := Failure{
		Error: ErrorBody{
			Type:    e.Type,
			Message: e.Message,
			Status:  e.Status,
			DocURL:  DocURL(docBase, e.Type),
			Details: e.Details,
		},
		CreditsUsed:      Amount(0),
		CreditsRemaining: e.CreditsRemaining,
		RequestID:        requestID,
	}
	if e.ChargePending {
		f.CreditsUsed = nil
	}
	return f
}

// Marshal encodes an envelope without HTML escaping, so URLs stay readable.
func Marshal(v any) ([]byte, error) {
	if s, ok := v.(Success); ok {
		if raw, ok := s.Data.(json.RawMessage); ok && len(raw) > 0 {
			return marshalEncoded(s, raw)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dataNull is the data member of a success envelope encoded with no data.
// Only the fixed keys success, platform and endpoint come before it, and
// their values cannot hold it: a quote inside a JSON string is escaped.
var dataNull = []byte(`,"data":null,`)

// marshalEncoded encodes a success whose data is already encoded (fresh
// from Marshal or read back from the cache) by splicing it into the
// envelope, rather than letting encoding/json validate and compact it
// again: on a cache hit that was most of the work.
func marshalEncoded(s Success, data json.RawMessage) ([]byte, error) {
	s.Data = nil
	head, err := Marshal(s)
	if err != nil {
		return nil, err
	}
	at := bytes.Index(head, dataNull)
	if at < 0 {
		return nil, errors.New("envelope: no data member in a success envelope")
	}
	at += len(dataNull) - len("null,")
	out := make([]byte, 0, len(head)+len(data))
	out = append(out, head[:at]...)
	out = append(out, data...)
	return append(out, head[at+len("null"):]...), nil
}

// WriteJSON writes a JSON envelope with the headers every routed response
// carries: content-type, x-request-id and the credit headers. Header
// names are written in net/http's canonical form (as throughout the
// pipeline), which Set would otherwise allocate anew for every response.
func WriteJSON(w http.ResponseWriter, status int, requestID string, used *Credits, remaining *Credits, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", requestID)
	if used != nil {
		h.Set("X-Credits-Used", strconv.FormatInt(*used, 10))
	}
	if remaining != nil {
		h.Set("X-Credits-Remaining", strconv.FormatInt(*remaining, 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError writes the error envelope for e, with e's own headers.
func WriteError(w http.ResponseWriter, e *Error, requestID, docBase string) {
	for name, values := range e.Header {
		w.Header()[name] = values
	}
	f := NewFailure(e, requestID, docBase)
	body, err := Marshal(f)
	if err != nil {
		// Details hold only plain values; this is a programming error, so
		// fall back to the bare internal error rather than a half-written body.
		f = NewFailure(Internal(), requestID, docBase)
		body, _ = Marshal(f)
		e = Internal()
	}
	WriteJSON(w, e.Status, requestID, f.CreditsUsed, f.CreditsRemaining, body)
}

// Raw is handler data written as is (not in the envelope), e.g. markdown
// or the batch wrapper.
type Raw struct {
	ContentType string
	Body        []byte
}
