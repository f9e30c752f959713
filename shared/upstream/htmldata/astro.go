package htmldata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
)

// AstroIsland is one <astro-island> element of a page built with Astro:
// a component the browser hydrates, with the props the server rendered it
// with. Astro serialises those props into the element's props attribute
// (packages/astro/src/runtime/server/serialize.ts); AstroIslands decodes
// them back to plain JSON.
type AstroIsland struct {
	// ComponentURL, ComponentExport and RendererURL are the attributes of
	// the same names, entities decoded; Client is the hydration directive
	// (load, idle, visible, media, only). Each is "" when absent.
	ComponentURL, ComponentExport, RendererURL, Client string
	// Name is the component's display name, from the opts attribute.
	Name string
	// Props is the decoded props: a JSON object, {} when the island has
	// no props attribute.
	Props json.RawMessage
	// Dropped counts the values left out of Props because their type tag
	// is unknown to this reader (Astro's own client makes them undefined).
	Dropped int
}

// Astro's type tags (PROP_TYPE in serialize.ts; astro-island.ts revives them).
const (
	astroValue       = 0  // a JSON value; an object's members are encoded values
	astroArray       = 1  // an array of encoded values
	astroRegExp      = 2  // the pattern's source text
	astroDate        = 3  // toISOString()
	astroMap         = 4  // an array of [key, value] entries, each encoded
	astroSet         = 5  // an array of encoded values
	astroBigInt      = 6  // the decimal digits, as a string
	astroURL         = 7  // the URL's text
	astroUint8Array  = 8  // an array of plain numbers
	astroUint16Array = 9  // "
	astroUint32Array = 10 // "
	astroInfinity    = 11 // 1 or -1, the sign of an infinite number
)

// AstroIslands returns the page's <astro-island> elements in document
// order, their props decoded to plain JSON.
//
// The props attribute is HTML-unescaped once, by the HTML tokenizer (Astro
// escapes it with html-escaper: &amp; &lt; &gt; &#39; &quot;), then read
// as a JSON object whose members are [type, value] pairs, decoded as
// Astro's client revives them, top-down:
//
//   - 0: the value; an object's members are themselves pairs, decoded in
//     turn. [0] without a value is undefined and left out.
//   - 1 (array), 5 (Set): an array of pairs, decoded element by element.
//   - 4 (Map): an array of [key, value] entries; it stays an array of
//     pairs, since a Map's keys need not be strings.
//   - 2 (RegExp), 3 (Date), 6 (BigInt), 7 (URL): their text, as the
//     string Astro wrote (a BigInt as a string keeps its every digit).
//   - 8, 9, 10 (Uint8/16/32Array): the array of numbers.
//   - 11 (±Infinity): null, as JSON.stringify writes an infinite number;
//     a caller must not read that null as "absent".
//
// Astro before 3.0 wrote the arrays of 1, 4, 5 and 8-10 as JSON text in a
// string; that form is read too. An unknown type tag is left out (null in
// an array) and counted in Dropped. Numbers keep their text; key order is
// not kept (a repeated key keeps the last value, as JSON.parse does).
//
// An island whose props are not in this form is skipped as long as
// another island is readable; the error is a Malformed fault when the page
// has no island or none is readable.
func AstroIslands(page []byte) ([]AstroIsland, error) {
	var out []AstroIsland
	found := 0
	first := ""
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if string(name) != "astro-island" {
			continue
		}
		found++
		island, err := astroIsland(z, hasAttr)
		if err != nil {
			if first == "" {
				first = err.Error()
			}
			continue
		}
		out = append(out, island)
	}
	switch {
	case found == 0:
		return nil, upstream.MalformedFault("no astro-island element in a %d-byte page", len(page))
	case len(out) == 0:
		return nil, upstream.MalformedFault("no readable astro-island props in a %d-byte page: %d island(s), all invalid (first: %s)",
			len(page), found, first)
	}
	return out, nil
}

func astroIsland(z *html.Tokenizer, hasAttr bool) (AstroIsland, error) {
	island := AstroIsland{Props: json.RawMessage("{}")}
	var props, opts []byte
	hasProps := false
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case "component-url":
			island.ComponentURL = string(v)
		case "component-export":
			island.ComponentExport = string(v)
		case "renderer-url":
			island.RendererURL = string(v)
		case "client":
			island.Client = string(v)
		case "opts":
			opts = bytes.Clone(v)
		case "props":
			props, hasProps = bytes.Clone(v), true
		}
	}
	var o struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(opts, &o) == nil {
		island.Name = o.Name
	}
	if !hasProps {
		return island, nil
	}
	decoded, dropped, err := decodeAstroProps(props)
	if err != nil {
		return island, err
	}
	island.Props, island.Dropped = decoded, dropped
	return island, nil
}

