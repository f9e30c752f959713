package aliexpress

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Operator credentials of an AliExpress Open Platform app with the
// affiliate API (portals.aliexpress.com > Tools > API, then the app's
// keys in the Open Platform console).
const (
	AppKeySecret     = "MERIDIAN_ALIEXPRESS_APP_KEY"
	AppSecretSecret  = "MERIDIAN_ALIEXPRESS_APP_SECRET"
	TrackingIDSecret = "MERIDIAN_ALIEXPRESS_TRACKING_ID"
)

// ProviderName is the affiliate API route's provider name.
const ProviderName = "aliexpress_affiliate"

const (
	gatewayPath = "/sync"
	queryMethod = "aliexpress.affiliate.product.query"
	signMethod  = "sha256"
)

// responseName is the member a business method's answer comes under:
// the method's name with underscores, then "_response".
func responseName(method string) string {
	return strings.ReplaceAll(method, ".", "_") + "_response"
}

// The _warnings sentences of the affiliate API route, fixed so that callers
// can match them: what its answers lack or mean differently from the
// search pages'.
const (
	warnAPIRating = "rating is null: the affiliate API gives no star rating " +
		"(its evaluate_rate is a share of positive feedback, not stars)."
	warnAPISales = "sales is the affiliate API's recent sales count (lastest_volume), " +
		"which can differ from the sold count the search page shows."
	warnAPICards    = "listing_type, sales_label and selling_points are not available from the affiliate API; they are null."
	warnAPICurrency = "Some prices are not in the requested currency: the affiliate API gave them only in the " +
		"product's own currency, and currency is that of the first product with one."
	warnAPIOrders = "sort total_tranpro_desc is served as the affiliate API's order by recent sales volume (LAST_VOLUME_DESC)."
)

// Provider is the affiliate API route: first in route order, eligible only
// with the operator's app key and secret.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name: ProviderName,
		Protocol: "AliExpress Open Platform (IOP) business API over HTTPS: GET /sync with method=" + queryMethod +
			", system parameters app_key, timestamp (epoch ms), sign_method=sha256 and sign (HMAC-SHA256 of the sorted parameters)",
		Docs:      "https://openservice.aliexpress.com/doc/api.htm#/api?cid=21407&path=aliexpress.affiliate.product.query&methodType=GET/POST",
		BaseURL:   "https://api-sg.aliexpress.com",
		Secrets:   appSecrets(),
		Endpoints: map[string]upstream.Adapter{search: apiSearch},
	}
}

// appSecrets are the operator's app credentials, shared by every route
// over the affiliate API.
func appSecrets() []upstream.Secret {
	return []upstream.Secret{
		{Name: AppKeySecret, Required: true, Doc: "The app key of an AliExpress Open Platform app with affiliate API " +
			"access (apply at portals.aliexpress.com > Tools > API; the key is in the Open Platform console, App Management)."},
		{Name: AppSecretSecret, Required: true, Doc: "The same app's app secret; it signs every request and is never sent."},
		{Name: TrackingIDSecret, Doc: "Optional affiliate tracking id (portals.aliexpress.com > Tools > Tracking ID); " +
			"sent as tracking_id when set."},
	}
}

// sign is the IOP signature of a business API (a method name without
// "/"): the parameters sorted by name, each name followed by its value,
// concatenated, HMAC-SHA256 with the app secret, in upper-case hex. sign
// itself is not signed.
func sign(secret string, params url.Values) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != "sign" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	mac := hmac.New(sha256.New, []byte(secret))
	for _, k := range keys {
		mac.Write([]byte(k))
		mac.Write([]byte(params.Get(k)))
	}
	return strings.ToUpper(hex.EncodeToString(mac.Sum(nil)))
}

