package openapi

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"sigs.k8s.io/yaml"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
)

func load(t *testing.T, doc any) *openapi3.T {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("the document does not validate as OpenAPI: %v", err)
	}
	return loaded
}

func TestDocumentValidatesAndCoversTheRegistry(t *testing.T) {
	reg := registry.Default()
	doc := load(t, Document(reg, Options{BaseURL: "https://api.example.com"}))
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	for _, e := range reg.Live() {
		if e.Origin == registry.Derived {
			continue
		}
		item := doc.Paths.Find(e.Path())
		if item == nil {
			t.Errorf("%s has no path", e.Key())
			continue
		}
		op := item.GetOperation(e.HTTPMethod())
		if op == nil {
			t.Errorf("%s has no %s operation", e.Key(), e.HTTPMethod())
			continue
		}
		names := map[string]bool{}
		for _, p := range op.Parameters {
			names[p.Value.Name] = true
		}
		for _, p := range e.Accepted() {
			if !names[p.Name] {
				t.Errorf("%s lacks parameter %s", e.Key(), p.Name)
			}
		}
	}
	if doc.Paths.Find("/v1/microblog_b/search-tweets") != nil {
		t.Error("retired endpoints are not described")
	}
	if _, ok := doc.Components.SecuritySchemes["ApiKey"]; !ok {
		t.Error("security schemes")
	}
	errType := doc.Components.Schemas["ErrorType"].Value
	if len(errType.Enum) != 13 {
		t.Errorf("the error roster: %v", errType.Enum)
	}
}

func TestDataSchemasAreReferenced(t *testing.T) {
	schema := json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://x/y.json","type":"object","x-contract-version":"2026-09-22","properties":{"count":{"type":["number","null"]}}}`)
	doc := Document(registry.Default(), Options{BaseURL: "https://api.example.com", Schemas: func(key string) (json.RawMessage, bool) {
		return schema, key == "company_registry/search"
	}})
	loaded := load(t, doc)
	s, ok := loaded.Components.Schemas["Data_company_registry_search"]
	if !ok || s.Value.Properties["count"] == nil {
		t.Fatalf("data schema missing: %v", loaded.Components.Schemas)
	}
	raw, _ := json.Marshal(doc["paths"].(obj)["/v1/company_registry/search"])
	if !strings.Contains(string(raw), "#/components/schemas/Data_company_registry_search") {
		t.Errorf("the operation references its data schema: %s", raw)
	}
}

func TestYAMLIsTheSameDocument(t *testing.T) {
	doc := Document(registry.Default(), Options{BaseURL: "https://api.example.com"})
	js, _ := json.Marshal(doc)
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		t.Fatal(err)
	}
	back, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal(js, &a)
	_ = json.Unmarshal(back, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Error("YAML and JSON differ")
	}
}

func TestDocumentWithEveryPublishedSchemaValidates(t *testing.T) {
	doc := load(t, Document(registry.Default(), Options{BaseURL: "https://api.example.com", Schemas: schemas.For}))
	for _, key := range schemas.Keys() {
		raw, _ := schemas.For(key)
		if strings.Contains(string(raw), `"$ref"`) || strings.Contains(string(raw), `"$defs"`) {
			t.Errorf("%s uses $ref/$defs: dropping its $id in the document would break them", key)
		}
		e, _ := registry.Default().Endpoint(key)
		if _, ok := doc.Components.Schemas["Data_"+operationID(e)]; !ok {
			t.Errorf("%s: data schema not in the document", key)
		}
	}
}

// responsesOf resolves an operation's responses (components included) as
// plain JSON, keyed by status.
func responsesOf(t *testing.T, doc obj, path, method string) map[string]map[string]any {
	t.Helper()
	raw, _ := json.Marshal(doc)
	var plain map[string]any
	_ = json.Unmarshal(raw, &plain)
	shared := plain["components"].(map[string]any)["responses"].(map[string]any)
	op := plain["paths"].(map[string]any)[path].(map[string]any)[method].(map[string]any)
	out := map[string]map[string]any{}
	for status, r := range op["responses"].(map[string]any) {
		resp := r.(map[string]any)
		if ref, ok := resp["$ref"].(string); ok {
			resp = shared[strings.TrimPrefix(ref, "#/components/responses/")].(map[string]any)
		}
		out[status] = resp
	}
	return out
}

