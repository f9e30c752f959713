package htmldata_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// apolloPage is a server-rendered Apollo page: the normalized cache in
// window.__APOLLO_STATE__, with keys holding quotes and braces.
const apolloPage = `<!doctype html><html><head><title>Arc Lamp</title>
<script>window.dataLayer = window.dataLayer || []; if (window.__APOLLO_STATE__ === undefined) {}</script>
</head><body><div id="root"><h1>Arc Lamp</h1></div>
<script>window.__APOLLO_STATE__ = {"ROOT_QUERY":{"__typename":"Query","product({\"id\":\"42\"})":{"__ref":"Product:42"}},` +
	`"Product:42":{"__typename":"Product","id":"42","name":"Arc Lamp; \"brass\" {large}","price":59.5}};` +
	`window.__APOLLO_CLIENT_VERSION__ = "3.8";</script>
<script src="/static/js/main.4f1c.js"></script></body></html>`

// jsonParsePage embeds its state as a JavaScript string literal parsed at
// run time, the form that keeps large states cheap to parse in browsers.
const jsonParsePage = `<html><body><script>
  window.__PRELOADED_STATE__ = JSON.parse('{"user":{"name":"O\'Brien","city":"Z\u00fcrich"},"note":"caf\\u00e9 \\"q\\" <\/script>","emoji":"\\ud83d\\ude00","pair":"\ud83d\ude00","x":"\x41"}');
  window.__SSR__ = true;
</script></body></html>`

func TestAssigned(t *testing.T) {
	v, err := htmldata.Assigned([]byte(apolloPage), "__APOLLO_STATE__")
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]struct {
		Name  string
		Price float64
		Ref   string `json:"__ref"`
	}
	if err := json.Unmarshal(v, &state); err != nil {
		t.Fatal(err)
	}
	if p := state["Product:42"]; p.Name != `Arc Lamp; "brass" {large}` || p.Price != 59.5 {
		t.Fatalf("got %+v", state)
	}

	v, err = htmldata.Assigned([]byte(jsonParsePage), "__PRELOADED_STATE__")
	if err != nil {
		t.Fatal(err)
	}
	var pre struct {
		User                 struct{ Name, City string }
		Note, Emoji, Pair, X string
	}
	if err := json.Unmarshal(v, &pre); err != nil {
		t.Fatalf("%s: %v", v, err)
	}
	if pre.User.Name != "O'Brien" || pre.User.City != "Zürich" || pre.Note != `café "q" </script>` ||
		pre.Emoji != "😀" || pre.Pair != "😀" || pre.X != "A" {
		t.Fatalf("got %+v", pre)
	}
}

// TestAssignedForms: the assignment forms sites use, and look-alikes that
// are not assignments.
func TestAssignedForms(t *testing.T) {
	cases := []struct{ name, page, assigned, want string }{
		{"window member, no semicolon", "<script>window.__PRELOADED_STATE__ = {\"a\":1}\nwindow.other = 2</script>",
			"__PRELOADED_STATE__", `{"a":1}`},
		{"bracket, double quotes", `<script>window["__INITIAL_STATE__"]={"a":[1,2]};</script>`, "__INITIAL_STATE__", `{"a":[1,2]}`},
		{"bracket, single quotes and spaces", `<script>window[ '__INITIAL_STATE__' ] = {"a":2}</script>`, "__INITIAL_STATE__", `{"a":2}`},
		{"var", `<script type="text/javascript">var runParams = {"data":{"title":"x"}};</script>`, "runParams", `{"data":{"title":"x"}}`},
		{"const in a module", `<script type="module">const runParams={"b":true}</script>`, "runParams", `{"b":true}`},
		{"cdata in an old page", "<SCRIPT>//<![CDATA[\nvar runParams = {\"c\":3};\n//]]></SCRIPT>", "runParams", `{"c":3}`},
		{"inside a function", `<script>(function(){window.__X__ = {"d":4}})();</script>`, "__X__", `{"d":4}`},
		{"followed by a comment", `<script>var __X__ = [1,2] // ids</script>`, "__X__", `[1,2]`},
		{"a number", `<script>var pageSize = 24, sort = "asc";</script>`, "pageSize", `24`},
		{"a string", `<script>var locale = "de-CH";</script>`, "locale", `"de-CH"`},
		{"first JSON assignment wins", `<script>window.__X__ = window.__X__ || {};</script><script>window.__X__ = {"ok":true};</script>`,
			"__X__", `{"ok":true}`},
		{"longer names and comparisons skipped", `<script>window.__X__Extra = {"no":1}; my__X__ = {"no":2}; ` +
			`if (window.__X__ == null) {} var f = __X__ => 1; window.__X__ = {"yes":1};</script>`, "__X__", `{"yes":1}`},
		{"JSON.parse, double quotes", `<script>var s = JSON.parse( "{\"k\":\"v\\\\n\"}" );</script>`, "s", `{"k":"v\\n"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := htmldata.Assigned([]byte(c.page), c.assigned)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v, []byte(c.want)) {
				t.Fatalf("got %s, want %s", v, c.want)
			}
		})
	}
}

func TestAssignedMalformed(t *testing.T) {
	cases := []struct{ name, page, assigned, reason string }{
		{"absent", apolloPage + secret, "__NEXT_STATE__", "no script assigns __NEXT_STATE__ in a"},
		{"only compared", `<script>if (window.__X__ === "` + secret + `") {}</script>`, "__X__", "no script assigns __X__"},
		{"only in a JSON data block", `<script type="application/json">{"s":"window.__X__ = {}"}</script>` +
			`<script type="application/json">window.__X__ = {"from":"` + secret + `"}</script>`, "__X__", "no script assigns __X__"},
		{"only in a comment", `<!-- <script>window.__X__ = {"a":1}</script> -->` + secret, "__X__", "no script assigns __X__"},
		{"JavaScript object literal", `<script>window.runParams = { data: {"email":"` + secret + `"} };</script>`, "runParams",
			"runParams is assigned no JSON value (syntax error at byte 3) in a"},
		{"single-quoted strings", `<script>var runParams = {'email': '` + secret + `'};</script>`, "runParams",
			"runParams is assigned no JSON value (syntax error at byte 2)"},
		{"longer expression", `<script>window.__X__ = {"email":"` + secret + `"}.email;</script>`, "__X__",
			"__X__ is assigned no JSON value (the JSON value is part of a longer expression)"},
		{"cut short", `<script>window.__X__ = {"email":"` + secret + `", "more": [1,`, "__X__",
			"__X__ is assigned no JSON value (value cut short)"},
		{"JSON.parse of a variable", `<script>window.__X__ = JSON.parse(raw);</script>` + secret, "__X__",
			"JSON.parse of something other than a quoted string"},
		{"JSON.parse of invalid JSON", `<script>window.__X__ = JSON.parse('{"email":"` + secret + `",}');</script>`, "__X__",
			"JSON.parse argument: syntax error at byte"},
		{"JSON.parse unterminated", `<script>window.__X__ = JSON.parse('{"email":"` + secret + "\n\"}');</script>", "__X__",
			"unterminated or unsupported string literal"},
		{"no name", apolloPage, "", "no name to look for"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := htmldata.Assigned([]byte(c.page), c.assigned)
			wantMalformed(t, err, c.page, c.reason)
		})
	}
}
