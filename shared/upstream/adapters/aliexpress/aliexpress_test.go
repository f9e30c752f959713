package aliexpress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/aliexpress"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const endpoint = "marketplace_a/search"

// Configured credentials: the key and tracking id must reach the gateway,
// the secret never.
const (
	testAppKey   = "sample-app-key"
	testSecret   = "sample-app-secret"
	testTracking = "sample-tracking"
)

// fixedNow makes the timestamp, and so the signature, reproducible.
var fixedNow = time.UnixMilli(1773144000123).UTC()

func startAPI(t *testing.T, secrets map[string]string) *adaptertest.Upstream {
	t.Helper()
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	if secrets == nil {
		secrets = map[string]string{aliexpress.AppKeySecret: testAppKey, aliexpress.AppSecretSecret: testSecret}
	}
	return adaptertest.StartWith(t, aliexpress.Provider(), secrets, opts)
}

func TestAPISearchData(t *testing.T) {
	u := startAPI(t, nil)
	data := u.Data(t, endpoint, "query=usb+c+cable", "search-usb-c-cable")
	items := adaptertest.Items(t, data)
	if data["count"] != 4.0 || data["total"] != 1234.0 || data["has_more"] != true || data["page"] != 1.0 ||
		data["currency"] != "USD" || data["region"] != "US" || data["query"] != "usb c cable" || data["cursor"] != nil {
		t.Fatalf("list: %v", data)
	}
	first := items[0]
	if first["id"] != "1005007000000000" || first["platform"] != "marketplace_a" || first["type"] != "product" ||
		first["price"] != 9.98 || first["promotion_price"].(map[string]any)["min"] != 4.49 ||
		first["sales"] != 1520.0 || first["url"] != "https://www.aliexpress.com/item/1005007000000000.html" {
		t.Fatalf("first item: %v", first)
	}
	// evaluate_rate is a positive-feedback share, not stars: no rating.
	if v, ok := first["rating"]; !ok || v != nil {
		t.Fatalf("rating = %v (present %v); want null", v, ok)
	}
	// Without a list price, the sale price is the price and there is no promotion.
	if third := items[2]; third["price"] != 6.74 || third["promotion_price"] != nil {
		t.Fatalf("third item: %v", third)
	}
	sorts := data["sorts"].([]any)
	if len(sorts) != 4 || sorts[0] != "default" {
		t.Fatalf("sorts %v", sorts)
	}
	wantWarnings(t, data, "rating is null", "sales is the affiliate API's recent sales count", "selling_points are not available")
}

// TestAPIOrdersSortWarning: the orders sort is served as the API's recent
// sales order, and the answer says so.
func TestAPIOrdersSortWarning(t *testing.T) {
	u := startAPI(t, nil)
	out := u.Serve(t, endpoint, "query=usb+c+cable&sort=total_tranpro_desc")
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	b, err := json.Marshal(out.Data)
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	wantWarnings(t, data, "rating is null", "sales is", "selling_points", "LAST_VOLUME_DESC")
}

// wantWarnings requires data's _warnings to hold one line per fragment, in
// order, each containing it; no fragments means no _warnings at all.
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
		if s, _ := got[i].(string); !strings.Contains(s, f) {
			t.Errorf("_warnings[%d] = %q; want it to contain %q", i, got[i], f)
		}
	}
}

