// Package envelopetest checks answers against the envelopes of spec 2.1
// and 2.2, for the tests of the packages that write them (the pipeline,
// the console, the app).
package envelopetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/meridian-data/meridian/shared/envelope"
)

// RequestID matches a request id: req_ and 32 hex digits.
var RequestID = regexp.MustCompile(`^req_[0-9a-f]{32}$`)

// Failure is the error envelope of spec 2.2 as a test reads it.
type Failure struct {
	Success *bool `json:"success"`
	Error   *struct {
		Type    envelope.Type  `json:"type"`
		Message string         `json:"message"`
		Status  int            `json:"status"`
		DocURL  string         `json:"doc_url"`
		Details map[string]any `json:"details"`
	} `json:"error"`
	CreditsUsed *json.Number `json:"credits_used"`
	RequestID   string       `json:"request_id"`
}

// TypedFailure checks that body is a typed error envelope (spec 2.2) for
// status: success false, a type of the roster that may carry that status,
// the status repeated, a doc_url anchored at the type, credits_used 0 and
// a request id. It returns the envelope, or an error saying what is wrong.
func TypedFailure(status int, body []byte) (Failure, error) {
	var f Failure
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("not a JSON object: %v", err)
	}
	switch {
	case f.Success == nil || *f.Success:
		return f, fmt.Errorf("success is not false")
	case f.Error == nil || f.Error.Type == "" || f.Error.Message == "":
		return f, fmt.Errorf("no error.type and error.message")
	case f.Error.Status != status:
		return f, fmt.Errorf("error.status %d for HTTP %d", f.Error.Status, status)
	case !strings.HasSuffix(f.Error.DocURL, "#"+f.Error.Type.Anchor()):
		return f, fmt.Errorf("doc_url %q is not anchored at %s", f.Error.DocURL, f.Error.Type)
	case f.CreditsUsed == nil || f.CreditsUsed.String() != "0":
		return f, fmt.Errorf("credits_used %v, want 0", f.CreditsUsed)
	case !RequestID.MatchString(f.RequestID):
		return f, fmt.Errorf("request_id %q", f.RequestID)
	}
	for _, info := range envelope.Roster {
		if info.Type == f.Error.Type {
			if !info.Emitted || !slices.Contains(info.Statuses, status) {
				return f, fmt.Errorf("%s is not emitted with status %d", f.Error.Type, status)
			}
			return f, nil
		}
	}
	return f, fmt.Errorf("error.type %q is not in the roster", f.Error.Type)
}

// Problems lists how a routed JSON answer (its status code, head and
// decoded body) breaks the rules of spec 2.1 and 2.2 that hold for every
// one: a request id in the body and in x-request-id, credits_used, and for
// a failure success false, credits_used 0 (body and x-credits-used),
// error.status and error.message, and a doc_url into docBase anchored at
// the type.
func Problems(code int, header http.Header, body map[string]any, docBase string) []string {
	var out []string
	id, _ := body["request_id"].(string)
	if !RequestID.MatchString(id) || header.Get("x-request-id") != id {
		out = append(out, fmt.Sprintf("request_id %q, header %q", id, header.Get("x-request-id")))
	}
	if _, ok := body["credits_used"]; !ok {
		out = append(out, "credits_used missing")
	}
	if code < 400 {
		return out
	}
	e, _ := body["error"].(map[string]any)
	if body["success"] != false || body["credits_used"] != float64(0) || header.Get("x-credits-used") != "0" {
		out = append(out, fmt.Sprintf("failure must report credits_used 0: %v / %q", body["credits_used"], header.Get("x-credits-used")))
	}
	if e["status"] != float64(code) || e["message"] == "" {
		out = append(out, fmt.Sprintf("error.status %v for HTTP %d", e["status"], code))
	}
	t, _ := e["type"].(string)
	if want := docBase + "#" + strings.ReplaceAll(strings.ToLower(t), "_", "-"); e["doc_url"] != want {
		out = append(out, fmt.Sprintf("doc_url %v, want %s", e["doc_url"], want))
	}
	return out
}
