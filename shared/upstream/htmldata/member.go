package htmldata

import (
	"bytes"
	"encoding/json"

	"github.com/meridian-data/meridian/shared/upstream"
)

// AssignedMember returns the JSON value of member key of the object that
// an inline script assigns to name: <JSON> in
// name = { other: …, key: <JSON>, … } (see the package comment).
func AssignedMember(page []byte, name, key string) (json.RawMessage, error) {
	switch {
	case name == "":
		return nil, upstream.MalformedFault("no name to look for in a %d-byte page", len(page))
	case key == "":
		return nil, upstream.MalformedFault("no member of %s to look for in a %d-byte page", name, len(page))
	}
	problem := ""
	for expr := range assignments(page, name) {
		v, p := memberAt(expr, key)
		if p == "" {
			return v, nil
		}
		problem = p
	}
	if problem != "" {
		return nil, upstream.MalformedFault("%s is assigned no object with a JSON %s member (%s) in a %d-byte page",
			name, key, problem, len(page))
	}
	return nil, upstream.MalformedFault("no %s assignment in a %d-byte page", name, len(page))
}

// memberAt reads member key of the object an assigned expression starts
// with; on failure it says why, without quoting the script.
func memberAt(expr []byte, key string) (json.RawMessage, string) {
	if bytes.HasPrefix(expr, jsonParse) {
		v, p := valueAt(expr)
		if p != "" {
			return nil, p
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil, "JSON.parse of something other than an object"
		}
		m, ok := obj[key]
		if !ok {
			return nil, "no " + key + " member"
		}
		return m, ""
	}
	if len(expr) == 0 || expr[0] != '{' {
		return nil, "not an object literal"
	}
	// Every member is read, as a later one of the same key replaces an
	// earlier one in JavaScript; members that are not JSON (functions,
	// variables, regular expressions) are skipped over.
	var found json.RawMessage
	problem := "no " + key + " member"
	seen := false // a member named key was read
	i := 1
	for {
		i = skipBlank(expr, i)
		if i < len(expr) && expr[i] == '}' {
			break
		}
		next := i // where the scan for the member's end starts
		if k, j, ok := memberName(expr, i); ok && k == key {
			seen = true
			found, problem = nil, "its "+key+" member is not key: <JSON>"
			if j = skipBlank(expr, j); j < len(expr) && expr[j] == ':' {
				start := skipBlank(expr, j+1)
				next = start
				v, n, p := jsonValue(expr[start:])
				switch e := skipBlank(expr, start+n); {
				case p != "":
					problem = "its " + key + " member is not JSON: " + p
				case e < len(expr) && (expr[e] == ',' || expr[e] == '}'):
					found, problem, next = v, "", e
				default:
					problem = "its " + key + " member is part of a longer expression"
				}
			}
		}
		end, ok := skipExpr(expr, next)
		if !ok {
			if seen {
				// The rest cannot be read: what was read stands.
				return found, problem
			}
			return nil, "a member before any " + key + " member could not be read, or the object is cut short"
		}
		i = end
		if expr[end] == '}' {
			break
		}
		i++
	}
	if problem == "" && !ends(expr, i+1) {
		return nil, "the object is part of a longer expression"
	}
	return found, problem
}

// memberName reads the name of the member at b[i] (an identifier, a
// number or a quoted string) and returns it and where it ends; false for
// other forms (spread, computed names), which skipExpr passes over.
func memberName(b []byte, i int) (string, int, bool) {
	if i >= len(b) {
		return "", 0, false
	}
	if c := b[i]; c == '"' || c == '\'' {
		s, n, ok := jsString(b[i:])
		return string(s), i + n, ok
	}
	j := i
	for j < len(b) && isIdent(b[j]) {
		j++
	}
	return string(b[i:j]), j, j > i
}

// skipBlank skips white space and comments.
func skipBlank(b []byte, i int) int {
	for {
		i = skipSpace(b, i)
		j, ok := commentEnd(b, i)
		if !ok {
			return i
		}
		i = j
	}
}

