package aliexpress

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// SiteName is the direct route's provider name (and fixture folder).
const SiteName = "aliexpress"

// sitePageSize is how many results a search page of the site shows.
const sitePageSize = 60

// Site is www.aliexpress.com's search pages, for pages.Direct, pages.Zyte
// and pages.ScraperAPI.
func Site() *pages.Site {
	return &pages.Site{
		Name:       SiteName,
		Origin:     "https://www.aliexpress.com",
		Hosts:      []string{"aliexpress.com"},
		Header:     pages.BrowserHeader(""),
		Blocked:    blocked,
		Operations: map[string]pages.Operation{search: {Build: buildSearch, Parse: parseSearch}},
	}
}

// blocked recognises the bot walls htmldata.Challenge knows, AliExpress's
// slider captcha (Alibaba's punish page) among them. The site may also
// redirect to the captcha's URL (/_____tmd_____/punish?x5secdata=…),
// which only the page's URL shows.
func blocked(p *pages.Page) (string, bool) {
	if reason, ok := htmldata.Challenge(p.Body); ok {
		return reason, true
	}
	if strings.Contains(p.URL, "/_____tmd_____/") {
		return "alibaba captcha: punish URL", true
	}
	return "", false
}

// buildSearch is the search page for the request: Meridian page p is read
// from site page (p-1)/3+1.
func buildSearch(c *upstream.Call) (pages.Request, error) {
	r, err := readRequest(c)
	if err != nil {
		return pages.Request{}, err
	}
	slug := strings.Join(strings.Fields(r.query), "-")
	q := url.Values{}
	q.Set("SearchText", r.query)
	q.Set("page", strconv.Itoa(sitePage(r.page)))
	if r.sort != "" {
		q.Set("SortType", r.sort)
	}
	if r.category != "" {
		q.Set("catId", r.category)
	}
	if r.minPrice != nil {
		q.Set("minPrice", strconv.FormatFloat(*r.minPrice, 'f', -1, 64))
	}
	if r.maxPrice != nil {
		q.Set("maxPrice", strconv.FormatFloat(*r.maxPrice, 'f', -1, 64))
	}
	if r.shipFrom != "" {
		q.Set("shpf_co", r.shipFrom)
	}
	h := http.Header{}
	// The storefront (country, currency, locale) is the aep_usuc_f cookie
	// the site's own region picker sets.
	h.Set("cookie", "aep_usuc_f=site=glo&c_tp="+r.currency+"&region="+r.region+"&b_locale="+r.locale)
	return pages.Request{
		Path:    "/w/wholesale-" + url.PathEscape(slug) + ".html",
		Query:   q,
		Header:  h,
		Country: r.region,
	}, nil
}

func sitePage(p int) int { return (p-1)*perPage/sitePageSize + 1 }

// The part of the page's init data this package reads: the search
// module's fields (data.root.fields) with its item list and page info.
type initFields struct {
	Data struct {
		Root struct {
			Fields *struct {
				Mods *struct {
					ItemList *struct {
						Content []json.RawMessage `json:"content"`
					} `json:"itemList"`
				} `json:"mods"`
				PageInfo *struct {
					TotalResults *flexNumber `json:"totalResults"`
				} `json:"pageInfo"`
			} `json:"fields"`
		} `json:"root"`
	} `json:"data"`
}

// pageItem is one search card (mods.itemList.content[]).
type pageItem struct {
	ProductID   flexString `json:"productId"`
	ProductType string     `json:"productType"`
	Title       struct {
		DisplayTitle string `json:"displayTitle"`
		SeoTitle     string `json:"seoTitle"`
	} `json:"title"`
	Image struct {
		ImgURL string `json:"imgUrl"`
	} `json:"image"`
	Prices struct {
		SalePrice     *pagePrice `json:"salePrice"`
		OriginalPrice *pagePrice `json:"originalPrice"`
	} `json:"prices"`
	Evaluation struct {
		StarRating *flexNumber `json:"starRating"`
	} `json:"evaluation"`
	Trade struct {
		TradeDesc      string     `json:"tradeDesc"`
		RealTradeCount flexString `json:"realTradeCount"`
	} `json:"trade"`
	SellingPoints []struct {
		SellingPointTagID string `json:"sellingPointTagId"`
		TagContent        struct {
			DisplayTagType string `json:"displayTagType"`
			DisplayTagText string `json:"displayTagText"`
			TagText        string `json:"tagText"`
			TagImgURL      string `json:"tagImgUrl"`
		} `json:"tagContent"`
	} `json:"sellingPoints"`
}

type pagePrice struct {
	CurrencyCode string      `json:"currencyCode"`
	MinPrice     *flexNumber `json:"minPrice"`
	MaxPrice     *flexNumber `json:"maxPrice"`
}

