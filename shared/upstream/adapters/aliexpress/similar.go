package aliexpress

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

// SimilarProviderName is the route of marketplace_a/similar: the same
// affiliate app as ProviderName, under its own name so that its monthly
// allowance (limited capacity, spec 2.4) counts this endpoint only.
const SimilarProviderName = "aliexpress_similar"

// DefaultSimilarAllowance is the similar route's monthly allowance of
// attempts. AliExpress publishes no call quota for the affiliate API (an
// app's limits show only in its console, and smartmatch is an "advanced"
// method granted on request); the app is shared with marketplace_a/search,
// so this route gets a deliberately small slice of it: about 33 calls a
// day, at most two gateway requests each. Operators set their own with
// MERIDIAN_UPSTREAM_ALIEXPRESS_SIMILAR_ALLOWANCE.
const DefaultSimilarAllowance = 1000

const (
	similar = "marketplace_a/similar"
	// smartMatchMethod recommends products related to a product_id (or to
	// keywords, or a device): the one affiliate method documented for
	// "matching related products".
	smartMatchMethod = "aliexpress.affiliate.product.smartmatch"
	// detailMethod tells an unknown product from one without matches.
	detailMethod = "aliexpress.affiliate.productdetail.get"
	// apiLanguage: the endpoint has no language parameter.
	apiLanguage = "EN"
)

// The _warnings sentences of the similar route, fixed so that callers can
// match them.
const (
	warnSimilarByQuery = "No product_id was given: these are the affiliate API's keyword search results for query " +
		"(aliexpress.affiliate.product.query), the closest answer it documents to \"similar to this text\", " +
		"not recommendations for a product; source_product_id is null."
	warnSimilarQueryUnused = "query was not used: with a product_id, the results are the affiliate API's matches for that product."
	warnSimilarCards       = "sales_label, selling_points, sku_id and shop.name are not available from the affiliate API; they are null."
	warnSimilarPromotion   = "promotion_price is the affiliate API's app-only price (app_sale_price) where it is lower than price."
	warnSimilarCurrency    = "Some prices are not in the requested currency: the affiliate API gave them only in the " +
		"product's own currency, which each item's currency names."
)

// SimilarProvider serves marketplace_a/similar over the affiliate API with
// the operator's app credentials (the secrets of Provider), within a
// monthly allowance: put it in route order on its own; it has no fallback.
func SimilarProvider() *upstream.Provider {
	return &upstream.Provider{
		Name: SimilarProviderName,
		Protocol: "AliExpress Open Platform (IOP) business API over HTTPS, signed as " + ProviderName + ": GET /sync with method=" +
			smartMatchMethod + " (product_id; " + detailMethod + " when it matches nothing) or " + queryMethod + " (query alone)",
		Docs:      "https://openservice.aliexpress.com/doc/api.htm#/api?cid=21407&path=aliexpress.affiliate.product.smartmatch&methodType=GET/POST",
		BaseURL:   "https://api-sg.aliexpress.com",
		Secrets:   appSecrets(),
		Allowance: DefaultSimilarAllowance,
		Endpoints: map[string]upstream.Adapter{similar: apiSimilar},
	}
}

// similarRequest is the call's parameters, normalised.
type similarRequest struct {
	productID, query  string
	country, currency string
}

func readSimilar(c *upstream.Call) (similarRequest, error) {
	r := similarRequest{
		query:    strings.TrimSpace(c.Param("query")),
		country:  strings.ToUpper(c.Param("country")),
		currency: strings.ToUpper(c.Param("currency")),
	}
	if r.country == "" {
		r.country = defaultRegion
	}
	if r.currency == "" {
		r.currency = defaultCurrency
	}
	if raw := strings.TrimSpace(c.Param("product_id")); raw != "" {
		id, ok := productIDOf(raw)
		if !ok {
			return r, upstream.InvalidParameterFault("product_id", "not_a_product",
				"product_id must be a numeric product id of this platform or the URL of a product page (…/item/<id>.html).")
		}
		r.productID = id
	}
	if r.productID == "" && r.query == "" {
		return r, upstream.InvalidParameterFault("query", "missing", "Give product_id or query.")
	}
	return r, nil
}

