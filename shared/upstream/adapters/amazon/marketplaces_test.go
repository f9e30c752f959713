package amazon_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/amazon"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// hostsDir holds each marketplace's captured pages for the direct route,
// one folder per host: the replay upstream matches no header, so they are
// served here by the host the request names.
func hostsDir(t *testing.T) string {
	return filepath.Join(adaptertest.FixturesDir(t), amazon.SiteName, "hosts")
}

// startMarketplaces is the direct route with MERIDIAN_UPSTREAM_AMAZON_URL
// moved to a proxy that routes by X-Forwarded-Host: a request naming a
// host gets that host's pages, any other the default fixtures. The
// returned Upstream's Replay records the requests that named a host.
func startMarketplaces(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	byHost, err := replay.Load(hostsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	def, err := replay.Load(adaptertest.FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Header.Get(pages.ForwardedHostHeader)
		if host == "" {
			def.ServeHTTP(w, r)
			return
		}
		r.URL.Path = "/" + host + strings.TrimPrefix(r.URL.Path, "/"+amazon.SiteName)
		byHost.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	p := direct()
	vars := map[string]string{p.BaseURLVar(): proxy.URL + "/" + amazon.SiteName}
	runner := upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{
		Lookup:  func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Options: options(),
	})
	return &adaptertest.Upstream{Provider: p, Replay: byHost, Runner: runner}
}

// market is what every marketplace's answer must say of itself.
type market struct {
	country, host, domain, currency, cookie string
}

var (
	us = market{"US", "www.amazon.com", "amazon.com", "USD", "i18n-prefs=USD; lc-main=en_US"}
	de = market{"DE", "www.amazon.de", "amazon.de", "EUR", "i18n-prefs=EUR; lc-acbde=de_DE"}
	jp = market{"JP", "www.amazon.co.jp", "amazon.co.jp", "JPY", "i18n-prefs=JPY; lc-acbjp=ja_JP"}
)

// checkDeals checks the marketplace fields of a deals answer and its items.
func checkDeals(t *testing.T, m market, data map[string]any) {
	t.Helper()
	if data["country"] != m.country || data["domain"] != m.domain {
		t.Errorf("%s: country %v domain %v", m.country, data["country"], data["domain"])
	}
	if mk := data["marketplace"].(map[string]any); mk["country"] != m.country || mk["domain"] != m.domain {
		t.Errorf("%s: marketplace %v", m.country, mk)
	}
	for _, it := range adaptertest.Items(t, data) {
		if it["currency"] != nil && it["currency"] != m.currency {
			t.Errorf("%s: %s currency %v", m.country, it["asin"], it["currency"])
		}
		if it["canonical_url"] != "https://"+m.host+"/dp/"+it["asin"].(string) || !strings.HasPrefix(it["url"].(string), "https://"+m.host+"/") {
			t.Errorf("%s: %s urls %v %v", m.country, it["asin"], it["url"], it["canonical_url"])
		}
	}
}

func TestDealsMarketplacesDirect(t *testing.T) {
	u := startMarketplaces(t)
	for _, tc := range []struct {
		m      market
		query  string
		golden string
	}{
		{us, "country=US", "deals-us"},
		{de, "country=de", "deals-de"},
		{jp, "country=JP", "deals-jp"},
	} {
		data := u.Data(t, dealsEP, tc.query, tc.golden)
		r := u.LastRequest(t)
		if r.Provider != tc.m.host || r.Path != "/deals" || r.Header.Get("cookie") != tc.m.cookie {
			t.Errorf("%s: request %s %s cookie %q", tc.m.country, r.Provider, r.Path, r.Header.Get("cookie"))
		}
		checkDeals(t, tc.m, data)
	}

	us := u.Data(t, dealsEP, "country=US", "deals-us")
	// A deal the grid shows without a price says so.
	if h := item(t, us, 1); h["price"] != nil || h["badge"] != "Prime exclusive deal" || h["type"] != "prime_exclusive_deal" {
		t.Errorf("priceless deal: %v", h)
	}
	if w, _ := us["_warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "no price") {
		t.Errorf("US warnings: %v", us["_warnings"])
	}
	jpData := u.Data(t, dealsEP, "country=JP", "deals-jp")
	// Whole yen; a row without a currency code is in the marketplace's.
	if k := item(t, jpData, 1); k["price"] != 4480.0 || k["list_price"] != 5980.0 || k["currency"] != "JPY" || k["savings_amount"] != 1500.0 {
		t.Errorf("JP row: %v", k)
	}
	deData := u.Data(t, dealsEP, "country=DE", "deals-de")
	if deData["_warnings"] != nil || deData["has_more"] != false || deData["cursor"] != nil {
		t.Errorf("DE page: warnings %v more %v cursor %v", deData["_warnings"], deData["has_more"], deData["cursor"])
	}
	if k := item(t, deData, 0); k["badge"] != "Blitzangebot" || k["savings_percentage"] != 33.0 {
		t.Errorf("DE row: %v", k)
	}

	// The US cursor asks the US widget endpoint, and only the US.
	cursor := us["cursor"].(string)
	page2 := u.Data(t, dealsEP, "country=US&cursor="+url.QueryEscape(cursor), "deals-us-page2")
	r := u.LastRequest(t)
	if r.Provider != "www.amazon.com" || r.Path != "/deals/widget-api/getProducts" || url.Values(r.Query).Get("startIndex") != "30" ||
		r.Header.Get("referer") != "https://www.amazon.com/deals" || r.Header.Get("cookie") != "i18n-prefs=USD; lc-main=en_US" {
		t.Errorf("US page 2 request: %s %s %v %v", r.Provider, r.Path, r.Query, r.Header)
	}
	if page2["country"] != "US" || page2["count"] != 1.0 || item(t, page2, 0)["currency"] != "USD" {
		t.Errorf("US page 2: %v", page2)
	}
	before := len(u.Replay.Requests())
	gb := start(t, direct())
	gbCursor := gb.Data(t, dealsEP, "", "deals-default")["cursor"].(string)
	for _, q := range []string{
		"cursor=" + url.QueryEscape(cursor),              // the US cursor on GB
		"country=DE&cursor=" + url.QueryEscape(cursor),   // and on DE
		"country=US&cursor=" + url.QueryEscape(gbCursor), // a GB cursor on the US
	} {
		out := u.Fault(t, dealsEP, q, upstream.InvalidParameter)
		if out.Fault.Field != "cursor" || out.Fault.Code != "invalid_cursor" {
			t.Errorf("%s: %+v", q, out.Fault)
		}
	}
	if n := len(u.Replay.Requests()); n != before {
		t.Errorf("another marketplace's cursor reached the source (%d requests)", n-before)
	}
}

func TestShopMarketplaceDirect(t *testing.T) {
	u := startMarketplaces(t)
	for _, q := range []string{
		"url=" + url.QueryEscape("https://www.amazon.com/shop/trail-kitchen"),
		"url=" + url.QueryEscape("amazon.com/shop/trail-kitchen/list/2B3C4D5E6F7A8") + "&country=GB", // the URL's host decides
		"url=trail-kitchen&country=US",
	} {
		data := u.Data(t, shopEP, q, "shop-us")
		r := u.LastRequest(t)
		if r.Provider != "www.amazon.com" || r.Path != "/shop/trail-kitchen" || r.Header.Get("cookie") != us.cookie {
			t.Errorf("%s: request %s %s %v", q, r.Provider, r.Path, r.Header)
		}
		if data["country"] != "US" || data["url"] != "https://www.amazon.com/shop/trail-kitchen" || data["name"] != "Trail Kitchen" ||
			data["posts_count"] != 1.0 || data["count"] != 2.0 {
			t.Errorf("%s: %v", q, data)
		}
		if mk := data["marketplace"].(map[string]any); mk["domain"] != "amazon.com" {
			t.Errorf("%s: marketplace %v", q, mk)
		}
		p := adaptertest.Items(t, data)[0]
		if p["url"] != "https://www.amazon.com/dp/B0USSHOP01" || p["price"] != nil {
			t.Errorf("%s: product %v", q, p)
		}
		post := data["posts"].([]any)[0].(map[string]any)
		if post["url"] != "https://www.amazon.com/shop/trail-kitchen/list/2B3C4D5E6F7A8?ref=cm_sw_r_list_sf" {
			t.Errorf("%s: post url %v", q, post["url"])
		}
		if w, _ := data["_warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "no product prices or badges") {
			t.Errorf("%s: warnings %v", q, data["_warnings"])
		}
	}
}

// marketplaceTransport answers as the marketplaces' own hosts would, from
// the captured pages.
type marketplaceTransport struct {
	t    *testing.T
	mu   sync.Mutex
	seen []string
}

func (m *marketplaceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	m.mu.Lock()
	m.seen = append(m.seen, r.URL.String()+" "+r.Header.Get(pages.ForwardedHostHeader))
	m.mu.Unlock()
	fx := readFixture(m.t, filepath.Join(hostsDir(m.t), r.URL.Host, "deals.json"))
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/html;charset=UTF-8"}},
		Body: io.NopCloser(strings.NewReader(*fx.Response.BodyText)), Request: r,
	}, nil
}

