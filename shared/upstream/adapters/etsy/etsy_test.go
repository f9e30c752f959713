package etsy_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/etsy"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const endpoint = "craft_market/reviews"

// Configured credentials: they must reach Etsy as keystring:shared_secret
// and never a fault's reason.
var secrets = map[string]string{
	etsy.KeystringSecret:    "samplekeystring0123",
	etsy.SharedSecretSecret: "samplesharedsecret",
}

func api(t *testing.T) *adaptertest.Upstream {
	return adaptertest.Start(t, etsy.Provider(), secrets)
}

func TestAPIListingReviews(t *testing.T) {
	u := api(t)
	d := u.Data(t, endpoint, "id=1234567890", "listing-page1")
	items := adaptertest.Items(t, d)
	if d["count"] != 8.0 || d["total"] != 11.0 || d["total_pages"] != 2.0 || d["has_more"] != true || d["cursor"] != nil ||
		d["page"] != 1.0 || d["listing_id"] != "1234567890" {
		t.Fatalf("paging: %v", d)
	}
	first := items[0]
	if first["rating"] != 5.0 || first["posted_at"] != "2025-10-09T08:53:20Z" || first["platform"] != "craft_market" ||
		first["listing"].(map[string]any)["title"] != "Hand-thrown stoneware mug, speckled glaze" || first["id"] != nil {
		t.Fatalf("first review: %v", first)
	}
	if items[6]["text"] != nil {
		t.Errorf("an empty review text is unknown, got %q", items[6]["text"])
	}
	dist := d["rating_distribution"].(map[string]any)
	if dist["All"] != 11.0 || dist["5"] != 7.0 || dist["1"] != 1.0 || dist["2"] != 0.0 {
		t.Fatalf("distribution: %v", dist)
	}
	if r := d["rating"].(map[string]any); r["value"] != 4.27 || r["votes"] != 11.0 || r["max"] != 5.0 {
		t.Fatalf("rating: %v", r)
	}
	if p := d["photos"].([]any); len(p) != 2 {
		t.Fatalf("photos: %v", p)
	}
	if d["themes"] != nil {
		t.Fatalf("the API has no themes: %v", d["themes"])
	}
	// What the API cannot fill is said, and only that.
	wantWarnings(t, d, "Reviewer names are not available", "Review themes are not available")
	last := u.Data(t, endpoint, "id=https://www.etsy.com/uk/listing/1234567890/hand-thrown-mug?ref=shop_home&page=2", "listing-page2-url")
	if last["count"] != 3.0 || last["has_more"] != false || last["cursor"] != nil || last["page"] != 2.0 {
		t.Fatalf("page 2: %v", last)
	}
}

func TestAPISortAndRatingAreAppliedToEveryReview(t *testing.T) {
	u := api(t)
	low := adaptertest.Items(t, u.Data(t, endpoint, "id=1234567890&sort=lowest", "listing-lowest"))
	if low[0]["rating"] != 1.0 || low[1]["rating"] != 3.0 || low[2]["rating"] != 4.0 {
		t.Fatalf("lowest first: %v %v %v", low[0]["rating"], low[1]["rating"], low[2]["rating"])
	}
	high := adaptertest.Items(t, u.Data(t, endpoint, "id=1234567890&sort=highest", "listing-highest"))
	if high[0]["rating"] != 5.0 || high[7]["rating"] != 4.0 {
		t.Fatalf("highest first: %v", high)
	}
	fours := u.Data(t, endpoint, "id=1234567890&rating=4&sort=recency", "listing-rating-4")
	if fours["total"] != 2.0 || fours["count"] != 2.0 || fours["has_more"] != false {
		t.Fatalf("rating filter: %v", fours)
	}
	for _, it := range adaptertest.Items(t, fours) {
		if it["rating"] != 4.0 {
			t.Fatalf("rating filter let through %v", it["rating"])
		}
	}
	// The distribution describes every review, not the filtered ones, and
	// the response says so.
	if fours["rating_distribution"].(map[string]any)["All"] != 11.0 {
		t.Fatalf("distribution: %v", fours["rating_distribution"])
	}
	wantWarnings(t, fours, "Reviewer names", "Review themes", "describe every review, not only those with the requested rating")
}

func TestAPIShopReviews(t *testing.T) {
	u := api(t)
	d := u.Data(t, endpoint, "id=1234567890&scope=shop", "shop")
	if got := u.LastRequest(t).Path; got != "/v3/application/shops/22222222/reviews" {
		t.Fatalf("path %s", got)
	}
	items := adaptertest.Items(t, d)
	if d["total"] != 3.0 || items[0]["id"] != "3900000000" {
		t.Fatalf("shop: %v", d)
	}
	other := items[1]["listing"].(map[string]any)
	if other["id"] != "4444444444" || other["title"] != nil || other["url"] != "https://www.etsy.com/listing/4444444444" {
		t.Fatalf("another listing of the shop: %v", other)
	}
}

