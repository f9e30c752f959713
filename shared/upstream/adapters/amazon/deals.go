package amazon

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// The deals page and its widget endpoint.
const (
	dealsPath       = "/deals"
	dealsWidgetPath = "/deals/widget-api/getProducts"
	// widgetParam carries the grid's filters, as the page's own links do.
	widgetParam = "discounts-widget"
)

// dealsCursor is what the next page needs: the widget's start index and
// the widget and page ids its endpoint is asked with. It is handed out
// base64url-encoded, opaque to callers.
type dealsCursor struct {
	Offset int    `json:"o"`
	Widget string `json:"w"`
	Page   string `json:"p"`
	// Country is the marketplace whose widget the ids name; "" is the
	// default one, so its cursors read as they always have.
	Country string `json:"c,omitempty"`
}

func (k dealsCursor) encode() string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor handed out for marketplace m; another
// marketplace's would ask m for a widget it does not run.
func decodeCursor(s string, m marketplace) (dealsCursor, error) {
	var k dealsCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	if err != nil || k.Offset <= 0 || k.Widget == "" || k.Page == "" {
		return dealsCursor{}, upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor is not one this endpoint returned; pass the previous page's cursor back unchanged.")
	}
	if firstNonEmpty(k.Country, defaultMarket.Country) != m.Country {
		return dealsCursor{}, upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor belongs to the "+firstNonEmpty(k.Country, defaultMarket.Country)+" marketplace; pass the same country as the previous page.")
	}
	return k, nil
}

// cursorCountry is what a cursor records of m ("" for the default).
func cursorCountry(m marketplace) string {
	if m.Country == defaultMarket.Country {
		return ""
	}
	return m.Country
}

// widgetState is the discounts-widget value of the grid's filters: the
// JSON state {"state":{"refinementFilters":{"departments":[…],"brands":[…]}},
// "version":1}, as a JSON string, percent-encoded once more than the rest
// of the query (the page decodes it twice: links read %2522%257B…).
// "" without filters.
func widgetState(categories, brands []string) string {
	filters := map[string][]string{}
	if len(categories) > 0 {
		filters["departments"] = categories
	}
	if len(brands) > 0 {
		filters["brands"] = brands
	}
	if len(filters) == 0 {
		return ""
	}
	state := marshalPlain(map[string]any{"state": map[string]any{"refinementFilters": filters}, "version": 1})
	quoted := marshalPlain(state)
	// encodeURIComponent, which the page uses: spaces are %20, not +.
	return strings.ReplaceAll(url.QueryEscape(string(quoted)), "+", "%20")
}

