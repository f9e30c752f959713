package envelope

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestDocURLRule(t *testing.T) {
	// spec 2.2: the lowercased type, underscores replaced by hyphens, as an anchor.
	want := map[Type]string{
		Unauthorized:         "unauthorized",
		KeyRevoked:           "key-revoked",
		KeyLimitExceeded:     "key-limit-exceeded",
		RateLimited:          "rate-limited",
		FairUseExceeded:      "fair-use-exceeded",
		InsufficientCredits:  "insufficient-credits",
		ResourceNotFound:     "resource-not-found",
		InvalidParameters:    "invalid-parameters",
		UpstreamError:        "upstream-error",
		UpstreamTimeout:      "upstream-timeout",
		EndpointNotAvailable: "endpoint-not-available",
		EndpointNotFound:     "endpoint-not-found",
		InternalError:        "internal-error",
	}
	if len(Roster) != len(want) {
		t.Fatalf("roster has %d types, spec part 7 has %d", len(Roster), len(want))
	}
	for _, info := range Roster {
		anchor, ok := want[info.Type]
		if !ok {
			t.Fatalf("%s is not in spec part 7", info.Type)
		}
		if got := DocURL("https://api.example.com/docs/errors", info.Type); got != "https://api.example.com/docs/errors#"+anchor {
			t.Errorf("DocURL(%s) = %s", info.Type, got)
		}
	}
	if got := DocURL("https://x.example/errors#old", RateLimited); got != "https://x.example/errors#rate-limited" {
		t.Errorf("a base with a fragment keeps one anchor, got %s", got)
	}
}

func TestKeyRevokedIsListedButNeverEmitted(t *testing.T) {
	var listed bool
	for _, info := range Roster {
		if info.Type == KeyRevoked {
			listed = true
			if info.Emitted || len(info.Statuses) != 0 {
				t.Error("KEY_REVOKED must be reserved: no status, not emitted")
			}
		}
	}
	if !listed {
		t.Fatal("KEY_REVOKED missing from the roster")
	}
	// No production code outside this package's roster may emit it.
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		if strings.HasSuffix(filepath.ToSlash(path), "shared/envelope/errors.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err == nil && (strings.Contains(string(src), "envelope.KeyRevoked") || strings.Contains(string(src), `"KEY_REVOKED"`)) {
			t.Errorf("%s refers to KEY_REVOKED; a revoked key answers UNAUTHORIZED", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFailureEnvelope(t *testing.T) {
	rec := httptest.NewRecorder()
	e := New(InvalidParameters, 422, "limit is out of range.", map[string]any{"field": "limit"}).WithHeader("retry-after", "3")
	WriteError(rec, e, "req_abc", "https://api.example.com/docs/errors")
	if rec.Code != 422 || rec.Header().Get("x-credits-used") != "0" || rec.Header().Get("x-request-id") != "req_abc" ||
		rec.Header().Get("content-type") != "application/json" || rec.Header().Get("retry-after") != "3" {
		t.Fatalf("headers: %d %v", rec.Code, rec.Header())
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body["success"] != false || body["credits_used"] != float64(0) || body["request_id"] != "req_abc" {
		t.Errorf("envelope: %v", body)
	}
	if _, ok := body["credits_remaining"]; ok {
		t.Error("credits_remaining must be absent when the balance is unknown")
	}
	errObj := body["error"].(map[string]any)
	if errObj["type"] != "INVALID_PARAMETERS" || errObj["status"] != float64(422) || errObj["message"] == "" ||
		errObj["doc_url"] != "https://api.example.com/docs/errors#invalid-parameters" {
		t.Errorf("error object: %v", errObj)
	}
	if errObj["details"].(map[string]any)["field"] != "limit" {
		t.Errorf("details: %v", errObj["details"])
	}
}

func TestUnencodableDetailsBecomeInternalError(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, New(InvalidParameters, 400, "x", map[string]any{"bad": make(chan int)}), "req_x", "https://e/docs/errors")
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"INTERNAL_ERROR"`) {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}

func TestSuccessEnvelopeFields(t *testing.T) {
	b, err := Marshal(Success{Success: true, Platform: "p", Endpoint: "/v1/p/e", Data: map[string]any{}, CreditsUsed: nil, RequestID: "req_1"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if v, ok := m["credits_used"]; !ok || v != nil {
		t.Errorf("a pending charge reports credits_used null, got %v", m)
	}
	for _, absent := range []string{"credits_remaining", "synthetic", "degraded"} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s must be absent outside its case", absent)
		}
	}
	if m["cached"] != false {
		t.Error("cached is always present")
	}
}

func TestRequestIDs(t *testing.T) {
	re := regexp.MustCompile(`^req_[0-9a-f]{32}$`)
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := NewRequestID()
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		if id < prev {
			t.Fatalf("ids must sort by creation: %s after %s", id, prev)
		}
		seen[id], prev = true, id
	}
}

func TestErrorsReferenceDoesNotEchoOddHosts(t *testing.T) {
	if got := ErrorsReference("https", "api.example.com:443"); got != "https://api.example.com:443/docs/errors" {
		t.Error(got)
	}
	for _, h := range []string{"", "evil.example/<script>", "a b", strings.Repeat("a", 300)} {
		if got := ErrorsReference("http", h); got != "http://localhost/docs/errors" {
			t.Errorf("%q gave %s", h, got)
		}
	}
}

// Encoded data is spliced into the envelope as it is; the result is the
// envelope encoding/json would write, even when the platform's name holds
// the member's own text.
func TestSuccessWithEncodedDataIsSpliced(t *testing.T) {
	data := `{"title":"<b>A & B</b>","url":"https://x.test/?a=1&b=2","n":[1,2.5,null]}`
	s := Success{Success: true, Platform: `odd,"data":null,"name`, Endpoint: "search", Data: json.RawMessage(data),
		CreditsUsed: Amount(2), CreditsRemaining: Amount(98), RequestID: "req_1", Cached: true}
	got, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"success":true,"platform":"odd,\"data\":null,\"name","endpoint":"search","data":` + data +
		`,"credits_used":2,"credits_remaining":98,"request_id":"req_1","cached":true}` + "\n"
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var decoded map[string]any
	if err := json.Unmarshal(got, &decoded); err != nil || decoded["platform"] != s.Platform {
		t.Errorf("not the envelope: %v %v", err, decoded)
	}
}