func TestAPIParameterMapping(t *testing.T) {
	u := api(t)
	u.Serve(t, endpoint, "id=2000000001&page=20")
	r := u.LastRequest(t)
	if r.Path != "/v3/application/listings/2000000001/reviews" || url.Values(r.Query).Get("limit") != "8" || url.Values(r.Query).Get("offset") != "152" {
		t.Fatalf("window request: %s %v", r.Path, r.Query)
	}
	if got := r.Header.Get("x-api-key"); got != "samplekeystring0123:samplesharedsecret" {
		t.Fatalf("x-api-key %q", got)
	}
	d := u.Data(t, endpoint, "id=2000000001&page=20", "big-page20")
	if d["total"] != 1200.0 || d["total_pages"] != 150.0 || d["cursor"] != nil || d["rating_distribution"] != nil || d["rating"] != nil {
		t.Fatalf("big listing page 20: %v", d)
	}
	first := u.Data(t, endpoint, "id=2000000001", "big-page1")
	if first["count"] != 8.0 || first["total"] != 1200.0 || first["rating_distribution"] != nil {
		t.Fatalf("big listing page 1: %v", first)
	}
	// Not every review was read: the missing summary is explained.
	for _, page := range []map[string]any{d, first} {
		wantWarnings(t, page, "Reviewer names", "Review themes", "rating and rating_distribution are null")
	}
	if q := url.Values(u.LastRequest(t).Query); q.Get("limit") != "100" || q.Get("offset") != "0" {
		t.Fatalf("first hundred: %v", q)
	}
}

func TestAPIDeclinesWhatItCannotHonour(t *testing.T) {
	u := api(t)
	u.Fault(t, endpoint, "id=1234567890&sort=relevancy", upstream.Rejected)
	f := u.Fault(t, endpoint, "id=2000000001&sort=highest", upstream.Rejected)
	if !strings.Contains(f.Fault.Reason, "1200 reviews") {
		t.Fatalf("reason %q", f.Fault.Reason)
	}
}

func TestAPIFaults(t *testing.T) {
	u := api(t)
	empty := u.Data(t, endpoint, "id=3333333333", "empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["total"] != 0.0 || empty["has_more"] != false {
		t.Fatalf("empty: %v", empty)
	}
	wantWarnings(t, empty)
	u.Fault(t, endpoint, "id=9999999999", upstream.NotFound)
	m := u.Fault(t, endpoint, "id=6666666666", upstream.Malformed)
	if !strings.Contains(m.Fault.Reason, "count or results") {
		t.Fatalf("malformed reason %q", m.Fault.Reason)
	}
	bad := u.Fault(t, endpoint, "id=8888888888", upstream.Rejected)
	if bad.Fault.Status != 403 || strings.Contains(bad.Fault.Reason, "samplesharedsecret") {
		t.Fatalf("bad key: %v", bad.Fault)
	}
	inv := u.Fault(t, endpoint, "id=https://www.etsy.com/shop/SampleClayStudio", upstream.InvalidParameter)
	if inv.Fault.Field != "id" {
		t.Fatalf("field %q", inv.Fault.Field)
	}
	// Last: a rate limit rests the route for its retry-after.
	rl := u.Fault(t, endpoint, "id=7777777777", upstream.RateLimited)
	if rl.Fault.RetryAfter.Seconds() != 2 {
		t.Fatalf("retry-after %v", rl.Fault.RetryAfter)
	}
}

// The page routes: the site directly, then Zyte API, then ScraperAPI.