// commentEnd returns where the comment at b[i] ends; false when b[i]
// starts no comment. An unterminated block comment runs to the end.
func commentEnd(b []byte, i int) (int, bool) {
	if i+1 >= len(b) || b[i] != '/' {
		return i, false
	}
	switch b[i+1] {
	case '/':
		for i += 2; i < len(b) && b[i] != '\n' && b[i] != '\r'; i++ {
		}
		return i, true
	case '*':
		for i += 2; i+1 < len(b); i++ {
			if b[i] == '*' && b[i+1] == '/' {
				return i + 2, true
			}
		}
		return len(b), true
	}
	return i, false
}

// regexAfter are the words after which "/" starts a regular expression
// literal; after any other word or a number it divides.
var regexAfter = map[string]bool{
	"return": true, "typeof": true, "instanceof": true, "in": true, "of": true, "new": true, "delete": true,
	"void": true, "throw": true, "case": true, "do": true, "else": true, "yield": true, "await": true,
}

// closer maps closing brackets to their opening ones.
var closer = map[byte]byte{')': '(', ']': '[', '}': '{'}

// skipExpr returns the index of the "," or "}" that ends the JavaScript
// member value starting at b[i] in an object literal. It follows strings,
// template literals, comments, regular expression literals and brackets:
// enough to pass over functions and other values that are not JSON without
// running them. False when the text ends first or brackets do not match.
func skipExpr(b []byte, i int) (int, bool) {
	var open []byte // open brackets; '`' for a template literal's ${
	regexOK := true // "/" here starts a regular expression, not a division
	for i < len(b) {
		c := b[i]
		if isSpace(c) {
			i++
			continue
		}
		if j, ok := commentEnd(b, i); ok {
			if j >= len(b) {
				return 0, false
			}
			i = j
			continue
		}
		switch {
		case c == '"' || c == '\'':
			n, ok := quotedLen(b[i:])
			if !ok {
				return 0, false
			}
			i += n
			regexOK = false
			continue
		case c == '`':
			j, inExpr, ok := templateRest(b, i+1)
			if !ok {
				return 0, false
			}
			if inExpr {
				open = append(open, '`')
			}
			i, regexOK = j, inExpr
			continue
		case c == '/' && regexOK:
			n, ok := regexLen(b[i:])
			if !ok {
				return 0, false
			}
			i += n
			regexOK = false
			continue
		case isIdent(c):
			j := i
			for j < len(b) && isIdent(b[j]) {
				j++
			}
			regexOK = regexAfter[string(b[i:j])]
			i = j
			continue
		case c == '(' || c == '[' || c == '{':
			open = append(open, c)
		case c == ')' || c == ']' || c == '}':
			if len(open) == 0 {
				return i, c == '}'
			}
			top := open[len(open)-1]
			open = open[:len(open)-1]
			if top == '`' && c == '}' {
				j, inExpr, ok := templateRest(b, i+1)
				if !ok {
					return 0, false
				}
				if inExpr {
					open = append(open, '`')
				}
				i, regexOK = j, inExpr
				continue
			}
			if top != closer[c] {
				return 0, false
			}
			// After a block a statement may start with a regular
			// expression; after ) or ] a "/" divides.
			regexOK = c == '}'
			i++
			continue
		case c == ',' && len(open) == 0:
			return i, true
		}
		regexOK = true // after an operator or punctuation
		i++
	}
	return 0, false
}

// quotedLen is the length of the string literal b starts with.
func quotedLen(b []byte) (int, bool) {
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case b[0]:
			return i + 1, true
		case '\\':
			i++ // the escaped character, a line continuation's \n included
			if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
				i++
			}
		case '\n', '\r':
			return 0, false
		}
	}
	return 0, false
}

// templateRest reads template literal text from b[i] to its closing
// backquote, or to a "${" whose expression follows (inExpr); it returns
// where reading goes on.
func templateRest(b []byte, i int) (next int, inExpr, ok bool) {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '`':
			return i + 1, false, true
		case '$':
			if i+1 < len(b) && b[i+1] == '{' {
				return i + 2, true, true
			}
		}
	}
	return 0, false, false
}

// regexLen is the length of the regular expression literal b starts with,
// flags included.
func regexLen(b []byte) (int, bool) {
	inClass := false
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\\':
			i++
		case c == '\n' || c == '\r':
			return 0, false
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == '/' && !inClass:
			i++
			for i < len(b) && isIdent(b[i]) {
				i++
			}
			return i, true
		}
	}
	return 0, false
}
