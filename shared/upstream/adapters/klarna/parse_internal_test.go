package klarna

import (
	"slices"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// A rating value without its scale gets max 5, and the response says it
// was assumed; so does a page with only JSON-LD, naming the fields that
// stayed null.
func TestWarnings(t *testing.T) {
	const cache = `<script id="initial_payload" type="application/json">{"__DEHYDRATED_QUERY_STATE__":{"queries":[` +
		`{"queryKey":["product-detail-initial"],"state":{"status":"success","data":{"product":{"id":"1","name":"Sample",` +
		`"reviewSummary":{"averageRating":"4.2","numberOfRatings":10}},"rank":2}}}]}}</script>`
	const ld = `<script type="application/ld+json">{"@context":"https://schema.org","@type":"Product","name":"Sample",` +
		`"aggregateRating":{"@type":"AggregateRating","ratingValue":"4.2","ratingCount":"10"}}</script>`
	const ldScaled = `<script type="application/ld+json">{"@context":"https://schema.org","@type":"Product","name":"Sample",` +
		`"aggregateRating":{"@type":"AggregateRating","ratingValue":"4.2","ratingCount":"10","bestRating":"5"}}</script>`
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"cache without scale", cache, []string{warnAssumedMax}},
		{"cache and JSON-LD scale", cache + ldScaled, nil},
		{"JSON-LD without scale", ld, []string{
			"The page carried only its JSON-LD product data; rank, installment, specifications and retailers_count are null.",
			warnAssumedMax}},
		{"JSON-LD with scale", ldScaled, []string{
			"The page carried only its JSON-LD product data; rank, installment, specifications and retailers_count are null."}},
	} {
		c := &upstream.Call{Params: map[string]string{"id": "1", "category": "94"}}
		v, err := parseProduct(c, &pages.Page{Status: 200, Body: []byte("<html><head>" + tc.body + "</head></html>")})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		p := v.(Product)
		if p.Rating == nil || p.Rating.Max == nil || *p.Rating.Max != 5 {
			t.Errorf("%s: rating %+v", tc.name, p.Rating)
		}
		if !slices.Equal(p.Warnings, tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.name, p.Warnings, tc.want)
		}
	}
}

func TestFieldList(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"rank"}, "rank is"},
		{[]string{"rank", "installment"}, "rank and installment are"},
		{[]string{"rank", "installment", "specifications"}, "rank, installment and specifications are"},
	} {
		if got := fieldList(tc.in); got != tc.want {
			t.Errorf("fieldList(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
