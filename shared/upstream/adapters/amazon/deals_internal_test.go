package amazon

import (
	"encoding/json"
	"testing"
)

// A field whose type changed reads as unknown; the row survives.
func TestRowToleratesChangedFields(t *testing.T) {
	raw := json.RawMessage(`{"asin":"B0SAMPLE09","title":{"displayString":"Desk Fan"},"link":{"href":"/dp/B0SAMPLE09"},
		"image":"https://example.invalid/fan.jpg","price":{"priceToPay":{"price":"£19.99"},"basisPrice":{"price":24}},
		"dealDetails":{"type":7,"endTime":"soon"},"buyingOptions":{"not":"a list"}}`)
	it := currentRow(raw).item(defaultMarket)
	if it.ASIN != "B0SAMPLE09" || it.Title == nil || *it.Title != "Desk Fan" || it.URL != "https://www.amazon.co.uk/dp/B0SAMPLE09" {
		t.Fatalf("row: %+v", it)
	}
	if it.Price != nil || it.ListPrice == nil || *it.ListPrice != 24 || it.SavingsAmount != nil || it.Image != nil ||
		it.EndsAt != nil || it.Type != "deal" {
		t.Errorf("tolerated fields: price %v list %v savings %v image %v ends %v type %s",
			it.Price, it.ListPrice, it.SavingsAmount, it.Image, it.EndsAt, it.Type)
	}
	if it.Currency == nil || *it.Currency != "GBP" {
		t.Errorf("currency %v", it.Currency)
	}
}

func TestMountArgument(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`'slot-1', {"a":"}"} );`, true},
		{` "slot-2" ,{"a":[1,2]}`, true},
		{`slot, {"a":1}`, false},
		{`'slot-3', config)`, false},
		{`'slot-4', {"a":`, false},
	} {
		if _, ok := mountArgument([]byte(c.in)); ok != c.ok {
			t.Errorf("%q: ok %v", c.in, ok)
		}
	}
}

func TestByHost(t *testing.T) {
	for host, want := range map[string]string{
		"www.amazon.co.uk": "GB", "amazon.com": "US", "smile.amazon.com": "US", "www.amazon.com.au": "AU",
		"www.amazon.com.be": "BE", "WWW.AMAZON.DE.": "DE",
	} {
		if m, ok := byHost(host); !ok || m.Country != want {
			t.Errorf("%s: %v %v", host, m.Country, ok)
		}
	}
	if _, ok := byHost("notamazon.com"); ok {
		t.Error("notamazon.com is a marketplace")
	}
}
