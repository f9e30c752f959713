package booking

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// The hotel page keeps its data in booking.env, a JavaScript object
// literal (B = window.booking = { …, env: { b_hotel_id: '1322386',
// b_rooms_available_and_soldout: [ … ], … } }) or in assignments
// (booking.env.b_map_center_latitude = 38.7). htmldata reads one level of
// a literal; these read a member at any depth: the scripts come from the
// HTML tokenizer (htmldata.Scripts), and the value after the member's name
// is decoded as JSON (encoding/json) or read as one JavaScript string or
// number literal. Nothing is evaluated.

// maxMemberTries bounds the occurrences of one name tried per page.
const maxMemberTries = 64

// memberValues yields, for each inline script occurrence of name followed
// by ":" or "=" (not "==" or "=>"), the text from the value on.
func memberValues(page []byte, name string, yield func(rest []byte) bool) {
	tries := 0
	for s := range htmldata.Scripts(page) {
		if strings.HasSuffix(s.Type, "json") || s.Src != "" {
			continue
		}
		text := s.Text
		for from := 0; from < len(text); {
			i := bytes.Index(text[from:], []byte(name))
			if i < 0 {
				break
			}
			at := from + i
			from = at + len(name)
			if tries++; tries > maxMemberTries {
				return
			}
			if at > 0 && identByte(text[at-1]) {
				continue // part of a longer name
			}
			j := at + len(name)
			if at > 0 && (text[at-1] == '"' || text[at-1] == '\'') {
				if j >= len(text) || text[j] != text[at-1] {
					continue
				}
				j++ // the closing quote of a quoted member name
			} else if j < len(text) && identByte(text[j]) {
				continue
			}
			j = skipBlank(text, j)
			if j >= len(text) || (text[j] != ':' && text[j] != '=') {
				continue
			}
			if text[j] == '=' && j+1 < len(text) && (text[j+1] == '=' || text[j+1] == '>') {
				continue
			}
			if !yield(text[skipBlank(text, j+1):]) {
				return
			}
		}
	}
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf
}

func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonMember is the first JSON value assigned to name in the page's
// inline scripts.
func jsonMember(page []byte, name string) (json.RawMessage, bool) {
	var out json.RawMessage
	memberValues(page, name, func(rest []byte) bool {
		dec := json.NewDecoder(bytes.NewReader(rest))
		dec.UseNumber()
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return true // not JSON there: try the next occurrence
		}
		out = v
		return false
	})
	return out, out != nil
}

// literalMember is the first string or number literal assigned to name in
// the page's inline scripts, as its value ('EUR' → EUR, 38.7 → 38.7).
func literalMember(page []byte, name string) (string, bool) {
	var out string
	found := false
	memberValues(page, name, func(rest []byte) bool {
		if v, ok := jsLiteral(rest); ok {
			out, found = v, true
			return false
		}
		return true
	})
	return out, found
}

// jsLiteral reads the string or number literal b starts with.
func jsLiteral(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	if q := b[0]; q == '\'' || q == '"' {
		var sb strings.Builder
		for i := 1; i < len(b); i++ {
			c := b[i]
			switch {
			case c == q:
				return sb.String(), true
			case c == '\n':
				return "", false
			case c == '\\' && i+1 < len(b):
				i++
				switch e := b[i]; e {
				case 'n':
					sb.WriteByte('\n')
				case 't':
					sb.WriteByte('\t')
				case 'u':
					if i+4 < len(b) {
						if r, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 32); err == nil {
							sb.WriteRune(rune(r))
							i += 4
							continue
						}
					}
					return "", false
				default:
					sb.WriteByte(e) // \' \" \\ \/ and the rest stand for themselves
				}
			default:
				sb.WriteByte(c)
			}
		}
		return "", false
	}
	end := 0
	for end < len(b) && (b[end] == '-' || b[end] == '+' || b[end] == '.' || b[end] >= '0' && b[end] <= '9') {
		end++
	}
	if end == 0 {
		return "", false
	}
	if _, err := strconv.ParseFloat(string(b[:end]), 64); err != nil {
		return "", false
	}
	return string(b[:end]), true
}

// apolloStore is the page's Apollo cache: the application/json script
// (data-capla-store-data="apollo" on the site's capla pages) whose object
// has a ROOT_QUERY.
func apolloStore(page []byte) (map[string]json.RawMessage, bool) {
	for s := range htmldata.Scripts(page) {
		if s.Type != "application/json" {
			continue
		}
		text := bytes.TrimSpace(s.Text)
		if len(text) == 0 || text[0] != '{' || !bytes.Contains(text, []byte(`"ROOT_QUERY"`)) {
			continue
		}
		var store map[string]json.RawMessage
		if json.Unmarshal(text, &store) != nil {
			continue
		}
		if _, ok := store["ROOT_QUERY"]; ok {
			return store, true
		}
	}
	return nil, false
}

// maxRefDepth bounds how deep references are followed (the cache may hold
// cycles; the data read here nests a few levels).
const maxRefDepth = 12

// inline replaces the Apollo references ({"__ref": "Type:id"}) in v with
// the cache's objects, so normalised and inline caches read the same.
func inline(store map[string]json.RawMessage, v json.RawMessage, depth int) json.RawMessage {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || depth > maxRefDepth || (v[0] != '{' && v[0] != '[') {
		return v
	}
	if v[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			return v
		}
		for i := range items {
			items[i] = inline(store, items[i], depth+1)
		}
		out, _ := json.Marshal(items)
		return out
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		return v
	}
	if ref, ok := obj["__ref"]; ok && len(obj) == 1 {
		var key string
		if json.Unmarshal(ref, &key) == nil {
			if target, ok := store[key]; ok {
				return inline(store, target, depth+1)
			}
		}
		return json.RawMessage("null")
	}
	for k, child := range obj {
		obj[k] = inline(store, child, depth+1)
	}
	out, _ := json.Marshal(obj)
	return out
}
