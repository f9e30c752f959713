package etsy

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Site is www.etsy.com's public listing page (pages.Direct, pages.Zyte,
// pages.ScraperAPI). The page embeds a schema.org Product whose
// aggregateRating is the shop's average and review count, not the
// listing's (every listing of a shop carries the same one: captures of two
// listings of one shop show it; Etsy's Open API likewise keeps
// review_average and review_count on the shop, not the listing), and whose
// review array holds the reviews the page shows first, in the site's own
// (relevancy) order; the review cards it renders server-side
// (data-review-region, read in cards.go) add each review's id, the
// reviewer's profile link and avatar, and review photos, and are the
// reviews when the JSON-LD lists none. The star histogram and review tags
// live only in the "View all reviews" sheet, and more pages, other orders,
// the rating filter and the shop's reviews come from POSTs to the site's
// internal API that need a session's CSRF token: this route declines those
// (a Rejected fault, so the runner moves on) rather than answer another
// list. What it serves says in _warnings that it holds only the first
// reviews, in relevancy order, and that it has no rating distribution or
// themes.
func Site() *pages.Site {
	return &pages.Site{
		Name:    "etsy_web",
		Origin:  "https://www.etsy.com",
		Hosts:   []string{"etsy.com"},
		Header:  pages.BrowserHeader("en-US,en;q=0.9"),
		Blocked: pages.BlockedBody(htmldata.Challenge), // DataDome on etsy.com
		Operations: map[string]pages.Operation{
			endpoint: {Build: pageRequest, Parse: parsePage},
		},
	}
}

func pageRequest(c *upstream.Call) (pages.Request, error) {
	id, err := listingID(c.Param("id"))
	if err != nil {
		return pages.Request{}, err
	}
	decline := ""
	switch {
	case c.Param("scope") == "shop":
		decline = "shop reviews"
	case c.Param("sort") != "" && c.Param("sort") != "relevancy":
		decline = "the " + c.Param("sort") + " order"
	case c.Param("rating") != "":
		decline = "a rating filter"
	case pageNumber(c) > 1:
		decline = "pages after the first"
	}
	if decline != "" {
		return pages.Request{}, &upstream.Fault{Kind: upstream.Rejected,
			Reason: "the listing page has only its first reviews in relevancy order, not " + decline}
	}
	// US English: the reviews Etsy shows first and their language depend on
	// the visitor's locale.
	return pages.Request{Path: "/listing/" + id, Country: "US"}, nil
}

// ldProduct is the part of the page's Product JSON-LD used here.
type ldProduct struct {
	Name            string          `json:"name"`
	URL             string          `json:"url"`
	AggregateRating *ldAggregate    `json:"aggregateRating"`
	Review          json.RawMessage `json:"review"`
}

type ldAggregate struct {
	RatingValue flexNumber `json:"ratingValue"`
	ReviewCount flexNumber `json:"reviewCount"`
	RatingCount flexNumber `json:"ratingCount"`
	BestRating  flexNumber `json:"bestRating"`
}

type ldReview struct {
	ReviewRating *struct {
		RatingValue flexNumber `json:"ratingValue"`
	} `json:"reviewRating"`
	DatePublished string          `json:"datePublished"`
	ReviewBody    string          `json:"reviewBody"`
	Description   string          `json:"description"`
	Author        json.RawMessage `json:"author"`
	Image         json.RawMessage `json:"image"`
}