// productIDOf reads a product id: digits, the page's file name
// (<id>.html), or a product page URL (validation has checked its host and
// made it https): /item/<id>.html on every storefront, the mobile
// /i/<id>.html, an older /item/<title>/<id>.html, or a productId query
// value (the app's detail links).
func productIDOf(raw string) (string, bool) {
	if id := strings.TrimSuffix(raw, ".html"); digits(id) {
		return id, true
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i, seg := range parts {
		if (seg == "item" || seg == "i") && i+1 < len(parts) {
			if id := strings.TrimSuffix(parts[len(parts)-1], ".html"); digits(id) {
				return id, true
			}
		}
	}
	if id := u.Query().Get("productId"); digits(id) {
		return id, true
	}
	return "", false
}

func apiSimilar(ctx context.Context, c *upstream.Call) (any, error) {
	r, err := readSimilar(c)
	if err != nil {
		return nil, err
	}
	if r.productID == "" {
		return similarByQuery(ctx, c, r)
	}
	q := gatewayQuery(c, smartMatchMethod)
	q.Set("product_id", r.productID)
	q.Set("country", r.country)
	q.Set("target_currency", r.currency)
	q.Set("target_language", apiLanguage)
	q.Set("page_no", "1")
	// No device_id: the method documents it may be null, recommending by
	// product_id alone, and Meridian has no end-user device to name.
	rr, err := callProducts(ctx, c, q)
	if err != nil {
		return nil, err
	}
	if code := rr.RespCode.String(); code != "200" && code != respEmpty {
		return nil, respFault(rr)
	}
	out := newSimilar(r, rr)
	if out.Count == 0 {
		// smartmatch says nothing of the product itself: an empty answer
		// is either an unknown product (404) or one without matches.
		if err := confirmProduct(ctx, c, r); err != nil {
			return nil, err
		}
		out.HasMore = boolp(false)
		return out, nil
	}
	if rr.Result != nil && rr.Result.IsFinished != nil {
		out.HasMore = boolp(!*rr.Result.IsFinished)
	} else if t := totalOf(rr); t != nil {
		out.HasMore = boolp(float64(out.Count) < *t)
	} // neither: unknown
	return out, nil
}

// confirmProduct asks the product details whether the source product is
// one the affiliate API knows: NotFound when it is not.
func confirmProduct(ctx context.Context, c *upstream.Call, r similarRequest) error {
	q := gatewayQuery(c, detailMethod)
	q.Set("product_ids", r.productID)
	q.Set("country", r.country)
	q.Set("target_currency", r.currency)
	q.Set("target_language", apiLanguage)
	rr, err := callProducts(ctx, c, q)
	if err != nil {
		return err
	}
	switch rr.RespCode.String() {
	case "200":
		for _, p := range rr.products() {
			if p.ProductID.String() == r.productID {
				return nil
			}
		}
	case respEmpty:
	default:
		return respFault(rr)
	}
	return upstream.NotFoundFault("the affiliate API knows no product " + r.productID + " (unknown, or not in the affiliate program)")
}

// similarByQuery answers a query without a product_id with the keyword
// search (20 results, the API's relevance order), and says so.
func similarByQuery(ctx context.Context, c *upstream.Call, r similarRequest) (any, error) {
	q := gatewayQuery(c, queryMethod)
	q.Set("keywords", r.query)
	q.Set("page_no", "1")
	q.Set("page_size", "20")
	q.Set("ship_to_country", r.country)
	q.Set("target_currency", r.currency)
	q.Set("target_language", apiLanguage)
	rr, err := callProducts(ctx, c, q)
	if err != nil {
		return nil, err
	}
	if code := rr.RespCode.String(); code != "200" && code != respEmpty {
		return nil, respFault(rr)
	}
	out := newSimilar(r, rr)
	if t := totalOf(rr); t != nil {
		out.HasMore = boolp(float64(out.Count) < *t)
	} else if out.Count < 20 {
		out.HasMore = boolp(false)
	}
	return out, nil
}

func totalOf(rr *respResult) *float64 {
	if rr.Result == nil {
		return nil
	}
	return rr.Result.TotalRecordCount.ptr()
}

// newSimilar maps a page of products and the warnings they call for.
func newSimilar(r similarRequest, rr *respResult) *similarResult {
	out := &similarResult{Page: 1, SourceProductID: str(r.productID), Items: []similarItem{}}
	promo, otherCurrency := false, false
	for _, p := range rr.products() {
		it, ok := mapSimilarProduct(p)
		if !ok {
			continue
		}
		out.Items = append(out.Items, it)
		promo = promo || it.PromotionPrice != nil
		otherCurrency = otherCurrency || it.Currency != nil && *it.Currency != r.currency
	}
	out.Count = len(out.Items)
	switch {
	case r.productID == "":
		out.Warnings = append(out.Warnings, warnSimilarByQuery)
	case r.query != "":
		out.Warnings = append(out.Warnings, warnSimilarQueryUnused)
	}
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, warnAPIRating, warnAPISales, warnSimilarCards)
		if promo {
			out.Warnings = append(out.Warnings, warnSimilarPromotion)
		}
		if otherCurrency {
			out.Warnings = append(out.Warnings, warnSimilarCurrency)
		}
	}
	return out
}

