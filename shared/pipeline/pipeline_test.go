package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/envelope/envelopetest"
	"github.com/meridian-data/meridian/shared/registry"
)

// Well-formed keys (mn_ + 43 characters) for the in-memory key source.
var (
	testKey  = "mn_TESTKEY" + strings.Repeat("a", 36)
	otherKey = "mn_OTHERKEY" + strings.Repeat("b", 35)
)

// memKeys is the in-memory key source the tests drive later stages with.
type memKeys map[string]auth.Principal

func (m memKeys) Authenticate(_ context.Context, key string) (auth.Principal, error) {
	if p, ok := m[key]; ok {
		return p, nil
	}
	return auth.Principal{}, auth.ErrUnknownKey
}

type failingKeys struct{}

func (failingKeys) Authenticate(context.Context, string) (auth.Principal, error) {
	return auth.Principal{}, errors.New("store unreachable: dial tcp 10.0.0.1:8000 while looking up " + testKey)
}

type harness struct {
	t    testing.TB
	p    *Pipeline
	logs *bytes.Buffer
}

func newHarness(t testing.TB, mutate ...func(*Config)) *harness {
	t.Helper()
	logs := &bytes.Buffer{}
	cfg := Config{
		Registry: registry.Default(),
		Keys:     memKeys{testKey: {AccountID: "acct_1", KeyID: "key_1"}},
		Logger:   slog.New(slog.NewJSONHandler(logs, nil)),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	return &harness{t: t, p: New(cfg), logs: logs}
}

type response struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

func (h *harness) do(method, target string, headers ...string) response {
	h.t.Helper()
	req := httptest.NewRequest(method, "http://api.test"+target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.p.ServeHTTP(rec, req)
	res := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if strings.HasPrefix(rec.Header().Get("content-type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &res.body); err != nil {
			h.t.Fatalf("%s %s: body is not JSON: %v\n%s", method, target, err, rec.Body)
		}
	}
	return res
}

func (h *harness) get(target string) response { return h.do("GET", target, "x-api-key", testKey) }

func (r response) errorType() string {
	e, _ := r.body["error"].(map[string]any)
	t, _ := e["type"].(string)
	return t
}

func (r response) details() map[string]any {
	e, _ := r.body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	return d
}

// checkEnvelope asserts the rules of spec 2.1 and 2.2 that hold for every
// routed JSON response.
func checkEnvelope(t *testing.T, r response) {
	t.Helper()
	for _, p := range envelopetest.Problems(r.code, r.header, r.body, "http://api.test/docs/errors") {
		t.Error(p)
	}
}

func TestAuthentication(t *testing.T) {
	h := newHarness(t)
	cases := []struct {
		name    string
		method  string
		target  string
		headers []string
		status  int
		reason  string
	}{
		{"no key", "GET", "/v1/company_registry/search?query=a", nil, 401, "missing_api_key"},
		{"blank key", "GET", "/v1/company_registry/search?query=a", []string{"x-api-key", "  "}, 401, "missing_api_key"},
		{"unknown key", "GET", "/v1/company_registry/search?query=a", []string{"x-api-key", otherKey}, 401, "invalid_api_key"},
		{"malformed key", "GET", "/v1/company_registry/search?query=a", []string{"x-api-key", "mn_short"}, 401, "invalid_api_key"},
		{"key in the query", "GET", "/v1/company_registry/search?query=a&api_key=" + testKey, nil, 401, "query_string_key_rejected"},
		{"key in the query beside a header", "GET", "/v1/company_registry/search?api_key=x", []string{"x-api-key", testKey}, 401, "query_string_key_rejected"},
		{"key in a malformed query", "GET", "/v1/company_registry/search?api_key=x&q=%zz", []string{"x-api-key", testKey}, 401, "query_string_key_rejected"},
		{"bearer on a data endpoint", "GET", "/v1/company_registry/search?query=a", []string{"authorization", "Bearer " + testKey}, 501, ""},
		{"unknown bearer on a data endpoint", "GET", "/v1/company_registry/search?query=a", []string{"authorization", "Bearer " + otherKey}, 401, "invalid_api_key"},
		{"bearer on a POST", "POST", "/v1/company_registry/search?query=a", []string{"authorization", "Bearer " + testKey}, 404, ""},
		{"bearer on batch", "POST", "/v1/batch", []string{"authorization", "Bearer " + testKey}, 401, "missing_api_key"},
		{"unknown bearer on /v1", "GET", "/v1", []string{"authorization", "Bearer " + otherKey}, 401, "invalid_api_key"},
		{"bearer on /v1", "GET", "/v1", []string{"authorization", "Bearer " + testKey}, 200, ""},
		{"lowercase bearer scheme on /v1", "GET", "/v1", []string{"authorization", "bearer " + testKey}, 200, ""},
		{"x-api-key on /v1", "GET", "/v1", []string{"x-api-key", testKey}, 200, ""},
		{"bearer on /sandbox", "GET", "/sandbox", []string{"authorization", "Bearer " + testKey}, 200, ""},
		{"bearer on a sandbox endpoint", "GET", "/sandbox/company_registry/search?query=a", []string{"authorization", "Bearer " + testKey}, 501, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(c.method, c.target, c.headers...)
			checkEnvelope(t, r)
			if r.code != c.status {
				t.Fatalf("status %d, want %d: %s", r.code, c.status, r.raw)
			}
			if c.status == 401 && (r.errorType() != "UNAUTHORIZED" || r.details()["reason"] != c.reason) {
				t.Fatalf("got %s %v, want UNAUTHORIZED %s", r.errorType(), r.details(), c.reason)
			}
		})
	}
}

func TestKeyStoreFailureIsAnInternalErrorThatLeaksNothing(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Keys = failingKeys{} })
	r := h.get("/v1/company_registry/search?query=a")
	checkEnvelope(t, r)
	if r.code != 500 || r.errorType() != "INTERNAL_ERROR" || strings.Contains(r.raw, "hunter2") || strings.Contains(r.raw, "10.0.0.1") {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if !strings.Contains(h.logs.String(), r.body["request_id"].(string)) || !strings.Contains(h.logs.String(), "store unreachable") {
		t.Error("the fault must be logged against the request id")
	}
	if strings.Contains(h.logs.String(), testKey[3:]) || strings.Contains(r.raw, testKey[3:]) {
		t.Error("key material from a store error reached the log or the body")
	}
}

