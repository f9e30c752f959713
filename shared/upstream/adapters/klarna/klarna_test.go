package klarna_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/klarna"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const endpoint = klarna.Endpoint

// Service keys: they must reach the services and never a fault's reason.
const (
	zyteKey    = "zk-klarna-test-5d1e"
	scraperKey = "sk-klarna-test-8a0c"
)

func direct(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.Start(t, pages.Direct(klarna.Site()), nil)
}

func zyte(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Zyte(klarna.Site()), map[string]string{pages.ZyteKeySecret: zyteKey}, serviceOptions())
}

func scraperAPI(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.ScraperAPI(klarna.Site()), map[string]string{pages.ScraperAPIKeySecret: scraperKey}, serviceOptions())
}

// serviceOptions leave room for the services' own 15 s attempt timeout.
func serviceOptions() upstream.Options {
	o := adaptertest.Options
	o.Timeout = 20 * o.AttemptTimeout
	return o
}

func TestProductDirect(t *testing.T) {
	u := direct(t)
	p := u.Data(t, endpoint, "id=3201350617&category=94&region=us", "product-us")
	if r := u.LastRequest(t); r.Path != "/us/shopping/pl/cl94/3201350617/" || len(r.Query) != 0 {
		t.Fatalf("request %s %v", r.Path, r.Query)
	}
	if p["id"] != "3201350617" || p["title"] != "Sony WH-1000XM5" || p["platform"] != "shopping_comparison" || p["type"] != "product" ||
		p["url"] != "https://www.klarna.com/us/shopping/pl/cl94/3201350617/Headphones/Sony-WH-1000XM5/" || p["article"] != "WH1000XM5/B" ||
		p["retailers_count"] != 3.0 {
		t.Fatalf("product: %v", p)
	}
	b := p["brand"].(map[string]any)
	if b["id"] != "2317" || b["name"] != "Sony" || b["logo_url"] != "https://owp.klarna.com/brand/2317/sony.png" {
		t.Errorf("brand %v", b)
	}
	if c := p["category"].(map[string]any); c["id"] != "cl94" || c["name"] != "Headphones" || c["url"] != "https://www.klarna.com/us/shopping/cl/cl94/Headphones/" {
		t.Errorf("category %v", c)
	}
	if bc := p["breadcrumbs"].([]any); len(bc) != 2 || bc[0].(map[string]any)["name"] != "Sound & Vision" {
		t.Errorf("breadcrumbs %v", bc)
	}
	if imgs := p["images"].([]any); len(imgs) != 2 || imgs[0] != "https://owp.klarna.com/product/640x640/3201350617/Sony-WH-1000XM5.jpg" {
		t.Errorf("images (deduplicated) %v", imgs)
	}
	if r := p["rating"].(map[string]any); r["value"] != 4.6 || r["votes"] != 1243.0 || r["max"] != 5.0 {
		t.Errorf("rating %v", r)
	}
	if r := p["rank"].(map[string]any); r["rank"] != 3.0 || r["category"] != "Headphones" {
		t.Errorf("rank %v", r)
	}
	if in := p["installment"].(map[string]any); in["price"] != 30.58 || in["currency"] != "USD" || in["term_length"] != 12.0 ||
		in["interest_rate"] != 0.0 || in["interval"] != "MONTH" {
		t.Errorf("installment %v", in)
	}
	specs := p["specifications"].([]any)
	if len(specs) != 5 {
		t.Fatalf("specifications %v", specs)
	}
	if s := specs[3].(map[string]any); s["group"] != "Connectivity" || s["name"] != "Bluetooth Codecs" || s["value"] != "AAC, LDAC, SBC" {
		t.Errorf("multi-valued row %v", s)
	}
	if s := specs[4].(map[string]any); s["value"] != "30 h" || s["description"] != "With noise cancelling on." {
		t.Errorf("row with unit %v", s)
	}
	if w, ok := p["_warnings"]; ok {
		t.Errorf("a complete page has no warnings: %v", w)
	}
}

