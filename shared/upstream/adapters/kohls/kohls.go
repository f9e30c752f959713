// Package kohls serves retailer_a/search from Kohl's (www.kohls.com), the
// US department-store retailer, as a pages.Site: Kohl's publishes no
// public data API (its catalog API needs a partner key), so the search is
// read from the public search page, which embeds its whole result for the
// page's own scripts. Since 2026 the page is built with Astro: the result
// is catalogData in the props of the ProductGrid <astro-island>, in Astro's
// [type, value] serialisation (htmldata.AstroIslands decodes it). Pages
// before that assigned the same object to window.pmpSearchJsonData; that
// form is still read when no island carries catalogData.
//
// GET /search.jsp?submit-search=web-regular&search=Q&PPP=N&WS=O&S=ID is
// the page the site's search box opens: PPP is the products per page, WS
// the zero-based offset of the first product and S the sort id of the
// payload's sorts list (1 featured, 2 new, 3 best sellers, 4/5 price, 6
// rating, 7 percent off on today's site; ids are passed through as the
// caller gives them). The result (catalogData or pmpSearchJsonData)
// carries products[] (webID, productTitle, seoURL,
// image, prices[], rating, availableColr, couponEligible,
// isAvailableforShip, isAvailableforPickUp, sponsoredData, prodType,
// variations, skuIds), sorts[] {ID, name, active}, relatedSearchTerms,
// searchTerm and the number of matches (productCount in catalogData,
// totalRecordsCount in pmpSearchJsonData); the same payload, nested under
// "payload", is what Kohl's catalog API answers, and that form is read too.
//
// The endpoint pages by number (page, limit) and declares no cursor
// parameter, so cursor is always null; has_more says whether page+1 has
// results.
//
// _warnings says, in fixed sentences, what a caller could otherwise misread:
// sku_ids left null because the results carry no SKU ids, a page shorter
// than limit although more results follow (the site may cap its page size,
// and the next page's offset counts limit products, so results between
// would be skipped), a sort id the site did not apply, and a query the
// site corrected before searching.
package kohls

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const (
	// Name is the direct route's provider name (MERIDIAN_UPSTREAM_KOHLS_URL,
	// testdata/upstream/kohls/).
	Name     = "kohls"
	origin   = "https://www.kohls.com"
	platform = "retailer_a"
	endpoint = "retailer_a/search"
	// islandProp is the prop of the search page's Astro island that holds
	// the result; dataVar is the global older pages assigned it to.
	islandProp = "catalogData"
	dataVar    = "pmpSearchJsonData"
	// maxPerPage is the largest page the site's own page-size picker offers.
	maxPerPage = 120
)

// Site is Kohl's, with retailer_a/search. The integrator lists
// pages.Direct(Site()), pages.Zyte(…, Site(), …) and
// pages.ScraperAPI(…, Site(), …) in adapters.All().
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  origin,
		Hosts:   []string{"www.kohls.com", "kohls.com", "m.kohls.com"},
		Header:  pages.BrowserHeader(""),
		Blocked: pages.BlockedBody(htmldata.Challenge),
		Operations: map[string]pages.Operation{
			endpoint: {Build: searchRequest, Parse: parseSearch},
		},
	}
}

// searchRequest builds the search page's URL in the site's own form.
func searchRequest(c *upstream.Call) (pages.Request, error) {
	page, limit := paging(c)
	q := url.Values{}
	q.Set("submit-search", "web-regular")
	q.Set("search", c.Param("query"))
	q.Set("PPP", strconv.Itoa(limit))
	if page > 1 {
		q.Set("WS", strconv.Itoa((page-1)*limit))
	}
	if s := c.Param("sort"); s != "" {
		q.Set("S", s)
	}
	// Kohl's sells in the US only; the services fetch from there.
	return pages.Request{Path: "/search.jsp", Query: q, Country: "US"}, nil
}

