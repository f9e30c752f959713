// Package aliexpress serves marketplace_a (AliExpress) over two sources:
//
//   - Provider: the AliExpress Open Platform's affiliate API
//     (aliexpress.affiliate.product.query on the IOP gateway
//     https://api-sg.aliexpress.com/sync, signed with HMAC-SHA256 as the
//     platform's SDK does), eligible only when the operator's app key and
//     secret are configured;
//   - Site: the public search pages of www.aliexpress.com
//     (/w/wholesale-<query>.html), whose server-rendered data
//     (window._dida_config_._init_data_) pages.Direct, pages.Zyte and
//     pages.ScraperAPI fetch and this package maps;
//   - SimilarProvider: marketplace_a/similar over the same affiliate app
//     (aliexpress.affiliate.product.smartmatch by product_id, the keyword
//     product query for a query alone), under its own name so that its
//     monthly allowance limits that endpoint only (similar.go).
//
// Both routes take the same parameters and the same sort ids (the site's
// own SortType values, see sorts), so a caller's request means the same
// thing whichever route answers it. A request one route cannot express (a
// ship-from filter, or a sort the affiliate API lacks) is refused by that
// route as Rejected, which makes the runner fail over to the pages.
//
// Pages: the endpoint pages 20 results at a time. The affiliate API takes
// page_size 20 directly; the site shows 60 per page, so Meridian page p is
// the slice ((p-1)%3)*20 of site page (p-1)/3+1.
package aliexpress

import (
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

const (
	platform = "marketplace_a"
	search   = "marketplace_a/search"
	// perPage is the endpoint's page size (registry: 20 per page).
	perPage = 20
)

// Defaults when the caller names no storefront: the global site as a US
// visitor sees it, so answers do not depend on where Meridian runs.
const (
	defaultRegion   = "US"
	defaultCurrency = "USD"
	defaultLocale   = "en_US"
)

// sortSite lists the sort ids the endpoint accepts: the search page's own
// SortType values (its sort bar: best match, orders, price up, price
// down). The affiliate API serves the three it has an equivalent for.
var sortSite = []string{"default", "total_tranpro_desc", "price_asc", "price_desc"}

// sortAPI maps sort ids to the affiliate API's sort values. "default" is
// the API's own relevance order (no sort parameter).
var sortAPI = map[string]string{
	"default":            "",
	"total_tranpro_desc": "LAST_VOLUME_DESC",
	"price_asc":          "SALE_PRICE_ASC",
	"price_desc":         "SALE_PRICE_DESC",
}

// request is the call's parameters, normalised once for both routes.
type request struct {
	query, sort, category, shipFrom string
	region, currency, locale        string
	page                            int
	minPrice, maxPrice              *float64
}

func readRequest(c *upstream.Call) (request, error) {
	r := request{
		query:    strings.TrimSpace(c.Param("query")),
		sort:     c.Param("sort"),
		category: c.Param("category_id"),
		shipFrom: strings.ToUpper(c.Param("ship_from")),
		region:   strings.ToUpper(c.Param("region")),
		currency: strings.ToUpper(c.Param("currency")),
		locale:   locale(c.Param("language")),
		page:     1,
	}
	if r.region == "" {
		r.region = defaultRegion
	}
	if r.currency == "" {
		r.currency = defaultCurrency
	}
	if p := c.Param("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return r, upstream.InvalidParameterFault("page", "invalid_page", "page must be a whole number from 1.")
		}
		r.page = n
	}
	if r.sort != "" && !slices.Contains(sortSite, r.sort) {
		return r, upstream.InvalidParameterFault("sort", "not_allowed",
			"sort must be one of the response's sorts: "+strings.Join(sortSite, ", ")+".")
	}
	if r.category != "" && !digits(r.category) {
		// Both sources number their categories.
		return r, upstream.InvalidParameterFault("category_id", "invalid_format",
			"category_id must be a numeric category id of the marketplace.")
	}
	for name, dst := range map[string]**float64{"min_price": &r.minPrice, "max_price": &r.maxPrice} {
		if v := c.Param(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return r, upstream.InvalidParameterFault(name, "invalid_type", name+" must be a number of at least 0.")
			}
			*dst = &f
		}
	}
	return r, nil
}