// The older layout (the cache inside __INITIAL_PROPS__) with looser types:
// a numeric id, a brand as text, images as URLs, a bare rank, no ratings
// yet, breadcrumbs only in JSON-LD and the merchant count on the product.
func TestProductOlderLayoutUK(t *testing.T) {
	u := direct(t)
	p := u.Data(t, endpoint, "id=3208812345&category=cl27&region=uk", "product-uk")
	if r := u.LastRequest(t); r.Path != "/uk/shopping/pl/cl27/3208812345/" {
		t.Fatalf("path %s", r.Path)
	}
	if p["id"] != "3208812345" || p["description"] != nil || p["retailers_count"] != 5.0 || p["installment"] != nil || p["article"] != nil {
		t.Fatalf("product %v", p)
	}
	if b := p["brand"].(map[string]any); b["name"] != "Lenovo" || b["id"] != nil {
		t.Errorf("brand %v", b)
	}
	if r := p["rating"].(map[string]any); r["votes"] != 0.0 || r["value"] != nil || r["max"] != nil {
		t.Errorf("no ratings yet: %v", r)
	}
	if r := p["rank"].(map[string]any); r["rank"] != 12.0 || r["category"] != "Laptops" {
		t.Errorf("rank %v", r)
	}
	bc := p["breadcrumbs"].([]any)
	if len(bc) != 2 || bc[1].(map[string]any)["url"] != "https://www.klarna.com/uk/shopping/cl/cl27/Laptops/" || bc[0].(map[string]any)["id"] != "t5" {
		t.Errorf("JSON-LD breadcrumbs %v", bc)
	}
	if p["url"] != "https://www.klarna.com/uk/shopping/pl/cl27/3208812345/Laptops/Lenovo-IdeaPad-Slim-5-14-OLED/" {
		t.Errorf("url %v", p["url"])
	}
	if s := p["specifications"].([]any)[1].(map[string]any); s["value"] != "16 GB" || s["group"] != "Memory" {
		t.Errorf("spec %v", s)
	}
	// No installment on this page is not a gap to warn about; no rating
	// value means no scale to assume.
	if w, ok := p["_warnings"]; ok {
		t.Errorf("warnings %v", w)
	}
}

// Without the cache the JSON-LD Product still gives a product; what only
// the cache has stays null.
func TestProductJSONLDOnly(t *testing.T) {
	u := direct(t)
	p := u.Data(t, endpoint, "id=3200000001&category=94", "product-jsonld-only")
	if p["id"] != "3200000001" || p["title"] != "Bose QuietComfort Ultra Headphones" || p["article"] != "0017817846585" ||
		p["retailers_count"] != nil || p["rank"] != nil || p["installment"] != nil || p["specifications"] != nil {
		t.Fatalf("product %v", p)
	}
	if r := p["rating"].(map[string]any); r["value"] != 4.4 || r["votes"] != 388.0 || r["max"] != 5.0 {
		t.Errorf("rating %v", r)
	}
	if len(p["breadcrumbs"].([]any)) != 2 || len(p["images"].([]any)) != 1 {
		t.Errorf("breadcrumbs %v images %v", p["breadcrumbs"], p["images"])
	}
	// The category is the deepest category breadcrumb, its id the one its link carries.
	if c := p["category"].(map[string]any); c["id"] != "cl94" || c["name"] != "Headphones" {
		t.Errorf("category %v", c)
	}
	// The caller is told why the cache's fields are null (bestRating is given).
	if w, _ := p["_warnings"].([]any); len(w) != 1 ||
		w[0] != "The page carried only its JSON-LD product data; rank, installment, specifications and retailers_count are null." {
		t.Errorf("warnings %v", p["_warnings"])
	}
}