// apiParams are the query of a product query (callProducts signs it).
func apiParams(c *upstream.Call, r request) (url.Values, error) {
	if r.shipFrom != "" {
		// product.query has no ship-from filter: let the pages answer.
		return nil, &upstream.Fault{Kind: upstream.Rejected, Reason: "the affiliate API cannot filter by ship-from country"}
	}
	apiSort, ok := sortAPI[r.sort]
	if r.sort != "" && !ok {
		return nil, &upstream.Fault{Kind: upstream.Rejected, Reason: "the affiliate API has no equivalent of sort " + strconv.Quote(r.sort)}
	}
	q := gatewayQuery(c, queryMethod)
	q.Set("keywords", r.query)
	q.Set("page_no", strconv.Itoa(r.page))
	q.Set("page_size", strconv.Itoa(perPage))
	q.Set("ship_to_country", r.region)
	q.Set("target_currency", r.currency)
	// target_language is the language alone, upper case (EN, PT, ES…).
	lang, _, _ := strings.Cut(r.locale, "_")
	q.Set("target_language", strings.ToUpper(lang))
	if apiSort != "" {
		q.Set("sort", apiSort)
	}
	if r.category != "" {
		q.Set("category_ids", r.category)
	}
	// Price filters are in the currency's smallest unit (cents).
	if r.minPrice != nil {
		q.Set("min_sale_price", strconv.FormatInt(int64(math.Round(*r.minPrice*100)), 10))
	}
	if r.maxPrice != nil {
		q.Set("max_sale_price", strconv.FormatInt(int64(math.Round(*r.maxPrice*100)), 10))
	}
	return q, nil
}

// gatewayQuery is what every affiliate method's request starts with: the
// system parameters, the method and the tracking id when configured.
// callProducts signs it once the business parameters are set.
func gatewayQuery(c *upstream.Call, method string) url.Values {
	q := url.Values{}
	q.Set("app_key", c.Secret(AppKeySecret))
	q.Set("method", method)
	q.Set("sign_method", signMethod)
	q.Set("timestamp", strconv.FormatInt(c.Now.UnixMilli(), 10))
	q.Set("format", "json")
	if t := c.Secret(TrackingIDSecret); t != "" {
		q.Set("tracking_id", t)
	}
	return q
}

// callProducts signs q, calls the gateway and returns the resp_result of a
// product method (product.query, product.smartmatch and productdetail.get
// share one answer shape); a gateway refusal is a fault (gatewayFault).
// resp_code is left to the caller: what "no result" means differs.
func callProducts(ctx context.Context, c *upstream.Call, q url.Values) (*respResult, error) {
	q.Set("sign", sign(c.Secret(AppSecretSecret), q))
	resp, err := c.Get(ctx, gatewayPath, q, nil)
	if err != nil {
		return nil, err
	}
	var a gatewayAnswer
	if err := upstream.DecodeJSON(resp.Body, &a); err != nil {
		return nil, err
	}
	if e := a.ErrorResponse; e != nil {
		return nil, gatewayFault(*e)
	}
	if a.Code.String() != "" && a.Code.String() != "0" {
		return nil, gatewayFault(a.apiError)
	}
	name := responseName(q.Get("method"))
	var body struct {
		RespResult *respResult `json:"resp_result"`
	}
	if raw := a.members[name]; raw != nil {
		if err := upstream.DecodeJSON(raw, &body); err != nil {
			return nil, err
		}
	}
	if body.RespResult == nil {
		return nil, upstream.MalformedFault("the affiliate API answered without %s.resp_result (%d bytes)", name, len(resp.Body))
	}
	return body.RespResult, nil
}

// gatewayAnswer is the gateway's envelope: the result under
// <method>_response (kept raw in members), or an error at the top level
// (IOP: code, type, message) or under error_response (the older TOP form).
type gatewayAnswer struct {
	apiError
	ErrorResponse *apiError `json:"error_response"`
	members       map[string]json.RawMessage
}

func (a *gatewayAnswer) UnmarshalJSON(b []byte) error {
	type plain gatewayAnswer // without this method
	if err := json.Unmarshal(b, (*plain)(a)); err != nil {
		return err
	}
	return json.Unmarshal(b, &a.members)
}

// respResult is the resp_result of a product method: its status and the
// TrafficProductResultDto (a page of products).
type respResult struct {
	RespCode *flexString `json:"resp_code"`
	RespMsg  string      `json:"resp_msg"`
	Result   *struct {
		CurrentPageNo      *flexNumber `json:"current_page_no"`
		CurrentRecordCount *flexNumber `json:"current_record_count"`
		TotalRecordCount   *flexNumber `json:"total_record_count"`
		IsFinished         *bool       `json:"is_finished"`
		Products           *struct {
			Product []apiProduct `json:"product"`
		} `json:"products"`
	} `json:"result"`
}

// products are the result's products (none when absent).
func (rr *respResult) products() []apiProduct {
	if rr.Result == nil || rr.Result.Products == nil {
		return nil
	}
	return rr.Result.Products.Product
}

