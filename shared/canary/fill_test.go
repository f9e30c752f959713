package canary

import (
	"slices"
	"testing"

	"github.com/meridian-data/meridian/shared/schemas"
)

func TestMeasure(t *testing.T) {
	// code_host/profile/repos: a list; each item's declared fields count,
	// the mean over items is the rate, and a field filled in any item is
	// filled.
	repoFields := len(declaredShape("code_host/profile/repos").lists[itemsField].order)
	if repoFields < 5 {
		t.Fatalf("the repos schema declares %d item fields", repoFields)
	}
	doc := map[string]any{"count": 2.0, "items": []any{
		map[string]any{"id": "1", "name": "a"},
		map[string]any{"id": "2", "name": nil, "stars": 3.0},
	}}
	f := Measure("code_host/profile/repos", doc)
	want := (2.0/float64(repoFields) + 2.0/float64(repoFields)) / 2
	if f.Items == nil || *f.Items != 2 || f.Rate != want {
		t.Errorf("rate %v (want %v), items %v", f.Rate, want, f.Items)
	}
	for _, path := range []string{"count", "items[].id", "items[].name", "items[].stars"} {
		if !slices.Contains(f.Fields, path) {
			t.Errorf("%s not filled: %v", path, f.Fields)
		}
	}
	// A list that came back empty, or not at all, has lost everything.
	for _, d := range []map[string]any{{"items": []any{}, "count": 0.0}, {"count": 0.0}} {
		if f := Measure("code_host/profile/repos", d); f.Rate != 0 || f.Items == nil || *f.Items != 0 {
			t.Errorf("%v: rate %v, items %v", d, f.Rate, f.Items)
		}
	}

	// app_store_a/app-info: no list; nested objects count by their leaves,
	// a null object loses every leaf it declares; _warnings is a note.
	shape := declaredShape("app_store_a/app-info")
	devLeaves := len(shape.properties["developer"].order)
	if devLeaves == 0 {
		t.Fatal("the developer object declares no fields")
	}
	full := Measure("app_store_a/app-info", map[string]any{"id": "1", "developer": map[string]any{"name": "x"}, "_warnings": []any{"w"}})
	empty := Measure("app_store_a/app-info", map[string]any{"id": "1", "developer": nil})
	if !slices.Contains(full.Fields, "developer.name") || slices.Contains(full.Fields, "_warnings") || full.Items != nil {
		t.Errorf("fields %v", full.Fields)
	}
	if full.Rate <= empty.Rate || empty.Rate <= 0 {
		t.Errorf("rates %v and %v", full.Rate, empty.Rate)
	}
	// Every schema has a shape the fill can read.
	for _, key := range schemas.Keys() {
		if declaredShape(key) == nil {
			t.Errorf("%s: no shape", key)
		}
	}
}