// Every route maps the same page to the same data.
func TestProductServices(t *testing.T) {
	z := zyte(t)
	adaptertest.MatchesGolden(t, endpoint, z.Serve(t, endpoint, "id=3201350617&category=94&region=us"), klarna.Name, "product-us")
	r := z.LastRequest(t)
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if r.Path != "/v1/extract" || body["url"] != "https://www.klarna.com/us/shopping/pl/cl94/3201350617/" || body["geolocation"] != "US" ||
		body["httpResponseBody"] != true || !strings.HasPrefix(r.Header.Get("authorization"), "Basic ") {
		t.Errorf("Zyte request %s %s", r.Path, r.Body)
	}

	s := scraperAPI(t)
	adaptertest.MatchesGolden(t, endpoint, s.Serve(t, endpoint, "id=3201350617&category=cl94"), klarna.Name, "product-us") // region defaults to us
	q := s.LastRequest(t).Query
	if q["url"][0] != "https://www.klarna.com/us/shopping/pl/cl94/3201350617/" || q["country_code"][0] != "us" || q["api_key"][0] != scraperKey ||
		q["keep_headers"] != nil {
		t.Errorf("ScraperAPI query %v", q)
	}

	adaptertest.MatchesGolden(t, endpoint, z.Serve(t, endpoint, "id=3208812345&category=27&region=gb"), klarna.Name, "product-uk")
	if !bytes.Contains(z.LastRequest(t).Body, []byte(`"geolocation":"GB"`)) {
		t.Errorf("uk geolocation: %s", z.LastRequest(t).Body)
	}
	adaptertest.MatchesGolden(t, endpoint, s.Serve(t, endpoint, "id=3208812345&category=27&region=UK"), klarna.Name, "product-uk")
	if q := s.LastRequest(t).Query; q["country_code"][0] != "gb" {
		t.Errorf("uk country_code %v", q["country_code"])
	}
}

// A challenge on the direct route fails over to the services, which fetch
// the Swedish catalogue from Sweden.
func TestBlockedFailsOver(t *testing.T) {
	d := direct(t)
	out := d.Fault(t, endpoint, "id=3201350617&category=94&region=se", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "challenge") {
		t.Errorf("reason %q", out.Fault.Reason)
	}

	site := klarna.Site()
	providers := []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	secrets := map[string]string{pages.ZyteKeySecret: zyteKey, pages.ScraperAPIKeySecret: scraperKey}
	res := adaptertest.StartRoutes(t, providers, secrets, serviceOptions()).Serve(t, endpoint, "id=3201350617&category=94&region=se")
	if res.Fault != nil {
		t.Fatalf("fault %v", res.Fault)
	}
	if err := schemas.Validate(endpoint, res.Data); err != nil {
		t.Fatal(err)
	}
	p := res.Data.(klarna.Product)
	if *p.Category.Name != "Hörlurar" || *p.Installment.Currency != "SEK" || *p.Installment.InterestRate != 19.95 ||
		*p.URL != "https://www.klarna.com/se/shopping/pl/cl94/3201350617/Hörlurar/Sony-WH-1000XM5/" {
		t.Fatalf("Swedish product %+v", p)
	}
	if res.Trace.ServedBy != pages.ZyteName {
		t.Errorf("served by %q", res.Trace.ServedBy)
	}
}

func TestNotFound(t *testing.T) {
	d := direct(t)
	d.Fault(t, endpoint, "id=3200000404&category=94", upstream.NotFound)
	// A 200 page whose product query failed with the site's 404.
	d.Fault(t, endpoint, "id=3200000405&category=94", upstream.NotFound)
	zyte(t).Fault(t, endpoint, "id=3200000404&category=94", upstream.NotFound)
	scraperAPI(t).Fault(t, endpoint, "id=3200000404&category=94", upstream.NotFound)
}

// A changed page is Malformed (502, refunded), never an empty success; the
// reason names what is missing and the page size, never page content.
func TestChangedShape(t *testing.T) {
	d := direct(t)
	for _, tc := range []struct{ query, want string }{
		{"id=3200000002&category=94", "no product-detail-initial query with a product and no JSON-LD Product"},
		{"id=3200000003&category=94", "initial_payload script is not a JSON object"},
	} {
		out := d.Fault(t, endpoint, tc.query, upstream.Malformed)
		if !strings.Contains(out.Fault.Reason, tc.want) || !strings.Contains(out.Fault.Reason, "-byte page") ||
			strings.Contains(out.Fault.Reason, "Sample") {
			t.Errorf("%s: reason %q", tc.query, out.Fault.Reason)
		}
	}
	out := zyte(t).Fault(t, endpoint, "id=3200000002&category=94", upstream.Malformed)
	if strings.Contains(out.Fault.Reason, zyteKey) {
		t.Errorf("key in reason %q", out.Fault.Reason)
	}
}

