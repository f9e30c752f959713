package htmldata_test

import (
	"bytes"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// didaPage assigns its server-rendered data the way AliExpress's search
// page does: a member of a JavaScript object literal with a bare key, after
// a config object that is not JSON either.
const didaPage = `<!DOCTYPE html><html><head><title>Usb C Cable</title>
<script>window._dida_config_={pageName:"search-pc",headers:{},needLogin:false};
if(window._dida_config_&&!window._dida_config_._init_data_){}</script></head><body><div id="root"></div>
<script>
/*!-->init-data-start--*/
window._dida_config_._init_data_= { data: {"data":{"root":{"fields":{"title":"USB {C} \"cable\"; 1m"}}}} }
/*!-->init-data-end--*/
</script></body></html>`

func TestAssignedMember(t *testing.T) {
	v, err := htmldata.AssignedMember([]byte(didaPage), "_init_data_", "data")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"data":{"root":{"fields":{"title":"USB {C} \"cable\"; 1m"}}}}`; string(v) != want {
		t.Fatalf("got %s, want %s", v, want)
	}
}

// TestAssignedMemberForms: key forms, members before the wanted one that
// are not JSON (skipped), and literals that are strict JSON.
func TestAssignedMemberForms(t *testing.T) {
	cases := []struct{ name, script, want string }{
		{"bare key", `x = { data: [1,2] }`, `[1,2]`},
		{"double-quoted key", `x = {"data" : {"a":1}};`, `{"a":1}`},
		{"single-quoted key", `x = {'data':"v"}`, `"v"`},
		{"escaped quoted key", `x = {"d\u0061ta":1}`, `1`},
		{"strict JSON with later members", `window.x = {"data": {"b": true}, "more": [1, 2]};`, `{"b": true}`},
		{"JSON.parse", `var x = JSON.parse('{"page":1,"data":{"c":"\u00e9"}}');`, `{"c":"é"}`},
		{"after JSON members", `x = {page: 2, sort: "asc", data: null}`, `null`},
		{"after a function", `x = {render: function (a, b) { if (a > b) { return "}"; } return {b: [a]}; }, data: 3}`, `3`},
		{"after an arrow function and a method", `x = {f: (a) => ({a}), g() { return ')' }, data: 4}`, `4`},
		{"after a regular expression", `x = {re: /[}{,"']+\/x/gi, data: 5}`, `5`},
		{"after a division", `x = {w: (a + b) / 2, h: c / 3 / 4, data: 6}`, `6`},
		{"after a regular expression after return", `x = {f: function () { return /}/.test(s) }, data: 7}`, `7`},
		{"after template literals", "x = {t: `a ${b + `c}${'}'}`} }` + \"`\", u: `\\``, data: 8}", `8`},
		{"after comments and a trailing comma", "x = { // the page's config\n a: 1, /* } , */ b: [2,],\n data: 9, }", `9`},
		{"after variables, spread, computed and shorthand members", `x = {...base, [k]: v, y, z: a.b[c](d), data: 10}`, `10`},
		{"after strings with braces and quotes", `x = {s: "}\",{", t: '\'}', data: 11}`, `11`},
		{"a later duplicate wins", `x = {data: 1, data: {"z": 2}}`, `{"z": 2}`},
		{"first assignment with the member wins", `x = {other: 1}; x = {data: "first"}; x = {data: "second"};`, `"first"`},
		{"unreadable rest after the member", `x = {data: [12], broken: "unterminated`, `[12]`},
		{"bracket assignment", `window["x"] = {data: 13}`, `13`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			page := "<script>if (x == null) {}</script><script>" + c.script + "</script>"
			v, err := htmldata.AssignedMember([]byte(page), "x", "data")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v, []byte(c.want)) {
				t.Fatalf("got %s, want %s", v, c.want)
			}
		})
	}
}

func TestAssignedMemberMalformed(t *testing.T) {
	cases := []struct{ name, page, reason string }{
		{"absent", apolloPage + secret, "no _init_data_ assignment in a"},
		{"only read", `<script>var u = e._init_data_ || "` + secret + `";</script>`, "no _init_data_ assignment"},
		{"only in a JSON data block", `<script type="application/json">{"s":"_init_data_ = {data: 1}", "e":"` + secret + `"}</script>`,
			"no _init_data_ assignment"},
		{"no such member", `<script>_init_data_ = { page: {"email":"` + secret + `"} }</script>`, "(no data member) in a"},
		{"member not JSON", `<script>_init_data_ = { data: {email: "` + secret + `"} }</script>`,
			"_init_data_ is assigned no object with a JSON data member (its data member is not JSON: syntax error at byte 2) in a"},
		{"member in a longer expression", `<script>_init_data_ = { data: {"e":"` + secret + `"}.e }</script>`,
			"(its data member is part of a longer expression)"},
		{"shorthand member", `<script>_init_data_ = { data }</script>` + secret, "(its data member is not key: <JSON>)"},
		{"object in a longer expression", `<script>_init_data_ = { data: {"e":"` + secret + `"} }.data;</script>`,
			"(the object is part of a longer expression)"},
		{"not an object", `<script>_init_data_ = load("` + secret + `");</script>`, "(not an object literal)"},
		{"unreadable member before", `<script>_init_data_ = { a: "` + secret + "\n" + `", data: 1 }</script>`,
			"(a member before any data member could not be read, or the object is cut short)"},
		{"cut short", `<script>_init_data_ = { a: 1, b: [{"e":"` + secret + `"}`, "could not be read, or the object is cut short"},
		{"JSON.parse without the member", `<script>_init_data_ = JSON.parse('{"e":"` + secret + `"}');</script>`, "(no data member)"},
		{"JSON.parse of an array", `<script>_init_data_ = JSON.parse('["` + secret + `"]');</script>`,
			"(JSON.parse of something other than an object)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := htmldata.AssignedMember([]byte(c.page), "_init_data_", "data")
			wantMalformed(t, err, c.page, c.reason)
		})
	}
	_, err := htmldata.AssignedMember([]byte(didaPage), "_init_data_", "")
	wantMalformed(t, err, didaPage, "no member of _init_data_ to look for")
	_, err = htmldata.AssignedMember([]byte(didaPage), "", "data")
	wantMalformed(t, err, didaPage, "no name to look for")
}
