// Package etsy serves craft_market/reviews (the platform is Etsy) over two
// sources, in this route order:
//
//   - Provider(): Etsy Open API v3 (openapi.etsy.com), getListing for the
//     listing's shop and title, getReviewsByListing (scope=listing) and
//     getReviewsByShop (scope=shop). It needs the operator's app keystring
//     and shared secret (x-api-key: keystring:shared_secret, required since
//     February 2026).
//   - Site(): the public listing page on www.etsy.com, read from its
//     schema.org Product JSON-LD (aggregateRating and the reviews the page
//     shows first) and its server-rendered review cards (ids, reviewer
//     links, avatars, photos), for pages.Direct and the shared unblocking
//     services.
//
// Neither source can do everything the endpoint's parameters ask. A route
// that cannot honour a request answers a Rejected fault (not counted
// against the route's health) so the runner tries the next route, and the
// call fails typed when none can, rather than returning a different list:
// a caller who asks for an order or a rating filter wants that list, and a
// caveat in _warnings would not make another list the one asked for. What
// a route serves but cannot fill completely (reviewer names, themes, the
// rating distribution, later pages in the same order) it says in _warnings,
// in the fixed sentences below.
package etsy

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

const (
	platform = "craft_market"
	endpoint = "craft_market/reviews"
	// perPage is the endpoint's page size (spec 4.6).
	perPage = 8
	// maxRating is Etsy's five-star scale.
	maxRating = 5
	// listingURL is the public listing page.
	listingURL = "https://www.etsy.com/listing/"
)

// listingID reads the id parameter: a numeric listing id, or an etsy.com
// listing URL (validation has already checked the host and made it https)
// whose path holds /listing/<digits>, optionally after a locale segment
// such as /uk/. Anything else is the caller's unusable value.
func listingID(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if digits(raw) {
		return raw, nil
	}
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == "listing" && digits(parts[i+1]) {
				return parts[i+1], nil
			}
		}
	}
	return "", upstream.InvalidParameterFault("id", "not_a_listing",
		"id must be a numeric listing id or the URL of a listing page (…/listing/<id>/…).")
}

func digits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// page is the requested page number (validated as at least 1).
func pageNumber(c *upstream.Call) int {
	n, err := strconv.Atoi(c.Param("page"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Data shapes of spec 2.7 craft_market/reviews.

type reviews struct {
	ListingID          *string        `json:"listing_id"`
	Page               int            `json:"page"`
	Count              int            `json:"count"`
	Total              *int           `json:"total"`
	TotalPages         *int           `json:"total_pages"`
	HasMore            *bool          `json:"has_more"`
	Cursor             *string        `json:"cursor"`
	Items              []review       `json:"items"`
	Rating             *rating        `json:"rating"`
	RatingDistribution map[string]int `json:"rating_distribution"`
	// ShopRating is the rating summary of the listing's whole shop, which
	// the listing page carries instead of the listing's own (an additional
	// field: spec 2.4 lets data carry more than the spec lists).
	ShopRating *rating  `json:"shop_rating,omitempty"`
	Photos     []string `json:"photos"`
	Themes     []theme  `json:"themes"`
	Warnings   []string `json:"_warnings,omitempty"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	warnAPIAuthor    = "Reviewer names are not available from the official API; author is null."
	warnAPIThemes    = "Review themes are not available from the official API; themes is null."
	warnAPINoSummary = "rating and rating_distribution are null: the official API gives no rating summary, " +
		"and this request did not read every review to compute one."
	warnAPIFiltered = "rating and rating_distribution describe every review, not only those with the requested rating."
	warnPageFirst   = "Only the reviews the listing page shows first, in the site's relevancy order: " +
		"later pages are not available in that order."
	warnPageNoSummary  = "rating_distribution and themes are not available from the listing page; they are null."
	warnPageShopRating = "The listing page's rating summary is its shop's, shared by every listing of the shop: " +
		"rating, total and total_pages are null, and shop_rating holds the shop's rating."
)

func (r *reviews) warn(s string) { r.Warnings = append(r.Warnings, s) }

type review struct {
	ID          *string  `json:"id"`
	Platform    string   `json:"platform"`
	Rating      *float64 `json:"rating"`
	Text        *string  `json:"text"`
	PostedAt    *string  `json:"posted_at"`
	Author      *author  `json:"author"`
	Listing     *listing `json:"listing"`
	Recommended *bool    `json:"recommended"`
}

type author struct {
	Name   *string `json:"name"`
	URL    *string `json:"url"`
	Avatar *string `json:"avatar"`
}

type listing struct {
	ID    *string `json:"id"`
	Title *string `json:"title"`
	URL   *string `json:"url"`
}

type rating struct {
	Value *float64 `json:"value"`
	Votes *int     `json:"votes"`
	Max   float64  `json:"max"`
}

type theme struct {
	Name     *string  `json:"name"`
	Positive *float64 `json:"positive"`
	Negative *float64 `json:"negative"`
}

// paging fills total, total_pages and has_more from a known total. The
// endpoint pages by number and declares no cursor parameter, so cursor
// stays null: the next page is page+1 while has_more is true.
func (r *reviews) paging(total int) {
	r.Total = &total
	pages := (total + perPage - 1) / perPage
	r.TotalPages = &pages
	more := r.Page < pages
	r.HasMore = &more
}

func ptr[T any](v T) *T { return &v }

// nonEmpty is nil for an empty or blank string.
func nonEmpty(s string) *string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return &s
}

// flexNumber reads a JSON number that sources also write as a string
// ("4.8"); nil when absent or unreadable.
type flexNumber struct{ v *float64 }

func (f *flexNumber) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		var s string
		if json.Unmarshal(b, &s) != nil {
			return nil // another type: unknown, not an error
		}
		n = json.Number(strings.TrimSpace(s))
	}
	if v, err := n.Float64(); err == nil {
		f.v = &v
	}
	return nil
}