func TestValidatedDataCallHasNoEligibleRoute(t *testing.T) {
	h := newHarness(t)
	for _, target := range []string{
		"/v1/company_registry/search?query=acme",
		"/v1/company_registry/search?query=acme&dry_run=1",
		"/v1/social_a/event/1234567890",
		"/v1/microblog_b/search-posts?query=a&sort=top&judgments=off",
		"/v1/app_store_b/categories",
	} {
		r := h.get(target)
		checkEnvelope(t, r)
		if r.code != 501 || r.errorType() != "ENDPOINT_NOT_AVAILABLE" {
			t.Fatalf("%s: %d %s", target, r.code, r.raw)
		}
		res, _ := registry.Default().Resolve(strings.Split(target, "?")[0])
		if r.details()["sandbox"] != res.Endpoint.SandboxPath() {
			t.Errorf("%s: details.sandbox %v", target, r.details()["sandbox"])
		}
		if _, ok := r.body["data"]; ok {
			t.Errorf("%s: no data may be substituted", target)
		}
	}
	r := h.get("/v1/credits/balance")
	if r.code != 501 || r.errorType() != "ENDPOINT_NOT_AVAILABLE" || r.details()["sandbox"] != nil {
		t.Errorf("an unwired service endpoint: %d %s", r.code, r.raw)
	}
}

