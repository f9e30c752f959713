package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
)

// Every data endpoint's sandbox answer is free, marked synthetic, clearly
// fake and valid against the endpoint's published data schema.
func TestSandboxDataValidatesAgainstEverySchema(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DataSchemas = schemas.For })
	reg := registry.Default()
	for _, e := range reg.Live() {
		if e.Kind != registry.Data {
			continue
		}
		ex := example(reg, e, "")
		target := "/sandbox" + strings.TrimPrefix(ex.URL, "/v1")
		r := h.get(target)
		checkEnvelope(t, r)
		if r.code != 200 || r.body["synthetic"] != true || r.body["degraded"] != false || r.body["credits_used"] != float64(0) ||
			r.body["endpoint"] != e.SandboxPath() {
			t.Errorf("%s: %d %.300s", target, r.code, r.raw)
			continue
		}
		if err := schemas.Validate(e.Key(), r.body["data"]); err != nil {
			t.Errorf("%s: synthetic data does not validate: %v", e.Key(), err)
		}
		data := r.body["data"].(map[string]any)
		if items, ok := data["items"].([]any); ok {
			if n, ok := data["count"].(float64); ok && int(n) != len(items) {
				t.Errorf("%s: count %v for %d items", e.Key(), n, len(items))
			}
			for _, it := range items {
				if m, ok := it.(map[string]any); ok && m["platform"] != nil && m["platform"] != e.Platform {
					t.Errorf("%s: item platform %v", e.Key(), m["platform"])
				}
			}
		}
		raw, _ := json.Marshal(r.body["data"])
		if strings.Contains(string(raw), "http") && !strings.Contains(string(raw), "https://example.com/sandbox/") {
			t.Errorf("%s: a URL that is not obviously fake: %s", e.Key(), raw)
		}
		if again := h.get(target); again.raw[strings.Index(again.raw, `"data"`):strings.Index(again.raw, `"credits_used"`)] !=
			r.raw[strings.Index(r.raw, `"data"`):strings.Index(r.raw, `"credits_used"`)] {
			t.Errorf("%s: the same request gives the same data", e.Key())
		}
	}
}

func TestSandboxKeepsV1Validation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DataSchemas = schemas.For })
	if r := h.get("/sandbox/company_registry/search?qery=a"); r.code != 400 {
		t.Errorf("undeclared parameter: %d", r.code)
	}
	if r := h.get("/sandbox/company_registry/search?query=a&limit=0"); r.code != 422 {
		t.Errorf("out of range: %d", r.code)
	}
	if r := h.do("GET", "/sandbox/company_registry/search?query=a"); r.code != 401 {
		t.Errorf("a key is required: %d", r.code)
	}
	if r := h.get("/sandbox/credits/balance"); r.code != 404 || r.details()["reason"] != "not_in_sandbox" {
		t.Errorf("service endpoints are not in the sandbox: %d %s", r.code, r.raw)
	}
	a := h.get("/sandbox/company_registry/search?query=" + url.QueryEscape("acme"))
	b := h.get("/sandbox/company_registry/search?query=other")
	if a.code != 200 || b.code != 200 || a.raw[strings.Index(a.raw, `"data"`):strings.Index(a.raw, `"credits_used"`)] == b.raw[strings.Index(b.raw, `"data"`):strings.Index(b.raw, `"credits_used"`)] {
		t.Error("different requests give different synthetic data")
	}
	if v1 := h.get("/v1/company_registry/search?query=acme"); v1.code != 501 || v1.body["synthetic"] != nil {
		t.Error("/v1 never falls back to the sandbox")
	}
}

// The sandbox memo generates each seed's data once, keeps no failure and
// stays within its bound.
func TestSandboxMemo(t *testing.T) {
	var m sandboxMemo
	calls := 0
	gen := func(seed string) (json.RawMessage, error) {
		calls++
		if seed == "bad" {
			return nil, errors.New("no schema")
		}
		return json.RawMessage(`{"seed":"` + seed + `"}`), nil
	}
	for i := 0; i < 3; i++ {
		if data, err := m.get("a", gen); err != nil || string(data) != `{"seed":"a"}` {
			t.Fatalf("%s %v", data, err)
		}
	}
	if calls != 1 {
		t.Fatalf("one seed generated %d times", calls)
	}
	for i := 0; i < 2; i++ {
		if _, err := m.get("bad", gen); err == nil {
			t.Fatal("a failed generation was answered")
		}
	}
	if calls != 3 {
		t.Fatalf("a failed generation was remembered (%d calls)", calls)
	}
	for i := 0; i < 2*maxSandboxMemo; i++ {
		if _, err := m.get(fmt.Sprint(i), gen); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.m) > maxSandboxMemo {
		t.Fatalf("%d entries kept, bound %d", len(m.m), maxSandboxMemo)
	}
}
