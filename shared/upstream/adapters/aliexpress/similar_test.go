package aliexpress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/aliexpress"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const similarEndpoint = "marketplace_a/similar"

// startSimilar serves the similar route on the fixed clock; extra adds
// configuration (a tracking id, an allowance override).
func startSimilar(t *testing.T, extra map[string]string) *adaptertest.Upstream {
	t.Helper()
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	secrets := map[string]string{aliexpress.AppKeySecret: testAppKey, aliexpress.AppSecretSecret: testSecret}
	for k, v := range extra {
		secrets[k] = v
	}
	return adaptertest.StartWith(t, aliexpress.SimilarProvider(), secrets, opts)
}

func TestSimilarByProductID(t *testing.T) {
	u := startSimilar(t, nil)
	data := u.Data(t, similarEndpoint, "product_id=1005007000000000", "similar-1005007000000000")
	items := adaptertest.Items(t, data)
	if data["count"] != 4.0 || len(items) != 4 || data["has_more"] != true || data["page"] != 1.0 ||
		data["source_product_id"] != "1005007000000000" {
		t.Fatalf("list: %v", data)
	}
	first := items[0]
	if first["id"] != "1005007000104729" || first["platform"] != "marketplace_a" || first["type"] != "product" ||
		first["price"] != 5.62 || first["original_price"] != 12.48 || first["promotion_price"] != 4.99 ||
		first["currency"] != "USD" || first["discount"] != "50%" || first["sales"] != 1309.0 ||
		first["url"] != "https://www.aliexpress.com/item/1005007000104729.html" ||
		first["video_url"] != "https://video.aliexpress-media.com/play/u/ae_sg_item/similar01.mp4" {
		t.Fatalf("first item: %v", first)
	}
	cat := first["category"].(map[string]any)
	parent := cat["parent"].(map[string]any)
	if cat["id"] != "200002361" || cat["name"] != "Data Cables" || parent["id"] != "44" || parent["name"] != "Consumer Electronics" {
		t.Fatalf("category %v", cat)
	}
	if imgs := first["images"].([]any); len(imgs) != 2 || imgs[1] != "https://ae-pic-a1.aliexpress-media.com/kf/Ssimilar01b.jpg" {
		t.Fatalf("images %v", imgs)
	}
	if s := first["shop"].(map[string]any); s["id"] != "1103000001" || s["url"] != "https://www.aliexpress.com/store/1103000001" || s["name"] != nil {
		t.Fatalf("shop %v", s)
	}
	// Not on any scale the site shows, and not given: null, never 0.
	for _, it := range items {
		for _, k := range []string{"rating", "sales_label", "selling_points", "sku_id"} {
			if v, ok := it[k]; !ok || v != nil {
				t.Fatalf("%s of %v = %v (present %v); want null", k, it["id"], v, ok)
			}
		}
	}
	// No list price: the sale price alone, no original price, no promotion.
	if second := items[1]; second["price"] != 6.74 || second["original_price"] != nil || second["promotion_price"] != nil || second["discount"] != nil {
		t.Fatalf("second item: %v", second)
	}
	// Only the product's own currency.
	if third := items[2]; third["currency"] != "EUR" || third["price"] != 7.87 || third["original_price"] != 17.48 {
		t.Fatalf("third item: %v", third)
	}
	// A first-level category alone, no shop, no gallery.
	fourth := items[3]
	if c := fourth["category"].(map[string]any); c["id"] != "44" || c["parent"] != nil {
		t.Fatalf("fourth category %v", c)
	}
	if fourth["shop"] != nil || fourth["images"] != nil || fourth["video_url"] != nil || fourth["sales"] != 0.0 {
		t.Fatalf("fourth item: %v", fourth)
	}
	wantWarnings(t, data, "rating is null", "sales is the affiliate API's recent sales count",
		"sku_id and shop.name are not available", "app-only price", "not in the requested currency")
}

