// Package htmldata extracts the JSON that public web pages embed for their
// own scripts, for adapters of sources that publish no API. Pages are read
// with the HTML tokenizer of golang.org/x/net/html, never with regular
// expressions, so comments, case, attribute order and the escaping rules of
// script elements are handled as a browser handles them.
//
// The API, each function taking the page's bytes:
//
//   - Scripts iterates over the script elements (id, type, src, raw text).
//   - ScriptByID returns the raw text of the script with a given id.
//   - NextData returns the JSON of Next.js's <script id="__NEXT_DATA__">.
//   - AstroIslands returns Astro's <astro-island> elements, each with its
//     component's names and its props attribute decoded from Astro's
//     [type, value] serialisation to plain JSON (see its comment).
//   - JSONLD returns the objects of every application/ld+json script, with
//     top-level arrays and @graph flattened; JSONLDOfType keeps those of one
//     schema.org @type (a string or an array, compared case-sensitively;
//     "Product" also matches "schema:Product" and the schema.org IRIs).
//     Character references in their string values are decoded once
//     (entities.go), as sites write them there as in their HTML.
//   - Assigned returns the JSON value an inline script assigns to a name.
//   - AssignedMember returns the JSON value of one member of an object
//     literal an inline script assigns to a name.
//   - Challenge tells whether the page is a bot-protection block or
//     challenge page instead of the content (see its comment).
//
// Script text is raw: HTML entities are not decoded inside scripts, as in a
// browser. A data script may be wrapped in an HTML comment or a CDATA
// section (also behind // or /* */), may start with a byte order mark and
// may end with a semicolon; "<\/script>" inside JSON strings is plain JSON.
//
// Assigned finds, in scripts that are not JSON data blocks, the name as an
// identifier or member (name, window.name, var/let/const name) or in
// brackets (window["name"], window['name']), followed by "=" (not "==" or
// "=>"), and decodes one strict JSON value there with encoding/json, so
// braces inside strings are handled. The value must end the expression: a
// ";", ",", ")", "}", line end, comment or the script's end follows it. The
// value may also be JSON.parse of one single- or double-quoted string
// literal, which is unescaped as JavaScript does. JavaScript object
// literals that are not JSON (unquoted keys, single quotes, \x escapes,
// undefined, trailing commas) and template literals are not supported: the
// name is then reported as assigned no JSON value. When a name is assigned
// several times, the first JSON assignment wins.
//
// AssignedMember finds the same assignments and reads an object literal
// there, name = { other: …, key: <JSON>, … }, as pages that wrap their data
// in one do (window._dida_config_._init_data_ = { data: {…} }). Member
// names may be bare, numbers or quoted; the wanted member's value is
// decoded as Assigned decodes a value and must be followed by "," or "}",
// and the object must end the expression as Assigned's value must. Other
// members need not be JSON: their values (functions, variables, regular
// expression and template literals) are skipped by following strings,
// comments and brackets, without running anything. A member that cannot
// be followed (an unterminated string, unmatched brackets) stops reading:
// before the wanted member that is a fault, after it what was read stands.
// As in JavaScript, a later member of the same name replaces an earlier
// one. The value may also be JSON.parse of a string literal holding an
// object. The first assignment with a JSON member of that name wins.
//
// Errors are *upstream.Fault of kind Malformed. Their reason says what was
// missing or invalid and the page's size in bytes, never any of the page's
// content: pages may carry personal data and reasons are logged. A JSON
// error is reduced to its class and byte offset for the same reason.
package htmldata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Script is one script element of a page.
type Script struct {
	// ID and Src are the attributes' values, entities decoded.
	ID, Src string
	// Type is the type attribute's media type, lowercased and without
	// parameters; "" when absent, which means classic JavaScript.
	Type string
	// Text is the element's raw text. It shares the page's memory when the
	// tokenizer's offsets allow it, so the page must not be changed while
	// Text is in use.
	Text []byte
}

// Scripts yields the page's script elements in document order. Scripts
// inside comments or noscript are not elements and are not yielded.
func Scripts(page []byte) iter.Seq[Script] {
	return func(yield func(Script) bool) {
		z := html.NewTokenizer(bytes.NewReader(page))
		var cur *Script // a script start tag whose text may come next
		off := 0        // the tokens' raw bytes partition the page
		for {
			tt := z.Next()
			raw := z.Raw()
			start := off
			off += len(raw)
			if cur != nil {
				s := *cur
				cur = nil
				if tt == html.TextToken {
					s.Text = pageSlice(page, start, raw)
				}
				if !yield(s) {
					return
				}
				if tt == html.TextToken {
					continue
				}
			}
			switch tt {
			case html.ErrorToken:
				return
			case html.StartTagToken, html.SelfClosingTagToken:
				// A self-closing <script/> still opens a script in HTML.
				if name, hasAttr := z.TagName(); string(name) == "script" {
					cur = scriptTag(z, hasAttr)
				}
			}
		}
	}
}

// pageSlice returns the page's bytes of a token, or a copy of the token
// should the offsets ever disagree with the page.
func pageSlice(page []byte, start int, raw []byte) []byte {
	end := start + len(raw)
	if end <= len(page) && bytes.Equal(page[start:end], raw) {
		return page[start:end:end]
	}
	return bytes.Clone(raw)
}

func scriptTag(z *html.Tokenizer, hasAttr bool) *Script {
	s := &Script{}
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case "id":
			s.ID = string(v)
		case "type":
			s.Type = mediaType(string(v))
		case "src":
			s.Src = string(v)
		}
	}
	return s
}

func mediaType(v string) string {
	v, _, _ = strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(v))
}

// isData tells JSON data blocks (application/json, application/ld+json,
// vendor +json types) from scripts that run.
func isData(typ string) bool { return strings.HasSuffix(typ, "json") }