// paging reads page (from 1) and limit (1-120, default 120). The registry
// declares those bounds, so validation has refused anything else before the
// call was reserved; the defaults cover a value that is absent (or, in a
// call made without validation, unreadable).
func paging(c *upstream.Call) (page, limit int) {
	page, limit = 1, maxPerPage
	if n, err := strconv.Atoi(c.Param("page")); err == nil && n >= 1 {
		page = n
	}
	if n, err := strconv.Atoi(c.Param("limit")); err == nil && n >= 1 && n <= maxPerPage {
		limit = n
	}
	return page, limit
}

// Result is the data of retailer_a/search.
type Result struct {
	Count           int      `json:"count"`
	Cursor          *string  `json:"cursor"`
	HasMore         *bool    `json:"has_more"`
	Items           []Item   `json:"items"`
	Page            int      `json:"page"`
	Query           string   `json:"query"`
	RelatedSearches []string `json:"related_searches"`
	Sorts           []Sort   `json:"sorts"`
	Total           *float64 `json:"total"`
	Warnings        []string `json:"_warnings,omitempty"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	warnNoSKUs = "The site's search results do not carry SKU ids; sku_ids is null for the products without them."
	warnShort  = "The site returned fewer products than limit although more follow (it may cap the page size); " +
		"the next page starts after limit products, so some results may be skipped."
	warnSort      = "The site did not apply the requested sort; sorts marks the order it used."
	warnCorrected = "The site corrected the query before searching; query is the term the results are for."
)

// Sort is one sort option; ID is what the sort parameter takes.
type Sort struct {
	Active *bool   `json:"active"`
	ID     string  `json:"id"`
	Name   *string `json:"name"`
}

// Item is one product of the results.
type Item struct {
	Colors         []string `json:"colors"`
	ColorsCount    *int     `json:"colors_count"`
	CouponEligible *bool    `json:"coupon_eligible"`
	Currency       string   `json:"currency"`
	ID             string   `json:"id"`
	ImageURL       *string  `json:"image_url"`
	Pickup         *bool    `json:"pickup"`
	Platform       string   `json:"platform"`
	Price          *float64 `json:"price"`
	PriceMax       *float64 `json:"price_max"`
	PriceType      *string  `json:"price_type"`
	Rating         *Rating  `json:"rating"`
	RegularPrice   *float64 `json:"regular_price"`
	Ships          *bool    `json:"ships"`
	SKUIDs         []string `json:"sku_ids"`
	Sponsored      *bool    `json:"sponsored"`
	Title          *string  `json:"title"`
	Type           *string  `json:"type"`
	URL            *string  `json:"url"`
	Variations     *string  `json:"variations"`
}

// Rating is the product's star rating out of 5 and its review count.
type Rating struct {
	Value *float64 `json:"value"`
	Max   float64  `json:"max"`
	Votes *float64 `json:"votes"`
}

// payload is the part of pmpSearchJsonData (or of the catalog API's
// "payload") that is read. Products stays raw so that a missing list is
// told apart from an empty one.
type payload struct {
	Payload            json.RawMessage   `json:"payload"`
	Products           json.RawMessage   `json:"products"`
	Sorts              []rawSort         `json:"sorts"`
	RelatedSearchTerms []json.RawMessage `json:"relatedSearchTerms"`
	TotalRecordsCount  json.Number       `json:"totalRecordsCount"`
	ProductCount       json.Number       `json:"productCount"`
	SearchTerm         string            `json:"searchTerm"`
	AutoCorrectedTerm  string            `json:"autoCorrectedTerm"`
}

type rawSort struct {
	ID     json.RawMessage `json:"ID"`
	Name   *string         `json:"name"`
	Active *bool           `json:"active"`
}

type product struct {
	WebID          json.RawMessage   `json:"webID"`
	ProductTitle   *string           `json:"productTitle"`
	SeoURL         string            `json:"seoURL"`
	Image          *image            `json:"image"`
	Prices         json.RawMessage   `json:"prices"`
	Rating         *rawRating        `json:"rating"`
	AvailableColr  []string          `json:"availableColr"`
	DisplayColor   []string          `json:"displayColor"`
	SwatchImages   []json.RawMessage `json:"swatchImages"`
	CouponEligible *bool             `json:"couponEligible"`
	Ship           *bool             `json:"isAvailableforShip"`
	Pickup         *bool             `json:"isAvailableforPickUp"`
	SponsoredData  json.RawMessage   `json:"sponsoredData"`
	ProdType       *string           `json:"prodType"`
	Variations     *string           `json:"variations"`
	SKUIDs         []json.RawMessage `json:"skuIds"`
}

type image struct {
	URL string `json:"url"`
}

type rawRating struct {
	Count     *float64 `json:"count"`
	AvgRating *float64 `json:"avgRating"`
}

type price struct {
	IsCurrentPrice   bool        `json:"isCurrentPrice"`
	IsSuppressed     bool        `json:"isSuppressed"`
	SalePrice        *priceRange `json:"salePrice"`
	SalePriceStatus  string      `json:"salePriceStatus"`
	SalePriceType    string      `json:"salePriceType"`
	RegularPrice     *priceRange `json:"regularPrice"`
	RegularPriceType string      `json:"regularPriceType"`
}

type priceRange struct {
	MinPrice *float64 `json:"minPrice"`
	MaxPrice *float64 `json:"maxPrice"`
}

// parseSearch maps the search page (or the catalog API's JSON) to Result.
func parseSearch(c *upstream.Call, p *pages.Page) (any, error) {
	raw, source, err := searchData(p.Body)
	if err != nil {
		return nil, err
	}
	var pl payload
	if err := decodeInto(raw, &pl, source, len(p.Body)); err != nil {
		return nil, err
	}
	if len(pl.Payload) > 0 && !isNull(pl.Payload) {
		// The catalog API's form: the result sits under "payload".
		if err := decodeInto(pl.Payload, &pl, source, len(p.Body)); err != nil {
			return nil, err
		}
	}
	total, hasTotal := count(pl.TotalRecordsCount)
	if !hasTotal {
		total, hasTotal = count(pl.ProductCount)
	}
	var products []product
	switch {
	case len(pl.Products) > 0 && pl.Products[0] == '[':
		if err := json.Unmarshal(pl.Products, &products); err != nil {
			return nil, upstream.MalformedFault("%s: products is not a list of products (%s) in a %d-byte page", source, jsonClass(err), len(p.Body))
		}
	case hasTotal && total == 0:
		// A search without results may carry no list at all.
	default:
		return nil, upstream.MalformedFault("%s: no products list in a %d-byte page", source, len(p.Body))
	}

	page, limit := paging(c)
	if len(products) > limit {
		// The offset of the next page counts limit products, so keep as many.
		products = products[:limit]
	}
	res := Result{
		Items:           make([]Item, 0, len(products)),
		Page:            page,
		Query:           c.Param("query"),
		RelatedSearches: related(pl.RelatedSearchTerms),
		Sorts:           sorts(pl.Sorts),
	}
	switch {
	case pl.AutoCorrectedTerm != "":
		res.Query = pl.AutoCorrectedTerm // the results are for the corrected term
	case pl.SearchTerm != "":
		res.Query = pl.SearchTerm
	}
	corrected := pl.AutoCorrectedTerm != "" && !strings.EqualFold(strings.TrimSpace(pl.AutoCorrectedTerm), strings.TrimSpace(c.Param("query")))
	for i, pr := range products {
		it, err := mapProduct(pr)
		if err != nil {
			return nil, upstream.MalformedFault("product %d: %v (a %d-byte page)", i, err, len(p.Body))
		}
		res.Items = append(res.Items, it)
	}
	res.Count = len(res.Items)
	if hasTotal {
		t := float64(total)
		res.Total = &t
		more := (page-1)*limit+res.Count < total && res.Count > 0
		res.HasMore = &more
	} else if res.Count == 0 {
		more := false
		res.HasMore = &more
	}

	for _, it := range res.Items {
		if len(it.SKUIDs) == 0 {
			res.Warnings = append(res.Warnings, warnNoSKUs)
			break
		}
	}
	if res.HasMore != nil && *res.HasMore && res.Count < limit {
		res.Warnings = append(res.Warnings, warnShort)
	}
	if s := c.Param("sort"); s != "" && !sortApplied(res.Sorts, s) {
		res.Warnings = append(res.Warnings, warnSort)
	}
	if corrected {
		res.Warnings = append(res.Warnings, warnCorrected)
	}
	return res, nil
}

// sortApplied is false only when the payload marks another sort active
// and not the requested one; without active marks it cannot tell.
func sortApplied(list []Sort, id string) bool {
	other := false
	for _, s := range list {
		if s.Active == nil || !*s.Active {
			continue
		}
		if s.ID == id {
			return true
		}
		other = true
	}
	return !other
}

// searchData finds the result and names where it was: the catalogData
// prop of an Astro island, else the JSON the page assigns to
// pmpSearchJsonData, or a JSON body as it is.
func searchData(body []byte) (json.RawMessage, string, error) {
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return t, "the JSON body", nil
	}
	if raw, ok := islandData(body); ok {
		return raw, islandProp, nil
	}
	if raw, err := htmldata.Assigned(body, dataVar); err == nil {
		return raw, dataVar, nil
	}
	return nil, "", upstream.MalformedFault("no Astro island with %s and no %s in a %d-byte page", islandProp, dataVar, len(body))
}

// islandData is the catalogData prop of the first island that has one
// holding an object (the page's other islands carry no results).
func islandData(body []byte) (json.RawMessage, bool) {
	islands, err := htmldata.AstroIslands(body)
	if err != nil {
		return nil, false
	}
	for _, island := range islands {
		var props map[string]json.RawMessage
		if json.Unmarshal(island.Props, &props) != nil {
			continue
		}
		if raw := bytes.TrimSpace(props[islandProp]); len(raw) > 0 && raw[0] == '{' {
			return raw, true
		}
	}
	return nil, false
}

func decodeInto(raw json.RawMessage, out *payload, source string, size int) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(out); err != nil {
		return upstream.MalformedFault("%s is not the expected object (%s) in a %d-byte page", source, jsonClass(err), size)
	}
	return nil
}

// jsonClass names a JSON error without quoting the page.
func jsonClass(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return "field " + te.Field + " has the wrong type"
	case errors.As(err, &se):
		return "syntax error at offset " + strconv.FormatInt(se.Offset, 10)
	}
	return "undecodable"
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// count reads a non-negative whole number of records.
func count(n json.Number) (int, bool) {
	if n == "" {
		return 0, false
	}
	v, err := strconv.Atoi(n.String())
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// idString is an id exactly as the source writes it, string or number.
func idString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return ""
	}
	var s string
	if raw[0] == '"' {
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	if raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9' {
		return string(raw)
	}
	return ""
}

func sorts(in []rawSort) []Sort {
	out := make([]Sort, 0, len(in))
	for _, s := range in {
		id := idString(s.ID)
		if id == "" {
			continue // a sort no caller could ask for
		}
		out = append(out, Sort{Active: s.Active, ID: id, Name: s.Name})
	}
	return out
}

// related keeps the related search terms as text: the site lists strings,
// or objects naming the term.
func related(in []json.RawMessage) []string {
	out := make([]string, 0, len(in))
	for _, raw := range in {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
			continue
		}
		var o struct {
			Term, Name, Label, SearchTerm string
		}
		if json.Unmarshal(raw, &o) == nil {
			for _, v := range []string{o.Term, o.SearchTerm, o.Name, o.Label} {
				if v = strings.TrimSpace(v); v != "" {
					out = append(out, v)
					break
				}
			}
		}
	}
	return out
}

func mapProduct(pr product) (Item, error) {
	it := Item{
		ID:             idString(pr.WebID),
		Platform:       platform,
		Currency:       "USD", // kohls.com prices in US dollars only
		Title:          pr.ProductTitle,
		CouponEligible: pr.CouponEligible,
		Ships:          pr.Ship,
		Pickup:         pr.Pickup,
		Type:           pr.ProdType,
		Variations:     pr.Variations,
	}
	if it.ID == "" {
		return it, errString("no webID")
	}
	if u := absolute(pr.SeoURL); u != "" {
		it.URL = &u
	}
	if pr.Image != nil {
		if u := absolute(pr.Image.URL); u != "" {
			it.ImageURL = &u
		}
	}
	it.Colors = pr.AvailableColr
	if len(it.Colors) == 0 {
		it.Colors = pr.DisplayColor
	}
	if n := len(it.Colors); n > 0 {
		it.ColorsCount = &n
	} else {
		it.Colors = nil // no colours listed: unknown, not none
		if n := len(pr.SwatchImages); n > 0 {
			it.ColorsCount = &n
		}
	}
	for _, raw := range pr.SKUIDs {
		if id := idString(raw); id != "" {
			it.SKUIDs = append(it.SKUIDs, id)
		}
	}
	if len(pr.SponsoredData) > 0 {
		// Present: null means an organic result, an object an ad.
		sp := !isNull(pr.SponsoredData)
		it.Sponsored = &sp
	}
	if pr.Rating != nil && (pr.Rating.AvgRating != nil || pr.Rating.Count != nil) {
		it.Rating = &Rating{Value: pr.Rating.AvgRating, Max: 5, Votes: pr.Rating.Count}
	}
	pc, err := currentPrice(pr.Prices)
	if err != nil {
		return it, err
	}
	if pc != nil {
		setPrices(&it, pc)
	}
	return it, nil
}

type errString string

func (e errString) Error() string { return string(e) }

// currentPrice picks the price in force from prices (a list, or one
// object); nil when the product carries none.
func currentPrice(raw json.RawMessage) (*price, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	if raw[0] == '{' {
		var p price
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, errString("prices is not a price (" + jsonClass(err) + ")")
		}
		return &p, nil
	}
	var list []price
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errString("prices is not a list of prices (" + jsonClass(err) + ")")
	}
	for i := range list {
		if list[i].IsCurrentPrice {
			return &list[i], nil
		}
	}
	if len(list) > 0 {
		return &list[0], nil
	}
	return nil, nil
}

// setPrices: the sale price when there is one, else the regular price; a
// suppressed price ("see price in bag") is unknown, not zero.
func setPrices(it *Item, p *price) {
	if r := p.RegularPrice; r != nil {
		it.RegularPrice = r.MinPrice
	}
	sale := p.SalePrice != nil && p.SalePrice.MinPrice != nil
	switch {
	case sale:
		it.PriceType = nonEmpty(p.SalePriceStatus, p.SalePriceType)
		if !p.IsSuppressed {
			it.Price, it.PriceMax = p.SalePrice.MinPrice, p.SalePrice.MaxPrice
		}
	case p.RegularPrice != nil:
		it.PriceType = nonEmpty(p.RegularPriceType)
		if !p.IsSuppressed {
			it.Price, it.PriceMax = p.RegularPrice.MinPrice, p.RegularPrice.MaxPrice
		}
	}
}

// nonEmpty is the first non-empty price type, in lower case: the site
// writes "Regular" and "Original" but "sale" and "clearance".
func nonEmpty(vs ...string) *string {
	for _, v := range vs {
		if v = strings.ToLower(strings.TrimSpace(v)); v != "" {
			return &v
		}
	}
	return nil
}

// absolute makes a site-relative link absolute on the public origin.
func absolute(u string) string {
	u = strings.TrimSpace(u)
	switch {
	case u == "":
		return ""
	case strings.HasPrefix(u, "//"):
		return "https:" + u
	case strings.HasPrefix(u, "/"):
		return origin + u
	}
	if pu, err := url.Parse(u); err == nil && (pu.Scheme == "http" || pu.Scheme == "https") {
		return u
	}
	return ""
}
