package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

func TestCatalogueListsEveryLiveEndpoint(t *testing.T) {
	h := newHarness(t)
	r := h.get("/v1/utility/endpoints")
	checkEnvelope(t, r)
	items := r.body["data"].(map[string]any)["items"].([]any)
	listed := map[string]map[string]any{}
	for _, it := range items {
		m := it.(map[string]any)
		listed[m["id"].(string)] = m
	}
	for _, e := range registry.Default().Live() {
		if e.Origin == registry.Derived || e.Platform == "" { // indexes are not catalogue entries
			continue
		}
		m, ok := listed[e.Key()]
		if !ok {
			t.Errorf("%s missing from the catalogue", e.Key())
			continue
		}
		for _, f := range []string{"id", "name", "credit_cost", "params", "description"} {
			if _, ok := m[f]; !ok {
				t.Errorf("%s lacks %s", e.Key(), f)
			}
		}
	}
	if _, ok := listed["microblog_b/search-tweets"]; ok {
		t.Error("retired endpoints are not listed")
	}
	if r.body["credits_used"] != float64(0) {
		t.Error("discovery is free")
	}
	filtered := h.get("/v1/utility/endpoints?platform=code_host&search=ISSUES").body["data"].(map[string]any)
	if filtered["count"] != float64(1) {
		t.Errorf("filters: %v", filtered)
	}
	posts := 0
	for _, e := range registry.Default().Live() {
		if e.HTTPMethod() == http.MethodPost {
			posts++
		}
	}
	if n := h.get("/v1/utility/endpoints?method=POST").body["data"].(map[string]any)["count"]; posts < 2 || n != float64(posts) {
		t.Errorf("POST endpoints: %v, want %d", n, posts)
	}
}

func TestEndpointDescription(t *testing.T) {
	h := newHarness(t)
	for _, target := range []string{
		"/v1/utility/endpoint?id=travel_booking/hotel",
		"/v1/utility/endpoint?url=https://api.example.com/v1/travel_booking/hotel/123?checkin=2026-12-01",
		"/v1/utility/endpoint?url=/sandbox/travel_booking/hotel",
	} {
		r := h.get(target)
		if r.code != 200 {
			t.Fatalf("%s: %d %s", target, r.code, r.raw)
		}
		d := r.body["data"].(map[string]any)
		if d["endpoint"].(map[string]any)["id"] != "travel_booking/hotel" {
			t.Errorf("%s: %v", target, d["endpoint"])
		}
		req := d["request"].(map[string]any)
		u := req["url"].(string)
		if !strings.HasPrefix(u, "http://api.test/v1/travel_booking/hotel?") || !strings.Contains(u, "checkin=") ||
			!strings.Contains(u, "checkout=") || !strings.Contains(req["curl"].(string), "x-api-key") {
			t.Errorf("ready-to-run request: %v", req)
		}
		// The example request itself passes validation.
		path := strings.TrimPrefix(u, "http://api.test")
		if got := h.get(path); got.code != http.StatusNotImplemented {
			t.Errorf("the example request is valid: %d %s", got.code, got.raw)
		}
	}
	for _, target := range []string{"/v1/utility/endpoint?id=nope/x", "/v1/utility/endpoint?url=/v1/nope", "/v1/utility/endpoint?id=microblog_b/search-tweets"} {
		if r := h.get(target); r.code != 404 || r.errorType() != "RESOURCE_NOT_FOUND" {
			t.Errorf("%s: %d %s", target, r.code, r.raw)
		}
	}
	if r := h.get("/v1/utility/endpoint"); r.code != 422 {
		t.Errorf("id or url: %d", r.code)
	}
}

