package quora

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// resultsMarker starts every inline query result in a page's scripts.
var resultsMarker = []byte("inlineQueryResults.results[")

// maxBad bounds the results that fail to decode before a page is given
// up on: a page full of broken results is not worth reading on.
const maxBad = 64

// payloads are a page's inline query results, decoded, in page order; bad
// counts the ones that did not decode (a cut page loses those, not all).
func payloads(page []byte) (out []any, bad int) {
	for s := range htmldata.Scripts(page) {
		if !classic(s.Type) {
			continue
		}
		text := s.Text
		for bad < maxBad {
			i := bytes.Index(text, resultsMarker)
			if i < 0 {
				break
			}
			text = text[i+len(resultsMarker):]
			v, n, ok, value := resultAt(text)
			if !ok && value {
				bad++ // a result was there and did not decode
			}
			text = text[n:] // after what was read, so no byte is read twice
			if ok {
				out = append(out, v)
			}
		}
	}
	return out, bad
}

// classic reports whether a script type runs as JavaScript.
func classic(typ string) bool {
	switch typ {
	case "", "text/javascript", "application/javascript", "module", "text/ecmascript", "application/ecmascript":
		return true
	}
	return false
}

// resultAt reads, after the marker, `"<key>"].push(<value>)` or
// `"<key>"] = <value>`, where the value is a string literal holding JSON
// text or, should a page ever inline it, the JSON itself. n is the bytes
// consumed; value says a value was there (a quote or a brace), so that a
// failure is a result that did not decode, not another use of the store
// (`results[k] = results[k] || []`).
func resultAt(b []byte) (v any, n int, ok, value bool) {
	i := skipSpace(b, 0)
	_, m, ok := jsString(b[i:])
	if !ok {
		return nil, i + m, false, false
	}
	i = skipSpace(b, i+m)
	if i >= len(b) || b[i] != ']' {
		return nil, i, false, false
	}
	i = skipSpace(b, i+1)
	switch {
	case bytes.HasPrefix(b[i:], []byte(".push(")):
		i = skipSpace(b, i+len(".push("))
	case i < len(b) && b[i] == '=' && (i+1 >= len(b) || b[i+1] != '='):
		i = skipSpace(b, i+1)
	default:
		return nil, i, false, false
	}
	if i >= len(b) {
		return nil, i, false, false
	}
	switch b[i] {
	case '{', '[':
		d := json.NewDecoder(bytes.NewReader(b[i:]))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			// Resume after the bytes the decoder read.
			return nil, i + max(int(d.InputOffset()), 1), false, true
		}
		return v, i + int(d.InputOffset()), true, true
	case '"', '\'':
		s, m, ok := jsString(b[i:])
		if !ok {
			return nil, i + max(m, 1), false, true
		}
		if v, ok = decodeJSON(s); !ok {
			return nil, i + m, false, true
		}
		return v, i + m, true, true
	}
	return nil, i, false, false
}

