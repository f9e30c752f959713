package htmldata_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// nextProductPage is a server-rendered Next.js product page: chunks in the
// head, the rendered product, then the page props in __NEXT_DATA__, whose
// strings hold braces, quotes, escaped markup and an escaped </script>.
const nextProductPage = `<!DOCTYPE html><html lang="en"><head><meta charSet="utf-8"/>` +
	`<meta name="viewport" content="width=device-width"/><title>Trail Runner 3 – Acme Outdoor</title>` +
	`<link rel="preload" href="/_next/static/css/8a1e.css" as="style"/>` +
	`<noscript data-n-css=""></noscript>` +
	`<script defer="" nomodule="" src="/_next/static/chunks/polyfills-c67a75d1b6f99dc8.js"></script>` +
	`<script src="/_next/static/chunks/webpack-59c5c889f52620d6.js" defer=""></script>` +
	`<script src="/_next/static/chunks/pages/p/%5Bslug%5D-3f2a.js" defer=""></script></head>` +
	`<body><div id="__next"><main><h1>Trail Runner 3</h1><p class="price">$129.00</p>` +
	`<p>Light &amp; fast.</p></main></div>` +
	`<script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{"product":` +
	`{"id":"TR3-BLK-42","name":"Trail Runner 3","price":{"amount":129,"currency":"USD"},` +
	`"description":"Grippy \u003cb\u003eoutsole\u003c/b\u003e {not a brace} \"quoted\" <\/script> &amp; done"}},` +
	`"__N_SSP":true},"page":"/p/[slug]","query":{"slug":"trail-runner-3"},"buildId":"a1b2c3",` +
	`"isFallback":false,"gssp":true,"scriptLoader":[]}</script></body></html>`

type nextProduct struct {
	Props struct {
		PageProps struct {
			Product struct {
				ID, Name, Description string
				Price                 struct{ Amount float64 }
			}
		}
	}
	Page string
}

func TestNextData(t *testing.T) {
	v, err := htmldata.NextData([]byte(nextProductPage))
	if err != nil {
		t.Fatal(err)
	}
	var got nextProduct
	if err := json.Unmarshal(v, &got); err != nil {
		t.Fatal(err)
	}
	p := got.Props.PageProps.Product
	if p.ID != "TR3-BLK-42" || p.Name != "Trail Runner 3" || p.Price.Amount != 129 || got.Page != "/p/[slug]" {
		t.Fatalf("got %+v", got)
	}
	// The JSON escapes are JSON's; the HTML entity stays undecoded, as a
	// browser leaves it inside a script.
	if want := `Grippy <b>outsole</b> {not a brace} "quoted" </script> &amp; done`; p.Description != want {
		t.Fatalf("description %q, want %q", p.Description, want)
	}
}

// TestNextDataForms: the shapes a __NEXT_DATA__ script really comes in.
func TestNextDataForms(t *testing.T) {
	const data = `{"props":{"pageProps":{"n":1}}}`
	cases := map[string]string{
		"uppercase tags":                         `<HTML><BODY><SCRIPT ID="__NEXT_DATA__" TYPE="application/json">` + data + `</SCRIPT></BODY></HTML>`,
		"attributes in any order, single quotes": `<script type='application/json' crossorigin id='__NEXT_DATA__'>` + data + `</script>`,
		"byte order mark before the page":        "\uFEFF<!DOCTYPE html><script id=\"__NEXT_DATA__\">" + data + "</script>",
		"byte order mark inside the script":      "<script id=\"__NEXT_DATA__\">\uFEFF" + data + "</script>",
		"html comment inside the script":         `<script id="__NEXT_DATA__" type="application/json"><!--` + data + `--></script>`,
		"cdata inside the script":                `<script id="__NEXT_DATA__" type="application/json">/*<![CDATA[*/` + data + `/*]]>*/</script>`,
		"line-comment cdata":                     "<script id=\"__NEXT_DATA__\">//<![CDATA[\n" + data + "\n//]]></script>",
		"crlf and indentation":                   "<script id=\"__NEXT_DATA__\">\r\n  {\"props\":\r\n {\"pageProps\":{\"n\":1}}}\r\n</script>",
		"decoys in a comment and in noscript": `<!-- <script id="__NEXT_DATA__">{"decoy":1}</script> -->` +
			`<noscript><script id="__NEXT_DATA__">{"decoy":2}</script></noscript>` +
			`<script id="__NEXT_DATA__" type="application/json">` + data + `</script>`,
		"self-closing start tag":   `<script id="__NEXT_DATA__"/>` + data + `</script>`,
		"unterminated at page end": `<script id="__NEXT_DATA__" type="application/json">` + data,
	}
	for name, page := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := htmldata.NextData([]byte(page))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Props struct{ PageProps struct{ N int } }
			}
			if err := json.Unmarshal(v, &got); err != nil || got.Props.PageProps.N != 1 {
				t.Fatalf("got %s (%v)", v, err)
			}
		})
	}
}