func TestSimilarRequest(t *testing.T) {
	u := startSimilar(t, map[string]string{aliexpress.TrackingIDSecret: testTracking})
	u.Serve(t, similarEndpoint, "product_id=1005007000000000")
	r := u.LastRequest(t)
	if r.Path != "/sync" || r.Method != "GET" {
		t.Fatalf("%s %s", r.Method, r.Path)
	}
	want := map[string]string{
		"method": "aliexpress.affiliate.product.smartmatch", "app_key": testAppKey, "sign_method": "sha256",
		"timestamp": "1773144000123", "format": "json", "product_id": "1005007000000000", "page_no": "1",
		"country": "US", "target_currency": "USD", "target_language": "EN", "tracking_id": testTracking,
		"sign": wantSimilarSign,
	}
	for k, v := range want {
		if got := r.Query[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %v; want %s", k, got, v)
		}
	}
	if len(r.Query) != len(want) {
		t.Errorf("unexpected parameters (no device_id, no keywords): %v", r.Query)
	}
	for _, vs := range r.Query {
		if strings.Contains(strings.Join(vs, ","), testSecret) {
			t.Fatal("the app secret was sent")
		}
	}
	// The ship-to country and currency, upper-cased; a query beside a
	// product_id is not sent, and the answer says so.
	out := u.Serve(t, similarEndpoint, "product_id=1005007000000000&query=braided&country=gb&currency=gbp")
	q := u.LastRequest(t).Query
	if q["country"][0] != "GB" || q["target_currency"][0] != "GBP" || q["keywords"] != nil {
		t.Errorf("country, currency: %v", q)
	}
	wantWarnings(t, plain(t, out), "query was not used", "rating", "sales", "sku_id", "app-only", "not in the requested currency")
}

// wantSimilarSign is the signature of TestSimilarRequest's first request,
// computed independently (Python hmac, sha256, the sorted name+value
// pairs, upper-case hex) for exactly those values.
const wantSimilarSign = "5A2305F3D4A7F71037D4A321AC1ABEBB4A9550284414E30FDB22F9E045FF1297"

func plain(t *testing.T, out upstream.Outcome) map[string]any {
	t.Helper()
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
	return data
}

// TestSimilarByURL: every product URL form names the same product, and
// answers exactly what its id does.
func TestSimilarByURL(t *testing.T) {
	u := startSimilar(t, nil)
	for _, v := range []string{
		"https://www.aliexpress.com/item/1005007000000000.html",
		"https://www.aliexpress.com/item/1005007000000000.html?spm=a2g0o.home.0.0&gatewayAdapt=glo2usa",
		"https://es.aliexpress.com/item/1005007000000000.html",
		"https://www.aliexpress.us/item/1005007000000000.html",
		"https://aliexpress.ru/item/1005007000000000.html",
		"https://m.aliexpress.com/i/1005007000000000.html",
		"https://www.aliexpress.com/item/Braided-USB-C-Cable/1005007000000000.html",
		"https://m.aliexpress.com/app/detail.html?productId=1005007000000000",
		"www.aliexpress.com/item/1005007000000000.html",
		"1005007000000000.html",
	} {
		data := u.Data(t, similarEndpoint, "product_id="+url.QueryEscape(v), "similar-1005007000000000")
		if got := u.LastRequest(t).Query["product_id"]; len(got) != 1 || got[0] != "1005007000000000" || data["source_product_id"] != "1005007000000000" {
			t.Errorf("%s: product_id sent %v, source %v", v, got, data["source_product_id"])
		}
	}
	before := len(u.Replay.Requests())
	for _, v := range []string{"https://www.aliexpress.com/store/1103000001", "https://www.aliexpress.com/item/cable.html", "abc"} {
		out := u.Fault(t, similarEndpoint, "product_id="+url.QueryEscape(v), upstream.InvalidParameter)
		if out.Fault.Field != "product_id" || out.Fault.Code != "not_a_product" {
			t.Errorf("%s: %+v", v, out.Fault)
		}
		if msg := out.Error().Message; strings.Contains(strings.ToLower(msg), "aliexpress") {
			t.Errorf("%s: the caller's message names the provider: %q", v, msg)
		}
	}
	if len(u.Replay.Requests()) != before {
		t.Error("an unusable product_id reached the gateway")
	}
}

