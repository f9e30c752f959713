package etsy_test

import (
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/adapters/etsy"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Etsy writes JSON-LD text as it writes its HTML, with &#39; and &quot;:
// the review text is decoded once, so a review that itself shows an
// escape ("&amp;#39;") keeps it.
func TestPageReviewTextDecodedOnce(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(etsy.Site()), nil)
	d := u.Data(t, endpoint, "id=4100000001", "shop-rating-4100000001")
	items := adaptertest.Items(t, d)
	for i, want := range []string{
		"Second rail we've bought — the brass is heavier than I expected.",
		"The seller wrote &#39;thanks&#39; in the note, escaped like that, which made me laugh.",
		`Lovely "warm" walnut; one screw was missing.`,
	} {
		if items[i]["text"] != want {
			t.Errorf("review %d text %q; want %q", i, items[i]["text"], want)
		}
	}
}

// Two listings of one shop carry the same aggregateRating in their JSON-LD:
// it is the shop's, so it is shop_rating, with a warning, and neither the
// listing's rating nor its review total.
func TestPageRatingIsTheShops(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(etsy.Site()), nil)
	var shop []map[string]any
	for _, id := range []string{"4100000001", "4100000002"} {
		d := u.Data(t, endpoint, "id="+id, "shop-rating-"+id)
		if d["rating"] != nil || d["total"] != nil || d["total_pages"] != nil || d["has_more"] != nil {
			t.Errorf("%s: rating %v, total %v, total_pages %v, has_more %v", id, d["rating"], d["total"], d["total_pages"], d["has_more"])
		}
		wantWarnings(t, d, "Only the reviews the listing page shows first", "rating_distribution and themes are not available",
			"rating summary is its shop's")
		shop = append(shop, d["shop_rating"].(map[string]any))
	}
	for _, r := range shop {
		if r["value"] != 4.9 || r["votes"] != 2417.0 || r["max"] != 5.0 {
			t.Errorf("shop_rating %v", r)
		}
	}
}
