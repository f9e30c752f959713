package quora

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestJSString(t *testing.T) {
	for in, want := range map[string]string{
		`"plain"`:                        "plain",
		`'single'`:                       "single",
		`"a\"b\\c\/d"`:                   `a"b\c/d`,
		`"\n\r\t\b\f\v\0"`:               "\n\r\t\b\f\v\x00",
		`"\x27\x3c"`:                     "'<",
		`"\u00e1\u003c/script>"`:         "á</script>",
		`"\ud83d\ude00"`:                 "😀",
		`"\u{1F600}"`:                    "😀",
		`"\ud83d x"`:                     "\uFFFD x",
		"\"line\\\ncontinued\"":          "linecontinued",
		"\"crlf\\\r\ncontinued\"":        "crlfcontinued",
		"\"ls\\\u2028continued\"":        "lscontinued",
		`"\q\'"`:                         "q'",
		`"ünïcödé"`:                      "ünïcödé",
		`"{\"data\":{\"qid\":1}}"` + `;`: `{"data":{"qid":1}}`,
	} {
		got, n, ok := jsString([]byte(in))
		if !ok || got != want {
			t.Errorf("%q: %q %v; want %q", in, got, ok, want)
			continue
		}
		if rest := in[n:]; rest != "" && rest != ";" {
			t.Errorf("%q: consumed %d, left %q", in, n, rest)
		}
	}
	for _, in := range []string{``, `x"`, `"open`, "\"raw\nbreak\"", `"\x2"`, `"\u12"`, `"\u{110000}"`, `"\01"`, "`template`", `"\`} {
		if got, _, ok := jsString([]byte(in)); ok {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}

func TestPayloads(t *testing.T) {
	page := `<html><head><script type="application/json">{"x":"inlineQueryResults.results[\"k\"].push(\"{}\")"}</script>` +
		`<script>var r = window.ansFrontendGlobals.data.inlineQueryResults.results["k1"] = window.ansFrontendGlobals.data.inlineQueryResults.results["k1"] || [];` +
		`window.ansFrontendGlobals.data.inlineQueryResults.results["k1"].push("{\"data\":{\"question\":{\"qid\":12345678901234567890}}}");` +
		`window.ansFrontendGlobals.data.inlineQueryResults.results['k2'] = '{"data":{"n":1}}';` +
		`window.ansFrontendGlobals.data.inlineQueryResults.results["k3"].push({"data":{"n":2}});` +
		`window.ansFrontendGlobals.data.inlineQueryResults.results["k4"].push("{\"data\":");` +
		`if (window.ansFrontendGlobals.data.inlineQueryResults.results["k5"] == null) {}</script>` +
		`<!-- <script>window.ansFrontendGlobals.data.inlineQueryResults.results["c"].push("{}")</script> -->` +
		`<script>window.earlySettings = {"rootClsKey": "QuestionPageLoadable", pageOid: 987654321, "myrootClsKey": "x"};</script></head></html>`
	got, bad := payloads([]byte(page))
	if len(got) != 3 || bad != 1 {
		t.Fatalf("%d payloads, %d bad: %v", len(got), bad, got)
	}
	raw, _ := json.Marshal(got)
	if want := `[{"data":{"question":{"qid":12345678901234567890}}},{"data":{"n":1}},{"data":{"n":2}}]`; string(raw) != want {
		t.Errorf("payloads %s", raw)
	}
	if rootComponent([]byte(page)) != "QuestionPageLoadable" || pageOid([]byte(page)) != "987654321" {
		t.Errorf("settings %q %q", rootComponent([]byte(page)), pageOid([]byte(page)))
	}
}

func TestRichText(t *testing.T) {
	doc := `{"sections":[{"type":"plain","spans":[{"text":"Hello, "},{"text":"world","modifiers":{"bold":true}}]},` +
		`{"type":"image","spans":[{"text":"","modifiers":{"image":"https://example.com/i.png"}}]},{"type":"unordered-list","spans":[{"text":"item"}]}]}`
	for in, want := range map[any]string{doc: "Hello, world\nitem", "  plain text ": "plain text", "{not json": "{not json"} {
		if got := richText(in); got == nil || *got != want {
			t.Errorf("%v: %v", in, got)
		}
	}
	for _, in := range []any{nil, "", `{"sections":[]}`, `{"other":1}`, 5.0} {
		if got := richText(in); got != nil {
			t.Errorf("%v: %q", in, *got)
		}
	}
}

func FuzzPayloads(f *testing.F) {
	f.Add([]byte(`<script>x.inlineQueryResults.results["k"].push("{\"data\":{\"question\":{\"qid\":1,\"title\":\"{\\\"sections\\\":[]}\"}}}")</script>`))
	f.Add([]byte(`<script>x.inlineQueryResults.results['k'] = '\u{1F600}\x27'</script>`))
	f.Add([]byte(`<script>rootClsKey: "\ud800"; pageOid: 12</script>`))
	f.Fuzz(func(t *testing.T, page []byte) {
		got, bad := payloads(page)
		if bad < 0 {
			t.Fatal("negative count")
		}
		c := newCollector()
		for _, v := range got {
			c.walk(v, walkCtx{})
		}
		if s := rootComponent(page); !utf8.ValidString(s) {
			t.Errorf("root component %q is not UTF-8", s)
		}
		if n := pageOid(page); strings.Trim(n, "0123456789") != "" {
			t.Errorf("page oid %q", n)
		}
		_, _, _ = jsString(page)
	})
}

func TestRelayID(t *testing.T) {
	for in, want := range map[any]string{
		"UXVlc3Rpb25AMDoxNDcwMjU4Mzk=": "147025839", // Question@0:147025839
		"UXVlc3Rpb25AMTA6NDI=":         "42",        // Question@10:42
		"QW5zd2VyQDA6MTIz":             "",          // Answer@0:123
		"not base64!":                  "",
		nil:                            "",
	} {
		if got := relayID(in, "Question"); got != want {
			t.Errorf("%v: %q, want %q", in, got, want)
		}
	}
}