// Every endpoint's ready-to-run request passes the endpoint's own validation.
func TestEveryExampleRequestValidates(t *testing.T) {
	h := newHarness(t)
	reg := registry.Default()
	for _, e := range reg.Live() {
		if e.Origin == registry.Derived {
			continue
		}
		ex := example(reg, e, "")
		if e.Platform == "batch" {
			req := httptest.NewRequest("POST", "http://api.test"+ex.URL, strings.NewReader(string(ex.Body)))
			req.Header.Set("x-api-key", testKey)
			rec := httptest.NewRecorder()
			h.p.ServeHTTP(rec, req)
			if rec.Code != 200 || strings.Contains(rec.Body.String(), `"status":4`) {
				t.Errorf("%s: %s %s -> %d %s", e.Key(), ex.URL, ex.Body, rec.Code, rec.Body)
			}
			continue
		}
		r := h.do(e.HTTPMethod(), ex.URL, "x-api-key", testKey)
		if r.code == 400 || r.code == 422 || r.code == 404 {
			t.Errorf("%s: %s -> %d %s", e.Key(), ex.URL, r.code, r.raw)
		}
	}
}

// The quickstart's rank: cheap, paid, simple, not limited. With no data
// handler nothing is available, so it ranks every registered endpoint.
func TestQuickstart(t *testing.T) {
	h := newHarness(t)
	d := h.get("/v1/utility/quickstart").body["data"].(map[string]any)
	ep := d["endpoint"].(map[string]any)
	if ep["credit_cost"] != float64(1) || d["request"] == nil || d["response"] == nil {
		t.Errorf("a low-cost endpoint with its request and envelope: %v", d)
	}
	d = h.get("/v1/utility/quickstart?platform=video_platform").body["data"].(map[string]any)
	if d["endpoint"].(map[string]any)["id"] != "video_platform/search" {
		t.Errorf("per platform: %v", d["endpoint"])
	}
	d = h.get("/v1/utility/quickstart?platform=marketplace_a").body["data"].(map[string]any)
	if d["endpoint"].(map[string]any)["id"] != "marketplace_a/search" {
		t.Errorf("a limited-capacity endpoint is a poor first call: %v", d["endpoint"])
	}
	if r := h.get("/v1/utility/quickstart?platform=nope"); r.code != 404 {
		t.Errorf("unknown platform: %d", r.code)
	}
}

// servedData are the data endpoints the partial deployment has handlers
// for: none of the cheapest (1 credit), a limited-capacity search, and a
// free endpoint.
var servedData = []string{"microblog_b/profile", "marketplace_a/search", "app_store_b/categories"}

// partialHarness serves servedData and the built-ins (discovery, batch and
// the indexes), with no store (no credits endpoints) and no outcomes (no
// status).
func partialHarness(t *testing.T) *harness {
	return newHarness(t, func(c *Config) {
		c.DataSchemas = schemas.For
		c.Handlers = map[string]Handler{}
		for _, key := range servedData {
			c.Handlers[key] = func(_ context.Context, c *Call) (any, *envelope.Error) {
				return map[string]any{"items": []any{}, "count": 0}, nil
			}
		}
	})
}

// wantAvailable is what partialHarness serves of the catalogue.
func wantAvailable(key string) bool {
	switch key {
	case "utility/endpoints", "utility/endpoint", "utility/quickstart", "utility/llms", "batch":
		return true
	}
	return slices.Contains(servedData, key)
}

func entriesOf(t *testing.T, v any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, it := range v.([]any) {
		m := it.(map[string]any)
		if _, ok := m["available"].(bool); !ok {
			t.Errorf("%v: available is not a boolean: %v", m["id"], m["available"])
		}
		out[m["id"].(string)] = m
	}
	return out
}