// locales are the storefront locales of the site for a bare language
// (its language menu); a caller's en-GB or pt_BR is used as given.
var locales = map[string]string{
	"en": "en_US", "es": "es_ES", "fr": "fr_FR", "de": "de_DE", "it": "it_IT", "pt": "pt_BR",
	"ru": "ru_RU", "nl": "nl_NL", "pl": "pl_PL", "tr": "tr_TR", "ja": "ja_JP", "ko": "ko_KR",
	"ar": "ar_MA", "he": "iw_IL", "iw": "iw_IL", "th": "th_TH", "vi": "vi_VN", "id": "in_ID", "in": "in_ID",
}

// locale turns a language tag (en, en-GB, en_us) into the site's form
// (en_GB); "" means the default.
func locale(tag string) string {
	if tag == "" {
		return defaultLocale
	}
	lang, region, _ := strings.Cut(strings.ReplaceAll(tag, "-", "_"), "_")
	lang = strings.ToLower(lang)
	region, _, _ = strings.Cut(region, "_")
	if region == "" {
		if l, ok := locales[lang]; ok {
			return l
		}
		return lang + "_" + strings.ToUpper(lang)
	}
	return lang + "_" + strings.ToUpper(region)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// productURL is the canonical product page: listing URLs of both sources
// may carry tracking or point at campaign pages.
func productURL(id string) string { return "https://www.aliexpress.com/item/" + id + ".html" }

// absolute gives protocol-relative image URLs (//ae-pic-a1…) a scheme.
func absolute(u string) string {
	if strings.HasPrefix(u, "//") {
		return "https:" + u
	}
	return u
}

// The data shape of marketplace_a/search (spec 2.7). Unknown values are
// null, never 0.
type result struct {
	Count    int      `json:"count"`
	Currency *string  `json:"currency"`
	Cursor   *string  `json:"cursor"`
	HasMore  *bool    `json:"has_more"`
	Items    []item   `json:"items"`
	Page     int      `json:"page"`
	Query    string   `json:"query"`
	Region   string   `json:"region"`
	Sorts    []string `json:"sorts"`
	Total    *float64 `json:"total"`
	Warnings []string `json:"_warnings,omitempty"`
}

type item struct {
	ID             string         `json:"id"`
	Image          *string        `json:"image"`
	ListingType    *string        `json:"listing_type"`
	Platform       string         `json:"platform"`
	Price          *float64       `json:"price"`
	PromotionPrice *priceRange    `json:"promotion_price"`
	Rating         *rating        `json:"rating"`
	Sales          *float64       `json:"sales"`
	SalesLabel     *string        `json:"sales_label"`
	SellingPoints  []sellingPoint `json:"selling_points"`
	Title          *string        `json:"title"`
	Type           string         `json:"type"`
	URL            string         `json:"url"`
}

type priceRange struct {
	Min *float64 `json:"min"`
	Max *float64 `json:"max"`
}

type rating struct {
	Value float64 `json:"value"`
	Max   float64 `json:"max"`
}

// sellingPoint is one badge of a search card ("Choice", "Free shipping",
// "Extra 5% off"): its text when it has one, its image when it is a
// picture, and the site's tag id.
type sellingPoint struct {
	ID    *string `json:"id"`
	Text  *string `json:"text"`
	Image *string `json:"image"`
}

// promotion is the sale price as a range when it differs from the list
// price (a promotion); nil when there is none or it is unknown.
func promotion(list, sale, saleMax *float64) (*float64, *priceRange) {
	switch {
	case list == nil && sale == nil:
		return nil, nil
	case list == nil:
		// Only one price is shown: that is the price.
		return sale, nil
	case sale == nil || (*sale == *list && saleMax == nil):
		return list, nil
	}
	return list, &priceRange{Min: sale, Max: saleMax}
}

var str = upstream.Text

func boolp(b bool) *bool { return &b }
