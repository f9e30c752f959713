package amazon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/amazon"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const (
	dealsEP = "marketplace_b/deals"
	shopEP  = "marketplace_b/shop"
	origin  = "https://www.amazon.co.uk"
)

// fixedNow makes checked_at reproducible.
var fixedNow = time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC)

func options() upstream.Options {
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	return opts
}

func start(t *testing.T, p *upstream.Provider) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, p, nil, options())
}

func direct() *upstream.Provider { return pages.Direct(amazon.Site()) }

// widgetState is the discounts-widget value the page's own links carry
// for these filters (already decoded once, as a server reads its query).
func widgetState(t *testing.T, departments, brands []string) string {
	t.Helper()
	filters := map[string][]string{}
	if len(departments) > 0 {
		filters["departments"] = departments
	}
	if len(brands) > 0 {
		filters["brands"] = brands
	}
	inner := `{"state":{"refinementFilters":` + plainJSON(t, filters) + `},"version":1}`
	return strings.ReplaceAll(url.QueryEscape(plainJSON(t, inner)), "+", "%20")
}

// plainJSON is JSON without HTML escaping, as JSON.stringify writes it.
func plainJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func item(t *testing.T, data map[string]any, i int) map[string]any {
	t.Helper()
	items := adaptertest.Items(t, data)
	if i >= len(items) {
		t.Fatalf("no item %d in %d", i, len(items))
	}
	return items[i]
}

func TestDealsDirect(t *testing.T) {
	u := start(t, direct())
	data := u.Data(t, dealsEP, "", "deals-default")
	// The default marketplace is asked exactly as before hosts existed.
	if r := u.LastRequest(t); r.Path != "/deals" || len(r.Query) != 0 || r.Header.Get("x-forwarded-host") != "" ||
		r.Header.Get("cookie") != "i18n-prefs=GBP; lc-acbuk=en_GB" {
		t.Fatalf("request %s %v %v", r.Path, r.Query, r.Header)
	}
	if data["country"] != "GB" || data["domain"] != "amazon.co.uk" || data["checked_at"] != "2026-11-24T09:30:00Z" ||
		data["count"] != 3.0 || data["dropped"] != 1.0 || data["has_more"] != true || data["cursor"] == nil {
		t.Fatalf("page: %v", data)
	}
	if m := data["marketplace"].(map[string]any); m["country"] != "GB" || m["domain"] != "amazon.co.uk" {
		t.Fatalf("marketplace %v", m)
	}
	k := item(t, data, 0)
	want := map[string]any{
		"id": "7c1f2b3a", "asin": "B0SAMPLE01", "platform": "marketplace_b", "type": "lightning_deal",
		"title": "Stainless Steel Kettle, 1.7 L, Brushed Finish", "price": 24.99, "list_price": 39.99,
		"currency": "GBP", "savings_amount": 15.0, "savings_percentage": 38.0, "badge": "Limited time deal",
		"state": "available", "ends_at": "2026-11-24T22:00:00Z",
		"url":           origin + "/Stainless-Steel-Kettle-Brushed/dp/B0SAMPLE01?ref=dlx_deals_dg_dcl_B0SAMPLE01_dt_sl15_7a",
		"canonical_url": origin + "/dp/B0SAMPLE01",
		"image":         "https://m.media-amazon.com/images/I/71aBcDeFgHL.jpg",
	}
	for key, v := range want {
		if k[key] != v {
			t.Errorf("kettle %s = %v; want %v", key, k[key], v)
		}
	}
	// Only a price: no list price, no savings, no deal; the id is the ASIN.
	e := item(t, data, 1)
	if e["id"] != "B0SAMPLE02" || e["price"] != 19.5 || e["currency"] != "GBP" || e["type"] != "deal" ||
		e["image"] != "https://m.media-amazon.com/images/I/51xYzAbCdEL.jpg" {
		t.Errorf("earbuds: %v", e)
	}
	for _, key := range []string{"list_price", "savings_amount", "savings_percentage", "badge", "state", "ends_at"} {
		if v, ok := e[key]; !ok || v != nil {
			t.Errorf("earbuds %s = %v (present %v); want null", key, v, ok)
		}
	}
	// Entity-wrapped blocks, money ranges, an epoch end time, computed savings.
	v := item(t, data, 2)
	if v["id"] != "9e8d7c6b" || v["type"] != "best_deal" || v["price"] != 129.0 || v["list_price"] != 199.99 ||
		v["savings_amount"] != 70.99 || v["savings_percentage"] != 35.0 || v["badge"] != "-35%" ||
		v["ends_at"] != "2026-11-19T00:00:00Z" || v["url"] != origin+"/dp/B0SAMPLE03?smid=A3P5ROKL5A1OLE" ||
		v["image"] != "https://m.media-amazon.com/images/I/71vAcUumHL._AC_SL1500_.jpg" {
		t.Errorf("vacuum: %v", v)
	}
}