func TestPageRoutes(t *testing.T) {
	site := etsy.Site()
	for _, p := range []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)} {
		t.Run(p.Name, func(t *testing.T) {
			u := adaptertest.Start(t, p, nil)
			golden := "listing-page1"
			if p.Name != "etsy_web" {
				golden = "etsy-listing-page1"
			}
			d := u.Data(t, endpoint, "id=https://www.etsy.com/listing/1234567890/hand-thrown-mug", golden)
			items := adaptertest.Items(t, d)
			// The page's aggregateRating is the shop's: neither the listing's
			// rating nor its review total.
			if d["count"] != 4.0 || d["total"] != nil || d["total_pages"] != nil || d["has_more"] != nil || d["cursor"] != nil {
				t.Fatalf("paging: %v", d)
			}
			if r := d["shop_rating"].(map[string]any); d["rating"] != nil || r["value"] != 4.8 || r["votes"] != 11.0 || r["max"] != 5.0 {
				t.Fatalf("rating %v, shop_rating %v", d["rating"], r)
			}
			if a := items[0]["author"].(map[string]any); a["name"] != "Sample Buyer A" || items[0]["posted_at"] != "2025-10-09" {
				t.Fatalf("first review: %v", items[0])
			}
			if items[3]["rating"] != 3.0 {
				t.Fatalf("string rating: %v", items[3]["rating"])
			}
			// The review cards add ids, profile links and avatars to the
			// JSON-LD reviews they match (by name and rating).
			a := items[0]["author"].(map[string]any)
			if items[0]["id"] != "4012345678" || a["url"] != "https://www.etsy.com/people/samplebuyera" ||
				a["avatar"] != "https://i.etsystatic.com/iusa/aa11/0001/iusa_75x75.0001_sample.jpg" {
				t.Fatalf("first review from its card: %v", items[0])
			}
			// A default avatar is not Etsy's image host: none.
			if b := items[1]["author"].(map[string]any); b["avatar"] != nil || b["url"] != "https://www.etsy.com/people/samplebuyerb" {
				t.Fatalf("second author: %v", b)
			}
			// The fourth review has no card on the page: JSON-LD only.
			if d4 := items[3]["author"].(map[string]any); items[3]["id"] != nil || d4["url"] != nil || d4["name"] != "Sample Buyer D" {
				t.Fatalf("review without a card: %v", items[3])
			}
			// Photos: the JSON-LD's full-size image of the second review (its
			// card's thumbnail is the same photo), then the third review's
			// lazy-loaded card photo.
			photos := d["photos"].([]any)
			if len(photos) != 2 || photos[0] != "https://i.etsystatic.com/sample/r/il/abc1/0001/il_fullxfull.0001_sample.jpg" ||
				photos[1] != "https://i.etsystatic.com/iap/dd44/0004/iap_300x300.0004_sample.jpg" {
				t.Fatalf("photos: %v", photos)
			}
			if d["rating_distribution"] != nil || d["themes"] != nil {
				t.Fatalf("the listing page has no distribution or themes: %v %v", d["rating_distribution"], d["themes"])
			}
			wantWarnings(t, d, "Only the reviews the listing page shows first, in the site's relevancy order",
				"rating_distribution and themes are not available from the listing page", "rating summary is its shop's")
			switch req := u.LastRequest(t); p.Name {
			case "zyte_api":
				if !strings.Contains(string(req.Body), `"url":"https://www.etsy.com/listing/1234567890"`) ||
					!strings.Contains(string(req.Body), `"geolocation":"US"`) {
					t.Fatalf("zyte body %s", req.Body)
				}
			case "scraperapi":
				if req.Query["url"][0] != "https://www.etsy.com/listing/1234567890" || req.Query["country_code"][0] != "us" {
					t.Fatalf("scraperapi query %v", req.Query)
				}
			}
		})
	}
}

