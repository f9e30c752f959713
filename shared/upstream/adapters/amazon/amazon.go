// Package amazon serves marketplace_b (Amazon) from its public pages, read
// by pages.Direct, pages.Zyte and pages.ScraperAPI through one pages.Site:
//
//   - marketplace_b/deals: the "Today's Deals" page (/deals), whose grid
//     is mounted by an inline script, assets.mountWidget('slot-N', {…}),
//     with the widget's JSON: productSearchResponse.products (the current
//     discount-asin-grid widget) or, on older pages, the promotions of
//     prefetchedData.entity.rankedPromotions. Further pages come from the
//     widget's own JSON endpoint, /deals/widget-api/getProducts, asked
//     with the widget and page ids the first page gave (kept in the
//     opaque cursor) and without the page's per-session anti-CSRF token,
//     which Meridian does not carry between calls: should the endpoint
//     insist on it, later pages fail typed while the first keeps working.
//   - marketplace_b/shop: a creator storefront, /shop/<handle>, which is
//     server-rendered HTML: the profile in the title and header, one card
//     per post (idea list, photo, video) carrying data-aci, and the
//     products of each card as data-asin elements.
//
// Marketplaces: Amazon runs one domain per country. The country parameter
// (or a shop URL's own host) picks one, and every route fetches that
// marketplace's www host (pages.Request.Host) with its own currency and
// language cookies; a country Amazon runs no marketplace for is refused
// (422 unknown_marketplace).
package amazon

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// SiteName names the direct route: MERIDIAN_UPSTREAM_AMAZON_URL and the
// replay fixtures of testdata/upstream/amazon/.
const SiteName = "amazon"

const (
	platform       = "marketplace_b"
	dealsKey       = "marketplace_b/deals"
	shopKey        = "marketplace_b/shop"
	defaultCountry = "GB"
)

// marketplace is one of Amazon's country sites.
type marketplace struct {
	Country, Domain, Currency string
	// Realm names the site's cookies (lc-<realm>, ubid-<realm>): "main" on
	// amazon.com, "acb" and the site's code elsewhere.
	Realm string
	// Locale is the site's own language, as its language switcher sets it
	// in lc-<realm>.
	Locale string
}

// marketplaces are every marketplace Amazon runs, as the Selling Partner
// API lists them (North America, Europe with the Middle East, Africa and
// India, Far East), with the currency each one prices in and the language
// it shows first. The realms follow the sites' cookies; acbza (South
// Africa, the newest) follows the pattern unconfirmed.
var marketplaces = []marketplace{
	{"US", "amazon.com", "USD", "main", "en_US"},
	{"CA", "amazon.ca", "CAD", "acbca", "en_CA"},
	{"MX", "amazon.com.mx", "MXN", "acbmx", "es_MX"},
	{"BR", "amazon.com.br", "BRL", "acbbr", "pt_BR"},
	{"GB", "amazon.co.uk", "GBP", "acbuk", "en_GB"},
	{"IE", "amazon.ie", "EUR", "acbie", "en_IE"},
	{"DE", "amazon.de", "EUR", "acbde", "de_DE"},
	{"FR", "amazon.fr", "EUR", "acbfr", "fr_FR"},
	{"IT", "amazon.it", "EUR", "acbit", "it_IT"},
	{"ES", "amazon.es", "EUR", "acbes", "es_ES"},
	{"NL", "amazon.nl", "EUR", "acbnl", "nl_NL"},
	{"BE", "amazon.com.be", "EUR", "acbbe", "fr_BE"},
	{"SE", "amazon.se", "SEK", "acbse", "sv_SE"},
	{"PL", "amazon.pl", "PLN", "acbpl", "pl_PL"},
	{"TR", "amazon.com.tr", "TRY", "acbtr", "tr_TR"},
	{"AE", "amazon.ae", "AED", "acbae", "en_AE"},
	{"SA", "amazon.sa", "SAR", "acbsa", "ar_AE"},
	{"EG", "amazon.eg", "EGP", "acbeg", "ar_AE"},
	{"ZA", "amazon.co.za", "ZAR", "acbza", "en_ZA"},
	{"IN", "amazon.in", "INR", "acbin", "en_IN"},
	{"JP", "amazon.co.jp", "JPY", "acbjp", "ja_JP"},
	{"AU", "amazon.com.au", "AUD", "acbau", "en_AU"},
	{"SG", "amazon.sg", "SGD", "acbsg", "en_SG"},
}