// Deployed, with the base URL the default origin, the direct route fetches
// each marketplace's own host.
func TestDirectFetchesTheMarketplaceHost(t *testing.T) {
	tr := &marketplaceTransport{t: t}
	r := upstream.NewRunner([]*upstream.Provider{direct()}, upstream.Settings{Options: options(), Client: &http.Client{Transport: tr}})
	for _, m := range []market{us, de, jp} {
		out := r.Serve(context.Background(), dealsEP, validated(t, dealsEP, "country="+m.country))
		if out.Fault != nil {
			t.Fatalf("%s: %v", m.country, out.Fault)
		}
		b, _ := json.Marshal(out.Data)
		var data map[string]any
		_ = json.Unmarshal(b, &data)
		checkDeals(t, m, data)
	}
	want := []string{"https://www.amazon.com/deals ", "https://www.amazon.de/deals ", "https://www.amazon.co.jp/deals "}
	if !slices.Equal(tr.seen, want) {
		t.Errorf("fetched %q; want %q", tr.seen, want)
	}
}

func TestMarketplacesServices(t *testing.T) {
	z := start(t, pages.Zyte(amazon.Site()))
	for _, tc := range []struct {
		m      market
		golden string
	}{{us, "amazon-deals-us"}, {de, "amazon-deals-de"}, {jp, "amazon-deals-jp"}} {
		data := z.Data(t, dealsEP, "country="+tc.m.country, tc.golden)
		checkDeals(t, tc.m, data)
		var body struct {
			URL            string `json:"url"`
			Geolocation    string `json:"geolocation"`
			RequestCookies []struct {
				Name, Value, Domain string
			} `json:"requestCookies"`
		}
		if err := json.Unmarshal(z.LastRequest(t).Body, &body); err != nil || body.URL != "https://"+tc.m.host+"/deals" {
			t.Fatalf("%s: zyte body (%v) %+v", tc.m.country, err, body)
		}
		var cookies []string
		for _, c := range body.RequestCookies {
			if c.Domain != tc.m.host {
				t.Errorf("%s: cookie %s for %s", tc.m.country, c.Name, c.Domain)
			}
			cookies = append(cookies, c.Name+"="+c.Value)
		}
		if strings.Join(cookies, "; ") != tc.m.cookie {
			t.Errorf("%s: zyte cookies %v", tc.m.country, cookies)
		}
	}
	shop := z.Data(t, shopEP, "url="+url.QueryEscape("https://www.amazon.com/shop/trail-kitchen"), "amazon-shop-us")
	if shop["country"] != "US" || shop["url"] != "https://www.amazon.com/shop/trail-kitchen" || shop["name"] != "Trail Kitchen" {
		t.Errorf("zyte US shop: %v", shop)
	}

	s := start(t, pages.ScraperAPI(amazon.Site()))
	data := s.Data(t, dealsEP, "country=JP", "amazon-deals-jp")
	checkDeals(t, jp, data)
	r := s.LastRequest(t)
	if q := url.Values(r.Query); q.Get("url") != "https://www.amazon.co.jp/deals" || q.Get("keep_headers") != "true" ||
		r.Header.Get("cookie") != jp.cookie {
		t.Errorf("scraperapi JP: %v %v", q, r.Header)
	}
	shop = s.Data(t, shopEP, "url=trail-kitchen&country=US", "amazon-shop-us")
	if q := url.Values(s.LastRequest(t).Query); q.Get("url") != "https://www.amazon.com/shop/trail-kitchen" || shop["country"] != "US" {
		t.Errorf("scraperapi US shop: %v %v", q, shop["country"])
	}
}