func TestOrderOfRefusals(t *testing.T) {
	h := newHarness(t)
	// Unknown path before authentication; authentication before validation.
	if r := h.do("GET", "/v1/nope/x?bad=1"); r.code != 404 {
		t.Errorf("unknown path without key: %d", r.code)
	}
	if r := h.do("GET", "/v1/company_registry/search?bad=1"); r.code != 401 {
		t.Errorf("bad params without key: %d", r.code)
	}
	if r := h.do("GET", "/v1/microblog_b/search-tweets"); r.code != 410 {
		t.Errorf("retired without key: %d", r.code)
	}
	// Undeclared names before missing ones.
	if r := h.get("/v1/company_registry/search?qery=a"); r.code != 400 || r.details()["suggestions"].(map[string]any)["qery"] != "query" {
		t.Errorf("unknown before missing: %d %s", r.code, r.raw)
	}
}

func TestResolutionErrors(t *testing.T) {
	h := newHarness(t)
	r := h.get("/v1/marketplace_a/nope")
	checkEnvelope(t, r)
	if r.code != 404 || r.errorType() != "ENDPOINT_NOT_FOUND" || r.details()["platform"] != "marketplace_a" || r.details()["endpoint"] != "nope" {
		t.Errorf("unknown endpoint: %d %s", r.code, r.raw)
	}
	r = h.get("/v1/microblog_b/search-tweets?query=a")
	checkEnvelope(t, r)
	if r.code != 410 || r.details()["reason"] != "endpoint_removed" || r.details()["successor"] != "/v1/microblog_b/search-posts" {
		t.Errorf("retired: %d %s", r.code, r.raw)
	}
	r = h.do("POST", "/v1/company_registry/search?query=a", "x-api-key", testKey)
	checkEnvelope(t, r)
	if r.code != 404 || r.details()["reason"] != "method_not_allowed" || r.header.Get("allow") != "GET" {
		t.Errorf("wrong method: %d %s", r.code, r.raw)
	}
	r = h.get("/v1/batch")
	if r.code != 404 || r.header.Get("allow") != "POST" {
		t.Errorf("GET batch: %d %s", r.code, r.raw)
	}
	for _, target := range []string{"/", "/v2/x", "/favicon.ico", "/openapi.xml"} {
		r = h.get(target)
		checkEnvelope(t, r)
		if r.code != 404 || r.errorType() != "ENDPOINT_NOT_FOUND" {
			t.Errorf("%s: %d", target, r.code)
		}
	}
}

func TestFamilyServesOnlyItsRoutes(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Family = registry.Commerce })
	if r := h.get("/v1/marketplace_a/search?query=a"); r.code != 501 {
		t.Errorf("own route: %d", r.code)
	}
	r := h.get("/v1/company_registry/search?query=a")
	checkEnvelope(t, r)
	if r.code != 404 || r.details()["platform"] != "company_registry" {
		t.Errorf("another family's route: %d %s", r.code, r.raw)
	}
	if r := h.get("/docs/errors"); r.code != 404 {
		t.Errorf("service page on the commerce function: %d", r.code)
	}
	// An escaped platform name falls to $default (the service function),
	// which must not serve the platform's endpoint.
	h = newHarness(t, func(c *Config) { c.Family = registry.Service })
	if r := h.get("/v1/marketplace%5Fa/search?query=a"); r.code != 404 || r.details()["platform"] != "marketplace_a" {
		t.Errorf("service function serving a commerce endpoint: %d %s", r.code, r.raw)
	}
}

func TestIndexes(t *testing.T) {
	h := newHarness(t)
	r := h.get("/v1")
	checkEnvelope(t, r)
	if r.code != 200 || r.body["success"] != true || r.body["credits_used"] != float64(0) || r.header.Get("x-credits-used") != "0" {
		t.Fatalf("/v1: %d %s", r.code, r.raw)
	}
	if r.body["endpoint"] != "/v1" || r.body["cached"] != false {
		t.Errorf("/v1 envelope: %v", r.body)
	}
	r = h.get("/v1/code_host")
	checkEnvelope(t, r)
	data := r.body["data"].(map[string]any)
	if r.code != 200 || r.body["platform"] != "code_host" || r.body["endpoint"] != "/v1/code_host" || data["count"] != float64(3) {
		t.Fatalf("platform index: %d %s", r.code, r.raw)
	}
	first := data["items"].([]any)[0].(map[string]any)
	for _, field := range []string{"id", "name", "credit_cost", "params", "description"} {
		if _, ok := first[field]; !ok {
			t.Errorf("catalogue entry lacks %s", field)
		}
	}
}