func TestDealsPagination(t *testing.T) {
	u := start(t, direct())
	first := u.Data(t, dealsEP, "", "deals-default")
	cursor := first["cursor"].(string)
	second := u.Data(t, dealsEP, "cursor="+url.QueryEscape(cursor), "deals-page2")
	r := u.LastRequest(t)
	if r.Path != "/deals/widget-api/getProducts" || url.Values(r.Query).Get("startIndex") != "30" ||
		url.Values(r.Query).Get("widgetId") != "amzn1.sym.2f4c8b0e-5a1d-4f57-9c1e-7d3b6a0c9e11" ||
		url.Values(r.Query).Get("pageId") != "d3a1c5e0-7b2f-4c8d-9e6a-1f0b2c3d4e5f" || url.Values(r.Query).Get("discounts-widget") != "" {
		t.Fatalf("page 2 request: %s %v", r.Path, r.Query)
	}
	if r.Header.Get("x-requested-with") != "XMLHttpRequest" || r.Header.Get("accept") != "application/json" ||
		r.Header.Get("referer") != origin+"/deals" {
		t.Errorf("page 2 headers: %v", r.Header)
	}
	if second["count"] != 1.0 || second["has_more"] != false || second["cursor"] != nil {
		t.Fatalf("page 2: %v", second)
	}
	if l := item(t, second, 0); l["asin"] != "B0SAMPLE04" || l["state"] != "sold_out" || l["savings_amount"] != 7.5 {
		t.Errorf("lamp: %v", l)
	}
	for _, bad := range []string{"30", "not-base64!", base64.RawURLEncoding.EncodeToString([]byte(`{"o":0,"w":"x","p":"y"}`))} {
		out := u.Fault(t, dealsEP, "cursor="+url.QueryEscape(bad), upstream.InvalidParameter)
		if out.Fault.Field != "cursor" {
			t.Errorf("cursor %q: field %q", bad, out.Fault.Field)
		}
	}
}

func TestDealsParameters(t *testing.T) {
	u := start(t, direct())
	data := u.Data(t, dealsEP, "country=gb&categories=11052681,3147411/3147471&brands="+url.QueryEscape("Sample Brand,Ferrum & Co"), "deals-filtered")
	got := url.Values(u.LastRequest(t).Query).Get("discounts-widget")
	want := widgetState(t, []string{"11052681", "3147411/3147471"}, []string{"Sample Brand", "Ferrum & Co"})
	if got != want {
		t.Fatalf("discounts-widget = %s\nwant %s", got, want)
	}
	// Decoded once more, the value is the JSON state as a JSON string.
	inner, err := url.QueryUnescape(got)
	if err != nil {
		t.Fatal(err)
	}
	var state string
	if err := json.Unmarshal([]byte(inner), &state); err != nil || !strings.Contains(state, `"brands":["Sample Brand","Ferrum & Co"]`) ||
		!strings.Contains(state, `"departments":["11052681","3147411/3147471"]`) || !strings.HasSuffix(state, `"version":1}`) {
		t.Fatalf("state %q (%v)", state, err)
	}
	if data["count"] != 1.0 || data["has_more"] != false || data["cursor"] != nil {
		t.Fatalf("filtered: %v", data)
	}
	// "UK" is read as GB; a lone filter is sent alone.
	u.Serve(t, dealsEP, "country=UK&brands=Legacy+Brand")
	if got := url.Values(u.LastRequest(t).Query).Get("discounts-widget"); got != widgetState(t, nil, []string{"Legacy Brand"}) {
		t.Errorf("brands only: %s", got)
	}
	// Another marketplace is its own host, with its own cookies.
	if out := u.Serve(t, dealsEP, "country=us"); out.Fault != nil {
		t.Fatalf("US: %v", out.Fault)
	}
	if h := u.LastRequest(t).Header; h.Get("x-forwarded-host") != "www.amazon.com" || h.Get("cookie") != "i18n-prefs=USD; lc-main=en_US" {
		t.Errorf("US headers: %v", h)
	}
	out := u.Fault(t, dealsEP, "country=XX", upstream.InvalidParameter)
	if out.Fault.Field != "country" || out.Fault.Code != "unknown_marketplace" {
		t.Errorf("XX: %+v", out.Fault)
	}
}