// ScriptByID returns the raw text of the first script whose id is id.
func ScriptByID(page []byte, id string) ([]byte, error) {
	text, ok := scriptByID(page, id)
	if !ok {
		return nil, upstream.MalformedFault("no script with id %q in a %d-byte page", id, len(page))
	}
	return text, nil
}

func scriptByID(page []byte, id string) ([]byte, bool) {
	for s := range Scripts(page) {
		if s.ID == id {
			return s.Text, true
		}
	}
	return nil, false
}

// NextData returns the JSON of a Next.js page's __NEXT_DATA__ script.
func NextData(page []byte) (json.RawMessage, error) {
	text, ok := scriptByID(page, "__NEXT_DATA__")
	if !ok {
		return nil, upstream.MalformedFault("no __NEXT_DATA__ script in a %d-byte page", len(page))
	}
	body := unwrap(text)
	if len(body) == 0 {
		return nil, upstream.MalformedFault("empty __NEXT_DATA__ script in a %d-byte page", len(page))
	}
	var v json.RawMessage
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, upstream.MalformedFault("invalid JSON in the __NEXT_DATA__ script (%s) of a %d-byte page",
			jsonProblem(err), len(page))
	}
	return v, nil
}

// Wrappers pages put around a data script's JSON, longest first.
var (
	wrapPrefixes = [][]byte{[]byte("\uFEFF"), []byte("/*<![CDATA[*/"), []byte("//<![CDATA["),
		[]byte("<![CDATA["), []byte("<!--")}
	wrapSuffixes = [][]byte{[]byte(";"), []byte("/*]]>*/"), []byte("//]]>"), []byte("]]>"),
		[]byte("//-->"), []byte("-->")}
)

// unwrap strips white space and the wrappers around a data script's JSON.
func unwrap(b []byte) []byte {
	for {
		n := len(b)
		b = bytes.TrimSpace(b)
		for _, p := range wrapPrefixes {
			b = bytes.TrimPrefix(b, p)
		}
		for _, s := range wrapSuffixes {
			b = bytes.TrimSuffix(b, s)
		}
		if len(b) == n {
			return b
		}
	}
}

// jsonProblem describes a JSON error by class and offset only: the
// decoder's message may quote the page.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "value cut short"
	case errors.Is(err, io.EOF):
		return "no value"
	}
	return "invalid JSON"
}

// maxGraphDepth bounds the flattening of arrays and @graph nested in each
// other; real JSON-LD nests them once.
const maxGraphDepth = 4

// JSONLD returns the objects of the page's application/ld+json scripts in
// document order: a top-level array yields its objects, an object with
// @graph yields the graph's objects (and itself only when it has
// properties besides @context and @graph). A script that is not valid JSON
// is skipped as long as another one is valid: pages often carry one broken
// block beside the one an adapter needs.
func JSONLD(page []byte) ([]json.RawMessage, error) {
	var out []json.RawMessage
	blocks, invalid := 0, 0
	first := ""
	for s := range Scripts(page) {
		if s.Type != "application/ld+json" {
			continue
		}
		body := unwrap(s.Text)
		if len(body) == 0 {
			continue
		}
		blocks++
		var v json.RawMessage
		if err := json.Unmarshal(body, &v); err != nil {
			invalid++
			if first == "" {
				first = jsonProblem(err)
			}
			continue
		}
		if decoded, err := decodeJSONText(v); err == nil {
			v = decoded
		}
		out = flatten(out, v, 0)
	}
	switch {
	case blocks == 0:
		return nil, upstream.MalformedFault("no JSON-LD script in a %d-byte page", len(page))
	case invalid == blocks:
		return nil, upstream.MalformedFault("no valid JSON-LD in a %d-byte page: %d script(s), all invalid (first: %s)",
			len(page), blocks, first)
	case len(out) == 0:
		return nil, upstream.MalformedFault("no JSON-LD object in %d script(s) of a %d-byte page", blocks, len(page))
	}
	return out, nil
}

func flatten(out []json.RawMessage, v json.RawMessage, depth int) []json.RawMessage {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || depth > maxGraphDepth {
		return out
	}
	switch v[0] {
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(v, &items) == nil {
			for _, item := range items {
				out = flatten(out, item, depth+1)
			}
		}
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return out
		}
		graph, ok := obj["@graph"]
		if !ok {
			return append(out, v)
		}
		props := len(obj) - 1
		if _, ok := obj["@context"]; ok {
			props--
		}
		if props > 0 {
			out = append(out, v)
		}
		out = flatten(out, graph, depth+1)
	}
	return out
}

// JSONLDOfType returns the page's JSON-LD objects (as JSONLD flattens them)
// whose @type is typ or includes it.
func JSONLDOfType(page []byte, typ string) ([]json.RawMessage, error) {
	all, err := JSONLD(page)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, obj := range all {
		if hasType(obj, typ) {
			out = append(out, obj)
		}
	}
	if len(out) == 0 {
		return nil, upstream.MalformedFault("no JSON-LD object of type %q among %d in a %d-byte page",
			typ, len(all), len(page))
	}
	return out, nil
}

func hasType(obj json.RawMessage, typ string) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return false
	}
	raw := fields["@type"]
	var types []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		types = []string{one}
	} else {
		var many []json.RawMessage
		_ = json.Unmarshal(raw, &many)
		for _, t := range many {
			if json.Unmarshal(t, &one) == nil {
				types = append(types, one)
			}
		}
	}
	for _, t := range types {
		// schema.org names are case-sensitive; a type may be written as a
		// compact or a full IRI.
		switch t {
		case typ, "schema:" + typ, "http://schema.org/" + typ, "https://schema.org/" + typ:
			return true
		}
	}
	return false
}