func TestAPIParameterMapping(t *testing.T) {
	u := startAPI(t, map[string]string{
		aliexpress.AppKeySecret: testAppKey, aliexpress.AppSecretSecret: testSecret, aliexpress.TrackingIDSecret: testTracking,
	})
	u.Serve(t, endpoint, "query=usb+c+cable&page=3&sort=price_asc&category_id=44&min_price=1.5&max_price=20&region=gb&currency=gbp&language=en-GB")
	r := u.LastRequest(t)
	if r.Path != "/sync" || r.Method != "GET" {
		t.Fatalf("%s %s", r.Method, r.Path)
	}
	want := map[string]string{
		"method": "aliexpress.affiliate.product.query", "app_key": testAppKey, "sign_method": "sha256",
		"timestamp": "1773144000123", "format": "json", "keywords": "usb c cable", "page_no": "3", "page_size": "20",
		"sort": "SALE_PRICE_ASC", "category_ids": "44", "min_sale_price": "150", "max_sale_price": "2000",
		"ship_to_country": "GB", "target_currency": "GBP", "target_language": "EN", "tracking_id": testTracking,
		"sign": "", // checked below
	}
	for k, v := range want {
		if got := r.Query[k]; len(got) != 1 || (got[0] != v && k != "sign") {
			t.Errorf("%s = %v; want %s", k, got, v)
		}
	}
	if len(r.Query) != len(want) {
		t.Errorf("unexpected parameters: %v", r.Query)
	}
	if got := r.Query["sign"][0]; got != wantSign {
		t.Errorf("sign = %s; want %s", got, wantSign)
	}
	for _, vs := range r.Query {
		if strings.Contains(strings.Join(vs, ","), testSecret) {
			t.Fatal("the app secret was sent")
		}
	}
	// Defaults: page 1, a US storefront in dollars and English, no sort.
	u.Serve(t, endpoint, "query=usb+c+cable")
	d := u.LastRequest(t).Query
	if d["page_no"][0] != "1" || d["ship_to_country"][0] != "US" || d["target_currency"][0] != "USD" ||
		d["target_language"][0] != "EN" || d["sort"] != nil || d["category_ids"] != nil || d["min_sale_price"] != nil {
		t.Errorf("defaults: %v", d)
	}
	u.Serve(t, endpoint, "query=usb+c+cable&sort=total_tranpro_desc")
	if got := u.LastRequest(t).Query["sort"]; len(got) != 1 || got[0] != "LAST_VOLUME_DESC" {
		t.Errorf("orders sort = %v", got)
	}
}

// wantSign is the signature of TestAPIParameterMapping's first request:
// HMAC-SHA256 (key: the app secret) of its parameters sorted by name, each
// name followed by its value, in upper-case hex, computed independently
// with Python's hmac module for exactly those values.
const wantSign = "8C3B7FED9A223BFE460AB80CDD558EBC33AA5D77C5A9D13A48B70E10CAE781CF"

func TestAPICannotServeShipFrom(t *testing.T) {
	u := startAPI(t, nil)
	out := u.Fault(t, endpoint, "query=usb+c+cable&ship_from=CN", upstream.Rejected)
	if len(u.Replay.Requests()) != 0 {
		t.Fatal("the gateway was called for a filter it does not have")
	}
	if out.Fault.Status == 401 || out.Fault.Status == 403 {
		t.Fatal("a request-specific refusal must not count against the route")
	}
}

// An answer for a target currency other than the product's (the real
// form: USD prices beside BRL target prices, a discount string, small
// images under "string", no page or total counts) is priced in the
// target currency.
func TestAPITargetCurrency(t *testing.T) {
	u := startAPI(t, nil)
	data := u.Data(t, endpoint, "query=pocket+mp3+player&currency=BRL&region=BR", "search-brl-target")
	items := adaptertest.Items(t, data)
	if len(items) != 1 || data["currency"] != "BRL" || items[0]["id"] != "1005009876543210" || items[0]["sales"] != 187.0 {
		t.Fatalf("%v", data)
	}
}

func TestAPIEmptyAndSparse(t *testing.T) {
	u := startAPI(t, nil)
	for _, q := range []string{"qwxzv+nothing", "qwxzv+empty"} {
		data := u.Data(t, endpoint, "query="+q, "search-"+strings.ReplaceAll(q, "+", "-"))
		if data["count"] != 0.0 || len(adaptertest.Items(t, data)) != 0 || data["has_more"] != false {
			t.Fatalf("%s: %v", q, data)
		}
		wantWarnings(t, data)
	}
	data := u.Data(t, endpoint, "query=sparse", "search-sparse")
	items := adaptertest.Items(t, data)
	if len(items) != 1 || items[0]["id"] != "10050079999999999999" || items[0]["price"] != 3.1 ||
		items[0]["sales"] != nil || items[0]["image"] != nil || data["currency"] != "EUR" || data["total"] != nil || data["has_more"] != false {
		t.Fatalf("sparse: %v", data)
	}
	// EUR prices for a USD request: the product's own currency.
	wantWarnings(t, data, "rating", "sales", "selling_points", "not in the requested currency")
}

