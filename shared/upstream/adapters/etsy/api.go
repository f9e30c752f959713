package etsy

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// The operator's Etsy app credentials (etsy.com/developers/your-apps).
const (
	KeystringSecret    = "MERIDIAN_ETSY_API_KEY"
	SharedSecretSecret = "MERIDIAN_ETSY_SHARED_SECRET"
)

const (
	// apiPageLimit is the reviews endpoints' largest limit.
	apiPageLimit = 100
	// maxFetched bounds the reviews read for a sort or a rating filter the
	// API cannot apply itself: five requests of 100. Above it the route
	// declines and the page route is asked.
	maxFetched = 500
)

// Provider is Etsy Open API v3. Its reviews endpoints page by limit and
// offset, newest first, with neither sort nor rating filter: this route
// reads every review (up to maxFetched) when a sort or filter needs them
// and applies it here, and declines the relevancy order, which only
// Etsy's own site computes.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     "etsy_open_api",
		Protocol: "Etsy Open API v3 (REST, JSON): getListing, getReviewsByListing, getReviewsByShop; x-api-key keystring:shared_secret",
		Docs:     "https://developers.etsy.com/documentation/reference",
		BaseURL:  "https://openapi.etsy.com",
		Secrets: []upstream.Secret{
			{
				Name:     KeystringSecret,
				Required: true,
				Doc: "The keystring of an Etsy app: register one at etsy.com/developers/your-apps (public listing " +
					"and review data needs no OAuth token).",
			},
			{
				Name:     SharedSecretSecret,
				Required: true,
				Doc: "The same app's shared secret (Your Apps page). Since February 2026 Etsy refuses requests whose " +
					"x-api-key is not keystring:shared_secret.",
			},
		},
		Endpoints: map[string]upstream.Adapter{endpoint: apiReviews},
	}
}

// apiListing is the part of getListing used here.
type apiListing struct {
	ListingID json.Number `json:"listing_id"`
	ShopID    json.Number `json:"shop_id"`
	Title     string      `json:"title"`
}

// apiReviewPage is getReviewsByListing's and getReviewsByShop's answer
// (ListingReviews, TransactionReviews).
type apiReviewPage struct {
	Count   *int         `json:"count"`
	Results *[]apiReview `json:"results"`
}

// apiReview is a ListingReview or TransactionReview; the shop's also has
// transaction_id and buyer_user_id (absent by the buyer's privacy choice).
type apiReview struct {
	ListingID        json.Number `json:"listing_id"`
	TransactionID    json.Number `json:"transaction_id"`
	Rating           *float64    `json:"rating"`
	Review           string      `json:"review"`
	ImageURL         string      `json:"image_url_fullxfull"`
	CreatedTimestamp *int64      `json:"created_timestamp"`
	CreateTimestamp  *int64      `json:"create_timestamp"`
}

func (r apiReview) created() int64 {
	if r.CreatedTimestamp != nil {
		return *r.CreatedTimestamp
	}
	if r.CreateTimestamp != nil {
		return *r.CreateTimestamp
	}
	return 0
}

func apiReviews(ctx context.Context, c *upstream.Call) (any, error) {
	id, err := listingID(c.Param("id"))
	if err != nil {
		return nil, err
	}
	sortBy, scope, stars := c.Param("sort"), c.Param("scope"), c.Param("rating")
	if sortBy == "relevancy" {
		return nil, &upstream.Fault{Kind: upstream.Rejected, Reason: "the Open API has no relevancy order; left to the site"}
	}
	var l apiListing
	if err := getJSON(ctx, c, "/v3/application/listings/"+id, nil, &l); err != nil {
		return nil, err
	}
	path := "/v3/application/listings/" + id + "/reviews"
	if scope == "shop" {
		if l.ShopID == "" {
			return nil, upstream.MalformedFault("getListing answered without shop_id")
		}
		path = "/v3/application/shops/" + l.ShopID.String() + "/reviews"
	}

	out := &reviews{ListingID: &id, Page: pageNumber(c)}
	offset := (out.Page - 1) * perPage
	filtered := stars != "" || sortBy == "highest" || sortBy == "lowest"

	var window []apiReview
	if filtered || offset+perPage <= apiPageLimit {
		all, count, complete, err := fetchReviews(ctx, c, path, filtered)
		if err != nil {
			return nil, err
		}
		if complete {
			summarise(out, all)
			all = arrange(all, sortBy, stars)
			count = len(all)
		}
		window = all[min(offset, len(all)):min(offset+perPage, len(all))]
		out.paging(count)
	} else {
		// A page beyond the first hundred, in the API's own order.
		q := url.Values{"limit": {strconv.Itoa(perPage)}, "offset": {strconv.Itoa(offset)}}
		var p apiReviewPage
		if err := getJSON(ctx, c, path, q, &p); err != nil {
			return nil, err
		}
		if p.Count == nil || p.Results == nil {
			return nil, upstream.MalformedFault("the reviews answer has no count or results")
		}
		window = *p.Results
		out.paging(*p.Count)
	}

	out.Items = make([]review, 0, len(window))
	for _, r := range window {
		item := review{Platform: platform, Rating: r.Rating, Text: nonEmpty(r.Review)}
		// A review belongs to one transaction: the only id Etsy gives it
		// (shop reviews carry it, listing reviews do not).
		item.ID = upstream.NumberID(r.TransactionID)
		if ts := r.created(); ts > 0 {
			item.PostedAt = ptr(time.Unix(ts, 0).UTC().Format(time.RFC3339))
		}
		if r.ListingID != "" {
			lid := r.ListingID.String()
			item.Listing = &listing{ID: &lid, URL: ptr(listingURL + lid)}
			if lid == id {
				item.Listing.Title = nonEmpty(l.Title)
			}
		}
		if r.ImageURL != "" {
			out.Photos = append(out.Photos, r.ImageURL)
		}
		out.Items = append(out.Items, item)
	}
	out.Count = len(out.Items)

	// Whether there are reviews at all: total counts the filtered ones.
	reviewed := out.RatingDistribution["All"] > 0 || (out.Total != nil && *out.Total > 0)
	if out.Count > 0 {
		out.warn(warnAPIAuthor)
	}
	if reviewed {
		out.warn(warnAPIThemes)
	}
	switch {
	case out.Rating == nil && reviewed:
		out.warn(warnAPINoSummary)
	case out.Rating != nil && stars != "":
		out.warn(warnAPIFiltered)
	}
	return out, nil
}

