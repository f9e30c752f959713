package pipeline

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/registry"
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
	if n := h.get("/v1/utility/endpoints?method=POST").body["data"].(map[string]any)["count"]; n != float64(1) {
		t.Errorf("POST endpoints: %v", n)
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
		if e.HTTPMethod() == http.MethodPost {
			req := httptest.NewRequest("POST", "http://api.test"+ex.URL, strings.NewReader(string(ex.Body)))
			req.Header.Set("x-api-key", testKey)
			rec := httptest.NewRecorder()
			h.p.ServeHTTP(rec, req)
			if rec.Code != 200 || strings.Contains(rec.Body.String(), `"status":4`) {
				t.Errorf("%s: %s %s -> %d %s", e.Key(), ex.URL, ex.Body, rec.Code, rec.Body)
			}
			continue
		}
		r := h.get(ex.URL)
		if r.code == 400 || r.code == 422 || r.code == 404 {
			t.Errorf("%s: %s -> %d %s", e.Key(), ex.URL, r.code, r.raw)
		}
	}
}

func TestQuickstart(t *testing.T) {
	h := newHarness(t)
	d := h.get("/v1/utility/quickstart").body["data"].(map[string]any)
	ep := d["endpoint"].(map[string]any)
	if ep["credit_cost"] != float64(1) || d["request"] == nil || d["response"].(map[string]any)["credits_used"] != float64(1) {
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
	if servers := r.body["servers"].([]any); servers[0].(map[string]any)["url"] != "/" {
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
