package monitors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"sort"
	"strings"
)

// MaxListChanges caps each of a list's Added, Removed and Changed entries;
// a list with more sets Truncated.
const MaxListChanges = 500

// identityKeys are the members that identify a list's records, in order of
// preference.
var identityKeys = []string{"id", "url", "handle", "username"}

// volatileFields are the top-level data fields that Compare leaves out:
// cursor is an opaque page token that changes every run, _warnings are
// collection notes about the run rather than data, and _assist is the
// AI-assist output of the call.
var volatileFields = map[string]bool{"cursor": true, "_warnings": true, "_assist": true}

// Changes is what changed between two runs' data objects (Compare).
type Changes struct {
	// SinceRun is set by the caller: the run compared against.
	SinceRun string `json:"since_run"`
	// Fields are the top-level fields (other than the lists in Lists and
	// the volatile fields) whose value changed, was added or was removed,
	// sorted by name.
	Fields []FieldChange `json:"fields"`
	// Lists holds, per top-level array of records compared by identity,
	// the records added, removed and changed; only lists with at least
	// one of those appear.
	Lists map[string]ListChanges `json:"lists,omitempty"`
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Fields) == 0 && len(c.Lists) == 0 }

// MarshalJSON writes Fields as [] rather than null when there are none.
func (c Changes) MarshalJSON() ([]byte, error) {
	type plain Changes
	if c.Fields == nil {
		c.Fields = []FieldChange{}
	}
	return json.Marshal(plain(c))
}

