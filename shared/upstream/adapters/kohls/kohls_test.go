package kohls_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/kohls"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const endpoint = "retailer_a/search"

// target is the public URL every route fetches for the default query.
const target = "https://www.kohls.com/search.jsp?PPP=120&search=winter+coat&submit-search=web-regular"

// Kohl's 2026 search page: the result is catalogData in the props of the
// ProductGrid Astro island, HTML-escaped [type, value] pairs (&#39; in
// titles, &amp; in image URLs, &lt;/&gt; and \&quot; in text); there is no
// pmpSearchJsonData.
func TestDirectSearch(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	data := u.Data(t, endpoint, "query=winter+coat", "search-default")
	req := u.LastRequest(t)
	if req.Path != "/search.jsp" {
		t.Fatalf("path %s", req.Path)
	}
	wantQuery(t, req.Query, map[string]string{"search": "winter coat", "submit-search": "web-regular", "PPP": "120"}, "WS", "S")
	if req.Header.Get("user-agent") == "" || !strings.Contains(req.Header.Get("accept"), "text/html") {
		t.Fatalf("not a browser's navigation: %v", req.Header)
	}

	// productCount is the number of matches; this page holds them all.
	if data["count"] != 4.0 || data["total"] != 4.0 || data["has_more"] != false || data["cursor"] != nil ||
		data["page"] != 1.0 || data["query"] != "winter coat" {
		t.Fatalf("list fields: %v", data)
	}
	sorts := data["sorts"].([]any)
	if len(sorts) != 6 {
		t.Fatalf("sorts %v", sorts)
	}
	if s := sorts[0].(map[string]any); s["id"] != "1" || s["name"] != "Featured" || s["active"] != true {
		t.Fatalf("first sort %v", s)
	}
	if s := sorts[5].(map[string]any); s["id"] != "7" || s["name"] != "Percent Off" || s["active"] != false {
		t.Fatalf("last sort %v", s)
	}
	if rel := data["related_searches"].([]any); len(rel) != 3 || rel[2] != "mens parka" {
		t.Fatalf("related %v", rel)
	}
	// Only the suppressed-price product lacks SKU ids.
	wantWarnings(t, data, "do not carry SKU ids")

	items := adaptertest.Items(t, data)
	sale := items[0]
	if sale["id"] != "6240115" || sale["platform"] != "retailer_a" || sale["currency"] != "USD" || sale["type"] != "product" ||
		sale["title"] != "Women's Sonoma Goods For Life® Quilted Puffer Jacket" ||
		sale["url"] != "https://www.kohls.com/product/prd-6240115/womens-sonoma-goods-for-life-quilted-puffer-jacket.jsp" ||
		sale["image_url"] != "https://media.kohlsimg.com/is/image/kohls/6240115_Black?wid=180&hei=180&op_sharpen=1" ||
		sale["price"] != 49.99 || sale["regular_price"] != 100.0 || sale["price_max"] != nil || sale["price_type"] != "sale" ||
		sale["colors_count"] != 3.0 || len(sale["colors"].([]any)) != 3 || sale["coupon_eligible"] != true ||
		sale["ships"] != true || sale["pickup"] != true || sale["sponsored"] != false || sale["variations"] != "SizeAndColor" {
		t.Fatalf("sale item: %v", sale)
	}
	if skus := sale["sku_ids"].([]any); len(skus) != 2 || skus[0] != "40112233" || skus[1] != "40112240" {
		t.Fatalf("sku ids %v", skus)
	}
	if r := sale["rating"].(map[string]any); r["value"] != 4.3 || r["max"] != 5.0 || r["votes"] != 212.0 {
		t.Fatalf("rating %v", r)
	}
	// "Select styles on sale": a sale range over a regular range.
	mixed := items[1]
	if mixed["title"] != "Men's ZeroXposur Big & Tall Soft Shell Jacket" || mixed["price"] != 59.99 || mixed["price_max"] != 95.0 ||
		mixed["price_type"] != "mixed" || mixed["regular_price"] != 80.0 || mixed["coupon_eligible"] != false {
		t.Fatalf("mixed-price item: %v", mixed)
	}
	regular := items[2]
	if regular["title"] != `Kids' Columbia Powder Lite "Hooded" Jacket` || regular["sponsored"] != true ||
		regular["price"] != 65.0 || regular["price_type"] != "regular" || regular["variations"] != "Size" {
		t.Fatalf("sponsored regular item: %v", regular)
	}
	if r := regular["rating"].(map[string]any); r["value"] != nil || r["votes"] != 0.0 {
		t.Fatalf("unrated item: rating %v; want value null, votes 0", r)
	}
	// A price the site hides until checkout is unknown, never 0.
	hidden := items[3]
	if hidden["title"] != "Women's Nine West Faux-Wool Wrap Coat <Online Only>" || hidden["price"] != nil ||
		hidden["price_max"] != nil || hidden["regular_price"] != 180.0 || hidden["colors"] != nil ||
		hidden["colors_count"] != nil || hidden["rating"] != nil || hidden["sku_ids"] != nil {
		t.Fatalf("suppressed-price item: %v", hidden)
	}
}