// secret stands for personal data on a page: no reason may carry it.
const secret = "alice.smith@example.com"

func TestNextDataMalformed(t *testing.T) {
	cases := []struct {
		name, page, reason string
	}{
		{"no script", `<html><head><title>` + secret + `</title></head><body><p>` + secret + `</p>` +
			`<script id="__NEXT_DATA_" type="application/json">{"near":"miss"}</script></body></html>`,
			"no __NEXT_DATA__ script in a"},
		{"only in a comment", `<!-- <script id="__NEXT_DATA__">{"a":1}</script> -->` + secret, "no __NEXT_DATA__ script"},
		{"empty script", `<script id="__NEXT_DATA__" type="application/json">  </script>` + secret, "empty __NEXT_DATA__ script"},
		{"invalid JSON", `<script id="__NEXT_DATA__" type="application/json">{"email":"` + secret + `", ` + secret + `}</script>`,
			"invalid JSON in the __NEXT_DATA__ script (syntax error at byte 37)"},
		{"cut short", `<script id="__NEXT_DATA__" type="application/json">{"email":"` + secret + `"`,
			"invalid JSON in the __NEXT_DATA__ script (syntax error at byte"},
		{"raw </script> inside a string ends the script", `<script id="__NEXT_DATA__">{"x":"</script>` + secret + `"}</script>`,
			"invalid JSON in the __NEXT_DATA__ script"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := htmldata.NextData([]byte(c.page))
			wantMalformed(t, err, c.page, c.reason)
		})
	}
}

// wantMalformed checks err is a Malformed fault whose reason holds want
// and the page's size, and nothing of the page's content.
func wantMalformed(t *testing.T, err error, page, want string) {
	t.Helper()
	var f *upstream.Fault
	if !errors.As(err, &f) || f.Kind != upstream.Malformed {
		t.Fatalf("error %v, want a malformed fault", err)
	}
	if !strings.Contains(f.Reason, want) {
		t.Errorf("reason %q, want it to hold %q", f.Reason, want)
	}
	if size := fmt.Sprintf("a %d-byte page", len(page)); !strings.Contains(f.Reason, size) {
		t.Errorf("reason %q does not give the size (%s)", f.Reason, size)
	}
	for _, leak := range []string{"alice", "example.com", "near", "email", "decoy", "'e'", "'x'", `'"'`} {
		if strings.Contains(f.Reason, leak) {
			t.Errorf("reason %q quotes the page (%q)", f.Reason, leak)
		}
	}
}

func TestScripts(t *testing.T) {
	page := `<html><head><script src="/a.js" async></script>` +
		`<script type="Application/LD+JSON; charset=utf-8">{"@type":"Thing"}</script>` +
		`<script id="cfg" type="module">import x from "/x.js"; var a = "&amp;";</script>` +
		`</head><body><!-- <script id="hidden">no</script> --><textarea><script>no</script></textarea>` +
		`<script/></body></html>`
	var got []htmldata.Script
	for s := range htmldata.Scripts([]byte(page)) {
		got = append(got, s)
	}
	want := []htmldata.Script{
		{Src: "/a.js"},
		{Type: "application/ld+json", Text: []byte(`{"@type":"Thing"}`)},
		{ID: "cfg", Type: "module", Text: []byte(`import x from "/x.js"; var a = "&amp;";`)},
		// A self-closing script still opens one: the rest is its text.
		{Text: []byte("</body></html>")},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d scripts: %+v", len(got), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Src != w.Src || g.Type != w.Type || string(g.Text) != string(w.Text) {
			t.Errorf("script %d: got %+v (%q), want %+v (%q)", i, g, g.Text, w, w.Text)
		}
	}
	// Stopping early is allowed.
	n := 0
	for range htmldata.Scripts([]byte(page)) {
		n++
		break
	}
	if n != 1 {
		t.Fatal("the iterator went on after break")
	}
}

func TestScriptByID(t *testing.T) {
	page := `<script id="state">window.x = "a &lt; b";</script>`
	text, err := htmldata.ScriptByID([]byte(page), "state")
	if err != nil || string(text) != `window.x = "a &lt; b";` {
		t.Fatalf("got %q, %v", text, err)
	}
	page = `<p>` + secret + `</p><script id="State">x</script>`
	_, err = htmldata.ScriptByID([]byte(page), "state")
	wantMalformed(t, err, page, `no script with id "state" in a`)
}

