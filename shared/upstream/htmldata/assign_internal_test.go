package htmldata

import "testing"

// TestJSString: JavaScript's string escapes, as JSON.parse's argument needs
// them unescaped.
func TestJSString(t *testing.T) {
	ok := []struct{ lit, want string }{
		{`"plain"`, "plain"},
		{`'it\'s'`, "it's"},
		{`"say \"hi\""`, `say "hi"`},
		{`"\n\t\r\b\f\v\0"`, "\n\t\r\b\f\v\x00"},
		{`"\\u0041"`, `\u0041`},
		{`"\x41\x7e\xe9"`, "A~é"},
		{`"\u00e9\u{1F600}\u{41}"`, "é😀A"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\ud83d!"`, "\uFFFD!"},
		{`"\ud83d\u0041"`, "\uFFFDA"},
		{`"\ude00"`, "\uFFFD"},
		{"\"a\\\nb\\\r\nc\"", "abc"},
		{`"\q\/\<"`, "q/<"},
		{`"'"`, "'"},
		{`'"'`, `"`},
		{"\"caf\xc3\xa9\"", "café"},
	}
	for _, c := range ok {
		got, n, good := jsString([]byte(c.lit + ");"))
		if !good || string(got) != c.want || n != len(c.lit) {
			t.Errorf("%s: got %q, %d, %v; want %q, %d", c.lit, got, n, good, c.want, len(c.lit))
		}
	}
	for _, lit := range []string{
		`"unterminated`, `"ends in a backslash\`, "\"a\nb\"", "\"a\rb\"", `"\01"`, `"\1"`, `"\x4"`, `"\xZZ"`,
		`"\u12"`, `"\u{}"`, `"\u{110000}"`, `"\u{1234567}"`, `"\u{12`, `"\u{G}"`,
	} {
		if got, _, good := jsString([]byte(lit)); good {
			t.Errorf("%s: accepted as %q", lit, got)
		}
	}
}