// fetchReviews reads the first hundred reviews, and when all are needed
// (a sort or filter) the rest up to maxFetched. complete says every review
// the API counts was read.
func fetchReviews(ctx context.Context, c *upstream.Call, path string, needAll bool) (all []apiReview, count int, complete bool, err error) {
	for offset := 0; ; offset += apiPageLimit {
		q := url.Values{"limit": {strconv.Itoa(apiPageLimit)}, "offset": {strconv.Itoa(offset)}}
		var p apiReviewPage
		if err := getJSON(ctx, c, path, q, &p); err != nil {
			return nil, 0, false, err
		}
		if p.Count == nil || p.Results == nil {
			return nil, 0, false, upstream.MalformedFault("the reviews answer has no count or results")
		}
		if offset == 0 {
			count = *p.Count
			if needAll && count > maxFetched {
				return nil, 0, false, &upstream.Fault{Kind: upstream.Rejected,
					Reason: "the sort or rating filter needs all " + strconv.Itoa(count) + " reviews, more than this route reads; left to the site"}
			}
		}
		all = append(all, *p.Results...)
		// A short page is the end, whatever count said (hidden reviews).
		if len(*p.Results) < apiPageLimit || len(all) >= count {
			return all, count, true, nil
		}
		if !needAll || len(all) >= maxFetched {
			return all, count, false, nil
		}
	}
}

// summarise fills the listing's or shop's rating and distribution from
// every review, which the API does not report itself.
func summarise(out *reviews, all []apiReview) {
	dist := map[string]int{"All": len(all), "1": 0, "2": 0, "3": 0, "4": 0, "5": 0}
	sum, rated := 0.0, 0
	for _, r := range all {
		if r.Rating == nil {
			continue
		}
		sum += *r.Rating
		rated++
		if k := strconv.Itoa(int(*r.Rating)); float64(int(*r.Rating)) == *r.Rating {
			if _, ok := dist[k]; ok {
				dist[k]++
			}
		}
	}
	out.RatingDistribution = dist
	out.Rating = &rating{Max: maxRating, Votes: &rated}
	if rated > 0 {
		avg := float64(int(sum/float64(rated)*100+0.5)) / 100
		out.Rating.Value = &avg
	}
}

// arrange applies the rating filter and the sort to every review; ties and
// the default keep newest first.
func arrange(all []apiReview, sortBy, stars string) []apiReview {
	out := make([]apiReview, 0, len(all))
	want, _ := strconv.ParseFloat(stars, 64)
	for _, r := range all {
		if stars == "" || (r.Rating != nil && *r.Rating == want) {
			out = append(out, r)
		}
	}
	rate := func(r apiReview) float64 {
		if r.Rating == nil {
			return 0
		}
		return *r.Rating
	}
	slices.SortStableFunc(out, func(a, b apiReview) int {
		switch sortBy {
		case "highest":
			if d := cmp.Compare(rate(b), rate(a)); d != 0 {
				return d
			}
		case "lowest":
			if d := cmp.Compare(rate(a), rate(b)); d != 0 {
				return d
			}
		}
		return cmp.Compare(b.created(), a.created())
	})
	return out
}

// getJSON calls the API with the app's key and classifies its errors.
func getJSON(ctx context.Context, c *upstream.Call, path string, q url.Values, out any) error {
	h := http.Header{}
	h.Set("x-api-key", c.Secret(KeystringSecret)+":"+c.Secret(SharedSecretSecret))
	resp, err := c.GetJSON(ctx, path, q, h, out)
	if err == nil {
		return nil
	}
	f, ok := err.(*upstream.Fault)
	if !ok || resp == nil || f.Status == 0 {
		return err
	}
	// Etsy's error body is {"error": "…"}; it names no credential.
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(resp.Body, &body) == nil && body.Error != "" {
		f.Reason += ": " + upstream.Clip(body.Error, 200)
	}
	return f
}