// Validation refuses these first (TestValidationRefusesBeforeReserve); a
// call made without it still gets the caller's fault (422 naming the
// field, in neutral words), before any request.
func TestInvalidParameters(t *testing.T) {
	d := direct(t)
	for _, tc := range []struct {
		values map[string]string
		field  string
	}{
		{map[string]string{"id": "3201350617", "category": "94", "region": "fr"}, "region"},
		{map[string]string{"id": "3201350617", "category": "94", "region": "xx"}, "region"},
		{map[string]string{"id": "sony-wh-1000xm5", "category": "94"}, "id"},
		{map[string]string{"id": "3201350617", "category": "laptops"}, "category"},
	} {
		before := len(d.Replay.Requests())
		out := d.Runner.Serve(context.Background(), endpoint, tc.values)
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter {
			t.Fatalf("%v: fault %v", tc.values, out.Fault)
		}
		if out.Fault.Field != tc.field {
			t.Errorf("%v: field %q", tc.values, out.Fault.Field)
		}
		if msg := out.Error().Message; strings.Contains(strings.ToLower(msg), "klarna") {
			t.Errorf("%v: message names the provider: %q", tc.values, msg)
		}
		if len(d.Replay.Requests()) != before {
			t.Errorf("%v: the site was asked", tc.values)
		}
	}
}

// Region names the catalogue's path and the services' country.
func TestRegions(t *testing.T) {
	d := direct(t)
	for region, path := range map[string]string{
		"us": "/us/shopping/", "UK": "/uk/shopping/", "gb": "/uk/shopping/", "se": "/se/shopping/", "de": "/de/shopping/",
		"dk": "/dk/shopping/", "no": "/no/shopping/", "fi": "/fi/shopping/", "at": "/at/shopping/", "nl": "/nl/shopping/",
	} {
		d.Serve(t, endpoint, "id=3201350617&category=94&region="+region) // answered by the default fixture
		if got := d.LastRequest(t).Path; got != path+"pl/cl94/3201350617/" {
			t.Errorf("%s: path %s", region, got)
		}
	}
	z := zyte(t)
	z.Serve(t, endpoint, "id=3201350617&category=94&region=de") // the Zyte fallback fixture answers
	if !bytes.Contains(z.LastRequest(t).Body, []byte(`"geolocation":"DE"`)) {
		t.Errorf("de geolocation: %s", z.LastRequest(t).Body)
	}
}

// ---- helpers ----

// The registry declares region, id and category, so validation refuses a
// bad value with 422 before the call is reserved (no debit, no fair-use
// attempt), and folds case so UK and CL94 still reach the adapter.
func TestValidationRefusesBeforeReserve(t *testing.T) {
	e, ok := registry.Default().Endpoint(endpoint)
	if !ok {
		t.Fatal("no endpoint")
	}
	for _, tc := range []struct{ query, field string }{
		{"id=3201350617&category=94&region=fr", "region"},
		{"id=3201350617&category=94&region=xx", "region"},
		{"id=sony-wh-1000xm5&category=94", "id"},
		{"id=123456789012345678901&category=94", "id"},
		{"id=3201350617&category=laptops", "category"},
		{"id=3201350617&category=cl", "category"},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, verr := params.Validate(e, q, nil)
		if verr == nil || verr.Status != 422 {
			t.Errorf("%s: %v", tc.query, verr)
			continue
		}
		if verr.Details["field"] != tc.field {
			t.Errorf("%s: details %v", tc.query, verr.Details)
		}
	}
	for query, want := range map[string][3]string{
		"id=3201350617&category=94":             {"3201350617", "94", ""},
		"id=3201350617&category=CL94&region=UK": {"3201350617", "cl94", "uk"},
		"id=3201350617&category=cl94&region=gb": {"3201350617", "cl94", "gb"},
		"id=3201350617&category=94&region=NL":   {"3201350617", "94", "nl"},
	} {
		q, _ := url.ParseQuery(query)
		res, verr := params.Validate(e, q, nil)
		if verr != nil {
			t.Errorf("%s: %v", query, verr)
			continue
		}
		if got := [3]string{res.Values["id"], res.Values["category"], res.Values["region"]}; got != want {
			t.Errorf("%s: %v; want %v", query, got, want)
		}
	}
	// A canonical value the registry passes is one the adapter takes.
	d := direct(t)
	d.Serve(t, endpoint, "id=3201350617&category=cl94&region=gb")
	if got := d.LastRequest(t).Path; got != "/uk/shopping/pl/cl94/3201350617/" {
		t.Errorf("path %s", got)
	}
}
