package zoopla

import (
	"encoding/json"
	"testing"
)

func TestFlightChunk(t *testing.T) {
	for _, c := range []struct {
		text string
		want string
		ok   bool
	}{
		{`self.__next_f.push([1,"0:[\"$\",\"div\"]\n"])`, "0:[\"$\",\"div\"]\n", true},
		{` self.__next_f.push([1, "a\u003cb"]); `, "a<b", true},
		{`(self.__next_f=self.__next_f||[]).push([0])`, "", false},
		{`self.__next_f.push([2,"form state"])`, "", false},
		{`self.__next_f.push([1,notjson])`, "", false},
		{`window.dataLayer=[]`, "", false},
	} {
		got, ok := flightChunk([]byte(c.text))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %q, %v", c.text, got, ok)
		}
	}
}

// A member name inside a string (its quote escaped) is not a member, and
// a member whose value does not decode is passed over.
func TestMembers(t *testing.T) {
	text := []byte(`1:{"note":"say \"totalResults\":7"}` + "\n" + `2:{"totalResults":oops}` + "\n" + `3:{"totalResults":61,"x":{"totalResults":"62"}}`)
	got := members(text, "totalResults")
	if len(got) != 2 || string(got[0]) != "61" || string(got[1]) != `"62"` {
		t.Fatalf("members %q", got)
	}
	if n, ok := number(text, "totalResults"); !ok || n != 61 {
		t.Fatalf("number %v %v", n, ok)
	}
	if _, ok := member(text, "pageNumber"); ok {
		t.Fatal("pageNumber found")
	}
}

func TestStreamReferences(t *testing.T) {
	v, err := decodeLoose(json.RawMessage(`{"a":"$undefined","b":"$$5 off","c":"$D2026-09-26T08:00:00.000Z","d":"$L1a","e":["x","$undefined"]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["a"] != nil || m["b"] != "$5 off" || m["c"] != "2026-09-26T08:00:00.000Z" || m["d"] != nil || m["e"].([]any)[1] != nil {
		t.Fatalf("resolved %v", m)
	}
	v, _ = decodeLoose(json.RawMessage(`{"a":"$undefined"}`), false)
	if v.(map[string]any)["a"] != "$undefined" {
		t.Fatal("a __NEXT_DATA__ string was changed")
	}
}

func TestIsoDay(t *testing.T) {
	for in, want := range map[string]string{
		"26th Sep 2026": "2026-09-26", "1st Oct 2026": "2026-10-01", "2nd Jul 2026": "2026-07-02",
		"3rd January 2027": "2027-01-03", "21st dec 2026": "2026-12-21",
	} {
		if got := isoDay(in); got == nil || *got != want {
			t.Errorf("%s: %v", in, got)
		}
	}
	for _, in := range []any{"", "yesterday", "32nd Sep 2026", "26th Smarch 2026", nil, 5} {
		if got := isoDay(in); got != nil {
			t.Errorf("%v: %v", in, *got)
		}
	}
}

func TestPrice(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want float64
	}{
		{map[string]any{"price": "£695,000", "priceUnformatted": json.Number("695000")}, 695000},
		{map[string]any{"price": "£325,000"}, 325000},
		{map[string]any{"price": "£1,250.50"}, 1250.5},
	} {
		if got := price(c.m); got == nil || *got != c.want {
			t.Errorf("%v: %v", c.m, got)
		}
	}
	for _, m := range []map[string]any{{"price": "POA"}, {"price": "Offers invited"}, {"price": "£"}, {"price": "£-5"}, {"price": "€300,000"}, {}, {"priceUnformatted": json.Number("0")}} {
		if got := price(m); got != nil {
			t.Errorf("%v: %v", m, *got)
		}
	}
}

func TestFloorAreaUnits(t *testing.T) {
	for in, want := range map[string]string{"sq. ft": "sq_ft", "sq ft": "sq_ft", "sq. m": "sq_m", "m²": "sq_m", "sqm": "sq_m", "acres": "acres"} {
		if got := unitsOf(in); got == nil || *got != want {
			t.Errorf("%s: %v", in, got)
		}
	}
	v, u := areaText("102 sq. m")
	if v == nil || *v != 102 || *u != "sq_m" {
		t.Fatalf("area %v %v", v, u)
	}
	if v, _ := areaText("ask agent"); v != nil {
		t.Fatal("text without a number read as an area")
	}
}

func TestPick(t *testing.T) {
	s := func(v string) *string { return &v }
	items := []Location{
		{Identifier: s("schools/primary/bath-school"), Label: s("Bath School, Bath, BA1")},
		{Identifier: s("bathgate"), Label: s("Bathgate, West Lothian")},
		{Identifier: s("bath"), Label: s("Bath, Somerset")},
	}
	if a, ok := pick(items, "bath"); !ok || a.identifier != "bath" {
		t.Fatalf("exact name: %v", a)
	}
	if a, ok := pick(items, "bat"); !ok || a.identifier != "bathgate" {
		t.Fatalf("first area: %v", a)
	}
	if a, ok := pick(items[:1], "bat"); !ok || a.identifier != "schools/primary/bath-school" {
		t.Fatalf("only a school: %v", a)
	}
	if _, ok := pick([]Location{{Label: s("BA1")}}, "ba1"); ok {
		t.Fatal("a suggestion without identifier was picked")
	}
}

// A priceDrop states a drop only by a value in it; GraphQL's meta members
// are no value.
func TestPriceDropStates(t *testing.T) {
	for raw, want := range map[string]any{
		`{"listingId":"1"}`:                  nil,
		`{"listingId":"1","priceDrop":null}`: false,
		`{"listingId":"1","priceDrop":{"__typename":"PriceDrop","lastPriceChangeDate":"","percentageChangeLabel":null}}`: false,
		`{"listingId":"1","priceDrop":{"__typename":"PriceDrop","lastPriceChangeDate":"","percentageChangeLabel":"4%"}}`: true,
		`{"listingId":"1","priceDrop":{"__typename":"PriceDrop","change":{"__typename":"Change","percent":0}}}`:          false,
		`{"listingId":"1","priceDrop":{"change":{"percent":4}}}`:                                                         true,
		`{"listingId":"1","priceDrop":"12th Sep 2026"}`:                                                                  true,
	} {
		v, err := decodeLoose(json.RawMessage(raw), false)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := mapListing(v.(map[string]any))
		var got any
		if l.PriceDrop != nil {
			got = *l.PriceDrop
		}
		if got != want {
			t.Errorf("%s: price_drop %v; want %v", raw, got, want)
		}
	}
}

// A branch object that names nothing is no agent.
func TestEmptyBranchIsNoAgent(t *testing.T) {
	v, _ := decodeLoose(json.RawMessage(`{"listingId":"1","branch":{"__typename":"Branch","name":null,"branchId":null,"phone":""}}`), false)
	if l, _ := mapListing(v.(map[string]any)); l.Agent != nil {
		t.Errorf("agent %+v", *l.Agent)
	}
}