// The search page before 2026 assigned the result to
// window.pmpSearchJsonData; that form is still read.
func TestDirectSearchLegacyPMP(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	data := u.Data(t, endpoint, "query=puffer+coat", "search-pmp-legacy")
	req := u.LastRequest(t)
	if req.Path != "/search.jsp" {
		t.Fatalf("path %s", req.Path)
	}
	wantQuery(t, req.Query, map[string]string{"search": "puffer coat", "submit-search": "web-regular", "PPP": "120"}, "WS", "S")
	if req.Header.Get("user-agent") == "" || !strings.Contains(req.Header.Get("accept"), "text/html") {
		t.Fatalf("not a browser's navigation: %v", req.Header)
	}

	if data["count"] != 4.0 || data["total"] != 1342.0 || data["has_more"] != true || data["cursor"] != nil ||
		data["page"] != 1.0 || data["query"] != "puffer coat" {
		t.Fatalf("list fields: %v", data)
	}
	sorts := data["sorts"].([]any)
	if len(sorts) != 6 {
		t.Fatalf("sorts %v", sorts)
	}
	if s := sorts[0].(map[string]any); s["id"] != "1" || s["name"] != "Featured" || s["active"] != true {
		t.Fatalf("first sort %v", s)
	}
	if s := sorts[3].(map[string]any); s["id"] != "4" || s["active"] != false {
		t.Fatalf("fourth sort %v", s)
	}
	if rel := data["related_searches"].([]any); len(rel) != 3 || rel[0] != "womens puffer coats" {
		t.Fatalf("related %v", rel)
	}
	// No SKU ids in the results, and 4 products for a limit of 120 with
	// 1342 matches: the next page's offset would skip the rest.
	wantWarnings(t, data, "do not carry SKU ids", "fewer products than limit")

	items := adaptertest.Items(t, data)
	sale := items[0]
	if sale["id"] != "6123457" || sale["platform"] != "retailer_a" || sale["currency"] != "USD" || sale["type"] != "product" ||
		sale["url"] != "https://www.kohls.com/product/prd-6123457/womens-sonoma-goods-for-life-hooded-puffer-coat.jsp" ||
		sale["price"] != 54.99 || sale["regular_price"] != 110.0 || sale["price_max"] != nil || sale["price_type"] != "sale" ||
		sale["colors_count"] != 3.0 || len(sale["colors"].([]any)) != 3 || sale["coupon_eligible"] != true ||
		sale["ships"] != true || sale["pickup"] != false || sale["sponsored"] != false || sale["variations"] != "Color" {
		t.Fatalf("sale item: %v", sale)
	}
	if r := sale["rating"].(map[string]any); r["value"] != 4.4 || r["max"] != 5.0 || r["votes"] != 318.0 {
		t.Fatalf("rating %v", r)
	}
	clearance := items[1]
	if clearance["price"] != 47.99 || clearance["price_max"] != 55.99 || clearance["price_type"] != "clearance" ||
		clearance["regular_price"] != 120.0 || clearance["coupon_eligible"] != false || clearance["pickup"] != true {
		t.Fatalf("clearance item: %v", clearance)
	}
	regular := items[2]
	if regular["sponsored"] != true || regular["price"] != 90.0 || regular["price_type"] != "regular" {
		t.Fatalf("sponsored regular item: %v", regular)
	}
	if r := regular["rating"].(map[string]any); r["value"] != nil || r["votes"] != 0.0 {
		t.Fatalf("unrated item: rating %v; want value null, votes 0", r)
	}
	// A price the site hides until checkout is unknown, never 0.
	hidden := items[3]
	if hidden["price"] != nil || hidden["price_max"] != nil || hidden["regular_price"] != 200.0 ||
		hidden["colors"] != nil || hidden["colors_count"] != nil || hidden["rating"] != nil {
		t.Fatalf("suppressed-price item: %v", hidden)
	}
}

// Each optional parameter reaches the site in its own form: page and limit
// as the offset WS and page size PPP, sort as S.
func TestParameterMapping(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	data := u.Data(t, endpoint, "query=winter+coat&page=2&limit=2&sort=4", "search-page2-sorted")
	wantQuery(t, u.LastRequest(t).Query, map[string]string{"search": "winter coat", "PPP": "2", "WS": "2", "S": "4"})
	if data["page"] != 2.0 || data["count"] != 2.0 || data["total"] != 5.0 || data["has_more"] != true || data["cursor"] != nil {
		t.Fatalf("page 2: %v", data)
	}
	for _, s := range data["sorts"].([]any) {
		s := s.(map[string]any)
		if (s["id"] == "4") != (s["active"] == true) {
			t.Fatalf("sort %v: only 4 is active", s)
		}
	}
	if rel := data["related_searches"].([]any); len(rel) != 1 || rel[0] != "wool coat" {
		t.Fatalf("related searches as objects: %v", rel)
	}
	if it := adaptertest.Items(t, data)[1]; it["price"] != 29.99 || it["price_max"] != 35.99 {
		t.Fatalf("price range %v", it)
	}
	// A full page in the requested sort: only the missing SKU ids are said.
	wantWarnings(t, data, "do not carry SKU ids")
}