func TestDocURLBase(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/v1", "x-forwarded-proto", "https")
	if got := r.body["error"].(map[string]any)["doc_url"]; got != "https://api.test/docs/errors#unauthorized" {
		t.Errorf("doc_url behind TLS termination: %v", got)
	}
	h = newHarness(t, func(c *Config) { c.ErrorsURL = "https://docs.example.com/errors" })
	r = h.do("GET", "/v1")
	if got := r.body["error"].(map[string]any)["doc_url"]; got != "https://docs.example.com/errors#unauthorized" {
		t.Errorf("configured doc_url: %v", got)
	}
}

func TestErrorsReferenceHasEveryAnchor(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/docs/errors")
	if r.code != 200 || !strings.HasPrefix(r.header.Get("content-type"), "text/html") {
		t.Fatalf("%d %v", r.code, r.header)
	}
	for _, info := range envelope.Roster {
		if !strings.Contains(r.raw, `id="`+info.Type.Anchor()+`"`) {
			t.Errorf("no anchor for %s", info.Type)
		}
	}
	if !strings.Contains(r.raw, `id="billing-status"`) || !strings.Contains(r.raw, "<code>"+BillingRefundPending+"</code>") {
		t.Error("the billing_status values are not documented")
	}
}

func TestDeprecationHeaders(t *testing.T) {
	announced := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	sunset := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	reg, err := registry.New([]registry.Endpoint{{
		Platform: "p", ID: "old", Name: "Old", Family: registry.Commerce, Kind: registry.Data, Origin: registry.SpecListed,
		Deprecated: &registry.Deprecation{Announced: announced, Sunset: sunset, Link: "https://docs.example.com/changes#old"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *Config) { c.Registry = reg })
	r := h.get("/v1/p/old")
	if r.header.Get("deprecation") != "@1788220800" || r.header.Get("sunset") != "Mon, 01 Mar 2027 00:00:00 GMT" ||
		r.header.Get("link") != `<https://docs.example.com/changes#old>; rel="deprecation"` {
		t.Errorf("headers %v", r.header)
	}
	for _, r := range []response{h.get("/v1/p/old?nope=1"), h.do("GET", "/v1/p/old")} {
		if r.code < 400 || r.header.Get("deprecation") == "" {
			t.Errorf("a refusal from a deprecated endpoint still announces it: %d %v", r.code, r.header)
		}
	}
	if r := h.get("/v1/p"); r.header.Get("deprecation") != "" {
		t.Error("other endpoints carry no notice")
	}
}

func TestPanicBecomesInternalError(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Handlers = map[string]Handler{"company_registry/search": func(context.Context, *Call) (any, *envelope.Error) {
			panic("boom: secret detail")
		}}
	})
	r := h.get("/v1/company_registry/search?query=a")
	checkEnvelope(t, r)
	if r.code != 500 || r.errorType() != "INTERNAL_ERROR" || strings.Contains(r.raw, "boom") || strings.Contains(r.raw, "goroutine") {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if !strings.Contains(h.logs.String(), "boom") || !strings.Contains(h.logs.String(), r.body["request_id"].(string)) {
		t.Error("the panic is logged against the request id")
	}
}

func TestHandlerSuccessEnvelope(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Handlers = map[string]Handler{"social_a/event": func(_ context.Context, c *Call) (any, *envelope.Error) {
			return map[string]any{"id": c.Params.Values["id"], "account": c.Principal.AccountID}, nil
		}}
	})
	r := h.get("/v1/social_a/event/42")
	checkEnvelope(t, r)
	if r.code != 200 || r.body["platform"] != "social_a" || r.body["endpoint"] != "/v1/social_a/event" || r.header.Get("x-cache") != "MISS" {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if d := r.body["data"].(map[string]any); d["id"] != "42" || d["account"] != "acct_1" {
		t.Errorf("data %v", d)
	}
}