// respEmpty is the documented resp_code of "the result is empty".
const respEmpty = "405"

// respFault is the fault of a resp_code other than 200 and 405: the
// platform's own failures (5xx) are retried, the rest refuse this request.
func respFault(rr *respResult) *upstream.Fault {
	code := rr.RespCode.String()
	f := &upstream.Fault{Kind: upstream.Rejected, Reason: "the affiliate API answered resp_code " + code + ": " + clip(rr.RespMsg)}
	if n, err := strconv.Atoi(code); err == nil && n >= 500 {
		f.Kind = upstream.ServerError
	}
	return f
}

type apiError struct {
	Code    flexString `json:"code"`
	Type    string     `json:"type"`
	Message string     `json:"message"`
	Msg     string     `json:"msg"`
	SubCode string     `json:"sub_code"`
	SubMsg  string     `json:"sub_msg"`
}

type apiProduct struct {
	ProductID             flexString  `json:"product_id"`
	ProductTitle          string      `json:"product_title"`
	ProductMainImageURL   string      `json:"product_main_image_url"`
	ProductDetailURL      string      `json:"product_detail_url"`
	TargetSalePrice       *flexNumber `json:"target_sale_price"`
	TargetSalePriceCur    string      `json:"target_sale_price_currency"`
	TargetOriginalPrice   *flexNumber `json:"target_original_price"`
	TargetOriginalCur     string      `json:"target_original_price_currency"`
	SalePrice             *flexNumber `json:"sale_price"`
	SalePriceCurrency     string      `json:"sale_price_currency"`
	OriginalPrice         *flexNumber `json:"original_price"`
	OriginalPriceCurrency string      `json:"original_price_currency"`
	LastestVolume         *flexNumber `json:"lastest_volume"`
	// Read by marketplace_a/similar only.
	TargetAppSalePrice    *flexNumber `json:"target_app_sale_price"`
	TargetAppSaleCur      string      `json:"target_app_sale_price_currency"`
	AppSalePrice          *flexNumber `json:"app_sale_price"`
	AppSalePriceCurrency  string      `json:"app_sale_price_currency"`
	Discount              string      `json:"discount"`
	FirstLevelCategoryID  flexString  `json:"first_level_category_id"`
	FirstLevelCategory    string      `json:"first_level_category_name"`
	SecondLevelCategoryID flexString  `json:"second_level_category_id"`
	SecondLevelCategory   string      `json:"second_level_category_name"`
	SmallImageURLs        stringList  `json:"product_small_image_urls"`
	ProductVideoURL       string      `json:"product_video_url"`
	ShopID                flexString  `json:"shop_id"`
	ShopName              string      `json:"shop_name"`
	ShopURL               string      `json:"shop_url"`
	SkuID                 flexString  `json:"sku_id"`
}

func apiSearch(ctx context.Context, c *upstream.Call) (any, error) {
	r, err := readRequest(c)
	if err != nil {
		return nil, err
	}
	q, err := apiParams(c, r)
	if err != nil {
		return nil, err
	}
	rr, err := callProducts(ctx, c, q)
	if err != nil {
		return nil, err
	}
	out := &result{Page: r.page, Query: r.query, Region: r.region, Sorts: apiSorts(), Items: []item{}}
	switch code := rr.RespCode.String(); code {
	case "200":
	case respEmpty:
		// The documented "no result" answer: an empty page.
		out.HasMore = boolp(false)
		out.Currency = &r.currency
		return out, nil
	default:
		return nil, respFault(rr)
	}
	res := rr.Result
	if res == nil {
		return nil, upstream.MalformedFault("the affiliate API answered resp_code 200 without a result")
	}
	otherCurrency := false
	if res.Products != nil {
		for _, p := range res.Products.Product {
			if it, cur, ok := mapAPIProduct(p); ok {
				out.Items = append(out.Items, it)
				if out.Currency == nil && cur != "" {
					out.Currency = &cur
				}
				otherCurrency = otherCurrency || cur != "" && cur != r.currency
			}
		}
	}
	if len(out.Items) > 0 {
		out.Warnings = []string{warnAPIRating, warnAPISales, warnAPICards}
		if otherCurrency {
			out.Warnings = append(out.Warnings, warnAPICurrency)
		}
		if r.sort == "total_tranpro_desc" {
			out.Warnings = append(out.Warnings, warnAPIOrders)
		}
	}
	if out.Currency == nil {
		out.Currency = &r.currency
	}
	out.Count = len(out.Items)
	if t := res.TotalRecordCount.ptr(); t != nil {
		out.Total = t
		out.HasMore = boolp(float64(r.page*perPage) < *t)
	} else if out.Count < perPage {
		out.HasMore = boolp(false)
	} // a full page without a total: unknown
	return out, nil
}

