package zoopla

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// flightPush is how each chunk of a Next.js App Router page's React Server
// Components stream starts: self.__next_f.push([1, "<JSON string>"]).
const flightPush = "self.__next_f.push("

// embedded returns the JSON text a search page embeds for its scripts: the
// concatenated strings of the React Server Components stream, or the
// __NEXT_DATA__ script's JSON, or a body that is JSON itself (the props as
// a capture saved them); stream says which. The HTML is read with the tokenizer (htmldata);
// the stream's chunks are JSON arrays and are decoded as such.
func embedded(body []byte) (text []byte, stream bool, err error) {
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return t, false, nil
	}
	var chunks bytes.Buffer
	var next []byte
	for s := range htmldata.Scripts(body) {
		if s.ID == "__NEXT_DATA__" {
			next = s.Text
			continue
		}
		if s.Type != "" && s.Type != "text/javascript" && s.Type != "application/javascript" {
			continue
		}
		if chunk, ok := flightChunk(s.Text); ok {
			chunks.WriteString(chunk)
		}
	}
	if chunks.Len() > 0 {
		return chunks.Bytes(), true, nil
	}
	if next != nil {
		raw, err := htmldata.NextData(body)
		if err != nil {
			return nil, false, err
		}
		return raw, false, nil
	}
	return nil, false, upstream.MalformedFault("no Next.js stream chunks and no __NEXT_DATA__ script in a %d-byte page", len(body))
}

// flightChunk decodes one script's self.__next_f.push([1, "…"]): the
// string of a data chunk. Other chunk kinds (0 the bootstrap, 2 form
// state, 3 binary) carry no listings.
func flightChunk(text []byte) (string, bool) {
	t := strings.TrimSpace(string(text))
	if !strings.HasPrefix(t, flightPush) {
		return "", false
	}
	t = strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(t, ";")), ")")
	var parts []json.RawMessage
	if json.Unmarshal([]byte(t[len(flightPush):]), &parts) != nil || len(parts) < 2 || string(bytes.TrimSpace(parts[0])) != "1" {
		return "", false
	}
	var s string
	if json.Unmarshal(parts[1], &s) != nil {
		return "", false
	}
	return s, true
}

// members yields the JSON values of the members named key, in the order
// they appear in the text. The text need not be one JSON document (a
// stream is rows of JSON with their ids), so each value is decoded where
// its name stands; a name inside a string (its quote escaped) is not a
// member.
func members(text []byte, key string) []json.RawMessage {
	needle := []byte(`"` + key + `":`)
	var out []json.RawMessage
	for off := 0; ; {
		i := bytes.Index(text[off:], needle)
		if i < 0 {
			return out
		}
		at := off + i
		off = at + len(needle)
		if escaped(text, at) {
			continue
		}
		var v json.RawMessage
		if json.NewDecoder(bytes.NewReader(text[off:])).Decode(&v) == nil {
			out = append(out, v)
		}
	}
}

// member is the first decodable value of the members named key.
func member(text []byte, key string) (json.RawMessage, bool) {
	if vs := members(text, key); len(vs) > 0 {
		return vs[0], true
	}
	return nil, false
}

// escaped reports whether the quote at i is escaped (an odd run of
// backslashes before it).
func escaped(text []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && text[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// decodeLoose decodes a value with numbers kept exact and, in a stream,
// its special strings resolved: "$undefined" is null, "$$…" a string starting
// with "$", "$D…" a date; other "$…" strings are references to rows this
// reader does not follow, so they are unknown (null).
func decodeLoose(raw json.RawMessage, stream bool) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if !stream {
		return v, nil // __NEXT_DATA__ strings are plain strings
	}
	return resolveRefs(v), nil
}

func resolveRefs(v any) any {
	switch x := v.(type) {
	case string:
		switch {
		case !strings.HasPrefix(x, "$"):
			return x
		case strings.HasPrefix(x, "$$"):
			return x[1:]
		case strings.HasPrefix(x, "$D"):
			return x[2:]
		}
		return nil
	case []any:
		for i := range x {
			x[i] = resolveRefs(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = resolveRefs(x[k])
		}
	}
	return v
}