func TestDealsLegacyAndEmpty(t *testing.T) {
	u := start(t, direct())
	legacy := u.Data(t, dealsEP, "brands=Legacy+Brand", "deals-legacy")
	l := item(t, legacy, 0)
	if l["asin"] != "B0LEGACY01" || l["title"] != "Bamboo Chopping Board Set of 3" || l["price"] != 12.99 ||
		l["list_price"] != 17.99 || l["savings_amount"] != 5.0 || l["savings_percentage"] != 28.0 ||
		l["type"] != "deal_of_the_day" || l["badge"] != "Deal of the Day" || l["id"] != "B0LEGACY01" ||
		l["image"] != "https://m.media-amazon.com/images/I/71mainImgL.jpg" || l["url"] != origin+"/dp/B0LEGACY01" {
		t.Errorf("legacy: %v", l)
	}
	if legacy["has_more"] != false || legacy["cursor"] != nil {
		t.Errorf("legacy paging: %v %v", legacy["has_more"], legacy["cursor"])
	}
	empty := u.Data(t, dealsEP, "brands=No+Such+Brand", "deals-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false ||
		empty["cursor"] != nil || empty["dropped"] != 0.0 {
		t.Fatalf("empty: %v", empty)
	}
}

func TestDealsFaults(t *testing.T) {
	u := start(t, direct())
	out := u.Fault(t, dealsEP, "categories=captcha-test", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "challenge") {
		t.Errorf("captcha reason: %s", out.Fault.Reason)
	}
	// The automated-traffic wall is a block, not a 503 to retry.
	out = u.Fault(t, dealsEP, "categories=wall-test", upstream.Rejected)
	if out.Trace.Attempts != 1 || !strings.Contains(out.Fault.Reason, "automated-access") {
		t.Errorf("wall: %d attempts, %s", out.Trace.Attempts, out.Fault.Reason)
	}
	out = u.Fault(t, dealsEP, "categories=changed-shape", upstream.Malformed)
	if r := out.Fault.Reason; !strings.Contains(r, "mountWidget") || !strings.Contains(r, "-byte") || strings.Contains(r, "DealsApp") {
		t.Errorf("changed reason: %s", r)
	}
	out = u.Fault(t, dealsEP, "categories=moved-shape", upstream.Malformed)
	if r := out.Fault.Reason; !strings.Contains(r, "productSearchResponse") || !strings.Contains(r, "-byte") {
		t.Errorf("moved reason: %s", r)
	}
}

func TestDealsServices(t *testing.T) {
	z := start(t, pages.Zyte(amazon.Site()))
	data := z.Data(t, dealsEP, "", "amazon-deals")
	var body struct {
		URL         string `json:"url"`
		Geolocation string `json:"geolocation"`
	}
	r := z.LastRequest(t)
	if err := json.Unmarshal(r.Body, &body); err != nil || body.URL != origin+"/deals" || body.Geolocation != "" {
		t.Fatalf("zyte body %s (%v)", r.Body, err)
	}
	if data["count"] != 3.0 || item(t, data, 0)["price"] != 24.99 {
		t.Errorf("zyte data: %v", data)
	}

	s := start(t, pages.ScraperAPI(amazon.Site()))
	data = s.Data(t, dealsEP, "", "amazon-deals")
	q := url.Values(s.LastRequest(t).Query)
	if q.Get("url") != origin+"/deals" || q.Get("api_key") == "" || q.Get("country_code") != "" {
		t.Fatalf("scraperapi query %v", q)
	}
	if data["count"] != 3.0 {
		t.Errorf("scraperapi data: %v", data)
	}
}

// TestDealsFailover: the site's robot check fails over to Zyte API, which
// is asked for the same public URL, filters included.
func TestDealsFailover(t *testing.T) {
	site := amazon.Site()
	providers := []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	runner := adaptertest.StartRoutes(t, providers, nil, options()).Runner
	out := runner.Serve(context.Background(), dealsEP, validated(t, dealsEP, "categories=captcha-test"))
	if out.Fault != nil || out.Trace.ServedBy != pages.ZyteName {
		t.Fatalf("fault %v, served by %q, legs %+v", out.Fault, out.Trace.ServedBy, out.Trace.Legs)
	}
	if leg := out.Trace.Legs[0]; leg.ServedBy != amazon.SiteName || leg.Fault != upstream.Rejected {
		t.Errorf("first leg %+v", leg)
	}
	// Not found is definitive: no other route is asked.
	out = runner.Serve(context.Background(), shopEP, validated(t, shopEP, "url=missing-shop"))
	if out.Fault == nil || out.Fault.Kind != upstream.NotFound || len(out.Trace.Legs) != 1 {
		t.Fatalf("missing shop: %v %+v", out.Fault, out.Trace)
	}
}

func validated(t *testing.T, endpoint, query string) map[string]string {
	t.Helper()
	e, _ := registry.Default().Endpoint(endpoint)
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	res, verr := params.Validate(e, q, nil)
	if verr != nil {
		t.Fatalf("%s?%s: %v", endpoint, query, verr)
	}
	return res.Values
}

func TestShopDirect(t *testing.T) {
	u := start(t, direct())
	data := u.Data(t, shopEP, "url=sample-creator", "shop-default")
	if r := u.LastRequest(t); r.Path != "/shop/sample-creator" || len(r.Query) != 0 {
		t.Fatalf("request %s %v", r.Path, r.Query)
	}
	if data["handle"] != "sample-creator" || data["name"] != "Sample Creator" || data["is_top_creator"] != true ||
		data["url"] != origin+"/shop/sample-creator" || data["country"] != "GB" || data["platform"] != "marketplace_b" ||
		data["posts_count"] != nil || data["posts_cursor"] != "eyJvZmZzZXQiOjN9" || data["count"] != 3.0 ||
		data["affiliate_status"] != nil || data["products_of_post"] != nil {
		t.Fatalf("shop: %v", data)
	}
	if d, _ := data["description"].(string); !strings.HasPrefix(d, "Home cook & kitchen gadget tester. As an Amazon Associate") {
		t.Errorf("description %q", d)
	}
	posts := data["posts"].([]any)
	list := posts[0].(map[string]any)
	if list["id"] != "amzn1.ideas.1A2B3C4D5E6F7" || list["type"] != "list" || list["title"] != "Kitchen favourites" ||
		list["items_count"] != 12.0 || list["pinned"] != true ||
		list["url"] != origin+"/shop/sample-creator/list/1A2B3C4D5E6F7?ref=cm_sw_r_list_sf" ||
		list["thumbnail"] != "https://m.media-amazon.com/images/I/61listHeroL._SL500_.jpg" {
		t.Errorf("list post: %v", list)
	}
	if video := posts[1].(map[string]any); video["type"] != "video" || video["title"] != "Unboxing the new air fryer" ||
		video["items_count"] != nil || video["pinned"] != false {
		t.Errorf("video post: %v", video)
	}
	// "2.1K views" is not an exact count of items.
	if photo := posts[2].(map[string]any); photo["type"] != "photo" || photo["title"] != nil || photo["items_count"] != nil {
		t.Errorf("photo post: %v", photo)
	}
	items := adaptertest.Items(t, data)
	if p := items[0]; p["asin"] != "B0SAMPLE01" || p["rank"] != 1.0 || p["type"] != "product" ||
		p["url"] != origin+"/dp/B0SAMPLE01" || p["title"] != "Stainless Steel Kettle, 1.7 L" || p["price"] != nil ||
		p["is_best_seller"] != nil {
		t.Errorf("first product: %v", p)
	}
	if p := items[2]; p["asin"] != "B0SAMPLE06" || p["rank"] != 3.0 {
		t.Errorf("third product (the repeated ASIN counted once): %v", p)
	}
	if len(data["products"].([]any)) != 3 {
		t.Errorf("products: %v", data["products"])
	}

	// Other spellings of the same shop reach the same page.
	for _, v := range []string{
		"https://www.amazon.co.uk/shop/sample-creator",
		"www.amazon.co.uk/shop/sample-creator/list/1A2B3C4D5E6F7?ref=x",
		"https://amazon.co.uk/shop/sample-creator/",
		"@sample-creator",
	} {
		u.Serve(t, shopEP, "url="+url.QueryEscape(v))
		if r := u.LastRequest(t); r.Path != "/shop/sample-creator" {
			t.Errorf("%s fetched %s", v, r.Path)
		}
	}

	quiet := u.Data(t, shopEP, "url=quiet-shop&country=GB", "shop-quiet")
	if quiet["name"] != "Quiet Shop" || quiet["is_top_creator"] != false || quiet["posts_cursor"] != nil || quiet["posts_count"] != 0.0 ||
		quiet["count"] != 0.0 || len(quiet["posts"].([]any)) != 0 || len(adaptertest.Items(t, quiet)) != 0 {
		t.Errorf("quiet shop: %v", quiet)
	}
}

func TestShopFaults(t *testing.T) {
	u := start(t, direct())
	u.Fault(t, shopEP, "url=missing-shop", upstream.NotFound)
	out := u.Fault(t, shopEP, "url=changed-shop", upstream.Malformed)
	if r := out.Fault.Reason; !strings.Contains(r, "data-aci") || !strings.Contains(r, "-byte") || strings.Contains(r, "storefront-root") {
		t.Errorf("changed reason: %s", r)
	}
	cases := []struct{ query, field, code string }{
		{"url=" + url.QueryEscape("https://www.amazon.co.uk/dp/B0SAMPLE01"), "url", "invalid_shop"},
		{"url=" + url.QueryEscape("https://www.amazon.com/dp/B0SAMPLE01"), "url", "invalid_shop"},
		{"url=" + url.QueryEscape("bad name"), "url", "invalid_shop"},
		{"url=sample-creator&country=ZZ", "country", "unknown_marketplace"},
	}
	before := len(u.Replay.Requests())
	for _, c := range cases {
		out := u.Fault(t, shopEP, c.query, upstream.InvalidParameter)
		if out.Fault.Field != c.field || out.Fault.Code != c.code {
			t.Errorf("%s: %+v", c.query, out.Fault)
		}
	}
	if n := len(u.Replay.Requests()); n != before {
		t.Errorf("refused parameters reached the source (%d requests)", n-before)
	}
}

func TestShopServices(t *testing.T) {
	z := start(t, pages.Zyte(amazon.Site()))
	data := z.Data(t, shopEP, "url=sample-creator", "amazon-shop")
	var body struct {
		URL            string `json:"url"`
		RequestCookies []struct {
			Name, Value, Domain string
		} `json:"requestCookies"`
	}
	if err := json.Unmarshal(z.LastRequest(t).Body, &body); err != nil || body.URL != origin+"/shop/sample-creator" {
		t.Fatalf("zyte body (%v): %+v", err, body)
	}
	if len(body.RequestCookies) != 2 || body.RequestCookies[0].Name != "i18n-prefs" || body.RequestCookies[0].Value != "GBP" ||
		body.RequestCookies[0].Domain != "www.amazon.co.uk" {
		t.Errorf("zyte cookies: %+v", body.RequestCookies)
	}
	if data["name"] != "Sample Creator" || data["count"] != 3.0 {
		t.Errorf("zyte shop: %v", data)
	}
	s := start(t, pages.ScraperAPI(amazon.Site()))
	data = s.Data(t, shopEP, "url=sample-creator", "amazon-shop")
	if q := url.Values(s.LastRequest(t).Query); q.Get("url") != origin+"/shop/sample-creator" || q.Get("keep_headers") != "true" {
		t.Fatalf("scraperapi query %v", q)
	}
	if data["name"] != "Sample Creator" {
		t.Errorf("scraperapi shop: %v", data)
	}
}

// TestServiceFixturesMatchTheSite keeps the services' copies of a page
// identical to the direct route's.
func TestServiceFixturesMatchTheSite(t *testing.T) {
	dir := adaptertest.FixturesDir(t)
	read := func(provider, name string) replay.Fixture {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, provider, name))
		if err != nil {
			t.Fatal(err)
		}
		var fx replay.Fixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatal(err)
		}
		return fx
	}
	for site, service := range map[string]string{"deals-default.json": "amazon-deals.json", "shop-default.json": "amazon-shop.json"} {
		want := *read("amazon", site).Response.BodyText
		if got := *read(pages.ScraperAPIName, service).Response.BodyText; got != want {
			t.Errorf("scraperapi %s differs from %s", service, site)
		}
		var env struct {
			HTTPResponseBody string `json:"httpResponseBody"`
		}
		if err := json.Unmarshal(read(pages.ZyteName, service).Response.Body, &env); err != nil {
			t.Fatal(err)
		}
		got, err := base64.StdEncoding.DecodeString(env.HTTPResponseBody)
		if err != nil || string(got) != want {
			t.Errorf("zyte %s differs from %s (%v)", service, site, err)
		}
	}
}