func parseSearch(c *upstream.Call, p *pages.Page) (any, error) {
	r, err := readRequest(c)
	if err != nil {
		return nil, err
	}
	raw, err := initData(p.Body)
	if err != nil {
		return nil, err
	}
	var d initFields
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, upstream.MalformedFault("the search data of a %d-byte page has an unexpected shape (%s)", len(p.Body), jsonProblem(err))
	}
	f := d.Data.Root.Fields
	if f == nil {
		return nil, upstream.MalformedFault("no data.root.fields in the search data of a %d-byte page", len(p.Body))
	}
	var total *float64
	if f.PageInfo != nil {
		total = f.PageInfo.TotalResults.ptr()
	}
	var content []json.RawMessage
	switch {
	case f.Mods != nil && f.Mods.ItemList != nil:
		content = f.Mods.ItemList.Content
	case total != nil && *total == 0:
		// A search without results may carry no item list at all.
	default:
		return nil, upstream.MalformedFault("no mods.itemList in the search data of a %d-byte page", len(p.Body))
	}

	out := &result{Page: r.page, Query: r.query, Region: r.region, Sorts: sortSite, Items: []item{}, Total: total}
	var products []item
	currency := ""
	undecodable := 0
	for _, rawItem := range content {
		var pi pageItem
		if err := json.Unmarshal(rawItem, &pi); err != nil {
			undecodable++
			continue
		}
		it, cur, ok := mapPageItem(pi)
		if !ok {
			continue // ad slots and layout cards carry no product id
		}
		products = append(products, it)
		if currency == "" {
			currency = cur
		}
	}
	if undecodable > 0 && len(products) == 0 {
		return nil, upstream.MalformedFault("none of the %d search cards of a %d-byte page has the expected shape", len(content), len(p.Body))
	}
	// This Meridian page's slice of the site page.
	offset := (r.page - 1) * perPage % sitePageSize
	if offset < len(products) {
		out.Items = products[offset:min(offset+perPage, len(products))]
	}
	out.Count = len(out.Items)
	switch {
	case offset+perPage < len(products):
		out.HasMore = boolp(true)
	case total != nil:
		out.HasMore = boolp(float64(r.page*perPage) < *total)
	case len(products) < sitePageSize:
		out.HasMore = boolp(false)
	}
	if currency == "" {
		currency = r.currency
	}
	out.Currency = &currency
	return out, nil
}

func mapPageItem(pi pageItem) (item, string, bool) {
	id := pi.ProductID.String()
	if id == "" {
		return item{}, "", false
	}
	var sale, saleMax, list *float64
	cur := ""
	if s := pi.Prices.SalePrice; s != nil {
		sale, saleMax, cur = s.MinPrice.ptr(), s.MaxPrice.ptr(), s.CurrencyCode
		if saleMax != nil && sale != nil && *saleMax == *sale {
			saleMax = nil
		}
	}
	if o := pi.Prices.OriginalPrice; o != nil {
		list = o.MinPrice.ptr()
		if cur == "" {
			cur = o.CurrencyCode
		}
	}
	price, promo := promotion(list, sale, saleMax)
	it := item{
		ID:             id,
		Image:          str(absolute(pi.Image.ImgURL)),
		ListingType:    str(pi.ProductType), // "natural", or "ad" for a promoted listing
		Platform:       platform,
		Price:          price,
		PromotionPrice: promo,
		SalesLabel:     str(strings.TrimSpace(pi.Trade.TradeDesc)),
		Title:          str(strings.TrimSpace(cmp.Or(pi.Title.DisplayTitle, pi.Title.SeoTitle))),
		Type:           "product",
		URL:            productURL(id),
	}
	if v := pi.Evaluation.StarRating.ptr(); v != nil && *v > 0 {
		// Stars out of five; a product without reviews shows none (not 0).
		it.Rating = &rating{Value: *v, Max: 5}
	}
	// The card shows sales as text ("1,000+ sold"); a number only when the
	// site gives the exact count.
	if n := pi.Trade.RealTradeCount.String(); digits(n) {
		f, _ := strconv.ParseFloat(n, 64)
		it.Sales = &f
	} else if n, ok := exactSold(pi.Trade.TradeDesc); ok {
		it.Sales = &n
	}
	for _, sp := range pi.SellingPoints {
		text := cmp.Or(sp.TagContent.DisplayTagText, sp.TagContent.TagText)
		if text == "" && sp.TagContent.TagImgURL == "" {
			continue
		}
		it.SellingPoints = append(it.SellingPoints, sellingPoint{
			ID:    str(sp.SellingPointTagID),
			Text:  str(text),
			Image: str(absolute(sp.TagContent.TagImgURL)),
		})
	}
	return it, cur, true
}

// exactSold reads an exact English sales line ("312 sold", "1,204 sold");
// rounded ones ("1,000+ sold", "1.2K sold") and other languages' lines,
// whose separators and multipliers vary, stay text only.
func exactSold(desc string) (float64, bool) {
	num, ok := strings.CutSuffix(strings.TrimSpace(desc), " sold")
	if !ok || num == "" {
		return 0, false
	}
	groups := strings.Split(num, ",")
	for i, g := range groups {
		if !digits(g) || (i > 0 && len(g) != 3) || (i == 0 && len(groups) > 1 && len(g) > 3) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.Join(groups, ""), 64)
	return f, err == nil
}

// initData returns the server-rendered data the search page assigns in
// window._dida_config_._init_data_ = { data: {…JSON…} }: the member of an
// object literal whose key is bare, so not JSON as a whole.
func initData(page []byte) (json.RawMessage, error) {
	return htmldata.AssignedMember(page, "_init_data_", "data")
}

// jsonProblem describes a JSON error by class and offset only: the
// decoder's message may quote the page.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("a %s where %s was expected at %s", te.Value, te.Type, te.Field)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "value cut short"
	case errors.Is(err, io.EOF):
		return "no value"
	}
	return "invalid JSON"
}
