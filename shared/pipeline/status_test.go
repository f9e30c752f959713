package pipeline

import (
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

func TestStatusFromRecordedOutcomes(t *testing.T) {
	b := newBilled(t, 1000, nil, func(c *Config) { c.Outcomes = c.Store.(store.Outcomes) })
	r := b.call("/v1/status")
	d := r.body["data"].(map[string]any)
	if r.code != 200 || d["window_minutes"] != float64(15) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	for _, p := range d["platforms"].([]any) {
		if m := p.(map[string]any); m["state"] != "no_data" || m["requests"] != float64(0) || m["p50_ms"] != nil {
			t.Fatalf("nothing recorded yet: %v", m)
		}
	}
	// A known series through the pipeline on marketplace_a: 3 successes and
	// 1 upstream failure count; a validation refusal, a keyless call, a
	// sandbox call and an unrouted platform's 501 do not.
	for _, q := range []string{"a", "b", "c", "fail"} {
		b.call("/v1/marketplace_a/search?query=" + q)
	}
	b.call("/v1/marketplace_a/search?limit=1")
	b.do("GET", "/v1/marketplace_a/search?query=a")
	b.call("/sandbox/marketplace_a/search?query=a")
	b.call("/v1/company_registry/search?query=a")
	// Older outcomes have left the window.
	old := b.clock.Now().Add(-16 * time.Minute)
	if _, err := b.store.RecordUsage(t.Context(), []store.UsageRecord{{RequestID: "req_old", At: old, Outcome: &store.Outcome{Platform: "marketplace_a", Status: 502}}}, old); err != nil {
		t.Fatal(err)
	}
	d = b.call("/v1/status").body["data"].(map[string]any)
	var ma map[string]any
	for _, p := range d["platforms"].([]any) {
		if m := p.(map[string]any); m["platform"] == "marketplace_a" {
			ma = m
		}
	}
	if ma["requests"] != float64(4) || ma["errors"] != float64(1) || ma["error_rate"] != 0.25 || ma["state"] != "down" ||
		ma["p50_ms"] != float64(10) || ma["p95_ms"] != float64(10) {
		t.Errorf("marketplace_a: %v", ma)
	}
	for _, p := range d["platforms"].([]any) {
		if m := p.(map[string]any); m["platform"] == "company_registry" && m["requests"] != float64(0) {
			t.Errorf("a 501 is not the platform's health: %v", m)
		}
	}
}