// marshalPlain is JSON as the page's JSON.stringify writes it: "&", "<"
// and ">" stay as they are.
func marshalPlain(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// list splits a validated comma list.
func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func dealsRequest(c *upstream.Call) (pages.Request, error) {
	m, err := marketplaceFor(c.Param("country"), defaultMarket)
	if err != nil {
		return pages.Request{}, err
	}
	q := url.Values{}
	if state := widgetState(list(c.Param("categories")), list(c.Param("brands"))); state != "" {
		q.Set(widgetParam, state)
	}
	raw := c.Param("cursor")
	if raw == "" {
		return m.request(dealsPath, q, nil), nil
	}
	k, err := decodeCursor(raw, m)
	if err != nil {
		return pages.Request{}, err
	}
	q.Set("widgetId", k.Widget)
	q.Set("pageId", k.Page)
	q.Set("startIndex", strconv.Itoa(k.Offset))
	// What the grid's own "load more" fetch sends.
	h := http.Header{}
	h.Set("x-requested-with", "XMLHttpRequest")
	h.Set("referer", m.origin()+dealsPath)
	r := m.request(dealsWidgetPath, q, h)
	r.JSON = true
	return r, nil
}

// widgetConfig is the JSON a mountWidget call (or the widget endpoint)
// gives: the grid's products and how to ask for more.
type widgetConfig struct {
	WidgetType       string `json:"widgetType"`
	WidgetID         str    `json:"widgetId"`
	RenderingContext *struct {
		PageID str `json:"pageId"`
	} `json:"renderingContext"`
	ProductSearchResponse *searchResponse `json:"productSearchResponse"`
	PrefetchedData        *struct {
		Entity *struct {
			RankedPromotions []json.RawMessage `json:"rankedPromotions"`
			NextIndex        num               `json:"nextIndex"`
		} `json:"entity"`
	} `json:"prefetchedData"`
	// The widget endpoint may answer the search response itself.
	Products  []json.RawMessage `json:"products"`
	NextIndex num               `json:"nextIndex"`
}

type searchResponse struct {
	Products  []json.RawMessage `json:"products"`
	NextIndex num               `json:"nextIndex"`
}

// grid is the chosen widget's rows.
type grid struct {
	rows      []json.RawMessage
	legacy    bool // rankedPromotions rows
	nextIndex *float64
	widget    string
	page      string
}

// gridOf returns the deals grid of a widget config, ok false when the
// config is some other widget.
func gridOf(w widgetConfig, bare bool) (grid, bool) {
	g := grid{widget: string(w.WidgetID)}
	if w.RenderingContext != nil {
		g.page = string(w.RenderingContext.PageID)
	}
	switch {
	case w.ProductSearchResponse != nil && w.ProductSearchResponse.Products != nil:
		g.rows, g.nextIndex = w.ProductSearchResponse.Products, w.ProductSearchResponse.NextIndex.V
	case w.PrefetchedData != nil && w.PrefetchedData.Entity != nil && w.PrefetchedData.Entity.RankedPromotions != nil:
		g.rows, g.nextIndex, g.legacy = w.PrefetchedData.Entity.RankedPromotions, w.PrefetchedData.Entity.NextIndex.V, true
	case bare && w.Products != nil:
		g.rows, g.nextIndex = w.Products, w.NextIndex.V
	default:
		return grid{}, false
	}
	return g, true
}

// mountedWidgets decodes the JSON argument of every
// mountWidget('<slot>', {…}) call in the page's inline scripts: the
// tokenizer finds the scripts, encoding/json reads exactly one value.
func mountedWidgets(page []byte) []json.RawMessage {
	var out []json.RawMessage
	marker := []byte("mountWidget(")
	for s := range htmldata.Scripts(page) {
		if s.Src != "" || (s.Type != "" && s.Type != "text/javascript" && s.Type != "application/javascript" && s.Type != "module") {
			continue
		}
		text := s.Text
		for {
			i := bytes.Index(text, marker)
			if i < 0 {
				break
			}
			text = text[i+len(marker):]
			if v, ok := mountArgument(text); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// mountArgument reads "'slot', {json}" at the start of b.
func mountArgument(b []byte) (json.RawMessage, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || (b[0] != '\'' && b[0] != '"') {
		return nil, false
	}
	end := bytes.IndexByte(b[1:], b[0])
	if end < 0 {
		return nil, false
	}
	b = bytes.TrimLeft(b[end+2:], " \t\r\n")
	if len(b) == 0 || b[0] != ',' {
		return nil, false
	}
	b = bytes.TrimLeft(b[1:], " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var v json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// findGrid picks the deals grid of a page: the discount-asin-grid widget
// when one is named, else the first widget with deals rows.
func findGrid(p *pages.Page, fromWidgetAPI bool) (grid, error) {
	if fromWidgetAPI {
		var w widgetConfig
		if err := p.JSON(&w); err != nil {
			return grid{}, upstream.MalformedFault("the deals widget endpoint's answer (%d bytes) is not JSON", len(p.Body))
		}
		g, ok := gridOf(w, true)
		if !ok {
			return grid{}, upstream.MalformedFault("no products in the deals widget endpoint's %d-byte answer", len(p.Body))
		}
		return g, nil
	}
	widgets := mountedWidgets(p.Body)
	if len(widgets) == 0 {
		return grid{}, upstream.MalformedFault("no mountWidget script in a %d-byte deals page", len(p.Body))
	}
	var found []grid
	for _, raw := range widgets {
		var w widgetConfig
		if json.Unmarshal(raw, &w) != nil {
			continue
		}
		if g, ok := gridOf(w, false); ok {
			if strings.Contains(strings.ToLower(w.WidgetType), "discount") {
				return g, nil
			}
			found = append(found, g)
		}
	}
	if len(found) == 0 {
		return grid{}, upstream.MalformedFault("none of the %d mounted widgets of a %d-byte deals page has deals "+
			"(productSearchResponse.products or prefetchedData.entity.rankedPromotions)", len(widgets), len(p.Body))
	}
	return found[0], nil
}

// dealItem is an item of marketplace_b/deals.
type dealItem struct {
	ID                *string  `json:"id"`
	ASIN              string   `json:"asin"`
	Platform          string   `json:"platform"`
	Type              string   `json:"type"`
	Title             *string  `json:"title"`
	URL               string   `json:"url"`
	CanonicalURL      string   `json:"canonical_url"`
	Image             *string  `json:"image"`
	Price             *float64 `json:"price"`
	ListPrice         *float64 `json:"list_price"`
	Currency          *string  `json:"currency"`
	SavingsAmount     *float64 `json:"savings_amount"`
	SavingsPercentage *float64 `json:"savings_percentage"`
	Badge             *string  `json:"badge"`
	State             *string  `json:"state"`
	EndsAt            *string  `json:"ends_at"`
}

// dealsData is marketplace_b/deals.
type dealsData struct {
	CheckedAt   string         `json:"checked_at"`
	Country     string         `json:"country"`
	Domain      string         `json:"domain"`
	Marketplace map[string]any `json:"marketplace"`
	Count       int            `json:"count"`
	Dropped     int            `json:"dropped"`
	HasMore     *bool          `json:"has_more"`
	Cursor      *string        `json:"cursor"`
	Items       []dealItem     `json:"items"`
	Warnings    []string       `json:"_warnings,omitempty"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	warnNoPrice = "Some deals show no price in the deals grid; their price, savings_amount and " +
		"savings_percentage are null (the product page may show one)."
	warnNoListPrice = "Some deals show no list price in the deals grid; their list_price is null, and savings " +
		"are given only where the grid states them."
)

func parseDeals(c *upstream.Call, p *pages.Page) (any, error) {
	m, err := marketplaceFor(c.Param("country"), defaultMarket)
	if err != nil {
		return nil, err
	}
	var prev *dealsCursor
	if raw := c.Param("cursor"); raw != "" {
		k, err := decodeCursor(raw, m)
		if err != nil {
			return nil, err
		}
		prev = &k
	}
	g, err := findGrid(p, prev != nil)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		// The endpoint's answer need not repeat the ids it was asked with.
		g.widget, g.page = firstNonEmpty(g.widget, prev.Widget), firstNonEmpty(g.page, prev.Page)
	}
	out := dealsData{
		CheckedAt:   c.Now.UTC().Format(time.RFC3339),
		Country:     m.Country,
		Domain:      m.Domain,
		Marketplace: m.view(),
		Items:       []dealItem{},
	}
	for _, raw := range g.rows {
		var row dealRow
		if g.legacy {
			row = legacyRow(raw)
		} else {
			row = currentRow(raw)
		}
		if row.asin == "" {
			out.Dropped++ // a row without a product cannot be linked or told apart
			continue
		}
		out.Items = append(out.Items, row.item(m))
	}
	out.Count = len(out.Items)
	noPrice, noList := false, false
	for _, it := range out.Items {
		noPrice = noPrice || it.Price == nil
		noList = noList || (it.Price != nil && it.ListPrice == nil)
	}
	// A null price reads like a free or missing deal unless it is said why.
	if noPrice {
		out.Warnings = append(out.Warnings, warnNoPrice)
	}
	if noList {
		out.Warnings = append(out.Warnings, warnNoListPrice)
	}
	switch {
	case g.nextIndex == nil:
		// Unknown: the widget did not say.
	case *g.nextIndex > 0 && len(g.rows) > 0:
		more := true
		out.HasMore = &more
		if g.widget != "" && g.page != "" && *g.nextIndex == math.Trunc(*g.nextIndex) {
			next := dealsCursor{Offset: int(*g.nextIndex), Widget: g.widget, Page: g.page, Country: cursorCountry(m)}.encode()
			out.Cursor = &next
		}
	default:
		more := false
		out.HasMore = &more
	}
	return out, nil
}

// dealRow is one grid row, whichever widget shape it came in.
type dealRow struct {
	asin, title, link, image string
	price                    *priceBlock
	badge                    *badgeBlock
	details                  *dealDetails
}

type priceBlock struct {
	PriceToPay ent[money] `json:"priceToPay"`
	BasisPrice ent[money] `json:"basisPrice"`
	Savings    ent[struct {
		Percentage pct        `json:"percentage"`
		Money      ent[money] `json:"money"`
		Amount     ent[money] `json:"amount"`
	}] `json:"savings"`
}

type badgeBlock struct {
	Label     text `json:"label"`
	Messaging text `json:"messaging"`
}

type dealDetails struct {
	ID        str     `json:"id"`
	DealID    str     `json:"dealId"`
	Type      string  `json:"type"`
	DealType  string  `json:"dealType"`
	State     string  `json:"state"`
	DealState string  `json:"dealState"`
	EndTime   instant `json:"endTime"`
	EndsAt    instant `json:"endsAt"`
}

type mediaAsset struct {
	PhysicalID string `json:"physicalId"`
	Extension  string `json:"extension"`
	BaseURL    string `json:"baseUrl"`
	URL        string `json:"url"`
}

// link is the image URL of a media asset ("" when it has none).
func (a *mediaAsset) link() string {
	if a == nil {
		return ""
	}
	if a.URL != "" {
		return a.URL
	}
	if a.PhysicalID == "" {
		return ""
	}
	base := firstNonEmpty(a.BaseURL, "https://m.media-amazon.com/images/I/"+url.PathEscape(a.PhysicalID))
	return base + "." + firstNonEmpty(strings.TrimPrefix(a.Extension, "."), "jpg")
}

// buyingOption is where older payloads keep price and deal.
type buyingOption struct {
	Price       ent[priceBlock]  `json:"price"`
	DealBadge   ent[badgeBlock]  `json:"dealBadge"`
	DealDetails ent[dealDetails] `json:"dealDetails"`
}

// currentRow reads a productSearchResponse product.
func currentRow(raw json.RawMessage) dealRow {
	// Every field tolerates a changed type, so one odd field does not
	// drop the row.
	var p struct {
		ASIN  str  `json:"asin"`
		Title text `json:"title"`
		Link  str  `json:"link"`
		Image ent[struct {
			HiRes  ent[mediaAsset] `json:"hiRes"`
			LowRes ent[mediaAsset] `json:"lowRes"`
		}] `json:"image"`
		Price         ent[priceBlock]     `json:"price"`
		DealBadge     ent[badgeBlock]     `json:"dealBadge"`
		DealDetails   ent[dealDetails]    `json:"dealDetails"`
		BuyingOptions ent[[]buyingOption] `json:"buyingOptions"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return dealRow{}
	}
	r := dealRow{asin: strings.TrimSpace(string(p.ASIN)), title: p.Title.V, link: string(p.Link),
		price: p.Price.V, badge: p.DealBadge.V, details: p.DealDetails.V}
	if img := p.Image.V; img != nil {
		r.image = firstNonEmpty(img.HiRes.V.link(), img.LowRes.V.link())
	}
	if o := p.BuyingOptions.V; o != nil && len(*o) > 0 {
		r.fill((*o)[0])
	}
	return r
}

// legacyRow reads a rankedPromotions promotion.
func legacyRow(raw json.RawMessage) dealRow {
	var p struct {
		Product ent[struct {
			ASIN  str `json:"asin"`
			Title ent[struct {
				DisplayString string `json:"displayString"`
			}] `json:"title"`
			Links ent[struct {
				ViewOnAmazon struct {
					URL string `json:"url"`
				} `json:"viewOnAmazon"`
			}] `json:"links"`
			ProductImages ent[struct {
				Images []struct {
					Variant string      `json:"variant"`
					HiRes   *mediaAsset `json:"hiRes"`
					LowRes  *mediaAsset `json:"lowRes"`
				} `json:"images"`
			}] `json:"productImages"`
			BuyingOptions ent[[]buyingOption] `json:"buyingOptions"`
		}] `json:"product"`
	}
	if json.Unmarshal(raw, &p) != nil || p.Product.V == nil {
		return dealRow{}
	}
	e := p.Product.V
	r := dealRow{asin: strings.TrimSpace(string(e.ASIN))}
	if e.Title.V != nil {
		r.title = clean(e.Title.V.DisplayString)
	}
	if e.Links.V != nil {
		r.link = e.Links.V.ViewOnAmazon.URL
	}
	if e.ProductImages.V != nil {
		for _, img := range e.ProductImages.V.Images {
			if l := firstNonEmpty(img.HiRes.link(), img.LowRes.link()); l != "" && (r.image == "" || img.Variant == "MAIN") {
				r.image = l
				if img.Variant == "MAIN" {
					break
				}
			}
		}
	}
	if o := e.BuyingOptions.V; o != nil && len(*o) > 0 {
		r.fill((*o)[0])
	}
	return r
}

// fill takes from a buying option what the row lacks.
func (r *dealRow) fill(o buyingOption) {
	if r.price == nil {
		r.price = o.Price.V
	}
	if r.badge == nil {
		r.badge = o.DealBadge.V
	}
	if r.details == nil {
		r.details = o.DealDetails.V
	}
}

func (r dealRow) item(m marketplace) dealItem {
	canonical := m.productURL(r.asin)
	it := dealItem{
		ASIN:         r.asin,
		Platform:     platform,
		Type:         "deal",
		Title:        nonEmpty(r.title),
		URL:          firstNonEmpty(m.absolute(r.link), canonical),
		CanonicalURL: canonical,
		Image:        nonEmpty(r.image),
	}
	currency := ""
	if r.price != nil {
		var cur, listCur string
		it.Price, cur = r.price.PriceToPay.V.read()
		it.ListPrice, listCur = r.price.BasisPrice.V.read()
		currency = firstNonEmpty(cur, listCur)
		if s := r.price.Savings.V; s != nil {
			it.SavingsPercentage = s.Percentage.V
			if it.SavingsAmount, _ = s.Money.V.read(); it.SavingsAmount == nil {
				it.SavingsAmount, _ = s.Amount.V.read()
			}
		}
	}
	if it.Price != nil && it.ListPrice != nil && *it.ListPrice > *it.Price {
		// Both prices are exact, so are the savings (to the cent, and to
		// the whole percent the site shows).
		if it.SavingsAmount == nil {
			v := math.Round((*it.ListPrice-*it.Price)*100) / 100
			it.SavingsAmount = &v
		}
		if it.SavingsPercentage == nil {
			v := math.Round((*it.ListPrice - *it.Price) / *it.ListPrice * 100)
			it.SavingsPercentage = &v
		}
	}
	if currency == "" && (it.Price != nil || it.ListPrice != nil) {
		currency = m.Currency // the i18n-prefs cookie asks for the marketplace's currency
	}
	it.Currency = nonEmpty(currency)
	if r.badge != nil {
		// The messaging is the deal's name ("Limited time deal"); the label
		// alone is its discount ("-30%"), shown when there is no name.
		it.Badge = nonEmpty(firstNonEmpty(r.badge.Messaging.V, r.badge.Label.V))
	}
	asin := r.asin
	it.ID = &asin
	if d := r.details; d != nil {
		if id := firstNonEmpty(string(d.ID), string(d.DealID)); id != "" {
			it.ID = &id
		}
		if t := firstNonEmpty(d.Type, d.DealType); t != "" {
			it.Type = strings.ToLower(t)
		}
		if s := firstNonEmpty(d.State, d.DealState); s != "" {
			s = strings.ToLower(s)
			it.State = &s
		}
		it.EndsAt = nonEmpty(firstNonEmpty(d.EndTime.V, d.EndsAt.V))
	}
	return it
}

var nonEmpty = upstream.Trimmed
