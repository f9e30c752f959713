package htmldata_test

import (
	"encoding/json"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// A Product JSON-LD block written as a shop's page writes it: review text
// with &#39; and &quot; references, an "&amp;" before another reference
// (the text says "&#39;" literally), an ampersand that starts no
// reference, and a URL whose query was HTML-escaped.
const referencesPage = `<!DOCTYPE html><html><head><meta charset="utf-8">
<script type="application/ld+json">{
  "@type": "Product",
  "@context": "https://schema.org",
  "name": "Walnut spice rack, 3 tiers &amp; 12 jars",
  "description": "Fits 8&quot; shelves.\nIt&#39;s oiled, not varnished.",
  "url": "https://shop.example/item/42?ref=a&amp;lang=en",
  "aggregateRating": {"@type": "AggregateRating", "ratingValue": "4.7", "reviewCount": 1034},
  "review": [
    {"@type": "Review", "reviewBody": "Second one we&#39;ve bought \u0026#8212; still great", "author": {"@type": "Person", "name": "R&amp;D Kitchen"}},
    {"@type": "Review", "reviewBody": "Escapes shown as text: &amp;#39; stays a reference", "author": {"@type": "Person", "name": "AT&T fan"}},
    {"@type": "Review", "reviewBody": "Odd marks: a=1&copy=2, &ampx; and &nosuchname; are kept", "author": {"@type": "Person", "name": "Q"}}
  ]
}</script></head><body></body></html>`

func TestJSONLDDecodesReferencesOnce(t *testing.T) {
	objs, err := htmldata.JSONLDOfType([]byte(referencesPage), "Product")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Name, Description, URL string
		AggregateRating        struct{ ReviewCount json.Number }
		Review                 []struct {
			ReviewBody string
			Author     struct{ Name string }
		}
	}
	if err := json.Unmarshal(objs[0], &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{p.Name, "Walnut spice rack, 3 tiers & 12 jars"},
		{p.Description, "Fits 8\" shelves.\nIt's oiled, not varnished."},
		{p.URL, "https://shop.example/item/42?ref=a&lang=en"},
		{p.AggregateRating.ReviewCount.String(), "1034"},
		{p.Review[0].ReviewBody, "Second one we've bought — still great"},
		{p.Review[0].Author.Name, "R&D Kitchen"},
		{p.Review[1].ReviewBody, "Escapes shown as text: &#39; stays a reference"},
		{p.Review[1].Author.Name, "AT&T fan"},
		{p.Review[2].ReviewBody, "Odd marks: a=1&copy=2, &ampx; and &nosuchname; are kept"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestDecodeReferences(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "",
		"plain":             "plain",
		"we&#39;ve":         "we've",
		"&#x27;hex&#X27;":   "'hex'",
		"&lt;b&gt;":         "<b>",
		"&amp;#39;":         "&#39;",
		"&amp;amp;":         "&amp;",
		"a & b":             "a & b",
		"&":                 "&",
		"&;":                "&;",
		"&#39":              "&#39",
		"&copy 2025":        "&copy 2025",
		"&ampx;":            "&ampx;",
		"&semi;":            ";",
		"tail &":            "tail &",
		"&#128512; &#39;x;": "😀 'x;",
	} {
		if got := htmldata.DecodeReferences(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
