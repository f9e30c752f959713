package sandbox

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The schema is decoded once and shared; generated data never aliases it,
// so changing one answer (as settle does) changes neither the schema nor
// the next answer, and the same seed still gives the same data.
func TestGenerateSharesNothingWithTheSchema(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"meta":{"const":{"platform":"x","tags":["a"]}},
		"kind":{"enum":[{"name":"one"}]},
		"platform":{"type":"string"},
		"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"}}}},
		"count":{"type":"integer"}}}`)
	first, err := Generate(schema, "seed", "demo")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Generate(schema, "seed", "demo")
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("not deterministic:\n%v\n%v", first, again)
	}
	m := first.(map[string]any)
	if m["platform"] != "demo" || m["count"] != float64(2) {
		t.Errorf("not settled: %v", m)
	}
	if meta := m["meta"].(map[string]any); meta["platform"] != "demo" {
		t.Errorf("const object not settled: %v", meta)
	}
	m["meta"].(map[string]any)["tags"].([]any)[0] = "changed"
	m["kind"].(map[string]any)["name"] = "changed"
	third, _ := Generate(schema, "seed", "demo")
	if !reflect.DeepEqual(again, third) {
		t.Errorf("an answer changed the schema:\n%v\n%v", again, third)
	}
	s, _ := parse(schema)
	if meta := s["properties"].(map[string]any)["meta"].(map[string]any)["const"].(map[string]any); meta["platform"] != "x" {
		t.Errorf("settling changed the schema's const: %v", meta)
	}
}
