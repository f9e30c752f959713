package booking

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

func TestBlocked(t *testing.T) {
	challenge := `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title></title><script>window.awsWafCookieDomainList = ['booking.com'];` +
		`window.gokuProps = {"key":"AQID","iv":"CgA","context":"x"};</script><script src="https://abc.edge.sdk.awswaf.com/abc/def/challenge.js"></script>` +
		`</head><body><div id="challenge-container"></div></body></html>`
	realPage := `<!DOCTYPE html><html><head><title>Avenida Palace, Lisbon</title>` +
		`<script src="https://abc.edge.sdk.awswaf.com/abc/def/challenge.compact.js" defer></script></head><body><h2>Avenida Palace</h2></body></html>`
	html := http.Header{"Content-Type": {"text/html; charset=UTF-8"}}
	for _, c := range []struct {
		name    string
		status  int
		header  http.Header
		body    string
		blocked bool
		reason  string
	}{
		{"the challenge, 202", 202, html, challenge, true, "AWS WAF challenge"},
		{"the challenge, 200", 200, html, challenge, true, "AWS WAF challenge"},
		{"the WAF's header", 405, http.Header{"X-Amzn-Waf-Action": {"captcha"}}, "", true, "x-amzn-waf-action"},
		{"any HTML answered 202", 202, html, "<html><head><title>Booking.com</title></head><body></body></html>", true, "202"},
		{"a real page loading the token script", 200, html, realPage, false, ""},
		{"JSON naming the markers", 200, http.Header{"Content-Type": {"application/json"}}, `{"note":"awsWafCookieDomainList"}`, false, ""},
		{"a Cloudflare challenge", 403, html, `<html><head><title>Just a moment...</title></head><body></body></html>`, true, "cloudflare"},
	} {
		reason, blocked := blocked(&pages.Page{Status: c.status, Header: c.header, Body: []byte(c.body)})
		if blocked != c.blocked || !strings.Contains(reason, c.reason) {
			t.Errorf("%s: blocked %v (%q); want %v (%q)", c.name, blocked, reason, c.blocked, c.reason)
		}
		if strings.Contains(reason, "booking.com") || strings.Contains(reason, "Avenida") {
			t.Errorf("%s: the reason quotes the page: %q", c.name, reason)
		}
	}
}

func TestMembers(t *testing.T) {
	page := []byte(`<html><head><script type="application/ld+json">{"b_hotel_id": "9"}</script>
<script>
var B = window.booking = { env : {
  isRetina : window.devicePixelRatio > 1,
  "b_action" : 'hotel',
  note: 'not_b_hotel_id: 1',
  xb_hotel_id: '8',
  b_hotel_id: '1322386',
  b_hotel_name: 'Sonder \'Quintinie\' \u00e9',
  b_check == '3',
  b_rooms_available_and_soldout: [{"b_id": 132238604, "b_name": "Studio", "b_blocks": []}],
  b_cheapest_price: parseInt('40'),
}};
booking.env.b_map_center_latitude = 48.8402;
</script></head></html>`)
	for name, want := range map[string]string{"b_hotel_id": "1322386", "b_action": "hotel", "b_hotel_name": "Sonder 'Quintinie' é", "b_map_center_latitude": "48.8402"} {
		if got, ok := literalMember(page, name); !ok || got != want {
			t.Errorf("%s: %q %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"b_check", "b_cheapest_price", "isRetina", "missing"} {
		if got, ok := literalMember(page, name); ok {
			t.Errorf("%s: %q; want no literal", name, got)
		}
	}
	raw, ok := jsonMember(page, "b_rooms_available_and_soldout")
	var rooms []envRoom
	if !ok || json.Unmarshal(raw, &rooms) != nil || len(rooms) != 1 || rawID(rooms[0].ID) != "132238604" {
		t.Fatalf("rooms %s %v", raw, ok)
	}
}

func TestInlineReferences(t *testing.T) {
	store := map[string]json.RawMessage{
		"ROOT_QUERY": json.RawMessage(`{"list":[{"__ref":"A:1"},{"__ref":"missing"}]}`),
		"A:1":        json.RawMessage(`{"id":1,"self":{"__ref":"A:1"}}`),
	}
	var got struct {
		List []map[string]any `json:"list"`
	}
	if err := json.Unmarshal(inline(store, store["ROOT_QUERY"], 0), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.List) != 2 || got.List[0]["id"] != 1.0 || got.List[1] != nil {
		t.Fatalf("inlined %v", got.List)
	}
}

func TestParseDestination(t *testing.T) {
	for in, want := range map[string]destination{
		"-2167973": {ID: "-2167973", Type: "city"}, "region:2286": {ID: "2286", Type: "region"},
		"Hotel:123456": {ID: "123456", Type: "hotel"}, "country:pt": {ID: "pt", Type: "country"},
	} {
		if got, err := parseDestination(in); err != nil || got != want {
			t.Errorf("%s: %+v %v", in, got, err)
		}
	}
	for _, in := range []string{"lisbon", "planet:3", "region:abc", "city:-1&x=1", ""} {
		if _, err := parseDestination(in); err == nil {
			t.Errorf("%q was accepted", in)
		} else if f, ok := err.(*upstream.Fault); !ok || f.Kind != upstream.InvalidParameter || f.Field != "destination_id" {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// Neither location nor destination_id: the caller's to fix, before any
// request (the registry may refuse it first, with an any-of rule).
func TestNoDestination(t *testing.T) {
	_, err := fetcher{}.destinationOf(context.Background(), &upstream.Call{Params: map[string]string{"page": "1"}}, "en-gb")
	if f, ok := err.(*upstream.Fault); !ok || f.Kind != upstream.InvalidParameter || f.Field != "location" {
		t.Fatalf("%v", err)
	}
}

func TestAcceptLanguage(t *testing.T) {
	if acceptLanguage("en-gb") != "en-GB,en;q=0.9" || acceptLanguage("de") != "de;q=1.0" {
		t.Errorf("accept-language %q %q", acceptLanguage("en-gb"), acceptLanguage("de"))
	}
}

func FuzzParsers(f *testing.F) {
	f.Add([]byte(`<script type="application/json">{"ROOT_QUERY":{"searchQueries":{"search({})":{"results":[{"basicPropertyData":{"__ref":"B:1"}}]}}},"B:1":{"id":1}}</script>`))
	f.Add([]byte(`<script type="application/ld+json">{"@type":"Hotel","name":"x"}</script><script>b_rooms_available_and_soldout: [{"b_blocks":[{}]}], b_hotel_id: '1'</script>`))
	f.Fuzz(func(t *testing.T, page []byte) {
		_, _ = parseResults(page)
		_, _ = parseHotel(page, "1", "/hotel/pt/x.html", stay{checkin: "2026-12-01", checkout: "2026-12-03"}, "")
		_, _ = blocked(&pages.Page{Status: 200, Header: http.Header{}, Body: page})
		_, _ = searchProducts(page)
	})
}
