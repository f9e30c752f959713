package schemas

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/registry"
)

// liveDataKeys lists every data endpoint of the production registry that is
// not retired.
func liveDataKeys(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range registry.Default().Endpoints() {
		if e.Kind == registry.Data && !e.Retired() {
			out = append(out, e.Key())
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("registry has no live data endpoints")
	}
	return out
}

func TestEveryDataEndpointHasExactlyOneSchema(t *testing.T) {
	want := liveDataKeys(t)
	if got := Keys(); !slices.Equal(got, want) {
		missing, extra := diff(want, got), diff(got, want)
		t.Fatalf("schemas and live data endpoints differ:\nmissing schema: %v\nschema without live data endpoint: %v", missing, extra)
	}
	// The directory on disk holds nothing but those files: no file that
	// the embed pattern skips and no second spelling of a key.
	entries, err := os.ReadDir("data")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, de := range entries {
		files = append(files, de.Name())
	}
	var wantFiles []string
	for _, k := range want {
		wantFiles = append(wantFiles, FileName(k))
	}
	sort.Strings(files)
	sort.Strings(wantFiles)
	if !slices.Equal(files, wantFiles) {
		t.Fatalf("data/ holds unexpected files %v and lacks %v", diff(files, wantFiles), diff(wantFiles, files))
	}
	for _, e := range registry.Default().Endpoints() {
		if _, ok := For(e.Key()); ok != (e.Kind == registry.Data && !e.Retired()) {
			t.Errorf("For(%q) found=%v, kind %s retired=%v", e.Key(), ok, e.Kind, e.Retired())
		}
	}
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestFileNaming(t *testing.T) {
	cases := map[string]string{
		"marketplace_a/search":    "marketplace_a__search.json",
		"code_host/profile/repos": "code_host__profile__repos.json",
		"web/jobs/{id}":           "web__jobs__{id}.json",
		"monitors/{id}/runs":      "monitors__{id}__runs.json",
		"status":                  "status.json",
	}
	for key, file := range cases {
		if got := FileName(key); got != file {
			t.Errorf("FileName(%q) = %q, want %q", key, got, file)
		}
		if got, ok := keyOf(file); !ok || got != key {
			t.Errorf("keyOf(%q) = %q, %v, want %q", file, got, ok, key)
		}
	}
	if got, want := ID("web/jobs/{id}"), "https://meridian.example/schemas/web/jobs/%7Bid%7D.json"; got != want {
		t.Errorf("ID = %q, want %q", got, want)
	}
	// Every registered key, data or not, round-trips.
	for _, e := range registry.Default().Endpoints() {
		if e.Platform == "" {
			continue
		}
		if got, ok := keyOf(FileName(e.Key())); !ok || got != e.Key() {
			t.Errorf("%s does not round-trip through its file name (%q)", e.Key(), got)
		}
	}
}

func TestEverySchemaCompilesAndCarriesTheContract(t *testing.T) {
	for _, key := range Keys() {
		raw, _ := For(key)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for field, want := range map[string]any{
			"$schema":            Draft,
			"x-contract-version": ContractVersion,
			"$id":                ID(key),
			"type":               "object",
		} {
			if doc[field] != want {
				t.Errorf("%s: %s = %v, want %v", key, field, doc[field], want)
			}
		}
		for _, field := range []string{"title", "description"} {
			if s, _ := doc[field].(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s: %s is empty", key, field)
			}
		}
		if _, err := compile(key, raw); err != nil {
			t.Errorf("%s does not compile under draft 2020-12: %v", key, err)
		}
		if _, err := byKey[key].compiled(key); err != nil {
			t.Errorf("%s: cached compile: %v", key, err)
		}
	}
}

// TestConventions holds every schema to spec 2.4: documented fields are
// optional and nullable, and additional fields are never refused. The one
// exception is the rule spec 2.7 states for lodging_marketplace/locations.
func TestConventions(t *testing.T) {
	for _, key := range Keys() {
		raw, _ := For(key)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		walk(t, key, "", doc, key == "lodging_marketplace/locations")
	}
}

func walk(t *testing.T, key, at string, node map[string]any, lodging bool) {
	t.Helper()
	// An array says what its elements are, an empty schema where the spec
	// shows no element fields: OpenAPI linters and client generators need it.
	isArray := node["type"] == "array"
	if types, ok := node["type"].([]any); ok {
		isArray = slices.Contains(types, any("array"))
	}
	if _, ok := node["items"]; isArray && !ok {
		t.Errorf("%s%s: an array without items", key, at)
	}
	for kw, v := range node {
		switch kw {
		case "additionalProperties", "unevaluatedProperties":
			if b, ok := v.(bool); ok && !b {
				t.Errorf("%s%s: %s false refuses additional fields", key, at, kw)
			}
		case "required":
			if !(lodging && (at == "" || strings.Contains(at, "/anyOf/"))) {
				t.Errorf("%s%s: required %v; spec 2.4 makes every documented field optional", key, at, v)
			}
		}
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for name, p := range props {
			ps, _ := p.(map[string]any)
			here := at + "/properties/" + name
			exempt := lodging && (here == "/properties/items" || strings.Contains(at, "/anyOf/"))
			if types, ok := ps["type"].([]any); !exempt && (!ok || !slices.Contains(types, any("null"))) {
				t.Errorf("%s%s: type %v does not allow null", key, here, ps["type"])
			}
			walk(t, key, here, ps, lodging)
		}
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		walk(t, key, at+"/additionalProperties", ap, lodging)
	}
	if items, ok := node["items"].(map[string]any); ok {
		walk(t, key, at+"/items", items, lodging)
	}
	if branches, ok := node["anyOf"].([]any); ok {
		for i, b := range branches {
			bs, _ := b.(map[string]any)
			walk(t, key, at+"/anyOf/"+strconv.Itoa(i), bs, lodging)
		}
	}
}

// specShapes are the endpoints whose data spec 2.7 shows; every other
// schema is a shape Meridian chose and must say so.
var specShapes = map[string]bool{
	"marketplace_a/search": true, "marketplace_a/similar": true, "company_registry/search": true,
	"photo_social/post-stats": true, "retailer_a/search": true, "microblog_a/search": true,
	"bundle/creator-vetting": true, "microblog_b/search-posts": true, "microblog_b/profile": true,
	"web/social-profiles": true, "app_store_a/app-info": true, "craft_market/reviews": true,
	"marketplace_b/deals": true, "app_store_b/categories": true, "property_portal/search-sale": true,
	"social_a/search-people": true, "travel_booking/search-attractions": true, "travel_booking/hotel": true,
	"qa_site/question": true, "marketplace_b/shop": true, "shopping_comparison/product": true,
	"professional_network/search-people": true, "social_a/event": true, "social_a/events-search": true,
	"lodging_marketplace/locations": true,
}

func TestChosenShapesSaySo(t *testing.T) {
	for _, key := range Keys() {
		raw, _ := For(key)
		var doc struct{ Description string }
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.HasPrefix(doc.Description, "Shape chosen by Meridian: "), !specShapes[key]; got != want {
			t.Errorf("%s: description starts with \"Shape chosen by Meridian\" = %v, want %v", key, got, want)
		}
	}
	for key := range specShapes {
		if _, ok := For(key); !ok {
			t.Errorf("spec 2.7 shows %s, which has no schema", key)
		}
	}
}

// examples holds, for every schema, a minimal valid data object and one
// that breaks a stated type: testdata/examples/<schema file without
// .json>.valid.json and .invalid.json, one pair per schema.
func examples(t *testing.T) map[string]struct{ valid, invalid string } {
	t.Helper()
	out := map[string]struct{ valid, invalid string }{}
	files, err := filepath.Glob(filepath.Join("testdata", "examples", "*.valid.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".valid.json")
		valid, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		invalid, err := os.ReadFile(filepath.Join("testdata", "examples", base+".invalid.json"))
		if err != nil {
			t.Fatalf("%s has no invalid twin: %v", f, err)
		}
		key, ok := keyOf(base + ".json")
		if !ok {
			t.Fatalf("%s: not a schema file name", f)
		}
		out[key] = struct{ valid, invalid string }{string(valid), string(invalid)}
	}
	return out
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad example %s: %v", s, err)
	}
	return v
}

func TestExamples(t *testing.T) {
	examples := examples(t)
	for _, key := range Keys() {
		ex, ok := examples[key]
		if !ok {
			t.Errorf("%s: no examples; add a valid and an invalid one", key)
			continue
		}
		if err := Validate(key, decode(t, ex.valid)); err != nil {
			t.Errorf("%s: valid example refused: %v", key, err)
		}
		if err := Validate(key, decode(t, ex.invalid)); err == nil {
			t.Errorf("%s: invalid example accepted: %s", key, ex.invalid)
		}
		// Additional fields are accepted (spec 2.4).
		extra := decode(t, ex.valid).(map[string]any)
		extra["x_new_field"] = map[string]any{"any": []any{1.0, "two", nil}}
		if err := Validate(key, extra); err != nil {
			t.Errorf("%s: an additional field is refused: %v", key, err)
		}
		// Every documented field is optional, except lodging's items.
		err := Validate(key, map[string]any{})
		if want := key == "lodging_marketplace/locations"; (err != nil) != want {
			t.Errorf("%s: Validate({}) = %v", key, err)
		}
		// data is an object.
		if err := Validate(key, []any{}); err == nil {
			t.Errorf("%s: an array is accepted as data", key)
		}
	}
	for key := range examples {
		if _, ok := For(key); !ok {
			t.Errorf("examples for %s, which has no schema", key)
		}
	}
}

func TestLodgingLocationsFollowsTheSpec(t *testing.T) {
	const key = "lodging_marketplace/locations"
	raw, ok := For(key)
	if !ok {
		t.Fatal("no schema")
	}
	var doc struct {
		Required   []string
		Properties map[string]struct {
			Type  any
			Items struct {
				Type       any
				Properties map[string]struct{ Type []string }
				AnyOf      []struct {
					Required   []string
					Properties map[string]struct {
						Type      string
						MinLength int
					}
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.Required, []string{"items"}) {
		t.Errorf("required = %v, want [items]", doc.Required)
	}
	items := doc.Properties["items"]
	if items.Type != "array" || items.Items.Type != "object" {
		t.Errorf("items type %v of %v, want array of object", items.Type, items.Items.Type)
	}
	for field, typ := range map[string]string{"count": "number", "has_more": "boolean", "query": "string"} {
		if got, want := doc.Properties[field].Type, []any{typ, "null"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s type = %v, want %v", field, got, want)
		}
	}
	five := []string{"country_code", "display_name", "map_place_id", "id", "name"}
	if len(items.Items.Properties) != len(five) || len(items.Items.AnyOf) != len(five) {
		t.Fatalf("item declares %d fields and %d anyOf branches, want %d each", len(items.Items.Properties), len(items.Items.AnyOf), len(five))
	}
	for i, f := range five {
		if got := items.Items.Properties[f].Type; !slices.Equal(got, []string{"string", "null"}) {
			t.Errorf("item %s type = %v, want string or null", f, got)
		}
		b := items.Items.AnyOf[i]
		if p := b.Properties[f]; !slices.Equal(b.Required, []string{f}) || p.Type != "string" || p.MinLength != 1 || len(b.Properties) != 1 {
			t.Errorf("anyOf[%d] = %+v, want %s required as a non-empty string", i, b, f)
		}
	}

	cases := []struct {
		data  string
		valid bool
	}{
		{`{"items":[]}`, true},
		{`{"items":[{"id":"1"}]}`, true},
		{`{"items":[{"country_code":"PT"}]}`, true},
		{`{"items":[{"display_name":"Lisbon, Portugal"}]}`, true},
		{`{"items":[{"name":"Lisbon","id":null,"map_place_id":"","extra":{"a":1}}]}`, true},
		{`{"items":[{"id":"1"}],"count":null,"has_more":null,"query":null}`, true},
		{`{"items":[{"id":"1"}],"count":1,"has_more":false,"query":"Lisbon","_warnings":["x"]}`, true},
		{`{}`, false},
		{`{"items":null}`, false},
		{`{"items":{}}`, false},
		{`{"items":[{}]}`, false},
		{`{"items":[null]}`, false},
		{`{"items":["Lisbon"]}`, false},
		{`{"items":[{"extra":"Lisbon"}]}`, false},
		{`{"items":[{"country_code":null,"display_name":null,"map_place_id":null,"id":null,"name":null}]}`, false},
		{`{"items":[{"country_code":"","display_name":"","map_place_id":"","id":"","name":""}]}`, false},
		{`{"items":[{"id":"1"},{"name":""}]}`, false},
		{`{"items":[{"id":1}]}`, false},
		{`{"items":[{"id":"1","name":5}]}`, false},
		{`{"items":[{"id":"1"}],"count":"1"}`, false},
		{`{"items":[{"id":"1"}],"has_more":"yes"}`, false},
		{`{"items":[{"id":"1"}],"query":1}`, false},
	}
	for _, c := range cases {
		if err := Validate(key, decode(t, c.data)); (err == nil) != c.valid {
			t.Errorf("Validate(%s) = %v, want valid=%v", c.data, err, c.valid)
		}
	}
}

func TestAPI(t *testing.T) {
	if err := Validate("no_such/endpoint", map[string]any{}); !errors.Is(err, ErrUnknownEndpoint) {
		t.Errorf("unknown key: %v", err)
	}
	if _, ok := For("no_such/endpoint"); ok {
		t.Error("For found an unknown key")
	}
	keys := Keys()
	if !sort.StringsAreSorted(keys) {
		t.Error("Keys is not sorted")
	}
	keys[0] = "mutated"
	if Keys()[0] == "mutated" {
		t.Error("Keys shares its slice")
	}
	a, _ := For("marketplace_a/search")
	a[0] = 'X'
	if b, _ := For("marketplace_a/search"); b[0] != '{' {
		t.Error("For shares its bytes")
	}

	const key = "app_store_b/categories"
	// Raw JSON, typed Go values and json.Number are all accepted.
	if err := Validate(key, json.RawMessage(`{"items":[{"code":"6014"}],"count":1}`)); err != nil {
		t.Errorf("RawMessage: %v", err)
	}
	if err := Validate(key, []byte(`{"count":"1"}`)); err == nil {
		t.Error("[]byte: invalid data accepted")
	}
	type item struct {
		Code string `json:"code"`
	}
	typed := struct {
		Items []item `json:"items"`
		Count int    `json:"count"`
	}{[]item{{"6014"}}, 1}
	if err := Validate(key, typed); err != nil {
		t.Errorf("typed value: %v", err)
	}
	if err := Validate(key, map[string]any{"count": json.Number("1"), "items": []map[string]int{{"code": 1}}}); err == nil {
		t.Error("typed invalid value accepted")
	}
	if err := Validate(key, json.RawMessage(`{`)); err == nil {
		t.Error("malformed JSON accepted")
	}
}

func TestValidateConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, key := range Keys() {
				if err := Validate(key, map[string]any{"items": []any{map[string]any{"id": "1"}}}); err != nil {
					t.Errorf("%s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
}
