// Package schemas publishes the JSON Schema (draft 2020-12) of the data
// object of every registered data endpoint (spec 2.4: "each success body
// validates against a published JSON Schema for response.data").
//
// Each schema is one file under data/, embedded at build time. The file of
// the endpoint whose key (registry Endpoint.Key, "platform/id") is K is named
//
//	<platform>__<id with every "/" replaced by "__">.json
//
// so marketplace_a/search is data/marketplace_a__search.json,
// code_host/profile/repos is data/code_host__profile__repos.json and a path
// identifier keeps its braces: web/jobs/{id} would be
// data/web__jobs__{id}.json. The mapping is reversible because registry
// route words never contain "_" (they match [a-z][a-z-]*) and the first
// "__" ends the platform segment; FileName and the tests hold it to that.
//
// Every schema carries "$schema" (draft 2020-12), "x-contract-version"
// (ContractVersion), a stable "$id" under IDBase, "title", "description" and
// "type": "object". Following spec 2.4 every documented field is optional
// and nullable, and additional fields are allowed everywhere. Shapes the
// spec does not show say so in their description ("Shape chosen by
// Meridian: ...").
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Draft is the JSON Schema dialect every schema declares in "$schema".
const Draft = "https://json-schema.org/draft/2020-12/schema"

// ContractVersion is the "x-contract-version" every schema carries (spec 9.2).
const ContractVersion = "2026-09-22"

// IDBase prefixes every schema's "$id": IDBase + "<platform>/<id>.json".
const IDBase = "https://meridian.example/schemas/"

// ErrUnknownEndpoint is returned by Validate for a key without a schema.
var ErrUnknownEndpoint = errors.New("schemas: no schema for endpoint")

//go:embed data/*.json
var files embed.FS

type entry struct {
	raw []byte

	once   sync.Once
	schema *jsonschema.Schema
	err    error
}

var (
	byKey = map[string]*entry{}
	keys  []string
)

func init() {
	names, err := fs.Glob(files, "data/*.json")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		base := path.Base(name)
		key, ok := keyOf(base)
		if !ok || FileName(key) != base {
			panic(fmt.Sprintf("schemas: %s does not follow the file naming", name))
		}
		raw, err := files.ReadFile(name)
		if err != nil {
			panic(err)
		}
		byKey[key] = &entry{raw: raw}
		keys = append(keys, key)
	}
	sort.Strings(keys)
}

// FileName is the name, inside data/, of the schema file of endpointKey.
func FileName(endpointKey string) string {
	platform, id, _ := strings.Cut(endpointKey, "/")
	if id == "" {
		return platform + ".json"
	}
	return platform + "__" + strings.ReplaceAll(id, "/", "__") + ".json"
}

// keyOf reverses FileName.
func keyOf(file string) (string, bool) {
	stem, ok := strings.CutSuffix(file, ".json")
	if !ok || stem == "" {
		return "", false
	}
	platform, id, found := strings.Cut(stem, "__")
	if !found {
		return platform, true
	}
	return platform + "/" + strings.ReplaceAll(id, "__", "/"), true
}

// ID is the "$id" the schema of endpointKey carries: each path segment is
// escaped, so a {id} segment becomes %7Bid%7D.
func ID(endpointKey string) string {
	segs := strings.Split(endpointKey, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return IDBase + strings.Join(segs, "/") + ".json"
}

// For returns the schema of the data object of endpointKey ("platform/id"),
// as published. The caller owns the returned bytes.
func For(endpointKey string) (json.RawMessage, bool) {
	e, ok := byKey[endpointKey]
	if !ok {
		return nil, false
	}
	return json.RawMessage(bytes.Clone(e.raw)), true
}

// Keys lists the endpoint keys that have a schema, sorted.
func Keys() []string { return append([]string(nil), keys...) }

// Validate checks a decoded JSON value (map[string]any, []any, string,
// float64 or json.Number, bool, nil, as encoding/json produces) against the
// schema of endpointKey. json.RawMessage and []byte are decoded first; any
// other Go value is converted through its JSON encoding. Each schema is
// compiled once, on first use.
func Validate(endpointKey string, data any) error {
	e, ok := byKey[endpointKey]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownEndpoint, endpointKey)
	}
	sch, err := e.compiled(endpointKey)
	if err != nil {
		return err
	}
	v, err := instance(data)
	if err != nil {
		return fmt.Errorf("schemas: %s: %w", endpointKey, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("schemas: %s: %w", endpointKey, err)
	}
	return nil
}

func (e *entry) compiled(key string) (*jsonschema.Schema, error) {
	e.once.Do(func() {
		e.schema, e.err = compile(key, e.raw)
	})
	return e.schema, e.err
}

// compile compiles one schema document under draft 2020-12; the compiler
// checks it against the draft's meta-schema. Nothing is fetched: the
// document is added as a resource and the meta-schema is built in.
func compile(key string, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", key, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	loc := ID(key)
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", key, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", key, err)
	}
	return sch, nil
}

// instance returns data as a value the validator understands.
func instance(data any) (any, error) {
	switch d := data.(type) {
	case json.RawMessage:
		return jsonschema.UnmarshalJSON(bytes.NewReader(d))
	case []byte:
		return jsonschema.UnmarshalJSON(bytes.NewReader(d))
	}
	if plain(data) {
		return data, nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// plain reports whether v is made only of the types a JSON decoder produces.
func plain(v any) bool {
	switch v := v.(type) {
	case nil, bool, string, float64, json.Number:
		return true
	case []any:
		for _, x := range v {
			if !plain(x) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, x := range v {
			if !plain(x) {
				return false
			}
		}
		return true
	}
	return false
}
