package monitors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	tests := []struct {
		name       string
		prev, next string
		want       string
	}{
		{
			name: "search list: items added, removed and changed; cursor ignored, total counts",
			prev: `{"count":3,"cursor":"abc","has_more":true,"query":"shoes","total":100,
				"items":[{"id":"a","title":"A","price":10},{"id":"b","title":"B","price":20},
				         {"id":"c","title":"C","rating":{"value":4.5,"max":5}},{"id":"e","title":"E","sales":null}]}`,
			next: `{"count":4,"cursor":"def","has_more":true,"query":"shoes","total":101,
				"items":[{"id":"d","title":"D"},{"id":"c","title":"C","rating":{"value":4.6,"max":5},"price":3},
				         {"id":"b","title":"B","price":20.0},{"id":"e","title":"E"},{"id":"f"}]}`,
			want: `{"since_run":"","fields":[{"name":"count","before":3,"after":4},{"name":"total","before":100,"after":101}],` +
				`"lists":{"items":{"added":["d","f"],"removed":["a"],"changed":[{"id":"c","fields":["price","rating"]}]}}}`,
		},
		{
			name: "profile counters change, before and after scalars; _warnings and _assist ignored",
			prev: `{"id":"42","handle":"ada","followers":1200,"following":80,"verified":false,"bio":"hi","tweets_count":10,
				"_warnings":["a"],"_assist":{"summary":"x"}}`,
			next: `{"id":"42","handle":"ada","followers":1250,"following":80,"verified":true,"bio":"hello","tweets_count":10,
				"_warnings":["b","c"],"_assist":{"summary":"y"}}`,
			want: `{"since_run":"","fields":[{"name":"bio","before":"hi","after":"hello"},{"name":"followers","before":1200,"after":1250},` +
				`{"name":"verified","before":false,"after":true}]}`,
		},
		{
			name: "nested object field changed: name only",
			prev: `{"id":"1","rating":{"value":4.5,"max":5},"price":{"amount":3,"currency":"EUR"}}`,
			next: `{"id":"1","rating":{"value":4.6,"max":5},"price":{"amount":3.00,"currency":"EUR"}}`,
			want: `{"since_run":"","fields":[{"name":"rating"}]}`,
		},
		{
			name: "fields added and removed: the absent side has no value",
			prev: `{"a":1,"bio":"x","old_obj":{"k":1},"gone_null":null}`,
			next: `{"a":1,"location":"Paris","new_list":[1,2],"came_null":null}`,
			want: `{"since_run":"","fields":[{"name":"bio","before":"x"},{"name":"location","after":"Paris"},` +
				`{"name":"new_list"},{"name":"old_obj"}]}`,
		},
		{
			name: "null is absent; a value becoming null is a change",
			prev: `{"a":null,"b":5,"c":"x","d":{"x":1,"y":null}}`,
			next: `{"b":null,"c":null,"d":{"x":1}}`,
			want: `{"since_run":"","fields":[{"name":"b","before":5,"after":null},{"name":"c","before":"x","after":null}]}`,
		},
		{
			name: "object or array to scalar: name only",
			prev: `{"a":{"x":1},"b":[1],"c":3}`,
			next: `{"a":1,"b":null,"c":[3]}`,
			want: `{"since_run":"","fields":[{"name":"a"},{"name":"b"},{"name":"c"}]}`,
		},
		{
			name: "items without identity: whole-field change",
			prev: `{"items":[{"name":"a"},{"name":"b"}],"sorts":["price","new"],"mixed":[{"id":"1"},{"name":"x"}],"same":[{"name":"z"}]}`,
			next: `{"items":[{"name":"a"},{"name":"c"}],"sorts":["new","price"],"mixed":[{"id":"1"},{"name":"y"}],"same":[{"name":"z"}]}`,
			want: `{"since_run":"","fields":[{"name":"items"},{"name":"mixed"},{"name":"sorts"}]}`,
		},
		{
			name: "identity that only one side has: whole-field change",
			prev: `{"items":[{"id":"1","v":1}]}`,
			next: `{"items":[{"url":"u","v":1}]}`,
			want: `{"since_run":"","fields":[{"name":"items"}]}`,
		},
		{
			name: "identity falls back to url, then handle, then username; a null id does not count",
			prev: `{"a":[{"id":"1","url":"u1","t":1},{"url":"u2","t":2}],` +
				`"b":[{"id":null,"handle":"h1","t":1}],"c":[{"username":"x","t":1},{"username":"y"}]}`,
			next: `{"a":[{"url":"u1","t":9},{"url":"u3"}],` +
				`"b":[{"handle":"h2"}],"c":[{"username":"y","t":2}]}`,
			want: `{"since_run":"","fields":[],"lists":{` +
				`"a":{"added":["u3"],"removed":["u2"],"changed":[{"id":"u1","fields":["id","t"]}]},` +
				`"b":{"added":["h2"],"removed":["h1"],"changed":[]},` +
				`"c":{"added":[],"removed":["x"],"changed":[{"id":"y","fields":["t"]}]}}}`,
		},
		{
			name: "list becoming absent or empty",
			prev: `{"items":[{"id":"1"}],"posts":[{"id":"p"}],"x":[]}`,
			next: `{"posts":[],"x":[]}`,
			want: `{"since_run":"","fields":[{"name":"items"}],"lists":{"posts":{"added":[],"removed":["p"],"changed":[]}}}`,
		},
		{
			name: "duplicate identities: the first occurrence counts",
			prev: `{"items":[{"id":"a","v":1},{"id":"a","v":2},{"id":"b","v":1}]}`,
			next: `{"items":[{"id":"a","v":1},{"id":"b","v":2},{"id":"b","v":1},{"id":"a","v":3}]}`,
			want: `{"since_run":"","fields":[],"lists":{"items":{"added":[],"removed":[],"changed":[{"id":"b","fields":["v"]}]}}}`,
		},
		{
			name: "item fields compare deeply, arrays in order, null as absent",
			prev: `{"items":[{"id":"1","tags":["a","b"],"x":null},{"id":"2","shop":{"id":"s","n":1}},{"id":"3","tags":["a"]}]}`,
			next: `{"items":[{"id":"1","tags":["b","a"]},{"id":"2","shop":{"n":1.0,"id":"s"}},{"id":"3","tags":["a"],"y":null}]}`,
			want: `{"since_run":"","fields":[],"lists":{"items":{"added":[],"removed":[],"changed":[{"id":"1","fields":["tags"]}]}}}`,
		},
		{
			name: "numbers compare by value: 1 and 1.0, 1e2 and 100, 0 and -0",
			prev: `{"n":1,"m":1.0,"e":1e2,"z":0,"f":0.50,"o":{"v":10}}`,
			next: `{"n":1.0,"m":1,"e":100,"z":-0.0,"f":5E-1,"o":{"v":1e1}}`,
			want: `{"since_run":"","fields":[]}`,
		},
		{
			name: "big numbers differing in the last digit are unequal and keep their text",
			prev: `{"big":12345678901234567890,"tiny":1.0000000000000000000001}`,
			next: `{"big":12345678901234567891,"tiny":1.0000000000000000000002}`,
			want: `{"since_run":"","fields":[{"name":"big","before":12345678901234567890,"after":12345678901234567891},` +
				`{"name":"tiny","before":1.0000000000000000000001,"after":1.0000000000000000000002}]}`,
		},
		{
			name: "numeric identities: by value, integers in plain digits, same as their string",
			prev: `{"items":[{"id":12345678901234567890},{"id":7.0},{"id":"5"},{"id":1.5}]}`,
			next: `{"items":[{"id":12345678901234567891},{"id":7},{"id":5},{"id":1.50},{"id":2e3}]}`,
			want: `{"since_run":"","fields":[],"lists":{"items":{"added":["12345678901234567891","2000"],` +
				`"removed":["12345678901234567890"],"changed":[{"id":"5","fields":["id"]}]}}}`,
		},
		{
			name: "identical inputs: no changes",
			prev: `{"count":2,"cursor":"x","items":[{"id":"1","a":{"b":[1,2]}},{"id":"2"}],"query":"q","sorts":["a"]}`,
			next: `{ "sorts" : ["a"], "query":"q", "items":[{"a":{"b":[1,2]},"id":"1"},{"id":"2"}], "cursor":"x", "count":2 }`,
			want: `{"since_run":"","fields":[]}`,
		},
		{
			name: "empty objects",
			prev: `{}`,
			next: `{}`,
			want: `{"since_run":"","fields":[]}`,
		},
		{
			name: "strings are written as JSON, keys sorted by byte",
			prev: `{"b":"a \"q\" <x>","B":"é","_x":1}`,
			next: `{"b":"a\u0020\"q\" <y>","B":"e","_x":2}`,
			want: `{"since_run":"","fields":[{"name":"B","before":"é","after":"e"},{"name":"_x","before":1,"after":2},` +
				`{"name":"b","before":"a \"q\" \u003cx\u003e","after":"a \"q\" \u003cy\u003e"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compare(json.RawMessage(tt.prev), json.RawMessage(tt.next))
			if err != nil {
				t.Fatalf("Compare: %v", err)
			}
			got, err := json.Marshal(c)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if c.Empty() != (tt.want == `{"since_run":"","fields":[]}`) {
				t.Errorf("Empty() = %v", c.Empty())
			}
			// Stable: a second comparison marshals to the same bytes.
			c2, _ := Compare(json.RawMessage(tt.prev), json.RawMessage(tt.next))
			if got2, _ := json.Marshal(c2); !bytes.Equal(got, got2) {
				t.Errorf("second run differs:\n%s\n%s", got, got2)
			}
		})
	}
}

func TestCompareSinceRun(t *testing.T) {
	c, err := Compare(json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":2}`))
	if err != nil {
		t.Fatal(err)
	}
	c.SinceRun = "run_000001700000"
	got, _ := json.Marshal(c)
	want := `{"since_run":"run_000001700000","fields":[{"name":"a","before":1,"after":2}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// items builds a list of n records with ids prefix0..prefixN-1, each with
// the field v.
func items(prefix string, n int, v int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"id":"%s%d","v":%d}`, prefix, i, v)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func ids(prefix string, from, to int) string {
	parts := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		parts = append(parts, fmt.Sprintf(`"%s%d"`, prefix, i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func changed(prefix string, from, to int) string {
	parts := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		parts = append(parts, fmt.Sprintf(`{"id":"%s%d","fields":["v"]}`, prefix, i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestCompareCaps(t *testing.T) {
	tests := []struct {
		name       string
		prev, next string
		want       string
	}{
		{
			name: "600 added and 600 removed: 500 of each, truncated",
			prev: `{"items":` + items("old", 600, 1) + `}`,
			next: `{"items":` + items("new", 600, 1) + `}`,
			want: `{"since_run":"","fields":[],"lists":{"items":{"added":` + ids("new", 0, 500) +
				`,"removed":` + ids("old", 0, 500) + `,"changed":[],"truncated":true}}}`,
		},
		{
			name: "600 changed: 500, truncated",
			prev: `{"items":` + items("i", 600, 1) + `}`,
			next: `{"items":` + items("i", 600, 2) + `}`,
			want: `{"since_run":"","fields":[],"lists":{"items":{"added":[],"removed":[],"changed":` +
				changed("i", 0, 500) + `,"truncated":true}}}`,
		},
		{
			name: "exactly 500 added: not truncated",
			prev: `{"items":[]}`,
			next: `{"items":` + items("n", 500, 1) + `}`,
			want: `{"since_run":"","fields":[],"lists":{"items":{"added":` + ids("n", 0, 500) +
				`,"removed":[],"changed":[]}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compare(json.RawMessage(tt.prev), json.RawMessage(tt.next))
			if err != nil {
				t.Fatalf("Compare: %v", err)
			}
			got, _ := json.Marshal(c)
			if string(got) != tt.want {
				t.Errorf("got  %.300s...\nwant %.300s...", got, tt.want)
			}
		})
	}
}

func TestCompareErrors(t *testing.T) {
	bad := []string{``, `  `, `null`, `[]`, `[{"id":1}]`, `"x"`, `1`, `true`, `{`, `{"a":}`, `{"a":1}{}`, `{"a":1} x`, `{"a":1}]`}
	for _, b := range bad {
		if _, err := Compare(json.RawMessage(b), json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "previous data") {
			t.Errorf("Compare(%q, {}) error = %v, want a previous-data error", b, err)
		}
		if _, err := Compare(json.RawMessage(`{}`), json.RawMessage(b)); err == nil || !strings.Contains(err.Error(), "next data") {
			t.Errorf("Compare({}, %q) error = %v, want a next-data error", b, err)
		}
	}
	if _, err := Compare(json.RawMessage(" \n{\"a\":1}\n "), json.RawMessage(`{}`)); err != nil {
		t.Errorf("surrounding whitespace: %v", err)
	}
}

func TestChangesMarshalEmptySlices(t *testing.T) {
	got, _ := json.Marshal(Changes{Lists: map[string]ListChanges{"items": {Changed: []ItemChange{{ID: "1"}}}}})
	want := `{"since_run":"","fields":[],"lists":{"items":{"added":[],"removed":[],"changed":[{"id":"1","fields":[]}]}}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got, _ = json.Marshal(&Changes{})
	if want := `{"since_run":"","fields":[]}`; string(got) != want {
		t.Errorf("pointer: got %s, want %s", got, want)
	}
}

func TestCanonicalNumber(t *testing.T) {
	same := [][]string{
		{"1", "1.0", "1e0", "10e-1", "0.1e1", "1.000E+0", "100e-2"},
		{"0", "-0", "0.0", "-0.0e5", "0e-99999999999999999999"},
		{"-12.5", "-125e-1", "-0.125e2"},
		{"12345678901234567890", "1234567890123456789e1", "12345678901234567890.000"},
	}
	for _, group := range same {
		for _, n := range group {
			if a, b := canonicalNumber(json.Number(group[0])), canonicalNumber(json.Number(n)); a != b {
				t.Errorf("canonical(%s) = %s, canonical(%s) = %s", group[0], a, n, b)
			}
		}
	}
	differ := [][2]string{{"1", "-1"}, {"12345678901234567890", "12345678901234567891"}, {"1e400", "1e401"}, {"0.1", "1"}}
	for _, d := range differ {
		if canonicalNumber(json.Number(d[0])) == canonicalNumber(json.Number(d[1])) {
			t.Errorf("%s and %s compare equal", d[0], d[1])
		}
	}
	ints := map[string]string{"7": "7", "7.0": "7", "-7e2": "-700", "0.0": "0", "-0": "0", "1.5": "", "1e-1": "", "1e200": "", "1e99": "1" + strings.Repeat("0", 99)}
	for in, want := range ints {
		got, ok := integerText(json.Number(in))
		if ok != (want != "") || got != want {
			t.Errorf("integerText(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	if dec.Decode(&v) != nil {
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		return false
	}
	_, ok := v.(map[string]any)
	return ok
}

func FuzzCompare(f *testing.F) {
	seeds := [][2]string{
		{`{"count":2,"cursor":"a","items":[{"id":"1","p":1},{"id":"2"}]}`, `{"count":2,"cursor":"b","items":[{"id":"2","p":2},{"id":"3"}]}`},
		{`{"followers":100,"verified":false,"rating":{"v":1}}`, `{"followers":1e2,"verified":true,"bio":"x"}`},
		{`{"items":[{"url":"u","id":null},{"url":"v"}]}`, `{"items":[{"url":"v","x":[1,{"a":null}]}]}`},
		{`{"items":[{"id":12345678901234567890},{"id":"5"},{"id":5.0},{"id":1.5}]}`, `{"items":[{"id":12345678901234567891},{"id":5}]}`},
		{`{"a":[1,2],"b":null,"c":{}}`, `{"a":[2,1],"c":{"d":null}}`},
		{`{"items":[{"id":"a"},{"id":"a","x":1}]}`, `{"items":[]}`},
		{`{}`, `[]`},
		{`{"a":1} x`, `null`},
	}
	for _, s := range seeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ab, errAB := Compare(a, b)
		ba, errBA := Compare(b, a)
		aOK, bOK := isObject(a), isObject(b)
		if (errAB == nil) != (aOK && bOK) || (errBA == nil) != (aOK && bOK) {
			t.Fatalf("errors %v, %v for objects %v, %v", errAB, errBA, aOK, bOK)
		}
		for _, in := range [][]byte{a, b} {
			if !isObject(in) {
				continue
			}
			same, err := Compare(in, in)
			if err != nil || !same.Empty() {
				t.Fatalf("Compare(x, x) = %+v, %v", same, err)
			}
			var indented bytes.Buffer
			if err := json.Indent(&indented, in, "", "  "); err == nil {
				if re, err := Compare(in, indented.Bytes()); err != nil || !re.Empty() {
					t.Fatalf("Compare(x, indented x) = %+v, %v", re, err)
				}
			}
		}
		if errAB != nil {
			return
		}
		out1, err := json.Marshal(ab)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, _ := Compare(a, b)
		if out2, _ := json.Marshal(again); !bytes.Equal(out1, out2) {
			t.Fatalf("unstable output:\n%s\n%s", out1, out2)
		}
		var shape struct {
			Fields []json.RawMessage `json:"fields"`
			Lists  map[string]struct {
				Added, Removed, Changed []json.RawMessage
			} `json:"lists"`
		}
		if err := json.Unmarshal(out1, &shape); err != nil || shape.Fields == nil {
			t.Fatalf("bad output %s: %v", out1, err)
		}
		for name, l := range shape.Lists {
			if l.Added == nil || l.Removed == nil || l.Changed == nil {
				t.Fatalf("list %s with a null array: %s", name, out1)
			}
		}
		// Swapping the arguments swaps before and after, added and removed.
		if len(ab.Fields) != len(ba.Fields) {
			t.Fatalf("fields %v vs swapped %v", ab.Fields, ba.Fields)
		}
		for i, fc := range ab.Fields {
			sw := ba.Fields[i]
			if fc.Name != sw.Name || !bytes.Equal(fc.Before, sw.After) || !bytes.Equal(fc.After, sw.Before) {
				t.Fatalf("field %+v vs swapped %+v", fc, sw)
			}
		}
		if len(ab.Lists) != len(ba.Lists) {
			t.Fatalf("lists %v vs swapped %v", ab.Lists, ba.Lists)
		}
		for name, l := range ab.Lists {
			sw, ok := ba.Lists[name]
			if !ok || !slices.Equal(l.Added, sw.Removed) || !slices.Equal(l.Removed, sw.Added) ||
				len(l.Changed) != len(sw.Changed) || l.Truncated != sw.Truncated {
				t.Fatalf("list %s: %+v vs swapped %+v", name, l, sw)
			}
			if len(l.Added) > MaxListChanges || len(l.Removed) > MaxListChanges || len(l.Changed) > MaxListChanges {
				t.Fatalf("list %s over the cap", name)
			}
			if !l.Truncated {
				var x, y []string
				for i := range l.Changed {
					x = append(x, strings.Join(l.Changed[i].Fields, ","))
					y = append(y, strings.Join(sw.Changed[i].Fields, ","))
					if !sort.StringsAreSorted(l.Changed[i].Fields) || len(l.Changed[i].Fields) == 0 {
						t.Fatalf("list %s: changed fields %v", name, l.Changed[i].Fields)
					}
				}
				sort.Strings(x)
				sort.Strings(y)
				if !slices.Equal(x, y) {
					t.Fatalf("list %s: changed %v vs swapped %v", name, l.Changed, sw.Changed)
				}
			}
		}
		if !sort.SliceIsSorted(ab.Fields, func(i, j int) bool { return ab.Fields[i].Name < ab.Fields[j].Name }) {
			t.Fatalf("fields not sorted: %v", ab.Fields)
		}
	})
}