// byCountry finds a marketplace; "UK", the code the United Kingdom
// reserves and many callers use, means GB.
func byCountry(code string) (marketplace, bool) {
	code = strings.ToUpper(strings.TrimSpace(code))
	if code == "UK" {
		code = "GB"
	}
	for _, m := range marketplaces {
		if m.Country == code {
			return m, true
		}
	}
	return marketplace{}, false
}

// byHost finds the marketplace of a host name (www.amazon.de, amazon.de,
// smile.amazon.com).
func byHost(host string) (marketplace, bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	var best marketplace
	found := false
	for _, m := range marketplaces {
		if (host == m.Domain || strings.HasSuffix(host, "."+m.Domain)) && len(m.Domain) > len(best.Domain) {
			best, found = m, true
		}
	}
	return best, found
}

// defaultMarket is the marketplace of an empty country, and the site's
// origin: the one MERIDIAN_UPSTREAM_AMAZON_URL replaces.
var defaultMarket, _ = byCountry(defaultCountry)

// host is the marketplace's public host name.
func (m marketplace) host() string { return "www." + m.Domain }

// origin is the marketplace's public https origin.
func (m marketplace) origin() string { return "https://" + m.host() }

// cookies are the marketplace's own currency and language, as its locale
// switcher sets them, so prices are not converted for a visitor from
// elsewhere: one Cookie line, sent to this marketplace only.
func (m marketplace) cookies() string {
	return (&http.Cookie{Name: "i18n-prefs", Value: m.Currency}).String() + "; " +
		(&http.Cookie{Name: "lc-" + m.Realm, Value: m.Locale}).String()
}

// request is a request for path on the marketplace, with its cookies.
func (m marketplace) request(path string, query url.Values, header http.Header) pages.Request {
	if header == nil {
		header = http.Header{}
	}
	header.Set("cookie", m.cookies())
	return pages.Request{Path: path, Query: query, Header: header, Host: m.host()}
}

// view is the marketplace object of the data shapes.
func (m marketplace) view() map[string]any {
	return map[string]any{"country": m.Country, "domain": m.Domain}
}

// productURL is a product's canonical page on the marketplace.
func (m marketplace) productURL(asin string) string {
	return m.origin() + "/dp/" + url.PathEscape(asin)
}

// absolute resolves a link the page gives relative to the marketplace.
func (m marketplace) absolute(link string) string {
	link = strings.TrimSpace(link)
	if link == "" {
		return ""
	}
	u, err := url.Parse(link)
	if err != nil {
		return ""
	}
	base, _ := url.Parse(m.origin() + "/")
	abs := base.ResolveReference(u)
	if abs.Scheme != "https" && abs.Scheme != "http" {
		return ""
	}
	return abs.String()
}

// marketplaceFor resolves the country parameter (fallback when empty) to
// the marketplace to read, refusing a country Amazon has no site for.
func marketplaceFor(country string, fallback marketplace) (marketplace, error) {
	if strings.TrimSpace(country) == "" {
		return fallback, nil
	}
	m, ok := byCountry(country)
	if !ok {
		return marketplace{}, upstream.InvalidParameterFault("country", "unknown_marketplace",
			"country "+strings.ToUpper(country)+" is not a marketplace of this platform.")
	}
	return m, nil
}

// automatedAccess is what Amazon's wall for automated traffic (a 503 page
// without the site around it) names and an ordinary error page does not:
// the address to write to for data access.
var automatedAccess = []byte("api-services-support@amazon.com")

// blocked recognises block pages: the captcha (htmldata.Challenge knows
// it) and the automated-traffic wall, which would otherwise be a 503 the
// runner retries on the same route instead of failing over.
func blocked(p *pages.Page) (string, bool) {
	if reason, ok := htmldata.Challenge(p.Body); ok {
		return reason, true
	}
	if p.Status == http.StatusServiceUnavailable && bytes.Contains(p.Body, automatedAccess) {
		return "amazon: automated-access wall", true
	}
	return "", false
}

// Site is Amazon's public site with the marketplace_b operations, for
// pages.Direct(Site()), pages.Zyte(…, Site(), …) and pages.ScraperAPI(…).
func Site() *pages.Site {
	var hosts []string
	for _, m := range marketplaces {
		hosts = append(hosts, m.Domain, m.host())
	}
	return &pages.Site{
		Name:   SiteName,
		Origin: defaultMarket.origin(),
		Hosts:  hosts,
		Header: pages.BrowserHeader("en-GB,en;q=0.9"),
		// No site-wide cookies: each request carries its marketplace's
		// (marketplace.request), which another marketplace must not get.
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			dealsKey: {Build: dealsRequest, Parse: parseDeals},
			shopKey:  {Build: shopRequest, Parse: parseShop},
		},
	}
}
