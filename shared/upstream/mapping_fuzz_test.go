package upstream

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzMappingHelpers checks the helpers adapters read upstream answers
// with, on arbitrary text, bounds and times: NumberID keeps a number's text
// exactly; Clip returns a prefix of at most n bytes that splits no
// character (valid UTF-8 stays valid) and gives up less than one
// character's worth; UntilUnix is never negative and is the wait until a
// future Unix second; FlexID keeps a string as written and a number's
// exact digits, and refuses every other JSON value; Text and Trimmed are
// nil exactly for empty text.
func FuzzMappingHelpers(f *testing.F) {
	for _, s := range []struct {
		text string
		n    int
		now  int64
	}{
		{"12345678901234567890123", 5, 1_800_000_000},
		{"héllo", 2, 1_800_000_000},
		{"日本語のテキスト", 7, 0},
		{"\xff\xfe\x80\x80abc", 3, -1},
		{"1800000042", 0, 1_800_000_000},
		{" 1800000042\n", 10, 1_799_999_999},
		{"-5", 1, 1_800_000_000},
		{"9223372036854775807", 64, math.MinInt64},
		{`"-2140479"`, 200, 0},
		{`12345678901234567890`, 200, 0},
		{`-0.5e-7`, 1, 0},
		{`null`, 4, 0},
		{`{"id":1}`, 4, 0},
		{`[1]`, 1, 0},
		{`true`, 1, 0},
		{`"\ud800"`, 1, 0},
		{"  \t ", 2, 0},
		{"", 0, 0},
		// Found by this fuzzer: Clip sliced s[:n] with a negative bound and panicked.
		{"0", -2, 0},
	} {
		f.Add(s.text, s.n, s.now)
	}
	f.Fuzz(func(t *testing.T, text string, n int, now int64) {
		// NumberID: nil for an absent number, else its text unchanged.
		if id := NumberID(json.Number(text)); (id == nil) != (text == "") || id != nil && *id != text {
			t.Fatalf("NumberID(%q) = %v", text, id)
		}

		// Clip: a prefix within the bound, cut at a character start.
		clipped := Clip(text, n)
		bound := max(n, 0)
		switch {
		case !strings.HasPrefix(text, clipped):
			t.Fatalf("Clip(%q, %d) = %q is not a prefix", text, n, clipped)
		case len(text) <= bound && clipped != text:
			t.Fatalf("Clip(%q, %d) = %q shortened a text within the bound", text, n, clipped)
		case len(clipped) > bound:
			t.Fatalf("Clip(%q, %d) = %q is longer than %d bytes", text, n, clipped, bound)
		case utf8.ValidString(text) && !utf8.ValidString(clipped):
			t.Fatalf("Clip(%q, %d) = %q splits a character", text, n, clipped)
		case utf8.ValidString(text) && bound-len(clipped) >= utf8.UTFMax && len(text) > bound:
			t.Fatalf("Clip(%q, %d) = %q cut more than a character", text, n, clipped)
		}

		// UntilUnix: the wait until a future second, else 0.
		at := time.Unix(now, 0)
		wait := UntilUnix(text, at)
		secs, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		switch {
		case wait < 0:
			t.Fatalf("UntilUnix(%q, %d) = %v is negative", text, now, wait)
		case (err != nil || secs <= 0 || secs <= now) && wait != 0:
			t.Fatalf("UntilUnix(%q, %d) = %v for a value that is not a future second", text, now, wait)
		case err == nil && secs > 0 && secs > now && now > -1<<40 && secs-now < 1<<32 && wait != time.Duration(secs-now)*time.Second:
			t.Fatalf("UntilUnix(%q, %d) = %v, want %ds", text, now, wait, secs-now)
		}

		// FlexID: a string as written, a number's digits, null as empty;
		// nothing else.
		var id FlexID
		flexErr := json.Unmarshal([]byte(text), &id)
		var v any
		ok := json.Valid([]byte(text))
		if ok {
			dec := json.NewDecoder(strings.NewReader(text))
			dec.UseNumber()
			ok = dec.Decode(&v) == nil
		}
		var want string
		switch x := v.(type) {
		case nil:
		case string:
			want = x
		case json.Number:
			want = x.String()
		default:
			ok = false
		}
		if ok != (flexErr == nil) || ok && string(id) != want {
			t.Fatalf("FlexID from %q: %q, %v; want %q (a string, number or null: %v)", text, id, flexErr, want, ok)
		}

		// Text and Trimmed: nil exactly when nothing is left.
		if p := Text(text); (p == nil) != (text == "") || p != nil && *p != text {
			t.Fatalf("Text(%q) = %v", text, p)
		}
		trimmed := strings.TrimSpace(text)
		if p := Trimmed(text); (p == nil) != (trimmed == "") || p != nil && *p != trimmed {
			t.Fatalf("Trimmed(%q) = %v", text, p)
		}
	})
}
