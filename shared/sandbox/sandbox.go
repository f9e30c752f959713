// Package sandbox makes the free synthetic data of /sandbox (spec 1):
// deterministic per request, shaped by the endpoint's published data
// schema, and obviously not real (example.com URLs, labelled names).
package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Generate returns synthetic data for a JSON Schema (draft 2020-12 subset:
// type, properties, items, anyOf/oneOf/allOf, enum, const, format,
// minimum/maximum). seed makes it deterministic per request. Fields named
// platform carry the platform's id, and count is the number of items, so
// the data agrees with itself as real data does.
func Generate(schema json.RawMessage, seed, platform string) (any, error) {
	s, err := parse(schema)
	if err != nil {
		return nil, err
	}
	g := &gen{seed: seed}
	data := g.value(s, "data", 0)
	settle(data, platform)
	return data, nil
}

// parsed holds each schema decoded once (there is one per data endpoint):
// decoding it was most of a sandbox call's work. Generation only reads it;
// values it hands out (const, enum) are copies.
var parsed sync.Map // schema text -> map[string]any

func parse(schema json.RawMessage) (map[string]any, error) {
	if s, ok := parsed.Load(string(schema)); ok {
		return s.(map[string]any), nil
	}
	var s map[string]any
	if err := json.Unmarshal(schema, &s); err != nil {
		return nil, err
	}
	parsed.Store(string(schema), s)
	return s, nil
}

// fresh is a deep copy of a JSON value taken from a schema, so settling
// the data never changes the schema.
func fresh(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = fresh(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = fresh(x)
		}
		return out
	}
	return v
}

// settle makes generated values consistent: platform fields name the
// platform, and a count beside items counts them.
func settle(v any, platform string) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "platform" {
				if _, ok := x.(string); ok {
					t[k] = platform
				}
			}
			settle(x, platform)
		}
		if items, ok := t["items"].([]any); ok {
			if _, ok := t["count"].(float64); ok {
				t["count"] = float64(len(items))
			}
		}
	case []any:
		for _, x := range t {
			settle(x, platform)
		}
	}
}

type gen struct {
	seed string
	n    int
}

// next is a deterministic number for the i-th generated value.
func (g *gen) next(path string) uint64 {
	g.n++
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%d", g.seed, path, g.n)))
	return binary.BigEndian.Uint64(sum[:8])
}

func (g *gen) value(s map[string]any, name string, depth int) any {
	if c, ok := s["const"]; ok {
		return fresh(c)
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return fresh(e[int(g.next(name)%uint64(len(e)))])
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			return g.value(merge(s, alts[0].(map[string]any), k), name, depth)
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		merged := map[string]any{}
		for k, v := range s {
			if k != "allOf" {
				merged[k] = v
			}
		}
		for _, a := range all {
			merged = merge(merged, a.(map[string]any), "")
		}
		return g.value(merged, name, depth)
	}
	switch typeOf(s) {
	case "object":
		return g.object(s, name, depth)
	case "array":
		if depth > 4 {
			return []any{}
		}
		item, _ := s["items"].(map[string]any)
		if item == nil {
			item = map[string]any{"type": "string"}
		}
		return []any{g.value(item, name, depth+1), g.value(item, name, depth+1)}
	case "number", "integer":
		lo, hi := 1.0, 500.0
		if v, ok := s["minimum"].(float64); ok {
			lo = v
		}
		if v, ok := s["maximum"].(float64); ok {
			hi = v
		}
		if hi < lo {
			hi = lo
		}
		return lo + float64(g.next(name)%uint64(hi-lo+1))
	case "boolean":
		return g.next(name)%2 == 0
	case "null":
		return nil
	}
	return g.str(s, name)
}

func (g *gen) object(s map[string]any, name string, depth int) map[string]any {
	out := map[string]any{}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, _ := props[k].(map[string]any)
		if p == nil || depth > 6 {
			continue
		}
		out[k] = g.value(p, k, depth+1)
	}
	return out
}

// str fills a string by what its name or format says it holds.
func (g *gen) str(s map[string]any, name string) string {
	n := g.next(name) % 1000
	lower := strings.ToLower(name)
	format, _ := s["format"].(string)
	switch {
	case format == "date" || strings.HasSuffix(lower, "_date") || strings.HasSuffix(lower, "_on"):
		return fmt.Sprintf("2026-01-%02d", 1+n%28)
	case format == "date-time" || strings.HasSuffix(lower, "_at"):
		return fmt.Sprintf("2026-01-%02dT12:00:00Z", 1+n%28)
	case format == "uri" || strings.Contains(lower, "url") || lower == "image" || lower == "thumbnail" || lower == "logo":
		return fmt.Sprintf("https://example.com/sandbox/%s/%d", lower, n)
	case lower == "id" || strings.HasSuffix(lower, "_id") || lower == "asin" || lower == "cid" || lower == "rkey":
		return fmt.Sprintf("sandbox-%s-%d", lower, n)
	case lower == "currency":
		return "XXX" // ISO 4217's code for "no currency"
	case lower == "country" || lower == "country_code" || lower == "region":
		return "ZZ" // a user-assigned code: no real country
	case lower == "handle":
		return fmt.Sprintf("sandbox_user_%d", n)
	}
	return fmt.Sprintf("Sandbox %s %d", strings.ReplaceAll(lower, "_", " "), n)
}

func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				return x.(string)
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return "string"
}

// merge overlays branch on base, dropping the combinator key it came from.
func merge(base, branch map[string]any, drop string) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		if k != drop {
			out[k] = v
		}
	}
	for k, v := range branch {
		if k == "properties" {
			props := map[string]any{}
			if bp, ok := out["properties"].(map[string]any); ok {
				for pk, pv := range bp {
					props[pk] = pv
				}
			}
			for pk, pv := range v.(map[string]any) {
				props[pk] = pv
			}
			out[k] = props
			continue
		}
		out[k] = v
	}
	return out
}