// Every catalogue view says, per entry, whether this deployment serves it
// (spec 9.6: registration does not promise availability), and each says
// what a call to it actually gets.
func TestCatalogueSaysWhatThisDeploymentServes(t *testing.T) {
	h := partialHarness(t)
	all := entriesOf(t, h.get("/v1/utility/endpoints").body["data"].(map[string]any)["items"])
	if len(all) == 0 {
		t.Fatal("empty catalogue")
	}
	for key, m := range all {
		if m["available"] != wantAvailable(key) {
			t.Errorf("endpoints: %s available %v, want %v", key, m["available"], wantAvailable(key))
		}
	}
	for _, key := range []string{"microblog_b/profile", "company_registry/search", "credits/balance", "status", "batch", "monitors/{id}/runs"} {
		d := h.get("/v1/utility/endpoint?id=" + url.QueryEscape(key)).body["data"].(map[string]any)
		if got := d["endpoint"].(map[string]any)["available"]; got != wantAvailable(key) {
			t.Errorf("endpoint %s: available %v", key, got)
		}
	}
	var doc struct {
		Endpoints []map[string]any `json:"endpoints"`
	}
	raw, _ := json.Marshal(h.get("/v1/utility/llms?format=json").body["data"])
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range doc.Endpoints {
		if v, ok := m["available"].(bool); !ok || v != wantAvailable(m["id"].(string)) {
			t.Errorf("llms json: %s available %v", m["id"], m["available"])
		}
	}
	if len(doc.Endpoints) != len(all) {
		t.Errorf("llms lists %d endpoints, the catalogue %d", len(doc.Endpoints), len(all))
	}
	index := entriesOf(t, h.get("/v1/marketplace_a").body["data"].(map[string]any)["items"])
	if index["marketplace_a/search"]["available"] != true || index["marketplace_a/similar"]["available"] != false {
		t.Errorf("platform index: %v", index)
	}
	// The flag agrees with what a call gets: 200 from a handler, 501 without.
	for _, key := range []string{"marketplace_a/search", "marketplace_a/similar"} {
		e, _ := registry.Default().Endpoint(key)
		r := h.get(example(registry.Default(), e, "").URL)
		if (r.code == 200) != wantAvailable(key) || (r.code != 200 && r.code != 501) {
			t.Errorf("%s: %d %s", key, r.code, r.raw)
		}
	}

	// A store serves the credits endpoints, outcomes the status.
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	withStore := newHarness(t, func(c *Config) { c.Store, c.Outcomes = s, s })
	got := entriesOf(t, withStore.get("/v1/utility/endpoints?platform=credits").body["data"].(map[string]any)["items"])
	if got["credits/balance"]["available"] != true || got["credits/transactions"]["available"] != true {
		t.Errorf("credits with a store: %v", got)
	}
	got = entriesOf(t, withStore.get("/v1/utility/endpoints?platform=status").body["data"].(map[string]any)["items"])
	if got["status"]["available"] != true {
		t.Errorf("status with outcomes: %v", got)
	}
}

// An upstream route makes its endpoint available only when it is eligible
// (its required secret configured).
func TestAvailabilityFollowsEligibleRoutes(t *testing.T) {
	srv := replay.New()
	var fx replay.Fixture
	fx.Match.Path, fx.Default = "/search", true
	fx.Response.Status, fx.Response.Body = 200, json.RawMessage(`{"items":[{"number":"00000006"}]}`)
	if err := srv.Add("open", "open-default", fx); err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	runner := upstream.NewRunner([]*upstream.Provider{
		{Name: "open", BaseURL: base + "/open", Endpoints: map[string]upstream.Adapter{"company_registry/search": registerAdapter}},
		{Name: "keyed", BaseURL: base + "/keyed", Secrets: []upstream.Secret{{Name: "MERIDIAN_TEST_KEY", Required: true}},
			Endpoints: map[string]upstream.Adapter{"video_platform/search": registerAdapter}},
	}, upstream.Settings{Options: upstreamTestOptions})
	h := newHarness(t, func(c *Config) { c.Upstream = runner })
	all := entriesOf(t, h.get("/v1/utility/endpoints").body["data"].(map[string]any)["items"])
	if all["company_registry/search"]["available"] != true || all["video_platform/search"]["available"] != false {
		t.Errorf("eligible route available, ineligible not: %v %v", all["company_registry/search"], all["video_platform/search"])
	}
	d := h.get("/v1/utility/quickstart").body["data"].(map[string]any)
	req := d["request"].(map[string]any)
	if d["available"] != true || d["endpoint"].(map[string]any)["id"] != "company_registry/search" {
		t.Fatalf("quickstart: %v", d)
	}
	if r := h.get(strings.TrimPrefix(req["url"].(string), "http://api.test")); r.code != 200 {
		t.Errorf("the quickstart request: %d %s", r.code, r.raw)
	}
}

