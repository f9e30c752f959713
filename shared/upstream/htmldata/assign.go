package htmldata

import (
	"bytes"
	"encoding/json"
	"iter"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream"
)

// maxAssignTries bounds the assignments of one name that Assigned and
// AssignedMember try to decode, so a page repeating the name cannot make
// them quadratic.
const maxAssignTries = 64

// Assigned returns the JSON value that an inline script assigns to name
// (see the package comment for the forms supported).
func Assigned(page []byte, name string) (json.RawMessage, error) {
	if name == "" {
		return nil, upstream.MalformedFault("no name to look for in a %d-byte page", len(page))
	}
	problem := ""
	for expr := range assignments(page, name) {
		v, p := valueAt(expr)
		if p == "" {
			return v, nil
		}
		problem = p
	}
	if problem != "" {
		return nil, upstream.MalformedFault("%s is assigned no JSON value (%s) in a %d-byte page",
			name, problem, len(page))
	}
	return nil, upstream.MalformedFault("no script assigns %s in a %d-byte page", name, len(page))
}

// assignments yields the expressions that the page's inline scripts assign
// to name, in document order, at most maxAssignTries of them.
func assignments(page []byte, name string) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		needle := []byte(name)
		tries := 0
		for s := range Scripts(page) {
			if isData(s.Type) {
				continue
			}
			text := s.Text
			for i := 0; ; {
				if tries >= maxAssignTries {
					return
				}
				k := bytes.Index(text[i:], needle)
				if k < 0 {
					break
				}
				at := i + k
				i = at + len(needle)
				j, ok := assignmentAt(text, at, len(needle))
				if !ok {
					continue
				}
				tries++
				if !yield(text[j:]) {
					return
				}
			}
		}
	}
}

// assignmentAt tells whether the name at text[at:at+n] is assigned to, and
// where the assigned expression starts.
func assignmentAt(text []byte, at, n int) (int, bool) {
	end := at + n
	var before byte
	if at > 0 {
		before = text[at-1]
	}
	if before == '"' || before == '\'' {
		// window["name"] = ...
		open := at - 2
		for open >= 0 && isSpace(text[open]) {
			open--
		}
		if open < 0 || text[open] != '[' || end >= len(text) || text[end] != before {
			return 0, false
		}
		end = skipSpace(text, end+1)
		if end >= len(text) || text[end] != ']' {
			return 0, false
		}
		end++
	} else if isIdent(before) || end < len(text) && isIdent(text[end]) {
		return 0, false // part of a longer identifier
	}
	end = skipSpace(text, end)
	if end >= len(text) || text[end] != '=' {
		return 0, false
	}
	if end+1 < len(text) && (text[end+1] == '=' || text[end+1] == '>') {
		return 0, false // a comparison or an arrow function
	}
	return skipSpace(text, end+1), true
}

func isIdent(c byte) bool {
	return c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

var jsonParse = []byte("JSON.parse(")

// valueAt decodes the JSON value an assigned expression starts with; on
// failure it says why, without quoting the script.
func valueAt(expr []byte) (json.RawMessage, string) {
	v, n, p := jsonValue(expr)
	switch {
	case p != "":
		return nil, p
	case !ends(expr, n) && bytes.HasPrefix(expr, jsonParse):
		return nil, "JSON.parse inside a longer expression"
	case !ends(expr, n):
		return nil, "the JSON value is part of a longer expression"
	}
	return v, ""
}

// jsonValue decodes the strict JSON value, or JSON.parse of one string
// literal, that expr starts with and says how many bytes it spans; on
// failure it says why, without quoting the script.
func jsonValue(expr []byte) (json.RawMessage, int, string) {
	if bytes.HasPrefix(expr, jsonParse) {
		k := skipSpace(expr, len(jsonParse))
		if k >= len(expr) || expr[k] != '"' && expr[k] != '\'' {
			return nil, 0, "JSON.parse of something other than a quoted string"
		}
		str, n, ok := jsString(expr[k:])
		if !ok {
			return nil, 0, "JSON.parse of an unterminated or unsupported string literal"
		}
		k = skipSpace(expr, k+n)
		if k >= len(expr) || expr[k] != ')' {
			return nil, 0, "JSON.parse with more than a string literal"
		}
		var v json.RawMessage
		if err := json.Unmarshal(str, &v); err != nil {
			return nil, 0, "JSON.parse argument: " + jsonProblem(err)
		}
		return v, k + 1, ""
	}
	dec := json.NewDecoder(bytes.NewReader(expr))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, 0, jsonProblem(err)
	}
	return v, int(dec.InputOffset()), ""
}

// ends tells whether the expression ends at b[i]: what follows could not
// continue it (an operator, a member access or a call would).
func ends(b []byte, i int) bool {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	if i >= len(b) {
		return true
	}
	switch b[i] {
	case ';', ',', ')', '}', '\n', '\r':
		return true
	case '/':
		return i+1 < len(b) && (b[i+1] == '/' || b[i+1] == '*')
	}
	return false
}

// jsString unescapes the JavaScript string literal b starts with (its quote
// is b[0]) and says how many bytes it spans.
func jsString(b []byte) (out []byte, n int, ok bool) {
	q := b[0]
	out = []byte{}
	for i := 1; i < len(b); {
		c := b[i]
		switch {
		case c == q:
			return out, i + 1, true
		case c == '\n' || c == '\r':
			return nil, 0, false // a literal cannot span lines
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(b) {
			return nil, 0, false
		}
		e := b[i+1]
		i += 2
		switch e {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'v':
			out = append(out, '\v')
		case '0':
			if i < len(b) && '0' <= b[i] && b[i] <= '9' {
				return nil, 0, false // legacy octal
			}
			out = append(out, 0)
		case '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return nil, 0, false // legacy octal
		case '\r':
			if i < len(b) && b[i] == '\n' {
				i++
			}
		case '\n':
			// a line continuation adds nothing
		case 'x':
			r, ok := hexRune(b, i, 2)
			if !ok {
				return nil, 0, false
			}
			out = utf8.AppendRune(out, r)
			i += 2
		case 'u':
			r, m, ok := unicodeEscape(b, i)
			if !ok {
				return nil, 0, false
			}
			i += m
			if utf16.IsSurrogate(r) {
				// A high surrogate pairs with a following \uDC00-\uDFFF;
				// alone, it is not valid Unicode.
				lo, m2, ok2 := rune(0), 0, false
				if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
					lo, m2, ok2 = unicodeEscape(b, i+2)
				}
				if pair := utf16.DecodeRune(r, lo); ok2 && pair != utf8.RuneError {
					r = pair
					i += 2 + m2
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			// Any other escaped character stands for itself.
			out = append(out, e)
		}
	}
	return nil, 0, false
}

// unicodeEscape reads what follows "\u": four hex digits or {hex}.
func unicodeEscape(b []byte, i int) (rune, int, bool) {
	if i < len(b) && b[i] == '{' {
		j := i + 1
		var r rune
		for j < len(b) && b[j] != '}' {
			d, ok := hexDigit(b[j])
			if !ok || j-i > 6 {
				return 0, 0, false
			}
			r = r<<4 | d
			j++
		}
		if j >= len(b) || j == i+1 || r > utf8.MaxRune {
			return 0, 0, false
		}
		return r, j + 1 - i, true
	}
	r, ok := hexRune(b, i, 4)
	return r, 4, ok
}

func hexRune(b []byte, i, n int) (rune, bool) {
	if i+n > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+n] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}