func readFixture(t *testing.T, path string) replay.Fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fx replay.Fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

// TestMarketplaceFixturesMatch keeps the services' copies of each
// marketplace's page identical to the direct route's.
func TestMarketplaceFixturesMatch(t *testing.T) {
	dir := adaptertest.FixturesDir(t)
	for page, service := range map[string]string{
		"www.amazon.com/deals.json":   "amazon-deals-us.json",
		"www.amazon.de/deals.json":    "amazon-deals-de.json",
		"www.amazon.co.jp/deals.json": "amazon-deals-jp.json",
		"www.amazon.com/shop.json":    "amazon-shop-us.json",
	} {
		want := *readFixture(t, filepath.Join(hostsDir(t), page)).Response.BodyText
		if got := *readFixture(t, filepath.Join(dir, pages.ScraperAPIName, service)).Response.BodyText; got != want {
			t.Errorf("scraperapi %s differs from %s", service, page)
		}
		var env struct {
			HTTPResponseBody string `json:"httpResponseBody"`
		}
		if err := json.Unmarshal(readFixture(t, filepath.Join(dir, pages.ZyteName, service)).Response.Body, &env); err != nil {
			t.Fatal(err)
		}
		if got, err := base64.StdEncoding.DecodeString(env.HTTPResponseBody); err != nil || string(got) != want {
			t.Errorf("zyte %s differs from %s (%v)", service, page, err)
		}
	}
}