// jsonLDPage has a Yoast-style @graph block, a top-level array in a type
// written in capitals with parameters, a broken block (a trailing comma,
// as CMSs produce) and a site-wide block whose @graph container has its
// own type.
const jsonLDPage = `<!DOCTYPE html><html><head><title>Trail Runner 3</title>
<script type="application/ld+json" class="yoast-schema-graph">{"@context":"https://schema.org","@graph":[
 {"@type":"WebPage","@id":"https://shop.example/p/tr3#webpage","name":"Trail Runner 3"},
 {"@type":"BreadcrumbList","itemListElement":[{"@type":"ListItem","position":1,"name":"Shoes"}]},
 {"@type":["Product","IndividualProduct"],"@id":"https://shop.example/p/tr3#product","name":"Graph product"}]}</script>
</head><body><h1>Trail Runner 3</h1>
<script type="APPLICATION/LD+JSON; charset=utf-8">
[{"@context":"https://schema.org","@type":"Organization","name":"Acme"},
 {"@context":"https://schema.org","@type":"Product","name":"Trail Runner 3","offers":{"@type":"Offer","price":"129.00","priceCurrency":"USD"}}]
</script>
<script type="application/ld+json">{"@type":"Product","name":"` + secret + `",}</script>
<script type="application/ld+json"><!--
{"@context":"http://schema.org","@type":"WebSite","url":"https://shop.example/","@graph":[{"@type":"http://schema.org/Product","name":"IRI product"}]}
--></script>
<script type="application/json">{"@type":"Product","name":"not JSON-LD"}</script>
</body></html>`

func TestJSONLD(t *testing.T) {
	all, err := htmldata.JSONLD([]byte(jsonLDPage))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, obj := range all {
		var o struct {
			Type json.RawMessage `json:"@type"`
			Name string
		}
		if err := json.Unmarshal(obj, &o); err != nil {
			t.Fatal(err)
		}
		got = append(got, string(o.Type)+" "+o.Name)
	}
	want := []string{
		`"WebPage" Trail Runner 3`,
		`"BreadcrumbList" `,
		`["Product","IndividualProduct"] Graph product`,
		`"Organization" Acme`,
		`"Product" Trail Runner 3`,
		`"WebSite" `,
		`"http://schema.org/Product" IRI product`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJSONLDOfType(t *testing.T) {
	names := func(objs []json.RawMessage) string {
		var out []string
		for _, obj := range objs {
			var o struct{ Name string }
			_ = json.Unmarshal(obj, &o)
			out = append(out, o.Name)
		}
		return strings.Join(out, ", ")
	}
	cases := map[string]string{
		"Product":           "Graph product, Trail Runner 3, IRI product",
		"IndividualProduct": "Graph product",
		"BreadcrumbList":    "",
		"Organization":      "Acme",
	}
	for typ, want := range cases {
		got, err := htmldata.JSONLDOfType([]byte(jsonLDPage), typ)
		if err != nil || names(got) != want {
			t.Errorf("%s: got %q, %v; want %q", typ, names(got), err, want)
		}
	}
	// schema.org names are case-sensitive, and nested objects (the Offer)
	// are not top-level objects.
	for _, typ := range []string{"product", "Offer", "ListItem"} {
		_, err := htmldata.JSONLDOfType([]byte(jsonLDPage), typ)
		wantMalformed(t, err, jsonLDPage, fmt.Sprintf("no JSON-LD object of type %q among 7 in a", typ))
	}
}

func TestJSONLDMalformed(t *testing.T) {
	cases := []struct{ name, page, reason string }{
		{"none", `<html><body>` + secret + `<script type="application/json">{"@type":"Product"}</script></body></html>`,
			"no JSON-LD script in a"},
		{"all invalid", `<script type="application/ld+json">{"name":"` + secret + `",}</script>` +
			`<script type="application/ld+json">{'name': 'x'}</script>`,
			"no valid JSON-LD in a"},
		{"no objects", `<script type="application/ld+json">[]</script><script type="application/ld+json">"` + secret + `"</script>`,
			"no JSON-LD object in 2 script(s) of a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := htmldata.JSONLD([]byte(c.page))
			wantMalformed(t, err, c.page, c.reason)
		})
	}
	page := cases[1].page
	_, err := htmldata.JSONLD([]byte(page))
	if !strings.Contains(err.Error(), "2 script(s), all invalid (first: syntax error at byte 35)") {
		t.Errorf("reason %q does not give the count and first error", err)
	}
}