func TestPageFaults(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(etsy.Site()), nil)
	empty := u.Data(t, endpoint, "id=3333333333", "empty")
	if empty["count"] != 0.0 || empty["total"] != 0.0 || empty["has_more"] != false || empty["rating"] != nil {
		t.Fatalf("empty: %v", empty)
	}
	wantWarnings(t, empty)
	u.Fault(t, endpoint, "id=9999999999", upstream.NotFound)
	// Review cards without the JSON-LD's review list are the reviews.
	cards := u.Data(t, endpoint, "id=2222222222", "cards-only")
	items := adaptertest.Items(t, cards)
	if cards["count"] != 2.0 || cards["total"] != nil || cards["has_more"] != nil || len(items) != 2 {
		t.Fatalf("cards only: %v", cards)
	}
	first := items[0]
	if first["id"] != "4022222221" || first["rating"] != 5.0 || first["posted_at"] != "2025-09-30" ||
		first["text"] != "Beautiful print, the colours are rich & true." ||
		first["author"].(map[string]any)["name"] != "Print Fan" ||
		first["author"].(map[string]any)["avatar"] != "https://i.etsystatic.com/iusa/ee55/0005/iusa_75x75.0005_sample.jpg" {
		t.Fatalf("first card: %v", first)
	}
	if items[1]["posted_at"] != "2025-09-02" || items[1]["rating"] != 4.0 || items[1]["author"].(map[string]any)["avatar"] != nil {
		t.Fatalf("second card: %v", items[1])
	}
	if p := cards["photos"].([]any); len(p) != 2 || p[1] != "https://i.etsystatic.com/iap/ff66/0007/iap_300x300.0007_sample.jpg" {
		t.Fatalf("card photos: %v", p)
	}
	wantWarnings(t, cards, "Only the reviews the listing page shows first",
		"rating_distribution and themes are not available from the listing page", "rating summary is its shop's")
	// A page without a review section still serves its JSON-LD reviews.
	bare := u.Data(t, endpoint, "id=7777777777", "no-review-section")
	bareItems := adaptertest.Items(t, bare)
	if bare["count"] != 4.0 || bareItems[0]["id"] != nil || bareItems[0]["author"].(map[string]any)["url"] != nil ||
		len(bare["photos"].([]any)) != 1 {
		t.Fatalf("no review section: %v", bare)
	}
	wantWarnings(t, bare, "Only the reviews the listing page shows first", "rating_distribution and themes are not available",
		"rating summary is its shop's")
	m := u.Fault(t, endpoint, "id=6666666666", upstream.Malformed)
	if !strings.Contains(m.Fault.Reason, `"Product"`) || !strings.Contains(m.Fault.Reason, "-byte page") || strings.Contains(m.Fault.Reason, "Home & Living") {
		t.Fatalf("malformed reason %q", m.Fault.Reason)
	}
	b := u.Fault(t, endpoint, "id=5555555555", upstream.Rejected)
	if !strings.Contains(b.Fault.Reason, "datadome") {
		t.Fatalf("block reason %q", b.Fault.Reason)
	}
	for _, q := range []string{"id=1234567890&page=2", "id=1234567890&scope=shop", "id=1234567890&sort=recency", "id=1234567890&rating=5"} {
		u.Fault(t, endpoint, q, upstream.Rejected)
	}
	if n := len(u.Replay.Requests()); n != 6 {
		t.Fatalf("declined requests reached the site: %d requests in all", n)
	}
	s := adaptertest.Start(t, pages.ScraperAPI(etsy.Site()), nil)
	s.Fault(t, endpoint, "id=6666666666", upstream.Malformed)
}

// TestRouteOrder runs the routes as the integrator wires them: the API,
// then the site, Zyte API and ScraperAPI.
func TestRouteOrder(t *testing.T) {
	site := etsy.Site()
	r, _ := runner(t, etsy.Provider(), pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site))
	serve := func(q string) upstream.Outcome {
		t.Helper()
		e, _ := registry.Default().Endpoint(endpoint)
		v, _ := url.ParseQuery(q)
		res, verr := params.Validate(e, v, nil)
		if verr != nil {
			t.Fatal(verr)
		}
		return r.Serve(context.Background(), endpoint, res.Values)
	}
	if out := serve("id=1234567890"); out.Trace.ServedBy != "etsy_open_api" {
		t.Fatalf("default served by %s", out.Trace.ServedBy)
	}
	// Relevancy is the site's: the API declines, the site answers.
	out := serve("id=1234567890&sort=relevancy")
	if out.Trace.ServedBy != "etsy_web" || schemas.Validate(endpoint, out.Data) != nil {
		t.Fatalf("relevancy served by %s (%v)", out.Trace.ServedBy, out.Fault)
	}
	// The site's block page fails over to Zyte API (the API declines relevancy).
	out = serve("id=5555555555&sort=relevancy")
	if out.Trace.ServedBy != "zyte_api" {
		t.Fatalf("blocked page served by %s (%v)", out.Trace.ServedBy, out.Fault)
	}
	// A missing listing is definitive on the first route.
	out = serve("id=9999999999")
	if out.Fault == nil || out.Fault.Kind != upstream.NotFound || len(out.Trace.Legs) != 1 {
		t.Fatalf("not found: %+v", out.Trace)
	}
}

// wantWarnings requires data's _warnings to hold one line per fragment,
// in order, each containing it; no fragments means no _warnings at all.
func wantWarnings(t *testing.T, data map[string]any, fragments ...string) {
	t.Helper()
	got, _ := data["_warnings"].([]any)
	if _, present := data["_warnings"]; present && len(fragments) == 0 {
		t.Fatalf("_warnings %v; want none", data["_warnings"])
	}
	if len(got) != len(fragments) {
		t.Fatalf("_warnings %v; want %d lines", got, len(fragments))
	}
	for i, f := range fragments {
		if line, _ := got[i].(string); !strings.Contains(line, f) {
			t.Errorf("_warnings[%d] = %q; want it to contain %q", i, got[i], f)
		}
	}
}

// runner serves the fixtures to several providers at once.
func runner(t *testing.T, ps ...*upstream.Provider) (*upstream.Runner, *replay.Server) {
	t.Helper()
	u := adaptertest.StartRoutes(t, ps, secrets, adaptertest.Options)
	return u.Runner, u.Replay
}
