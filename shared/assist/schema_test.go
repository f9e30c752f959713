package assist

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
)

// The data schemas of the AI endpoints describe the label fields with the
// values the code gives them.
func TestTheDataSchemasDescribeTheLabels(t *testing.T) {
	var categories, reasons, statuses []any
	for _, c := range Categories {
		categories = append(categories, c.Name)
	}
	for _, r := range Reasons {
		reasons = append(reasons, r.Name)
	}
	for _, s := range Statuses {
		statuses = append(statuses, s.Name)
	}
	enum := func(node map[string]any, names ...string) []any {
		for _, n := range names {
			node = node["properties"].(map[string]any)[n].(map[string]any)
		}
		e, _ := node["enum"].([]any)
		return slices.DeleteFunc(slices.Clone(e), func(v any) bool { return v == nil })
	}
	n := 0
	for _, e := range registry.Default().Endpoints() {
		if !e.AI {
			continue
		}
		n++
		raw, ok := schemas.For(e.Key())
		if !ok {
			t.Fatalf("%s has no schema", e.Key())
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		record := doc
		if e.Records.List != "" {
			record = doc["properties"].(map[string]any)[e.Records.List].(map[string]any)["items"].(map[string]any)
		}
		label := record["properties"].(map[string]any)["ai_label"].(map[string]any)
		if got := enum(label, "category"); !slices.Equal(got, categories) {
			t.Errorf("%s category enum %v, want %v", e.Key(), got, categories)
		}
		if got := enum(label, "reason"); !slices.Equal(got, reasons) {
			t.Errorf("%s reason enum %v, want %v", e.Key(), got, reasons)
		}
		if got := enum(doc, "_assist", "status"); !slices.Equal(got, statuses) {
			t.Errorf("%s _assist.status enum %v, want %v", e.Key(), got, statuses)
		}
		if e.Records.List != "" {
			if _, ok := record["properties"].(map[string]any)["ai_stub"]; !ok {
				t.Errorf("%s items have no ai_stub", e.Key())
			}
		}
	}
	if n != 6 {
		t.Errorf("%d AI endpoints, spec 4.6 marks 6", n)
	}
}