func TestAPIFaults(t *testing.T) {
	u := startAPI(t, nil)
	bad := u.Fault(t, endpoint, "query=bad+signature", upstream.Rejected)
	if bad.Fault.Status != 401 {
		t.Errorf("a refused signature must count against the route: status %d", bad.Fault.Status)
	}
	for _, s := range []string{testSecret, testAppKey} {
		if strings.Contains(bad.Fault.Reason, s) {
			t.Errorf("a credential in the reason: %s", bad.Fault.Reason)
		}
	}
	u.Fault(t, endpoint, "query=rate+limited", upstream.RateLimited)
	// The older TOP form says the limit in msg and sub_msg, under a code
	// (15) that names no limit.
	u.Fault(t, endpoint, "query=call+limit", upstream.RateLimited)
	u.Fault(t, endpoint, "query=legacy+error", upstream.Rejected)
	m := u.Fault(t, endpoint, "query=changed+shape", upstream.Malformed)
	if !strings.Contains(m.Fault.Reason, "resp_result") {
		t.Errorf("malformed reason %q does not name what is missing", m.Fault.Reason)
	}
	u.Fault(t, endpoint, "query=server+error", upstream.ServerError)
	u.Fault(t, endpoint, "query=usb+c+cable&sort=best_rated", upstream.InvalidParameter)
	u.Fault(t, endpoint, "query=usb+c+cable&category_id=cables", upstream.InvalidParameter)
}

// --- The search pages, over each route.

func site() *pages.Site { return aliexpress.Site() }

func TestDirectSearchData(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(site()), nil)
	data := u.Data(t, endpoint, "query=usb+c+cable", "search-usb-c-cable")
	checkUSBPage(t, data)
	r := u.LastRequest(t)
	if r.Path != "/w/wholesale-usb-c-cable.html" || r.Query["SearchText"][0] != "usb c cable" || r.Query["page"][0] != "1" {
		t.Fatalf("request %s %v", r.Path, r.Query)
	}
	if c := r.Header.Get("cookie"); c != "aep_usuc_f=site=glo&c_tp=USD&region=US&b_locale=en_US" {
		t.Errorf("cookie %q", c)
	}
	if !strings.Contains(r.Header.Get("user-agent"), "Chrome/") {
		t.Errorf("user-agent %q", r.Header.Get("user-agent"))
	}

	// Page 2 is the rest of the same site page.
	p2 := u.Data(t, endpoint, "query=usb+c+cable&page=2", "search-usb-c-cable-page2")
	if p2["count"] != 7.0 || p2["has_more"] != false || p2["page"] != 2.0 || u.LastRequest(t).Query["page"][0] != "1" {
		t.Fatalf("page 2: count %v has_more %v", p2["count"], p2["has_more"])
	}
	// Page 4 is the start of site page 2.
	p4 := u.Data(t, endpoint, "query=usb+c+cable&page=4", "search-usb-c-cable-page4")
	if p4["count"] != 5.0 || p4["has_more"] != true || p4["total"] != 4200.0 || u.LastRequest(t).Query["page"][0] != "2" {
		t.Fatalf("page 4: %v", p4)
	}
}

func checkUSBPage(t *testing.T, data map[string]any) {
	t.Helper()
	items := adaptertest.Items(t, data)
	if data["count"] != 20.0 || len(items) != 20 || data["total"] != 27.0 || data["has_more"] != true ||
		data["currency"] != "USD" || data["region"] != "US" || data["cursor"] != nil {
		t.Fatalf("list: count %v total %v has_more %v currency %v", data["count"], data["total"], data["has_more"], data["currency"])
	}
	ad := items[0]
	if ad["id"] != "1005006000000000" || ad["listing_type"] != "ad" || ad["price"] != 4.5 || ad["promotion_price"] != nil ||
		ad["image"] != "https://ae-pic-a1.aliexpress-media.com/kf/Ssample0000cable.jpg_350x350xz.jpg" {
		t.Fatalf("first card: %v", ad)
	}
	one := items[1]
	if one["listing_type"] != "natural" || one["price"] != 5.23 || one["promotion_price"].(map[string]any)["min"] != 2.72 ||
		one["sales"] != nil || one["sales_label"] != "1,000+ sold" {
		t.Fatalf("second card: %v", one)
	}
	if r := one["rating"].(map[string]any); r["value"] != 4.2 || r["max"] != 5.0 {
		t.Fatalf("rating %v", r)
	}
	if sp := one["selling_points"].([]any); len(sp) != 1 || sp[0].(map[string]any)["text"] != "Free shipping" {
		t.Fatalf("selling points %v", sp)
	}
	if sp := items[3]["selling_points"].([]any); len(sp) != 1 || sp[0].(map[string]any)["text"] != "Extra 5% off with coins" {
		t.Fatalf("selling points (tagText) %v", sp)
	}
	// No reviews and no sales line yet: unknown, not zero.
	if n := items[5]; n["rating"] != nil || n["sales"] != nil || n["sales_label"] != nil {
		t.Fatalf("new listing: %v", n)
	}
	if n := items[7]; n["sales"] != 27.0 || n["sales_label"] != "27 sold" {
		t.Fatalf("exact sales: %v", n)
	}
	// The banner between cards is not a product.
	for _, it := range items {
		if it["id"] == nil || it["id"] == "" {
			t.Fatalf("a card without id: %v", it)
		}
	}
}