// narrowedTypes reads the error types an error response admits.
func narrowedTypes(resp map[string]any) []string {
	schema := resp["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	var types []string
	for _, part := range schema["allOf"].([]any) {
		p := part.(map[string]any)
		if props, ok := p["properties"].(map[string]any); ok {
			for _, t := range props["error"].(map[string]any)["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any) {
				types = append(types, t.(string))
			}
		}
	}
	return types
}

// Every operation documents its errors: at least one 4XX, each error
// status an error envelope whose types are ones the roster gives that
// status (spec 7), the statuses spec 7 gives a paid data call, and the
// headers of spec 4.9 where they apply.
func TestEveryOperationDocumentsItsErrors(t *testing.T) {
	reg := registry.Default()
	doc := Document(reg, Options{BaseURL: "/", Schemas: schemas.For})
	load(t, doc)
	statuses := map[string]map[int]bool{}
	for _, info := range envelope.Roster {
		statuses[string(info.Type)] = map[int]bool{}
		for _, s := range info.Statuses {
			statuses[string(info.Type)][s] = true
		}
	}
	for _, e := range reg.Live() {
		if e.Origin == registry.Derived {
			continue
		}
		responses := responsesOf(t, doc, e.Path(), strings.ToLower(e.HTTPMethod()))
		has4xx := false
		for status, resp := range responses {
			code, err := strconv.Atoi(status)
			if err != nil || code < 400 {
				continue
			}
			has4xx = has4xx || code < 500
			types := narrowedTypes(resp)
			if len(types) == 0 {
				t.Errorf("%s %s: no error types", e.Key(), status)
			}
			for _, typ := range types {
				if !statuses[typ][code] {
					t.Errorf("%s %s: %s is not answered with %d (spec 7)", e.Key(), status, typ, code)
				}
			}
			if _, ok := resp["headers"].(map[string]any)["x-request-id"]; !ok {
				t.Errorf("%s %s: no x-request-id header", e.Key(), status)
			}
			if _, ok := resp["headers"].(map[string]any)["retry-after"]; (code == 429 || code == 503) != ok {
				t.Errorf("%s %s: retry-after documented %v", e.Key(), status, ok)
			}
		}
		if !has4xx {
			t.Errorf("%s: no 4XX response", e.Key())
		}
		if _, ok := responses["default"]; !ok {
			t.Errorf("%s: no default error response", e.Key())
		}
		want := []string{"400", "401", "500"}
		if e.Kind == registry.Data {
			want = append(want, "404", "409", "422", "429", "501", "502", "503", "504")
			if e.Cost > 0 {
				want = append(want, "402")
			}
		}
		if e.Platform == "batch" {
			want = append(want, "413")
		}
		for _, status := range want {
			if _, ok := responses[status]; !ok {
				t.Errorf("%s: %s not documented", e.Key(), status)
			}
		}
		ok200 := responses["200"]["headers"].(map[string]any)
		if _, ok := ok200["x-fairuse-limit"]; ok != (e.FairUse > 0) {
			t.Errorf("%s: x-fairuse-limit documented %v, metered %v", e.Key(), ok, e.FairUse > 0)
		}
		if _, ok := ok200["x-ratelimit-remaining"]; ok != (e.Platform != "batch") {
			t.Errorf("%s: x-ratelimit-remaining documented %v", e.Key(), ok)
		}
	}
	// A metered endpoint's 429 also carries FAIR_USE_EXCEEDED; data
	// endpoints' 402 both payment refusals.
	r := responsesOf(t, doc, "/v1/web/social-profiles", "get")
	if got := strings.Join(narrowedTypes(r["429"]), ","); got != "RATE_LIMITED,FAIR_USE_EXCEEDED,UPSTREAM_ERROR" {
		t.Errorf("metered 429: %s", got)
	}
	if got := strings.Join(narrowedTypes(r["402"]), ","); got != "KEY_LIMIT_EXCEEDED,INSUFFICIENT_CREDITS" {
		t.Errorf("402: %s", got)
	}
	if got := strings.Join(narrowedTypes(responsesOf(t, doc, "/v1/utility/endpoint", "get")["404"]), ","); got != "RESOURCE_NOT_FOUND" {
		t.Errorf("utility/endpoint 404: %s", got)
	}
	if _, ok := responsesOf(t, doc, "/v1/credits/balance", "get")["404"]; ok {
		t.Error("credits/balance finds nothing by id: no 404")
	}
}

// Client generators need declared tags, items on every array, contact
// and license: the rules Spectral and Redocly hold the document to.
func TestTagsArraysContactAndLicense(t *testing.T) {
	doc := Document(registry.Default(), Options{BaseURL: "/", Schemas: schemas.For})
	raw, _ := json.Marshal(doc)
	var plain map[string]any
	_ = json.Unmarshal(raw, &plain)
	declared := map[string]bool{}
	for _, tag := range plain["tags"].([]any) {
		m := tag.(map[string]any)
		if m["description"] == "" {
			t.Errorf("tag %v has no description", m["name"])
		}
		declared[m["name"].(string)] = true
	}
	for path, item := range plain["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			for _, tag := range op.(map[string]any)["tags"].([]any) {
				if !declared[tag.(string)] {
					t.Errorf("%s %s: tag %v not declared", method, path, tag)
				}
			}
		}
	}
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			isArray := x["type"] == "array"
			if list, ok := x["type"].([]any); ok {
				for _, ty := range list {
					isArray = isArray || ty == "array"
				}
			}
			if _, ok := x["items"]; isArray && !ok {
				t.Errorf("%s: an array schema without items", at)
			}
			for k, child := range x {
				walk(child, at+"/"+k)
			}
		case []any:
			for i, child := range x {
				walk(child, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(plain, "#")
	info := plain["info"].(map[string]any)
	if c, _ := info["contact"].(map[string]any); c["url"] == "" || c["name"] == "" {
		t.Errorf("contact: %v", info["contact"])
	}
	if l, _ := info["license"].(map[string]any); l["name"] == "" {
		t.Errorf("license: %v", info["license"])
	}
	custom := Document(registry.Default(), Options{BaseURL: "/", Contact: &Contact{Name: "Ops", Email: "ops@meridian.test"}})
	if c := custom["info"].(obj)["contact"].(Contact); c.Email != "ops@meridian.test" {
		t.Errorf("the operator's contact: %+v", c)
	}
}