func TestEmptySearch(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	data := u.Data(t, endpoint, "query=zzqx+nothing", "search-empty")
	if items, ok := data["items"].([]any); !ok || len(items) != 0 {
		t.Fatalf("items %v; want an empty list", data["items"])
	}
	if data["count"] != 0.0 || data["total"] != 0.0 || data["has_more"] != false || data["cursor"] != nil {
		t.Fatalf("empty search: %v", data)
	}
	wantWarnings(t, data)
}

// A page without the embedded result fails typed, naming what is missing
// and the page's size, never its content.
func TestChangedPageShape(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	out := u.Fault(t, endpoint, "query=changed+shape", upstream.Malformed)
	r := out.Fault.Reason
	if !strings.Contains(r, "pmpSearchJsonData") || !strings.Contains(r, "-byte page") || strings.Contains(r, "searchResults") {
		t.Fatalf("reason %q", r)
	}
}

func TestNotFound(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	u.Fault(t, endpoint, "query=retired+page", upstream.NotFound)
}

func TestBlockedDirect(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(kohls.Site()), nil)
	out := u.Fault(t, endpoint, "query=blocked+coat", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "block or challenge") {
		t.Fatalf("reason %q", out.Fault.Reason)
	}
}

func TestZyteRoute(t *testing.T) {
	u := adaptertest.Start(t, pages.Zyte(kohls.Site()), nil)
	data := u.Data(t, endpoint, "query=winter+coat", "kohls-search")
	var body map[string]any
	if err := json.Unmarshal(u.LastRequest(t).Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["url"] != target || body["geolocation"] != "US" || body["httpResponseBody"] != true {
		t.Fatalf("Zyte API request %v", body)
	}
	if data["count"] != 4.0 || adaptertest.Items(t, data)[0]["id"] != "6123457" {
		t.Fatalf("data %v", data)
	}
}

func TestScraperAPIRoute(t *testing.T) {
	u := adaptertest.Start(t, pages.ScraperAPI(kohls.Site()), nil)
	data := u.Data(t, endpoint, "query=winter+coat", "kohls-search")
	q := u.LastRequest(t).Query
	if first(q, "url") != target || first(q, "country_code") != "us" {
		t.Fatalf("ScraperAPI request %v", q)
	}
	if data["count"] != 4.0 || adaptertest.Items(t, data)[3]["regular_price"] != 200.0 {
		t.Fatalf("data %v", data)
	}
}

// The routes in the integrator's order: a block on the site fails over to
// Zyte API, a Zyte ban to ScraperAPI, and a block everywhere fails typed.
func TestFailover(t *testing.T) {
	site := kohls.Site()
	routes := adaptertest.StartRoutes(t, []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}, nil, adaptertest.Options)

	out := routes.Serve(t, endpoint, "query=blocked+coat")
	if out.Fault != nil || out.Trace.ServedBy != pages.ZyteName {
		t.Fatalf("blocked direct: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if l := out.Trace.Legs[0]; l.ServedBy != kohls.Name || l.Fault != upstream.Rejected || l.Status != 403 {
		t.Fatalf("direct leg %+v", l)
	}

	out = routes.Serve(t, endpoint, "query=banned+coat")
	if out.Fault != nil || out.Trace.ServedBy != pages.ScraperAPIName {
		t.Fatalf("Zyte ban: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if data := out.Data.(kohls.Result); data.Count != 1 || data.Items[0].ID != "5987012" {
		t.Fatalf("ScraperAPI data %+v", data)
	}

	out = routes.Serve(t, endpoint, "query=walled+coat")
	if out.Fault == nil || out.Fault.Kind != upstream.Rejected || len(out.Trace.Legs) != 3 {
		t.Fatalf("blocked everywhere: fault %v, legs %+v", out.Fault, out.Trace.Legs)
	}
}

func wantQuery(t *testing.T, got map[string][]string, want map[string]string, absent ...string) {
	t.Helper()
	for k, v := range want {
		if first(got, k) != v {
			t.Errorf("query %s = %q; want %q (query %v)", k, first(got, k), v, got)
		}
	}
	for _, k := range absent {
		if _, ok := got[k]; ok {
			t.Errorf("query has %s (%v)", k, got)
		}
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

func first(q map[string][]string, k string) string {
	if len(q[k]) == 0 {
		return ""
	}
	return q[k][0]
}

// The registry bounds page and limit, so validation refuses a value out of
// range with 422 before the call is reserved; the adapter has no second
// check of its own.
func TestPagingValidatedByRegistry(t *testing.T) {
	e, _ := registry.Default().Endpoint(endpoint)
	for _, query := range []string{"query=coat&page=0", "query=coat&page=x", "query=coat&limit=0", "query=coat&limit=121"} {
		q, _ := url.ParseQuery(query)
		if _, verr := params.Validate(e, q, nil); verr == nil || verr.Status != 422 {
			t.Errorf("%s: %v", query, verr)
		}
	}
}
