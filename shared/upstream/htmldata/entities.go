package htmldata

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// Sites write JSON-LD text the way they write their HTML, with character
// references (Etsy's review text says "we&#39;ve"), although a script's
// text is raw and no browser decodes them. JSON-LD readers decode them
// here, once: "&amp;#39;" becomes "&#39;", never "'".

// maxReference bounds a character reference's length ("&CounterClockwiseContourIntegral;" is the longest name).
const maxReference = 40

// DecodeReferences decodes the complete character references in s (named
// or numeric, ended by ";") exactly once. An ampersand that starts no
// complete reference ("AT&T", "a=1&copy=2", "&ampx;") is kept as it is:
// JSON-LD text is not HTML text, where a few names decode without their
// semicolon.
func DecodeReferences(s string) string {
	i := strings.IndexByte(s, '&')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i >= 0 {
		b.WriteString(s[:i])
		s = s[i:]
		n := referenceLen(s)
		if n == 0 {
			b.WriteByte('&')
			s = s[1:]
		} else {
			b.WriteString(html.UnescapeString(s[:n]))
			s = s[n:]
		}
		i = strings.IndexByte(s, '&')
	}
	b.WriteString(s)
	return b.String()
}

// referenceLen is the length of the complete character reference at the
// start of s ("&name;", "&#N;" or "&#xH;" that the HTML tables know), 0
// when there is none.
func referenceLen(s string) int {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > maxReference {
		return 0
	}
	for _, c := range s[1:end] {
		if !(c == '#' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return 0
		}
	}
	ref := s[:end+1]
	out := html.UnescapeString(ref)
	// A name the tables do not know is left as it is; one that decodes
	// only by a legacy prefix ("&ampx;" as "&" + "x;") leaves the rest of
	// its name and the semicolon behind.
	if out == ref || (out != ";" && strings.HasSuffix(out, ";")) {
		return 0
	}
	return end + 1
}

// decodeJSONText rewrites a JSON value with the character references in
// its string values decoded once (object keys are names, not text); keys,
// order and numbers are kept as written.
func decodeJSONText(v json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(v, []byte("&")) && !bytes.Contains(v, []byte(`\u0026`)) {
		return v, nil
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	type frame struct {
		object bool
		n      int // keys and values written so far
	}
	var (
		out   bytes.Buffer
		stack []frame
	)
	for {
		tok, err := d.Token()
		if err != nil {
			if len(stack) == 0 && out.Len() > 0 {
				return out.Bytes(), nil
			}
			return nil, err
		}
		isKey := false
		if delim, ok := tok.(json.Delim); ok && (delim == '}' || delim == ']') {
			stack = stack[:len(stack)-1]
			out.WriteByte(byte(delim))
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.object && top.n%2 == 1:
				out.WriteByte(':')
			case top.n > 0:
				out.WriteByte(',')
			}
			isKey = top.object && top.n%2 == 0
			top.n++
		}
		switch t := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(t))
			stack = append(stack, frame{object: t == '{'})
		case string:
			if !isKey {
				t = DecodeReferences(t)
			}
			enc, _ := json.Marshal(t)
			out.Write(enc)
		case json.Number:
			out.WriteString(t.String())
		case bool:
			out.WriteString(strconv.FormatBool(t))
		case nil:
			out.WriteString("null")
		}
	}
}
