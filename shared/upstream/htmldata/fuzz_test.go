package htmldata_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// FuzzExtract: no page makes any extractor panic, failures are always
// Malformed faults, and what is returned is valid JSON.
func FuzzExtract(f *testing.F) {
	for _, page := range []string{
		nextProductPage, jsonLDPage, apolloPage, jsonParsePage, cloudflareManaged, cloudflareBlocked,
		dataDomeBlocked, perimeterXBlocked, amazonCaptcha, akamaiDenied, incapsulaBlocked, recaptchaInterstitial,
		didaPage, alibabaPunish, astroPage,
		`<astro-island props="{&quot;a&quot;:[1,&quot;[[4,\&quot;[[1,[]]]\&quot;]]&quot;],&quot;b&quot;:[11],&quot;c&quot;:[0,{&quot;d&quot;:[99]}]}"></astro-island>`,
		"<script>__X__ = {f: function () { return /}/.test(`${'}'}`) }, \"data\": [1], data: {a: 1}}</script>",
		"<script>__X__ = {a: `${`${{}}`}`, b: x / 2 / 3, 'data': JSON.parse('1')}</script>",
		`<script>window["__X__"] = JSON.parse("\ud83d\u{1F600}\x41\
");</script>`,
		"<script><!--<script>window.__X__ = 1</script>-->{}</script>",
		`<script type="application/ld+json">{"@graph":[[[{"@graph":{"@type":"Product"}}]]]}</script>`,
	} {
		f.Add([]byte(page), "__X__")
	}
	f.Add([]byte(apolloPage), "__APOLLO_STATE__")
	f.Add([]byte(jsonParsePage), "__PRELOADED_STATE__")
	f.Add([]byte(didaPage), "_init_data_")
	f.Fuzz(func(t *testing.T, page []byte, name string) {
		orig := bytes.Clone(page)
		checkJSON(t, "NextData", page)(htmldata.NextData(page))
		checkJSON(t, "Assigned", page)(htmldata.Assigned(page, name))
		checkJSON(t, "AssignedMember", page)(htmldata.AssignedMember(page, name, "data"))
		// name as the member too, so the fuzzer varies keys.
		checkJSON(t, "AssignedMember", page)(htmldata.AssignedMember(page, "__X__", name))
		islands, err := htmldata.AstroIslands(page)
		checkFault(t, "AstroIslands", err)
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("a %d-byte page", len(page))) {
			t.Fatalf("AstroIslands: reason %q lacks the page size", err)
		}
		for _, island := range islands {
			if !json.Valid(island.Props) || bytes.TrimSpace(island.Props)[0] != '{' {
				t.Fatalf("AstroIslands returned props %q, not an object", island.Props)
			}
		}
		objs, err := htmldata.JSONLD(page)
		checkFault(t, "JSONLD", err)
		for _, obj := range objs {
			if !json.Valid(obj) || bytes.TrimSpace(obj)[0] != '{' {
				t.Fatalf("JSONLD returned a non-object %q", obj)
			}
		}
		_, err = htmldata.JSONLDOfType(page, "Product")
		checkFault(t, "JSONLDOfType", err)
		_, err = htmldata.ScriptByID(page, name)
		checkFault(t, "ScriptByID", err)
		for s := range htmldata.Scripts(page) {
			if s.Type != strings.ToLower(s.Type) {
				t.Fatalf("script type %q not lowercased", s.Type)
			}
		}
		if reason, blocked := htmldata.Challenge(page); blocked != (reason != "") {
			t.Fatalf("Challenge: %q, %v", reason, blocked)
		}
		if !bytes.Equal(page, orig) {
			t.Fatal("an extractor changed the page")
		}
	})
}

func checkJSON(t *testing.T, what string, page []byte) func(json.RawMessage, error) {
	return func(v json.RawMessage, err error) {
		t.Helper()
		checkFault(t, what, err)
		if err == nil && !json.Valid(v) {
			t.Fatalf("%s returned invalid JSON %q", what, v)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("a %d-byte page", len(page))) {
			t.Fatalf("%s: reason %q lacks the page size", what, err)
		}
	}
}

func checkFault(t *testing.T, what string, err error) {
	t.Helper()
	var f *upstream.Fault
	if err != nil && (!errors.As(err, &f) || f.Kind != upstream.Malformed) {
		t.Fatalf("%s: error %v is not a malformed fault", what, err)
	}
}

// benchPage is a ~1 MiB Next.js listing page: head scripts, a product grid
// and a __NEXT_DATA__ of ~400 KiB at the end, as large stores serve.
func benchPage() []byte {
	var b bytes.Buffer
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Shoes – Acme</title>`)
	for i := range 30 {
		fmt.Fprintf(&b, `<script src="/_next/static/chunks/%04d-4f1c9a.js" defer=""></script>`, i)
	}
	b.WriteString(`<style>.grid{display:grid}</style></head><body><div id="__next"><main class="grid">`)
	for i := 0; b.Len() < 600<<10; i++ {
		fmt.Fprintf(&b, `<article class="card" data-sku="SKU-%06d"><a href="/p/shoe-%d"><img src="/img/%d.jpg" alt="Shoe %d">`+
			`<h2>Trail Runner %d</h2></a><p class="price">$%d.00</p><p>Light &amp; fast, with a grippy outsole.</p></article>`,
			i, i, i, i, i, 50+i%100)
	}
	b.WriteString(`</main></div><script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{"products":[`)
	for i := 0; b.Len() < 1<<20-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%06d","name":"Trail Runner %d","price":{"amount":%d,"currency":"USD"},"tags":["run","trail"],"html":"\u003cb\u003enew\u003c/b\u003e"}`,
			i, i, 50+i%100)
	}
	b.WriteString(`]}},"page":"/c/[slug]","buildId":"a1b2c3"}</script></body></html>`)
	return b.Bytes()
}

func BenchmarkNextData(b *testing.B) {
	page := benchPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := htmldata.NextData(page); err != nil {
			b.Fatal(err)
		}
	}
}