func TestSimilarByQuery(t *testing.T) {
	u := startSimilar(t, nil)
	data := u.Data(t, similarEndpoint, "query=usb+c+cable&country=de&currency=eur", "similar-query-usb-c-cable")
	items := adaptertest.Items(t, data)
	if data["count"] != 2.0 || len(items) != 2 || data["has_more"] != true || data["source_product_id"] != nil {
		t.Fatalf("list: %v", data)
	}
	want := map[string]string{
		"method": "aliexpress.affiliate.product.query", "keywords": "usb c cable", "page_no": "1", "page_size": "20",
		"ship_to_country": "DE", "target_currency": "EUR", "target_language": "EN",
	}
	q := u.LastRequest(t).Query
	for k, v := range want {
		if got := q[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %v; want %s", k, got, v)
		}
	}
	// The fixture's prices are in USD for a EUR request.
	wantWarnings(t, data, "No product_id was given", "rating", "sales", "sku_id", "app-only", "not in the requested currency")
	// Nothing found: still a keyword search, and said so.
	empty := u.Data(t, similarEndpoint, "query=qwxzv+nothing", "similar-query-empty")
	if empty["count"] != 0.0 || empty["has_more"] != false || len(adaptertest.Items(t, empty)) != 0 {
		t.Fatalf("empty: %v", empty)
	}
	wantWarnings(t, empty, "No product_id was given")
}

// TestSimilarNotFoundAndEmpty: an empty match is either an unknown
// product (404, whichever way the details say so) or a known product
// without matches (an empty page).
func TestSimilarNotFoundAndEmpty(t *testing.T) {
	u := startSimilar(t, nil)
	for _, id := range []string{"1005000000000404", "1005000000000410"} {
		before := len(u.Replay.Requests())
		u.Fault(t, similarEndpoint, "product_id="+id, upstream.NotFound)
		reqs := u.Replay.Requests()[before:]
		if len(reqs) != 2 || url.Values(reqs[1].Query).Get("method") != "aliexpress.affiliate.productdetail.get" || url.Values(reqs[1].Query).Get("product_ids") != id {
			t.Fatalf("%s: requests %v", id, reqs)
		}
	}
	data := u.Data(t, similarEndpoint, "product_id=1005000000000001", "similar-empty")
	if data["count"] != 0.0 || data["has_more"] != false || data["source_product_id"] != "1005000000000001" || len(adaptertest.Items(t, data)) != 0 {
		t.Fatalf("empty: %v", data)
	}
	wantWarnings(t, data)
	// Matches found: the details are not asked.
	before := len(u.Replay.Requests())
	u.Serve(t, similarEndpoint, "product_id=1005007000000000")
	if n := len(u.Replay.Requests()) - before; n != 1 {
		t.Errorf("%d gateway requests for one with matches", n)
	}
}

// TestSimilarDefaultFixture: the catalogue's example answers in replay
// mode (the canary's -replay run).
func TestSimilarDefaultFixture(t *testing.T) {
	u := startSimilar(t, nil)
	data := u.Data(t, similarEndpoint, "product_id=1005006123456789", "similar-default")
	if data["count"] != 1.0 || data["has_more"] != false || data["source_product_id"] != "1005006123456789" {
		t.Fatalf("default: %v", data)
	}
	u.Data(t, similarEndpoint, "query=anything", "similar-query-default")
}

func TestSimilarFaults(t *testing.T) {
	u := startSimilar(t, nil)
	for _, id := range []string{"1005000000000401", "1005000000000403"} {
		out := u.Fault(t, similarEndpoint, "product_id="+id, upstream.Rejected)
		// A refused signature or a method the app may not call refuses
		// every later call too: it counts against the route.
		if out.Fault.Status != http.StatusUnauthorized {
			t.Errorf("%s: status %d", id, out.Fault.Status)
		}
		for _, s := range []string{testSecret, testAppKey} {
			if strings.Contains(out.Fault.Reason, s) {
				t.Errorf("a credential in the reason: %s", out.Fault.Reason)
			}
		}
	}
	u.Fault(t, similarEndpoint, "product_id=1005000000000429", upstream.RateLimited)
	if out := u.Fault(t, similarEndpoint, "product_id=1005000000000015", upstream.Rejected); out.Fault.Status != 0 {
		t.Errorf("a refused parameter must not count against the route: %d", out.Fault.Status)
	}
	u.Fault(t, similarEndpoint, "product_id=1005000000000503", upstream.ServerError)
	u.Fault(t, similarEndpoint, "product_id=1005000000000500", upstream.ServerError)
	m := u.Fault(t, similarEndpoint, "product_id=1005000000000422", upstream.Malformed)
	if !strings.Contains(m.Fault.Reason, "aliexpress_affiliate_product_smartmatch_response.resp_result") {
		t.Errorf("malformed reason %q does not name what is missing", m.Fault.Reason)
	}
}