func TestCatalogueAvailableFilter(t *testing.T) {
	h := partialHarness(t)
	total := h.get("/v1/utility/endpoints").body["data"].(map[string]any)["count"].(float64)
	counts := map[bool]float64{}
	for _, flag := range []string{"true", "1", "false", "0"} {
		want := flag == "true" || flag == "1"
		r := h.get("/v1/utility/endpoints?available=" + flag)
		checkEnvelope(t, r)
		d := r.body["data"].(map[string]any)
		for key, m := range entriesOf(t, d["items"]) {
			if m["available"] != want || wantAvailable(key) != want {
				t.Errorf("available=%s lists %s (available %v)", flag, key, m["available"])
			}
		}
		counts[want] = d["count"].(float64)
	}
	if counts[true] != float64(len(servedData)+5) || counts[true]+counts[false] != total {
		t.Errorf("available %v + unavailable %v of %v", counts[true], counts[false], total)
	}
	d := h.get("/v1/utility/endpoints?available=true&platform=marketplace_a").body["data"].(map[string]any)
	if d["count"] != float64(1) {
		t.Errorf("with platform: %v", d)
	}
	if r := h.get("/v1/utility/endpoints?available=maybe"); r.code != 422 {
		t.Errorf("not a flag: %d %s", r.code, r.raw)
	}
}

// The quickstart passes over cheaper endpoints this deployment cannot
// serve, and its request really answers.
func TestQuickstartPicksAnAvailableEndpoint(t *testing.T) {
	h := partialHarness(t)
	for target, want := range map[string]string{
		"/v1/utility/quickstart":                        "microblog_b/profile",
		"/v1/utility/quickstart?platform=marketplace_a": "marketplace_a/search",
	} {
		r := h.get(target)
		checkEnvelope(t, r)
		d := r.body["data"].(map[string]any)
		ep := d["endpoint"].(map[string]any)
		if d["available"] != true || ep["id"] != want || ep["available"] != true || d["message"] != nil || d["next"] == nil {
			t.Errorf("%s: %v", target, d)
			continue
		}
		e, _ := registry.Default().Endpoint(want)
		resp := d["response"].(map[string]any)
		if resp["credits_used"] != float64(e.Cost) || resp["endpoint"] != e.Path() || resp["synthetic"] != nil {
			t.Errorf("%s: response %v", target, resp)
		}
		u := d["request"].(map[string]any)["url"].(string)
		if !strings.HasPrefix(u, "http://api.test/v1/"+want) {
			t.Errorf("%s: request %s", target, u)
		}
		if got := h.get(strings.TrimPrefix(u, "http://api.test")); got.code != 200 || got.body["platform"] != e.Platform {
			t.Errorf("%s: the request answers %d %s", target, got.code, got.raw)
		}
	}
}