func TestOneLogLinePerRequestWithoutSecrets(t *testing.T) {
	h := newHarness(t)
	ids := map[string]bool{}
	for _, r := range []response{
		h.get("/v1/company_registry/search?query=a"),
		h.do("GET", "/v1/company_registry/search?api_key="+otherKey),
		h.do("GET", "/v1", "authorization", "Bearer "+testKey),
		h.do("GET", "/v1/nope"),
		h.do("GET", "/v1/social_a/event/"+otherKey, "x-api-key", testKey),
	} {
		ids[r.body["request_id"].(string)] = true
	}
	lines := strings.Split(strings.TrimSpace(h.logs.String()), "\n")
	if len(lines) != len(ids) {
		t.Fatalf("%d log lines for %d requests:\n%s", len(lines), len(ids), h.logs)
	}
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		if entry["msg"] != "request" || !ids[entry["request_id"].(string)] || entry["status"] == nil {
			t.Errorf("log line %v", entry)
		}
	}
	for _, secret := range []string{testKey, otherKey, "TESTKEY", "OTHERKEY"} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("logs contain key material %q", secret)
		}
	}
}

func TestBadInputIsATyped4xx(t *testing.T) {
	h := newHarness(t)
	cases := map[string]string{
		"huge query":            "/v1/company_registry/search?query=" + strings.Repeat("a", 100_000),
		"invalid UTF-8 value":   "/v1/company_registry/search?query=%ff%fe",
		"invalid UTF-8 name":    "/v1/company_registry/search?query=a&%c3%28=1",
		"repeated":              "/v1/company_registry/search?query=a&query=b",
		"NUL in value":          "/v1/company_registry/search?query=a%00",
		"NUL in path":           "/v1/company_registry/sea%00rch?query=a",
		"NUL as identifier":     "/v1/social_a/event/%00",
		"very long path":        "/v1/" + strings.Repeat("segment/", 1000),
		"very long identifier":  "/v1/social_a/event/" + strings.Repeat("9", 5000),
		"invalid UTF-8 path":    "/v1/%ff%fe/search",
		"semicolons":            "/v1/company_registry/search?query=a;limit=3",
		"bad escape":            "/v1/company_registry/search?query=%G1",
		"many parameters":       "/v1/company_registry/search?" + strings.Repeat("x=1&", 2000),
		"dot segments":          "/v1/company_registry/../search",
		"empty name with value": "/v1/company_registry/search?query=a&=1",
	}
	for name, target := range cases {
		t.Run(name, func(t *testing.T) {
			r := h.get(target)
			if r.code < 400 || r.code >= 500 || r.body == nil {
				t.Fatalf("%d %.300s", r.code, r.raw)
			}
			checkEnvelope(t, r)
		})
	}
}

func FuzzPipeline(f *testing.F) {
	for _, s := range []struct{ method, target, key string }{
		{"GET", "/v1/company_registry/search?query=acme", testKey},
		{"GET", "/v1/social_a/event/123?dry_run=1", testKey},
		{"GET", "/v1?x=%00", ""},
		{"POST", "/v1/batch", testKey},
		{"GET", "/sandbox/microblog_b/search-posts?query=a&sort=top", testKey},
		{"GET", "/v1/monitors/mon_1/runs?limit=500", testKey},
		{"GET", "/v1/company_registry/search?api_key=x", ""},
	} {
		f.Add(s.method, s.target, s.key)
	}
	p := New(Config{Registry: registry.Default(), Keys: memKeys{testKey: {AccountID: "a"}}})
	f.Fuzz(func(t *testing.T, method, target, key string) {
		req, err := http.NewRequest(method, "http://api.test"+target, nil)
		if err != nil || !strings.HasPrefix(target, "/") {
			return // not a request a client could send
		}
		req.Header.Set("x-api-key", key)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != 501 {
			t.Fatalf("%s %q: %d %s", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var body struct {
				Success   *bool  `json:"success"`
				RequestID string `json:"request_id"`
				Error     struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Success == nil || *body.Success ||
				body.Error.Type == "" || body.RequestID != rec.Header().Get("x-request-id") {
				t.Fatalf("%s %q: not an error envelope: %s", method, target, rec.Body)
			}
		}
	})
}
