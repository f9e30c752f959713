package openapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"sigs.k8s.io/yaml"

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