// checkSandboxQuickstart: nothing live to call, so the cheapest
// registered endpoint is offered through its free sandbox twin, which
// answers as written, with a message for the operator that names no
// provider.
func checkSandboxQuickstart(t *testing.T, h *harness, target, want string) {
	t.Helper()
	r := h.get(target)
	checkEnvelope(t, r)
	if r.code != 200 {
		t.Fatalf("%s: %d %s", target, r.code, r.raw)
	}
	d := r.body["data"].(map[string]any)
	ep := d["endpoint"].(map[string]any)
	if d["available"] != false || ep["available"] != false || ep["id"] != want {
		t.Fatalf("%s: %v", target, d)
	}
	e, _ := registry.Default().Endpoint(want)
	req := d["request"].(map[string]any)
	u := req["url"].(string)
	if !strings.HasPrefix(u, "http://api.test"+e.SandboxPath()+"?") || !strings.Contains(req["curl"].(string), "/sandbox/") {
		t.Errorf("%s: request %v", target, req)
	}
	got := h.get(strings.TrimPrefix(u, "http://api.test"))
	if got.code != 200 || got.body["synthetic"] != true || got.body["credits_used"] != float64(0) {
		t.Errorf("%s: the sandbox request answers %d %.300s", target, got.code, got.raw)
	}
	resp := d["response"].(map[string]any)
	if resp["endpoint"] != e.SandboxPath() || resp["credits_used"] != float64(0) || resp["synthetic"] != true {
		t.Errorf("%s: response %v", target, resp)
	}
	msg, _ := d["message"].(string)
	for _, want := range []string{"No live data source is configured", "in this deployment", "Upstream sources", "MERIDIAN_UPSTREAM=replay", "credentials"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: message lacks %q: %s", target, want, msg)
		}
	}
	for _, p := range adapters.All() {
		if strings.Contains(strings.ToLower(r.raw), strings.ToLower(p.Name)) {
			t.Errorf("%s: the answer names the provider %s: %s", target, p.Name, msg)
		}
	}
}

func TestQuickstartWithNothingAvailable(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DataSchemas = schemas.For })
	checkSandboxQuickstart(t, h, "/v1/utility/quickstart", "company_registry/search")
	checkSandboxQuickstart(t, h, "/v1/utility/quickstart?platform=marketplace_a", "marketplace_a/search")
	if r := h.get("/v1/utility/quickstart?platform=nope"); r.code != 404 || r.errorType() != "RESOURCE_NOT_FOUND" {
		t.Errorf("unknown platform: %d %s", r.code, r.raw)
	}
}

func TestQuickstartOnAPlatformWithNothingAvailable(t *testing.T) {
	h := partialHarness(t)
	checkSandboxQuickstart(t, h, "/v1/utility/quickstart?platform=company_registry", "company_registry/search")
	msg := h.get("/v1/utility/quickstart?platform=company_registry").body["data"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "for company_registry") || !strings.Contains(msg, "Without platform") {
		t.Errorf("the message says the rest of the deployment serves something: %s", msg)
	}
	if r := h.get("/v1/utility/quickstart?platform=nope"); r.code != 404 {
		t.Errorf("unknown platform: %d", r.code)
	}
}