func mapSimilarProduct(p apiProduct) (similarItem, bool) {
	id := p.ProductID.String()
	if id == "" {
		return similarItem{}, false
	}
	sale, list, app, cur := p.TargetSalePrice.ptr(), p.TargetOriginalPrice.ptr(), p.TargetAppSalePrice.ptr(), p.TargetSalePriceCur
	if sale == nil && list == nil {
		// No target-currency prices: the product's own currency.
		sale, list, app, cur = p.SalePrice.ptr(), p.OriginalPrice.ptr(), p.AppSalePrice.ptr(), p.SalePriceCurrency
		cur = cmp.Or(cur, p.OriginalPriceCurrency)
	} else {
		cur = cmp.Or(cur, p.TargetOriginalCur)
	}
	price := sale
	if price == nil {
		price = list
	}
	var promo *float64
	if app != nil && price != nil && *app < *price {
		promo = app
	}
	it := similarItem{
		Category:       categoryOf(p),
		Currency:       str(cur),
		Discount:       str(strings.TrimSpace(p.Discount)),
		ID:             id,
		Image:          str(absolute(p.ProductMainImageURL)),
		Images:         p.SmallImageURLs.absolute(),
		OriginalPrice:  list,
		Platform:       platform,
		Price:          price,
		PromotionPrice: promo,
		// evaluate_rate is a share of positive feedback, not stars.
		Rating:   nil,
		Sales:    p.LastestVolume.ptr(),
		Shop:     shopOf(p),
		Title:    str(strings.TrimSpace(p.ProductTitle)),
		Type:     "product",
		URL:      productURL(id),
		VideoURL: str(absolute(strings.TrimSpace(p.ProductVideoURL))),
	}
	return it, true
}

// categoryOf is the product's second-level category under its first
// level, or the first level alone; ids "0" or absent are unknown.
func categoryOf(p apiProduct) *category {
	first, second := known(p.FirstLevelCategoryID), known(p.SecondLevelCategoryID)
	switch {
	case second != "":
		c := &category{ID: &second, Name: str(p.SecondLevelCategory)}
		if first != "" {
			c.Parent = &categoryRef{ID: &first, Name: str(p.FirstLevelCategory)}
		}
		return c
	case first != "":
		return &category{ID: &first, Name: str(p.FirstLevelCategory)}
	}
	return nil
}

func shopOf(p apiProduct) *shop {
	id, u := known(p.ShopID), absolute(strings.TrimSpace(p.ShopURL))
	if id == "" && u == "" {
		return nil
	}
	return &shop{ID: str(id), URL: str(u)}
}

func known(s flexString) string {
	if v := s.String(); v != "0" {
		return v
	}
	return ""
}

// The data shape of marketplace_a/similar (spec 2.7). Unknown values are
// null, never 0.
type similarResult struct {
	Count           int           `json:"count"`
	HasMore         *bool         `json:"has_more"`
	Items           []similarItem `json:"items"`
	Page            int           `json:"page"`
	SourceProductID *string       `json:"source_product_id"`
	Warnings        []string      `json:"_warnings,omitempty"`
}

type similarItem struct {
	Category       *category      `json:"category"`
	Currency       *string        `json:"currency"`
	Discount       *string        `json:"discount"`
	ID             string         `json:"id"`
	Image          *string        `json:"image"`
	Images         []string       `json:"images"`
	OriginalPrice  *float64       `json:"original_price"`
	Platform       string         `json:"platform"`
	Price          *float64       `json:"price"`
	PromotionPrice *float64       `json:"promotion_price"`
	Rating         *rating        `json:"rating"`
	Sales          *float64       `json:"sales"`
	SalesLabel     *string        `json:"sales_label"`
	SellingPoints  []sellingPoint `json:"selling_points"`
	Shop           *shop          `json:"shop"`
	SkuID          *string        `json:"sku_id"`
	Title          *string        `json:"title"`
	Type           string         `json:"type"`
	URL            string         `json:"url"`
	VideoURL       *string        `json:"video_url"`
}

type category struct {
	ID     *string      `json:"id"`
	Name   *string      `json:"name"`
	Parent *categoryRef `json:"parent"`
}

// categoryRef is a parent category (spec: "id or name, or an object").
type categoryRef struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

type shop struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	URL  *string `json:"url"`
}

// stringList is a list of strings as the gateway's JSON writes it
// ({"string": [...]}, the TOP form of a list), or a plain array; another
// shape reads as no list rather than failing the page.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	var wrapped struct {
		String []string `json:"string"`
	}
	var plain []string
	switch {
	case len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &wrapped) == nil:
		*l = wrapped.String
	case len(b) > 0 && b[0] == '[' && json.Unmarshal(b, &plain) == nil:
		*l = plain
	default:
		*l = nil
	}
	return nil
}

// absolute is the list with schemes and without blanks; nil when empty.
func (l stringList) absolute() []string {
	var out []string
	for _, s := range l {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, absolute(s))
		}
	}
	return out
}