func TestDirectParameterMapping(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(site()), nil)
	u.Data(t, endpoint, "query=phone++case&page=2&sort=price_asc&category_id=100003109&min_price=1.5&max_price=20&ship_from=cn&region=gb&currency=gbp&language=en-GB", "search-parameters")
	r := u.LastRequest(t)
	if r.Path != "/w/wholesale-phone-case.html" {
		t.Errorf("path %s", r.Path)
	}
	want := map[string]string{"SearchText": "phone  case", "page": "1", "SortType": "price_asc", "catId": "100003109",
		"minPrice": "1.5", "maxPrice": "20", "shpf_co": "CN"}
	for k, v := range want {
		if got := r.Query[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %v; want %s", k, got, v)
		}
	}
	if len(r.Query) != len(want) {
		t.Errorf("unexpected parameters: %v", r.Query)
	}
	if c := r.Header.Get("cookie"); c != "aep_usuc_f=site=glo&c_tp=GBP&region=GB&b_locale=en_GB" {
		t.Errorf("cookie %q", c)
	}
	u.Serve(t, endpoint, "query=phone+case&language=pt")
	if c := u.LastRequest(t).Header.Get("cookie"); !strings.HasSuffix(c, "&b_locale=pt_BR") {
		t.Errorf("bare language cookie %q", c)
	}
	u.Fault(t, endpoint, "query=phone+case&sort=newest", upstream.InvalidParameter)
}

func TestDirectEmpty(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(site()), nil)
	for _, q := range []string{"qwxzv+nothing", "qwxzv+empty"} {
		data := u.Data(t, endpoint, "query="+q, "search-"+strings.ReplaceAll(q, "+", "-"))
		if data["count"] != 0.0 || len(adaptertest.Items(t, data)) != 0 || data["has_more"] != false || data["total"] != 0.0 {
			t.Fatalf("%s: %v", q, data)
		}
	}
}

func TestDirectBlockedAndChanged(t *testing.T) {
	u := adaptertest.Start(t, pages.Direct(site()), nil)
	blocked := u.Fault(t, endpoint, "query=blocked+query", upstream.Rejected)
	if !strings.Contains(blocked.Fault.Reason, "captcha") {
		t.Errorf("blocked reason %q", blocked.Fault.Reason)
	}
	// The site's route adds no _warnings.
	wantWarnings(t, u.Data(t, endpoint, "query=usb+c+cable", "search-usb-c-cable"))
	for q, what := range map[string]string{
		"changed+shape": "mods.itemList",
		"redesigned":    "no _init_data_ assignment",
		"not+json":      "not JSON",
	} {
		out := u.Fault(t, endpoint, "query="+q, upstream.Malformed)
		reason := out.Fault.Reason
		if !strings.Contains(reason, what) || !strings.Contains(reason, "-byte page") {
			t.Errorf("%s: reason %q does not name %q and the page size", q, reason, what)
		}
		for _, content := range []string{"Redesigned", "samplepageid", "root: {"} {
			if strings.Contains(reason, content) {
				t.Errorf("%s: page content in the reason %q", q, reason)
			}
		}
	}
}