// --- Limited capacity.

func TestSimilarAllowanceDeclared(t *testing.T) {
	p := aliexpress.SimilarProvider()
	if p.Name != "aliexpress_similar" || p.AllowanceVar() != "MERIDIAN_UPSTREAM_ALIEXPRESS_SIMILAR_ALLOWANCE" {
		t.Fatalf("%s %s", p.Name, p.AllowanceVar())
	}
	if limit, limited, err := upstream.AllowanceOf(p, nil); err != nil || !limited || limit != 1000 {
		t.Fatalf("default allowance %d %v %v", limit, limited, err)
	}
	override := func(v string) func(string) (string, bool) {
		return func(name string) (string, bool) { return v, name == p.AllowanceVar() }
	}
	if limit, limited, _ := upstream.AllowanceOf(p, override("250")); !limited || limit != 250 {
		t.Errorf("override: %d %v", limit, limited)
	}
	if _, limited, _ := upstream.AllowanceOf(p, override("unlimited")); limited {
		t.Error("unlimited still limited")
	}
	// The search route keeps no allowance: the limit applies to this route only.
	if a := aliexpress.Provider(); a.Allowance != 0 {
		t.Errorf("search allowance %d", a.Allowance)
	}
	// Same credentials as the search route.
	var names []string
	for _, s := range p.Secrets {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != aliexpress.AppKeySecret+","+aliexpress.AppSecretSecret+","+aliexpress.TrackingIDSecret {
		t.Errorf("secrets %v", names)
	}
}

// memAllowances counts allowances in memory as the store does.
type memAllowances struct {
	mu   sync.Mutex
	used map[string]int64
}

func (m *memAllowances) TakeAllowance(_ context.Context, name, month string, limit int64, _ time.Time) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := name + "#" + month
	if m.used[k] >= limit {
		return m.used[k], false, nil
	}
	m.used[k]++
	return m.used[k], true, nil
}

func (m *memAllowances) AllowanceUsed(_ context.Context, name, month string, _ time.Time) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used[name+"#"+month], nil
}

func TestSimilarAllowanceSpentRefuses(t *testing.T) {
	p := aliexpress.SimilarProvider()
	u := startSimilar(t, map[string]string{p.AllowanceVar(): "2"})
	mem := &memAllowances{used: map[string]int64{}}
	r := u.Runner.WithAllowances(mem)
	params := map[string]string{"product_id": "1005007000000000"}
	for i := 1; i <= 2; i++ {
		if out := r.Serve(context.Background(), similarEndpoint, params); out.Fault != nil || out.Trace.ServedBy != aliexpress.SimilarProviderName {
			t.Fatalf("call %d: %v %s", i, out.Fault, out.Trace.ServedBy)
		}
	}
	out := r.Serve(context.Background(), similarEndpoint, params)
	if out.Data != nil || out.Fault != nil || out.Trace.Attempts != 0 {
		t.Fatalf("spent: %+v", out)
	}
	e := out.Error()
	if e.Type != envelope.UpstreamError || e.Status != http.StatusTooManyRequests ||
		e.Details["reason"] != "capacity_exhausted" || e.Details["resets_at"] != "2026-04-01T00:00:00Z" {
		t.Fatalf("refusal %s %d %v", e.Type, e.Status, e.Details)
	}
	if e.Header.Get("retry-after") == "" {
		t.Error("no retry-after")
	}
	if n := len(u.Replay.Requests()); n != 2 {
		t.Errorf("the gateway was called %d times", n)
	}
	if got := mem.used["aliexpress_similar#2026-03"]; got != 2 {
		t.Errorf("counted %d", got)
	}
}
