package kohls

import (
	"slices"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// The catalog API's form of the same result (nested under "payload", a
// single price object, numeric sku ids) maps the same way.
func TestParseCatalogJSON(t *testing.T) {
	body := `{"offset":0,"count":1,"limit":120,"payload":{"searchTerm":"boots","autoCorrectedTerm":"boot",
		"totalRecordsCount":1,"relatedSearchTerms":["snow boots"],"sorts":[{"ID":1,"name":"Featured","active":true}],
		"products":[{"webID":"7000001","productTitle":"Boot","seoURL":"/product/prd-7000001/boot.jsp",
		"skuIds":[91234567890123456789,"000123"],"sponsoredData":null,
		"prices":{"isCurrentPrice":true,"regularPrice":{"minPrice":50,"maxPrice":70},"regularPriceType":"Original"}}]}}`
	c := &upstream.Call{Params: map[string]string{"query": "boots"}}
	v, err := parseSearch(c, &pages.Page{Status: 200, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	r := v.(Result)
	if r.Query != "boot" || r.Count != 1 || r.HasMore == nil || *r.HasMore || r.Cursor != nil || len(r.Sorts) != 1 || r.Sorts[0].ID != "1" {
		t.Fatalf("result %+v", r)
	}
	it := r.Items[0]
	if it.ID != "7000001" || len(it.SKUIDs) != 2 || it.SKUIDs[0] != "91234567890123456789" || it.SKUIDs[1] != "000123" ||
		*it.Price != 50 || *it.PriceMax != 70 || *it.PriceType != "original" || *it.Sponsored {
		t.Fatalf("item %+v", it)
	}
	// The SKU ids are there; the corrected query is said.
	if len(r.Warnings) != 1 || r.Warnings[0] != warnCorrected {
		t.Fatalf("warnings %q", r.Warnings)
	}
}

// A sort id the site did not apply (another is marked active) is said;
// without active marks nothing can be told.
func TestParseSortNotApplied(t *testing.T) {
	const products = `"totalRecordsCount":1,"products":[{"webID":"7000001","skuIds":["1"]}]`
	for _, tc := range []struct {
		sorts string
		want  []string
	}{
		{`[{"ID":1,"name":"Featured","active":true},{"ID":4,"active":false}]`, []string{warnSort}},
		{`[{"ID":1,"active":false},{"ID":4,"active":true}]`, nil},
		{`[{"ID":1,"name":"Featured"},{"ID":4}]`, nil},
	} {
		body := `{"searchTerm":"boots",` + products + `,"sorts":` + tc.sorts + `}`
		c := &upstream.Call{Params: map[string]string{"query": "boots", "sort": "4"}}
		v, err := parseSearch(c, &pages.Page{Status: 200, Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		if got := v.(Result).Warnings; !slices.Equal(got, tc.want) {
			t.Errorf("sorts %s: warnings %q, want %q", tc.sorts, got, tc.want)
		}
	}
}

// A product without its id is a changed shape, not a row to invent.
func TestParseProductWithoutID(t *testing.T) {
	body := `{"totalRecordsCount":1,"products":[{"productTitle":"Boot"}]}`
	c := &upstream.Call{Params: map[string]string{"query": "boots"}}
	_, err := parseSearch(c, &pages.Page{Status: 200, Body: []byte(body)})
	f, ok := err.(*upstream.Fault)
	if !ok || f.Kind != upstream.Malformed {
		t.Fatalf("err %v", err)
	}
}

// The result is read from whichever island carries catalogData, beside
// islands that carry other props, and before a leftover pmpSearchJsonData.
func TestParseAstroIslandAmongOthers(t *testing.T) {
	page := `<html><body><astro-island component-export="Header" props="{&quot;term&quot;:[0,&quot;boots&quot;]}"></astro-island>` +
		`<astro-island component-export="ProductGrid" props="{&quot;catalogData&quot;:[0,{&quot;searchTerm&quot;:[0,&quot;boots&quot;],` +
		`&quot;productCount&quot;:[0,250],&quot;products&quot;:[1,[[0,{&quot;webID&quot;:[0,&quot;7000002&quot;],` +
		`&quot;skuIds&quot;:[1,[[0,&quot;123&quot;]]]}]]]}]}"></astro-island>` +
		`<script>window.pmpSearchJsonData = {"totalRecordsCount":1,"products":[{"webID":"1"}]};</script></body></html>`
	c := &upstream.Call{Params: map[string]string{"query": "boots", "limit": "1"}}
	v, err := parseSearch(c, &pages.Page{Status: 200, Body: []byte(page)})
	if err != nil {
		t.Fatal(err)
	}
	r := v.(Result)
	if r.Count != 1 || r.Items[0].ID != "7000002" || r.Total == nil || *r.Total != 250 || r.HasMore == nil || !*r.HasMore ||
		!slices.Equal(r.Items[0].SKUIDs, []string{"123"}) || len(r.Warnings) != 0 {
		t.Fatalf("result %+v", r)
	}
}

// Islands without catalogData and no pmpSearchJsonData: a changed page,
// named by both places looked in.
func TestParseAstroIslandWithoutCatalog(t *testing.T) {
	page := `<astro-island component-export="Header" props="{&quot;term&quot;:[0,&quot;boots&quot;]}"></astro-island>`
	c := &upstream.Call{Params: map[string]string{"query": "boots"}}
	_, err := parseSearch(c, &pages.Page{Status: 200, Body: []byte(page)})
	f, ok := err.(*upstream.Fault)
	if !ok || f.Kind != upstream.Malformed || !strings.Contains(f.Reason, "catalogData") || !strings.Contains(f.Reason, "pmpSearchJsonData") {
		t.Fatalf("err %v", err)
	}
}