// FieldChange is one top-level field that changed. Before and After are
// the field's JSON values and are set only when the change is between
// scalars (string, number, bool, null): a side where the field is absent
// has no Before (or After), and a change to, from or inside an object or
// array carries the name alone.
type FieldChange struct {
	Name   string          `json:"name"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// ListChanges is what changed in one list of records: the identities of
// the records added and removed, in the order they appear in the run that
// holds them, and the records present in both runs whose fields differ, in
// the newer run's order. Each of the three holds at most MaxListChanges
// entries; Truncated says some were left off.
type ListChanges struct {
	Added     []string     `json:"added"`
	Removed   []string     `json:"removed"`
	Changed   []ItemChange `json:"changed"`
	Truncated bool         `json:"truncated,omitempty"`
}

// MarshalJSON writes empty lists as [] rather than null.
func (l ListChanges) MarshalJSON() ([]byte, error) {
	type plain ListChanges
	if l.Added == nil {
		l.Added = []string{}
	}
	if l.Removed == nil {
		l.Removed = []string{}
	}
	if l.Changed == nil {
		l.Changed = []ItemChange{}
	}
	return json.Marshal(plain(l))
}

func (l ListChanges) empty() bool {
	return len(l.Added) == 0 && len(l.Removed) == 0 && len(l.Changed) == 0
}

// ItemChange is a record present in both runs whose top-level fields
// differ: its identity and the names of those fields, sorted.
type ItemChange struct {
	ID     string   `json:"id"`
	Fields []string `json:"fields"`
}

// MarshalJSON writes Fields as [] rather than null when there are none.
func (i ItemChange) MarshalJSON() ([]byte, error) {
	type plain ItemChange
	if i.Fields == nil {
		i.Fields = []string{}
	}
	return json.Marshal(plain(i))
}

// Compare reports what changed from prev to next, two runs' data objects.
// SinceRun is left for the caller to set.
//
// Both must be a single JSON object; anything else (an array, a scalar,
// null, invalid JSON, trailing data) is an error.
//
// Values compare by deep equality with these rules:
//   - numbers compare by value on their decimal text, never through
//     float64: 1, 1.0 and 1e0 are equal, and two 20-digit ids that differ
//     in their last digit are not;
//   - strings compare exactly; an array equals another of the same length
//     whose elements are equal in order;
//   - a member whose value is null is the same as an absent member, at
//     every depth (spec 2.4: null or absent both mean unknown), so a field
//     going from null to absent is no change, while a field going from 5
//     to null, or from absent to 5, is.
//
// The top-level fields cursor, _warnings and _assist are volatile and are
// never compared. count and total are compared like any other field.
//
// A top-level array that is an array in both runs and whose elements are
// all objects carrying an identity is compared record by record under
// Lists[name] instead of Fields. The identity member is chosen per list:
// the first of id, url, handle and username that every element of both
// runs has as a string or a number (two empty arrays use id and have no
// changes). If no member qualifies, or an element is not an object, or the
// field is not an array on both sides, the field is compared as a whole
// and reported in Fields by name. An identity is the string, or for a
// number its plain decimal digits when it is an integer (so the number
// 123, 123.0 and the string "123" are the same record; a source that
// switches an id's type keeps its records) and its text as written
// otherwise. Within one list a repeated identity is ignored after its
// first occurrence. A record present in both runs is changed when any of
// its top-level members differs; the member names are listed, sorted.
//
// The output is deterministic: the same inputs marshal to the same bytes.
func Compare(prev, next json.RawMessage) (Changes, error) {
	p, err := decodeObject(prev)
	if err != nil {
		return Changes{}, fmt.Errorf("monitors: compare: previous data: %w", err)
	}
	n, err := decodeObject(next)
	if err != nil {
		return Changes{}, fmt.Errorf("monitors: compare: next data: %w", err)
	}
	names := make([]string, 0, len(p)+len(n))
	for k := range p {
		names = append(names, k)
	}
	for k := range n {
		if _, ok := p[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)

	c := Changes{Fields: []FieldChange{}}
	for _, name := range names {
		if volatileFields[name] {
			continue
		}
		pv, pok := p[name]
		nv, nok := n[name]
		if pa, ok := pv.([]any); ok {
			if na, ok := nv.([]any); ok {
				if key, ok := identityKey(pa, na); ok {
					if lc := compareList(pa, na, key); !lc.empty() {
						if c.Lists == nil {
							c.Lists = map[string]ListChanges{}
						}
						c.Lists[name] = lc
					}
					continue
				}
			}
		}
		if equal(pv, nv) {
			continue
		}
		fc := FieldChange{Name: name}
		if isScalar(pv) && isScalar(nv) {
			if pok {
				if fc.Before, err = json.Marshal(pv); err != nil {
					return Changes{}, fmt.Errorf("monitors: compare: %s: %w", name, err)
				}
			}
			if nok {
				if fc.After, err = json.Marshal(nv); err != nil {
					return Changes{}, fmt.Errorf("monitors: compare: %s: %w", name, err)
				}
			}
		}
		c.Fields = append(c.Fields, fc)
	}
	return c, nil
}

// decodeObject decodes one JSON object, numbers as json.Number.
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty, not a JSON object")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a JSON %s, not an object", kind(v))
	}
	return m, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		return "number"
	case []any:
		return "array"
	default:
		return "object"
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

// identityKey is the first identity member every element of a and b has
// as a string or a number.
func identityKey(a, b []any) (string, bool) {
	for _, k := range identityKeys {
		if allHave(a, k) && allHave(b, k) {
			return k, true
		}
	}
	return "", false
}

func allHave(list []any, key string) bool {
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		switch m[key].(type) {
		case string, json.Number:
		default:
			return false
		}
	}
	return true
}

// record is a list element by its identity.
type record struct {
	key     string // what identities compare by
	display string // what ListChanges shows
	fields  map[string]any
}

// identity is an element's identity member as a comparison key and as
// shown. Strings and integers share one key space ("s:" and the decimal
// text); other numbers compare by their normalised value ("n:").
func identity(v any) (key, display string) {
	switch v := v.(type) {
	case string:
		return "s:" + v, v
	case json.Number:
		if d, ok := integerText(v); ok {
			return "s:" + d, d
		}
		return "n:" + canonicalNumber(v), string(v)
	}
	return "", "" // unreachable: allHave checked the type
}

// records lists a list's elements by identity, first occurrences only.
func records(list []any, key string) ([]record, map[string]map[string]any) {
	out := make([]record, 0, len(list))
	byKey := make(map[string]map[string]any, len(list))
	for _, e := range list {
		m := e.(map[string]any)
		k, d := identity(m[key])
		if _, dup := byKey[k]; dup {
			continue
		}
		byKey[k] = m
		out = append(out, record{key: k, display: d, fields: m})
	}
	return out, byKey
}

func compareList(prev, next []any, key string) ListChanges {
	pr, pm := records(prev, key)
	nr, nm := records(next, key)
	lc := ListChanges{Changed: []ItemChange{}}
	lc.Added = notIn(nr, pm, &lc.Truncated)
	lc.Removed = notIn(pr, nm, &lc.Truncated)
	for _, r := range nr {
		before, ok := pm[r.key]
		if !ok {
			continue
		}
		if fields := changedMembers(before, r.fields); len(fields) > 0 {
			if len(lc.Changed) == MaxListChanges {
				lc.Truncated = true
				break
			}
			lc.Changed = append(lc.Changed, ItemChange{ID: r.display, Fields: fields})
		}
	}
	return lc
}

// notIn lists the displays of the records whose identity other lacks, at
// most MaxListChanges (past them it sets truncated).
func notIn(rs []record, other map[string]map[string]any, truncated *bool) []string {
	out := []string{}
	for _, r := range rs {
		if _, ok := other[r.key]; ok {
			continue
		}
		if len(out) == MaxListChanges {
			*truncated = true
			break
		}
		out = append(out, r.display)
	}
	return out
}

// changedMembers names the members of a and b whose values differ, sorted.
func changedMembers(a, b map[string]any) []string {
	var out []string
	for k, av := range a {
		if !equal(av, b[k]) {
			out = append(out, k)
		}
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok && bv != nil {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// equal is deep equality of decoded JSON values: numbers by value, and a
// null member the same as an absent one.
func equal(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		bb, ok := b.(bool)
		return ok && a == bb
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && (a == bn || canonicalNumber(a) == canonicalNumber(bn))
	case []any:
		bl, ok := b.([]any)
		return ok && slices.EqualFunc(a, bl, equal)
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, av := range a {
			if !equal(av, bm[k]) {
				return false
			}
		}
		for k, bv := range bm {
			if _, ok := a[k]; !ok && bv != nil {
				return false
			}
		}
		return true
	}
	return false
}

// numberParts splits a JSON number's text into its sign, its significant
// digits without leading or trailing zeros ("0" for zero, which has no
// sign) and the power of ten they are multiplied by.
func numberParts(n json.Number) (neg bool, digits string, exp *big.Int) {
	s := string(n)
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	exp = new(big.Int)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if _, ok := exp.SetString(strings.TrimPrefix(s[i+1:], "+"), 10); !ok {
			exp.SetInt64(0) // unreachable for a decoded JSON number
		}
		s = s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits = strings.TrimLeft(intPart+frac, "0")
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	trimmed := strings.TrimRight(digits, "0")
	exp.Add(exp, big.NewInt(int64(len(digits)-len(trimmed))))
	digits = trimmed
	if digits == "" {
		return false, "0", new(big.Int)
	}
	return neg, digits, exp
}

// canonicalNumber is a number's value as text: equal values, equal texts.
func canonicalNumber(n json.Number) string {
	neg, digits, exp := numberParts(n)
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + digits + "e" + exp.String()
}

// maxIdentityDigits bounds the integers written out in plain digits as
// identities; larger ones keep their text.
const maxIdentityDigits = 100

// integerText is an integral number in plain decimal digits ("123" for
// 123, 123.0 and 1.23e2).
func integerText(n json.Number) (string, bool) {
	neg, digits, exp := numberParts(n)
	if exp.Sign() < 0 || !exp.IsInt64() || exp.Int64() > maxIdentityDigits-int64(len(digits)) {
		return "", false
	}
	text := digits + strings.Repeat("0", int(exp.Int64()))
	if neg {
		text = "-" + text
	}
	return text, true
}