func parsePage(c *upstream.Call, p *pages.Page) (any, error) {
	id, err := listingID(c.Param("id"))
	if err != nil {
		return nil, err
	}
	objs, err := htmldata.JSONLDOfType(p.Body, "Product")
	if err != nil {
		return nil, err
	}
	var prod ldProduct
	if err := json.Unmarshal(objs[0], &prod); err != nil {
		return nil, upstream.MalformedFault("the Product JSON-LD of a %d-byte page does not decode: %T", len(p.Body), err)
	}
	var lds []ldReview
	if len(prod.Review) > 0 && string(prod.Review) != "null" {
		// One review is an object, several an array.
		if prod.Review[0] == '{' {
			prod.Review = append(append([]byte{'['}, prod.Review...), ']')
		}
		if err := json.Unmarshal(prod.Review, &lds); err != nil {
			return nil, upstream.MalformedFault("the Product JSON-LD's review of a %d-byte page is not a list of reviews", len(p.Body))
		}
	}

	out := &reviews{ListingID: &id, Page: 1}
	it := &listing{ID: &id, Title: nonEmpty(prod.Name), URL: ptr(listingURL + id)}
	cards := reviewCards(p.Body)
	used := make([]bool, len(cards))
	out.Items = make([]review, 0, len(lds)+len(cards))
	for _, r := range lds {
		item := review{Platform: platform, Listing: it, Text: nonEmpty(r.ReviewBody)}
		if item.Text == nil {
			item.Text = nonEmpty(r.Description)
		}
		if r.ReviewRating != nil {
			item.Rating = r.ReviewRating.RatingValue.v
		}
		item.PostedAt = isoDate(r.DatePublished)
		if name := personName(r.Author); name != nil {
			item.Author = &author{Name: name}
		}
		// A review's photos: the JSON-LD's (full size), else the card's
		// (the same photos as thumbnails, so never both).
		photos := imageURLs(r.Image)
		if i := matchCard(cards, used, item); i >= 0 {
			used[i] = true
			item.fromCard(cards[i])
			if len(photos) == 0 {
				photos = cards[i].Photos
			}
		}
		out.addPhotos(photos...)
		out.Items = append(out.Items, item)
	}
	// Cards the JSON-LD does not hold are reviews the page shows too
	// (a card without rating or text is a placeholder).
	for i, c := range cards {
		if used[i] || (c.Rating == nil && nonEmpty(c.Text) == nil) {
			continue
		}
		item := review{Platform: platform, Listing: it, Rating: c.Rating, Text: nonEmpty(c.Text), PostedAt: cardDate(c.Date)}
		item.fromCard(c)
		out.addPhotos(c.Photos...)
		out.Items = append(out.Items, item)
	}
	out.Count = len(out.Items)

	// The aggregateRating is the shop's: it is kept as shop_rating, and
	// neither the listing's rating nor its review total (the page's pages
	// and has_more) is read from it.
	switch a := prod.AggregateRating; {
	case a != nil:
		out.ShopRating = &rating{Value: a.RatingValue.v, Max: maxRating}
		if a.BestRating.v != nil {
			out.ShopRating.Max = *a.BestRating.v
		}
		votes := a.ReviewCount.v
		if votes == nil {
			votes = a.RatingCount.v
		}
		if votes != nil {
			n := int(*votes)
			out.ShopRating.Votes = &n
		}
	case out.Count == 0:
		// Etsy omits aggregateRating when nobody has reviewed the shop yet.
		out.paging(0)
	}
	if out.HasMore == nil || *out.HasMore {
		out.warn(warnPageFirst)
	}
	if out.Total == nil || *out.Total > 0 {
		out.warn(warnPageNoSummary)
	}
	if out.ShopRating != nil {
		out.warn(warnPageShopRating)
	}
	return out, nil
}

// matchCard finds the unused review card of the JSON-LD review: the same
// reviewer's name and, when both say it, the same rating; -1 when none.
func matchCard(cards []pageCard, used []bool, item review) int {
	if item.Author == nil || item.Author.Name == nil {
		return -1
	}
	for i, c := range cards {
		if used[i] || strings.TrimSpace(c.Name) != strings.TrimSpace(*item.Author.Name) {
			continue
		}
		if c.Rating != nil && item.Rating != nil && *c.Rating != *item.Rating {
			continue
		}
		return i
	}
	return -1
}

// fromCard adds what only the review card carries: the review's id (its
// transaction id), the reviewer's profile URL and avatar, and the name and
// text when the JSON-LD has none.
func (r *review) fromCard(c pageCard) {
	if digits(c.ID) {
		r.ID = ptr(c.ID)
	}
	if r.Author == nil {
		r.Author = &author{}
	}
	if r.Author.Name == nil {
		r.Author.Name = nonEmpty(c.Name)
	}
	r.Author.URL = nonEmpty(c.URL)
	r.Author.Avatar = nonEmpty(c.Avatar)
	if r.Author.Name == nil && r.Author.URL == nil && r.Author.Avatar == nil {
		r.Author = nil
	}
	if r.Text == nil {
		r.Text = nonEmpty(c.Text)
	}
}

// addPhotos appends review photos, each URL once.
func (r *reviews) addPhotos(urls ...string) {
	for _, u := range urls {
		seen := false
		for _, have := range r.Photos {
			seen = seen || have == u
		}
		if !seen && u != "" {
			r.Photos = append(r.Photos, u)
		}
	}
}

// isoDate keeps a datePublished that is an ISO date or date-time.
func isoDate(s string) *string {
	s = strings.TrimSpace(s)
	if _, err := time.Parse("2006-01-02", s); err == nil {
		return &s
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return ptr(t.UTC().Format(time.RFC3339))
	}
	return nil
}

// personName reads an author written as a Person object or a bare name.
func personName(raw json.RawMessage) *string {
	var p struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &p) == nil && p.Name != "" {
		return nonEmpty(p.Name)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nonEmpty(s)
	}
	return nil
}

// imageURLs reads a review's image: a URL, an ImageObject, or a list.
func imageURLs(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		var out []string
		for _, v := range list {
			out = append(out, imageURLs(v)...)
		}
		return out
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && strings.HasPrefix(s, "https://") {
		return []string{s}
	}
	var obj struct {
		URL        string `json:"url"`
		ContentURL string `json:"contentUrl"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		for _, u := range []string{obj.ContentURL, obj.URL} {
			if strings.HasPrefix(u, "https://") {
				return []string{u}
			}
		}
	}
	return nil
}