// astroReviver decodes Astro's pairs, counting the unknown type tags.
type astroReviver struct{ dropped int }

func decodeAstroProps(attr []byte) (json.RawMessage, int, error) {
	top, err := decodeOne(attr)
	switch {
	case errors.Is(err, errTrailing):
		return nil, 0, fmt.Errorf("props: %v", err)
	case err != nil:
		return nil, 0, fmt.Errorf("props: %s", jsonProblem(err))
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return nil, 0, fmt.Errorf("props: not a JSON object")
	}
	r := &astroReviver{}
	plain, err := r.object(obj)
	if err != nil {
		return nil, 0, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the text as the page has it, & and < included
	if err := enc.Encode(plain); err != nil {
		return nil, 0, fmt.Errorf("props: %v", err)
	}
	return json.RawMessage(bytes.TrimSpace(b.Bytes())), r.dropped, nil
}

// object decodes an object whose members are pairs; undefined members are
// left out, as JSON.stringify leaves them out.
func (r *astroReviver) object(in map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(in))
	for k, raw := range in {
		v, defined, err := r.pair(raw)
		if err != nil {
			return nil, err
		}
		if defined {
			out[k] = v
		}
	}
	return out, nil
}

// array decodes an array of pairs; undefined elements become null, as
// JSON.stringify writes them.
func (r *astroReviver) array(in []any) ([]any, error) {
	out := make([]any, len(in))
	for i, raw := range in {
		v, _, err := r.pair(raw)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// pair decodes one [type, value]; defined is false for undefined.
func (r *astroReviver) pair(raw any) (v any, defined bool, err error) {
	p, ok := raw.([]any)
	if !ok || len(p) == 0 {
		return nil, false, fmt.Errorf("props: a value is not a [type, value] pair")
	}
	tag, ok := p[0].(json.Number)
	if !ok {
		return nil, false, fmt.Errorf("props: a type tag is not a number")
	}
	typ, err := strconv.Atoi(tag.String())
	if err != nil {
		return nil, false, fmt.Errorf("props: a type tag is not a whole number")
	}
	if typ < astroValue || typ > astroInfinity {
		r.dropped++ // a type this reader does not know; Astro's client makes it undefined
		return nil, false, nil
	}
	if len(p) == 1 {
		if typ != astroValue {
			return nil, false, fmt.Errorf("props: a type-%d pair has no value", typ)
		}
		return nil, false, nil // [0] is undefined
	}
	val := p[1]
	switch typ {
	case astroValue:
		switch x := val.(type) {
		case map[string]any:
			m, err := r.object(x)
			return m, err == nil, err
		case []any:
			// Astro never writes an array as type 0.
			return nil, false, fmt.Errorf("props: an array tagged as a plain value")
		}
		return val, true, nil
	case astroArray, astroSet, astroMap:
		list, err := arrayValue(val, typ)
		if err != nil {
			return nil, false, err
		}
		a, err := r.array(list)
		return a, err == nil, err
	case astroUint8Array, astroUint16Array, astroUint32Array:
		list, err := arrayValue(val, typ)
		if err != nil {
			return nil, false, err
		}
		for _, n := range list {
			if _, ok := n.(json.Number); !ok {
				return nil, false, fmt.Errorf("props: a type-%d array holds a non-number", typ)
			}
		}
		return list, true, nil
	case astroRegExp, astroDate, astroBigInt, astroURL:
		switch val.(type) {
		case string, json.Number:
			return val, true, nil
		}
		return nil, false, fmt.Errorf("props: a type-%d value is not text", typ)
	}
	return nil, true, nil // astroInfinity: JSON has no infinity; JSON.stringify writes null
}

// arrayValue is the array of a type-1, 4, 5 or 8-10 pair: an array, or
// (before Astro 3.0) the JSON text of one.
func arrayValue(val any, typ int) ([]any, error) {
	if s, ok := val.(string); ok {
		parsed, err := decodeOne([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("props: a type-%d value is not the JSON text of an array", typ)
		}
		val = parsed
	}
	list, ok := val.([]any)
	if !ok {
		return nil, fmt.Errorf("props: a type-%d value is not an array", typ)
	}
	return list, nil
}

// decodeOne decodes exactly one JSON value, numbers kept as their text.
func decodeOne(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errTrailing
	}
	return v, nil
}

var errTrailing = errors.New("text after the JSON value")
