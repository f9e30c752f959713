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
// Marketplaces: Amazon runs one domain per country (marketplaces). A
// pages.Site has one origin and pages.Request has no host of its own, so
// until pages can fetch another host per request, only the default
// marketplace (GB, www.amazon.co.uk) is fetched; another known country is
// refused as a parameter the source cannot serve here (422 naming
// country), an unknown one as not a marketplace (422).
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
}

// marketplaces are every marketplace Amazon runs, as the Selling Partner
// API lists them (North America, Europe with the Middle East, Africa and
// India, Far East), with the currency each one prices in.
var marketplaces = []marketplace{
	{"US", "amazon.com", "USD"},
	{"CA", "amazon.ca", "CAD"},
	{"MX", "amazon.com.mx", "MXN"},
	{"BR", "amazon.com.br", "BRL"},
	{"GB", "amazon.co.uk", "GBP"},
	{"IE", "amazon.ie", "EUR"},
	{"DE", "amazon.de", "EUR"},
	{"FR", "amazon.fr", "EUR"},
	{"IT", "amazon.it", "EUR"},
	{"ES", "amazon.es", "EUR"},
	{"NL", "amazon.nl", "EUR"},
	{"BE", "amazon.com.be", "EUR"},
	{"SE", "amazon.se", "SEK"},
	{"PL", "amazon.pl", "PLN"},
	{"TR", "amazon.com.tr", "TRY"},
	{"AE", "amazon.ae", "AED"},
	{"SA", "amazon.sa", "SAR"},
	{"EG", "amazon.eg", "EGP"},
	{"ZA", "amazon.co.za", "ZAR"},
	{"IN", "amazon.in", "INR"},
	{"JP", "amazon.co.jp", "JPY"},
	{"AU", "amazon.com.au", "AUD"},
	{"SG", "amazon.sg", "SGD"},
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

// served is the marketplace the site's origin fetches (see the package
// comment): the only one until pages takes a host per request.
var served, _ = byCountry(defaultCountry)

// host is the marketplace's public host name.
func (m marketplace) host() string { return "www." + m.Domain }

// origin is the marketplace's public https origin.
func (m marketplace) origin() string { return "https://" + m.host() }

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
// the marketplace to read, refusing what cannot be served.
func marketplaceFor(country string, fallback marketplace) (marketplace, error) {
	m := fallback
	if strings.TrimSpace(country) != "" {
		var ok bool
		if m, ok = byCountry(country); !ok {
			return marketplace{}, upstream.InvalidParameterFault("country", "unknown_marketplace",
				"country "+strings.ToUpper(country)+" is not a marketplace of this platform.")
		}
	}
	if m.Country != served.Country {
		return marketplace{}, upstream.InvalidParameterFault("country", "marketplace_not_served",
			"The "+m.Country+" marketplace is not served yet; only "+served.Country+" is.")
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
		Origin: served.origin(),
		Hosts:  hosts,
		Header: pages.BrowserHeader("en-GB,en;q=0.9"),
		// The marketplace's own currency and language, as its locale
		// switcher sets them, so prices are not converted for a visitor
		// from elsewhere.
		Cookies: []*http.Cookie{{Name: "i18n-prefs", Value: served.Currency}, {Name: "lc-acbuk", Value: "en_GB"}},
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			dealsKey: {Build: dealsRequest, Parse: parseDeals},
			shopKey:  {Build: shopRequest, Parse: parseShop},
		},
	}
}