// decodeJSON decodes one JSON text with numbers kept exact.
func decodeJSON(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	if d.More() {
		return nil, false
	}
	return v, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsString reads a JavaScript string literal at the start of b, single-
// or double-quoted, and returns its value (valid UTF-8: a lone surrogate
// becomes U+FFFD) and its length in bytes. It follows the language's
// escapes: \n \r \t \b \f \v \0, \xHH, \uHHHH (surrogate pairs joined),
// \u{H…}, line continuations, and \c for any other c. A raw line break
// ends nothing: the literal is then invalid, as in JavaScript. On failure
// n is how far the scan got, so that a caller can resume after it rather
// than read the same bytes again.
func jsString(b []byte) (s string, n int, ok bool) {
	if len(b) == 0 || (b[0] != '"' && b[0] != '\'') {
		return "", 0, false
	}
	quote := b[0]
	var out strings.Builder
	for i := 1; i < len(b); {
		c := b[i]
		switch {
		case c == quote:
			return out.String(), i + 1, true
		case c == '\n' || c == '\r':
			return "", i, false
		case c != '\\':
			r, size := utf8.DecodeRune(b[i:])
			out.WriteRune(r)
			i += size
			continue
		}
		// An escape.
		if i+1 >= len(b) {
			return "", len(b), false
		}
		e := b[i+1]
		i += 2
		switch e {
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'v':
			out.WriteByte('\v')
		case '0':
			if i < len(b) && b[i] >= '0' && b[i] <= '9' {
				return "", i, false // a legacy octal escape: not produced by serialisers
			}
			out.WriteByte(0)
		case 'x':
			r, ok := hexRune(b, i, 2)
			if !ok {
				return "", i, false
			}
			out.WriteRune(r)
			i += 2
		case 'u':
			r, n, ok := unicodeEscape(b, i)
			if !ok {
				return "", i, false
			}
			i += n
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by \u low surrogate is one character.
				if r < 0xDC00 && i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
					if r2, n2, ok := unicodeEscape(b, i+2); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
						out.WriteRune(utf16.DecodeRune(r, r2))
						i += 2 + n2
						continue
					}
				}
				r = utf8.RuneError
			}
			out.WriteRune(r)
		case '\r':
			if i < len(b) && b[i] == '\n' {
				i++
			}
		case '\n':
		default:
			if e >= 0x80 {
				r, size := utf8.DecodeRune(b[i-1:])
				i += size - 1
				if r == '\u2028' || r == '\u2029' {
					continue // a line continuation
				}
				out.WriteRune(r)
				continue
			}
			out.WriteByte(e)
		}
	}
	return "", len(b), false
}

// unicodeEscape reads the digits after \u: four hex digits or {H…}.
func unicodeEscape(b []byte, i int) (rune, int, bool) {
	if i < len(b) && b[i] == '{' {
		end := bytes.IndexByte(b[i:], '}')
		if end < 2 || end > 7 {
			return 0, 0, false
		}
		v, err := strconv.ParseUint(string(b[i+1:i+end]), 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, 0, false
		}
		return rune(v), end + 1, true
	}
	r, ok := hexRune(b, i, 4)
	return r, 4, ok
}

func hexRune(b []byte, i, n int) (rune, bool) {
	if i+n > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+n]), 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

// rootComponent is the page's root component as its early settings name
// it (rootClsKey): "" when the page names none.
func rootComponent(page []byte) string {
	v, _ := setting(page, "rootClsKey")
	return v
}

// pageOid is the id of the object the page is about, when its early
// settings name one.
func pageOid(page []byte) string {
	_, n := setting(page, "pageOid")
	return n
}

// setting finds name: value in the page's classic scripts (a JSON or
// JavaScript object literal: the name quoted or bare) and returns the
// value when it is a string literal (s) or a whole number (n).
func setting(page []byte, name string) (s, n string) {
	key := []byte(name)
	for sc := range htmldata.Scripts(page) {
		if !classic(sc.Type) {
			continue
		}
		text := sc.Text
		for {
			i := bytes.Index(text, key)
			if i < 0 {
				break
			}
			before := byte(' ')
			if i > 0 {
				before = text[i-1]
			}
			rest := text[i+len(key):]
			text = rest
			if isIdent(before) {
				continue // part of a longer name
			}
			j := 0
			if before == '"' || before == '\'' {
				if j >= len(rest) || rest[j] != before {
					continue
				}
				j++
			} else if j < len(rest) && isIdent(rest[j]) {
				continue
			}
			j = skipSpace(rest, j)
			if j >= len(rest) || rest[j] != ':' {
				continue
			}
			j = skipSpace(rest, j+1)
			v, m, ok := jsString(rest[j:])
			if ok {
				return v, ""
			}
			if m > 0 {
				text = rest[j+m:] // a broken literal is not read again
				continue
			}
			k := j
			for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
				k++
			}
			if k > j {
				return "", string(rest[j:k])
			}
		}
	}
	return "", ""
}

func isIdent(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