// The batch example's one item is the quickstart's pick: an endpoint this
// deployment serves, so the example runs and its item succeeds.
func TestBatchExampleCallsAnAvailableEndpoint(t *testing.T) {
	h := partialHarness(t)
	req := h.get("/v1/utility/endpoint?id=batch").body["data"].(map[string]any)["request"].(map[string]any)
	var body struct {
		Requests []struct {
			Platform string `json:"platform"`
			Endpoint string `json:"endpoint"`
		} `json:"requests"`
	}
	raw := req["body"]
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &body); err != nil || len(body.Requests) != 1 {
		t.Fatalf("batch example body %v: %v", raw, err)
	}
	if key := body.Requests[0].Platform + "/" + body.Requests[0].Endpoint; !wantAvailable(key) {
		t.Errorf("the batch example calls %s, which this deployment does not serve", key)
	}
	post := httptest.NewRequest("POST", req["url"].(string), strings.NewReader(string(b)))
	post.Header.Set("x-api-key", testKey)
	post.Header.Set("content-type", "application/json")
	rec := httptest.NewRecorder()
	h.p.ServeHTTP(rec, post)
	var wrapper struct {
		Succeeded int `json:"succeeded"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &wrapper); rec.Code != 200 || err != nil || wrapper.Succeeded != 1 {
		t.Errorf("the batch example: %d %s", rec.Code, rec.Body)
	}
}

// The markdown says up front how many endpoints this deployment serves and
// marks each one it does not, pointing data endpoints at the sandbox.
func TestLLMsMarksUnavailableEndpoints(t *testing.T) {
	h := partialHarness(t)
	all := h.get("/v1/utility/endpoints").body["data"].(map[string]any)["count"].(float64)
	md := h.get("/v1/utility/llms").raw
	top := md[:strings.Index(md, "## Envelopes")]
	want := "Available in this deployment: " + strconv.Itoa(len(servedData)+5) + " of " + strconv.Itoa(int(all)) + " endpoints below; the others (marked) answer 501"
	if !strings.Contains(top, want) {
		t.Errorf("the top lacks %q:\n%s", want, top)
	}
	for _, want := range []string{
		"### GET /v1/company_registry/search (1 credit) — not available in this deployment\n\nNot available in this deployment (no live source is configured; /v1 answers 501 `ENDPOINT_NOT_AVAILABLE`): free synthetic data at `/sandbox/company_registry/search`",
		"### GET /v1/credits/balance (0 credits) — not available in this deployment\n\nNot available in this deployment: answers 501",
		"### GET /v1/microblog_b/profile (2 credits)\n\n",
		"### POST /v1/batch (0 credits)\n\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if n := strings.Count(md, "— not available in this deployment"); float64(n) != all-float64(len(servedData)+5) {
		t.Errorf("%d endpoints marked unavailable", n)
	}
	qa := newHarness(t, func(c *Config) {
		c.Handlers = map[string]Handler{}
		c.Handlers["qa_site/question"] = func(context.Context, *Call) (any, *envelope.Error) { return map[string]any{}, nil }
	}).get("/v1/utility/llms?platform=qa_site").raw
	if !strings.Contains(qa, "Available in this deployment: 1 of 1 endpoints below\n") || strings.Contains(qa, "not available") {
		t.Errorf("a platform served in full: %s", qa)
	}
}

func TestLLMsCatalogue(t *testing.T) {
	h := newHarness(t)
	r := h.get("/v1/utility/llms")
	if r.code != 200 || !strings.HasPrefix(r.header.Get("content-type"), "text/markdown") || r.header.Get("x-request-id") == "" {
		t.Fatalf("%d %v", r.code, r.header)
	}
	for _, want := range []string{"http://api.test/v1", "x-api-key", "error.type", "KEY_REVOKED", "INTERNAL_ERROR", "### GET /v1/company_registry/search (1 credit)", "### GET /v1/marketplace_a/search (3 credits)", "`limit` (integer, min 1 max 100", "`query` (string, required)"} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	for _, e := range registry.Default().Live() {
		if e.Origin != registry.Derived && e.Platform != "" && !strings.Contains(r.raw, " /v1/"+e.Key()+" (") {
			t.Errorf("markdown lacks %s", e.Key())
		}
	}
	r = h.get("/v1/utility/llms?format=json&platform=qa_site")
	var doc struct {
		BaseURL    string           `json:"base_url"`
		ErrorTypes []map[string]any `json:"error_types"`
		Endpoints  []map[string]any `json:"endpoints"`
	}
	raw, _ := json.Marshal(r.body["data"])
	if err := json.Unmarshal(raw, &doc); err != nil || doc.BaseURL != "http://api.test/v1" || len(doc.ErrorTypes) != 13 || len(doc.Endpoints) != 1 {
		t.Errorf("json: %v %s", err, raw)
	}
}

func TestOpenAPIIsServed(t *testing.T) {
	h := newHarness(t)
	r := h.do("GET", "/openapi.json")
	if r.code != 200 || r.header.Get("content-type") != "application/json" || r.body["openapi"] != "3.1.0" {
		t.Fatalf("%d %v %.200s", r.code, r.header, r.raw)
	}
	// The deployment's own address, as the llms catalogue names it: the
	// code samples run as written.
	if servers := r.body["servers"].([]any); servers[0].(map[string]any)["url"] != "http://api.test" {
		t.Errorf("servers: %v", servers)
	}
	y := h.do("GET", "/openapi.yaml")
	if y.code != 200 || y.header.Get("content-type") != "application/yaml" || !strings.Contains(y.raw, "openapi: 3.1.0") {
		t.Errorf("yaml: %d %v", y.code, y.header)
	}
	if r := h.do("POST", "/openapi.json"); r.code != 404 {
		t.Errorf("POST: %d", r.code)
	}
}