func TestZyteSearchData(t *testing.T) {
	u := adaptertest.Start(t, pages.Zyte(site()), nil)
	data := u.Data(t, endpoint, "query=usb+c+cable", "aliexpress-search-usb-c-cable")
	checkUSBPage(t, data)
	var body struct {
		URL            string `json:"url"`
		Geolocation    string `json:"geolocation"`
		RequestCookies []struct {
			Name, Value, Domain string
		} `json:"requestCookies"`
	}
	if err := json.Unmarshal(u.LastRequest(t).Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.URL != "https://www.aliexpress.com/w/wholesale-usb-c-cable.html?SearchText=usb+c+cable&page=1" || body.Geolocation != "US" {
		t.Errorf("zyte request %+v", body)
	}
	if len(body.RequestCookies) != 1 || body.RequestCookies[0].Name != "aep_usuc_f" ||
		body.RequestCookies[0].Value != "site=glo&c_tp=USD&region=US&b_locale=en_US" || body.RequestCookies[0].Domain != "www.aliexpress.com" {
		t.Errorf("zyte cookies %+v", body.RequestCookies)
	}
	u.Fault(t, endpoint, "query=blocked+query", upstream.Rejected)
}

func TestScraperAPISearchData(t *testing.T) {
	u := adaptertest.Start(t, pages.ScraperAPI(site()), nil)
	data := u.Data(t, endpoint, "query=usb+c+cable", "aliexpress-search-usb-c-cable")
	checkUSBPage(t, data)
	q := u.LastRequest(t).Query
	if q["url"][0] != "https://www.aliexpress.com/w/wholesale-usb-c-cable.html?SearchText=usb+c+cable&page=1" ||
		q["country_code"][0] != "us" || q["keep_headers"][0] != "true" {
		t.Errorf("scraperapi query %v", q)
	}
	u.Fault(t, endpoint, "query=blocked+query", upstream.Rejected)
}

// routeOrder runs the integrator's route order (affiliate API, the site,
// Zyte API, ScraperAPI) behind the replay upstream.
func routeOrder(t *testing.T) *upstream.Runner {
	t.Helper()
	srv, err := replay.Load(adaptertest.FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	s := site()
	providers := []*upstream.Provider{aliexpress.Provider(), pages.Direct(s), pages.Zyte(s), pages.ScraperAPI(s)}
	values := map[string]string{
		aliexpress.AppKeySecret: testAppKey, aliexpress.AppSecretSecret: testSecret,
		pages.ZyteKeySecret: "sample-zyte-key", pages.ScraperAPIKeySecret: "sample-scraperapi-key",
	}
	for _, p := range providers {
		values[p.BaseURLVar()] = base + "/" + p.Name
	}
	lookup := func(name string) (string, bool) { v, ok := values[name]; return v, ok }
	return upstream.NewRunner(providers, upstream.Settings{Lookup: lookup, Options: adaptertest.Options})
}

func servedBy(t *testing.T, out upstream.Outcome) string {
	t.Helper()
	b, err := json.Marshal(out.Trace.Legs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFailover(t *testing.T) {
	r := routeOrder(t)
	ctx := context.Background()
	// A ship-from filter the affiliate API lacks: the site answers.
	out := r.Serve(ctx, endpoint, map[string]string{"query": "phone case", "ship_from": "CN"})
	if out.Fault != nil || out.Trace.ServedBy != aliexpress.SiteName {
		t.Fatalf("ship_from: %v %s", out.Fault, servedBy(t, out))
	}
	// The site walls the direct fetch: Zyte API fetches the page.
	out = r.Serve(ctx, endpoint, map[string]string{"query": "blocked direct", "ship_from": "CN"})
	if out.Fault != nil || out.Trace.ServedBy != pages.ZyteName {
		t.Fatalf("blocked direct: %v %s", out.Fault, servedBy(t, out))
	}
	// Walled on every route: a typed refusal (502), never an empty success.
	out = r.Serve(ctx, endpoint, map[string]string{"query": "blocked query", "ship_from": "CN"})
	if out.Fault == nil || out.Fault.Kind != upstream.Rejected {
		t.Fatalf("blocked everywhere: %v %s", out.Fault, servedBy(t, out))
	}
	if got := servedBy(t, out); !strings.Contains(got, `"served_by":"scraperapi"`) {
		t.Fatalf("not every route was tried: %s", got)
	}
	// With credentials, the affiliate API answers first.
	out = r.Serve(ctx, endpoint, map[string]string{"query": "usb c cable"})
	if out.Fault != nil || out.Trace.ServedBy != aliexpress.ProviderName {
		t.Fatalf("api first: %v %s", out.Fault, servedBy(t, out))
	}
}