func mapAPIProduct(p apiProduct) (item, string, bool) {
	id := p.ProductID.String()
	if id == "" {
		return item{}, "", false
	}
	list, sale, cur := p.TargetOriginalPrice, p.TargetSalePrice, p.TargetSalePriceCur
	if sale == nil && list == nil {
		// No target-currency prices: the source's own currency.
		list, sale, cur = p.OriginalPrice, p.SalePrice, p.SalePriceCurrency
	}
	if cur == "" {
		cur = cmp.Or(p.TargetOriginalCur, p.OriginalPriceCurrency)
	}
	price, promo := promotion(list.ptr(), sale.ptr(), nil)
	it := item{
		ID:             id,
		Image:          str(absolute(p.ProductMainImageURL)),
		Platform:       platform,
		Price:          price,
		PromotionPrice: promo,
		// evaluate_rate is the share of positive feedback ("97.5%"), not a
		// star rating: it is not a rating on any scale the pages share.
		Rating: nil,
		Sales:  p.LastestVolume.ptr(),
		Title:  str(strings.TrimSpace(p.ProductTitle)),
		Type:   "product",
		URL:    productURL(id),
	}
	return it, cur, true
}

// apiSorts are the sort ids this route serves.
func apiSorts() []string {
	var out []string
	for _, s := range sortSite {
		if _, ok := sortAPI[s]; ok {
			out = append(out, s)
		}
	}
	return out
}

// gatewayFault classifies a gateway error: refused credentials or
// signatures count against the route (401), call limits rest it, the
// platform's own failures are retried.
func gatewayFault(e apiError) *upstream.Fault {
	code := e.Code.String()
	msg := clip(cmp.Or(e.Message, e.Msg))
	f := &upstream.Fault{Kind: upstream.Rejected, Reason: "the affiliate API refused the call: " + code + " " + e.SubCode + " " + msg}
	lc := strings.ToLower(code + " " + e.SubCode)
	// The older TOP form names a call limit only in its text: code 15,
	// msg "App call limit", sub_msg "qps".
	callLimit := strings.Contains(strings.ToLower(cmp.Or(e.Message, e.Msg)), "call limit") || strings.EqualFold(strings.TrimSpace(e.SubMsg), "qps")
	switch {
	case strings.Contains(lc, "limit") || strings.Contains(lc, "frequency") || strings.Contains(lc, "flow") || callLimit:
		f.Kind = upstream.RateLimited
	case strings.Contains(lc, "sign") || strings.Contains(lc, "appkey") || strings.Contains(lc, "app_key") ||
		strings.Contains(lc, "permission") || strings.Contains(lc, "unauthorized") || strings.Contains(lc, "forbidden"):
		f.Status = http.StatusUnauthorized
	case e.Type == "ISP" || e.Type == "SYSTEM" || strings.Contains(lc, "unavailable") || strings.Contains(lc, "timeout"):
		f.Kind = upstream.ServerError
	}
	return f
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = strings.ToValidUTF8(s[:160], "") + "…"
	}
	return s
}

// flexString is an id or code the source writes as a string or a number;
// a number keeps its exact digits.
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = ""
	case len(b) > 0 && b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = flexString(strings.TrimSpace(v))
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		*s = flexString(n)
	}
	return nil
}

func (s *flexString) String() string {
	if s == nil {
		return ""
	}
	return string(*s)
}

// flexNumber is a number the source writes as a number or a numeric
// string ("12.34", "1,234"); anything else reads as unknown.
type flexNumber struct {
	f  float64
	ok bool
}

func (n *flexNumber) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		n.f, n.ok = x, true
	case string:
		f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(x), ",", ""), 64)
		if err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			n.f, n.ok = f, true
		}
	}
	return nil
}

// ptr is the value, or nil when absent or not a number.
func (n *flexNumber) ptr() *float64 {
	if n == nil || !n.ok {
		return nil
	}
	f := n.f
	return &f
}
