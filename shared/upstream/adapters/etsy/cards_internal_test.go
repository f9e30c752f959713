package etsy

import "testing"

func TestReviewCardsTokenizer(t *testing.T) {
	page := []byte(`<html><body>
<script>var x = '<div data-review-region="1">';</script>
<div data-review-region="4000000001"><div role="img" aria-label="Rating: 3 out of 5 stars"></div>
<div class="wt-text-body"><p>Nice <b>mug</b> &amp; saucer</p></div><div class="wt-text-body">second body ignored</div>
<a href="/people/buyer%20one?ref=l_review"><img src="https://i.etsystatic.com/iusa/a/1/av.jpg"/></a>
<a href="https://www.etsy.com/people/buyer%20one?ref=l_review">Buyer
  One</a><span class="x wt-text-body-small--tight">Jan 2, 2025</span>
<img src="https://i.etsystatic.com/il/a/1/listing.jpg"><img src="http://i.etsystatic.com/iap/a/1/plain.jpg">
<a href="https://evil.example/people/x">not a profile</a>
</div>
<div data-review-region="4000000002"><div role="img" aria-label="five stars"></div>
<a href="https://www.etsy.com/shop/Studio">shop</a>`)
	cards := reviewCards(page)
	if len(cards) != 2 {
		t.Fatalf("cards: %+v", cards)
	}
	c := cards[0]
	if c.ID != "4000000001" || c.Rating == nil || *c.Rating != 3 || c.Text != "Nice mug & saucer" ||
		c.Name != "Buyer One" || c.URL != "https://www.etsy.com/people/buyer%20one" ||
		c.Avatar != "https://i.etsystatic.com/iusa/a/1/av.jpg" || c.Date != "Jan 2, 2025" || len(c.Photos) != 0 {
		t.Fatalf("first card: %+v", c)
	}
	if d := cardDate(c.Date); d == nil || *d != "2025-01-02" {
		t.Fatalf("date %v", d)
	}
	// An unclosed last card still counts; an unreadable label is no rating.
	if u := cards[1]; u.ID != "4000000002" || u.Rating != nil || u.URL != "" {
		t.Fatalf("second card: %+v", u)
	}
	if reviewCards([]byte(`<div data-review-region="7"/>`)) != nil || reviewCards(nil) != nil {
		t.Fatal("a self-closed or missing card is none")
	}
}

func TestStarLabel(t *testing.T) {
	for label, want := range map[string]float64{"Rating: 5 out of 5 stars": 5, "4 out of 5 stars": 4, "Rating: 0 out of 5 stars": 0, "Rating: 9 out of 5": 0, "": 0} {
		got := starLabel(label)
		if (got == nil) != (want == 0) || (got != nil && *got != want) {
			t.Errorf("%q: %v", label, got)
		}
	}
}
