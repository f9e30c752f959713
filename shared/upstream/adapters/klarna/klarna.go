// Package klarna reads shopping_comparison/product from Klarna's shopping
// comparison (klarna.com/<region>/shopping, the former PriceRunner
// catalogue, whose front end and JSON it shares). Klarna publishes no
// public data API for it, so the product page is read as a pages.Site:
// Site() is wired to the direct route and the unblocking services.
//
// A product page is https://www.klarna.com/<region>/shopping/pl/cl<category>/<id>/<slug>/;
// without the slug it redirects to the canonical page. The page is
// server-rendered React: its data is the React Query cache the server
// dehydrated into <script id="initial_payload" type="application/json">,
// under __DEHYDRATED_QUERY_STATE__.queries (older pages nest it in
// __INITIAL_PROPS__). Each entry is {queryKey, state: {data, status,
// error}}; the product is the "product-detail-initial" query (product,
// brand, category, breadcrumbs, review summary, specification) and its
// retailers the "product-detail-offers" query (offers, staticOffers,
// merchants). The page also carries schema.org JSON-LD (Product,
// BreadcrumbList), used for what the cache lacks.
//
// _warnings says, in fixed sentences, when the page carried only its
// JSON-LD (so rank, installment, specifications and retailers_count, which
// only the cache has, are null) and when rating.max is assumed to be 5
// because the page gives a rating value without its scale.
package klarna

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Name is the direct route's provider name (MERIDIAN_UPSTREAM_KLARNA_URL,
// testdata/upstream/klarna/).
const Name = "klarna"

// Origin is the site's public origin.
const Origin = "https://www.klarna.com"

// Endpoint is the operation's endpoint key.
const Endpoint = "shopping_comparison/product"

// imageOrigin serves the catalogue's images: the pages give paths such as
// /product/640x640/3201350617/Sony-WH-1000XM5.jpg.
const imageOrigin = "https://owp.klarna.com"

// region is one catalogue Klarna runs its price comparison in.
type region struct {
	path    string // the path prefix: /us/shopping/…
	country string // ISO 3166-1 alpha-2, where the services fetch from
}

// regions are the catalogues of klarna.com/<region>/shopping. The path
// uses "uk" for the United Kingdom, so "gb" is accepted as an alias.
var regions = map[string]region{
	"us": {"us", "US"},
	"uk": {"uk", "GB"},
	"gb": {"uk", "GB"},
	"se": {"se", "SE"},
	"de": {"de", "DE"},
	"dk": {"dk", "DK"},
	"no": {"no", "NO"},
	"fi": {"fi", "FI"},
	"at": {"at", "AT"},
	"nl": {"nl", "NL"},
}

// defaultRegion is the catalogue when the caller names none.
const defaultRegion = "us"

// Site is Klarna's shopping comparison as a pages.Site.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.klarna.com", "klarna.com"},
		Header:  pages.BrowserHeader(""),
		Blocked: pages.BlockedBody(htmldata.Challenge),
		Operations: map[string]pages.Operation{
			Endpoint: {Build: productRequest, Parse: parseProduct},
		},
	}
}

// productRequest builds the product page's path from region, category and
// id. The registry declares their forms, so validation refuses a bad value
// with 422 before the call is reserved; the checks here are a defensive
// fallback for a call made without validation.
func productRequest(c *upstream.Call) (pages.Request, error) {
	reg, err := regionOf(c.Param("region"))
	if err != nil {
		return pages.Request{}, err
	}
	id := strings.TrimSpace(c.Param("id"))
	if !digits(id) {
		return pages.Request{}, upstream.InvalidParameterFault("id", "invalid_id",
			"id must be the numeric product id search returns, e.g. 3201350617")
	}
	cat := categoryID(c.Param("category"))
	if !digits(cat) {
		return pages.Request{}, upstream.InvalidParameterFault("category", "invalid_category",
			"category must be the catalogue category id search returns, e.g. 94 or cl94")
	}
	return pages.Request{
		Path:    "/" + reg.path + "/shopping/pl/cl" + cat + "/" + id + "/",
		Country: reg.country,
	}, nil
}

// regionOf reads the region parameter (default us).
func regionOf(v string) (region, error) {
	key := strings.ToLower(strings.TrimSpace(v))
	if key == "" {
		key = defaultRegion
	}
	reg, ok := regions[key]
	if !ok {
		return region{}, upstream.InvalidParameterFault("region", "unknown_region",
			"region must be a catalogue region of this platform: us, uk, gb, se, de, dk, no, fi, at or nl")
	}
	return reg, nil
}

// categoryID accepts the category as search gives it, "94" or "cl94".
func categoryID(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 2 && strings.EqualFold(v[:2], "cl") {
		v = v[2:]
	}
	return v
}

func digits(s string) bool {
	if s == "" || len(s) > 30 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ---- the data ----

// Product is the data of shopping_comparison/product (spec 2.7).
type Product struct {
	Article        *string      `json:"article"`
	Brand          *Brand       `json:"brand"`
	Breadcrumbs    []Ref        `json:"breadcrumbs"`
	Category       *Ref         `json:"category"`
	Description    *string      `json:"description"`
	ID             *string      `json:"id"`
	Images         []string     `json:"images"`
	Installment    *Installment `json:"installment"`
	Platform       string       `json:"platform"`
	Rank           *Rank        `json:"rank"`
	Rating         *Rating      `json:"rating"`
	RetailersCount *int64       `json:"retailers_count"`
	Specifications []Spec       `json:"specifications"`
	Title          *string      `json:"title"`
	Type           string       `json:"type"`
	URL            *string      `json:"url"`
	Warnings       []string     `json:"_warnings,omitempty"`
}

// The _warnings sentences, fixed so that callers can match them (the
// JSON-LD one lists the fields that stayed null).
const (
	warnJSONLDOnly = "The page carried only its JSON-LD product data; %s null."
	warnAssumedMax = "rating.max is assumed to be 5: the page gives the rating value without its scale."
)

// Brand is the product's brand.
type Brand struct {
	ID      *string `json:"id"`
	LogoURL *string `json:"logo_url"`
	Name    *string `json:"name"`
}

// Ref is a category or a breadcrumb.
type Ref struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	URL  *string `json:"url"`
}

// Installment is the instalment plan the page advertises.
type Installment struct {
	Currency     *string  `json:"currency"`
	InterestRate *float64 `json:"interest_rate"`
	Interval     *string  `json:"interval"`
	Price        *float64 `json:"price"`
	TermLength   *float64 `json:"term_length"`
}

// Rank is the product's popularity rank in its category ("#3 in Headphones").
type Rank struct {
	Category *string  `json:"category"`
	Rank     *float64 `json:"rank"`
}

// Rating is the product's user rating.
type Rating struct {
	Max   *float64 `json:"max"`
	Value *float64 `json:"value"`
	Votes *float64 `json:"votes"`
}

// Spec is one specification row.
type Spec struct {
	Description *string `json:"description"`
	Group       *string `json:"group"`
	Name        *string `json:"name"`
	Value       *string `json:"value"`
}

// parseProduct maps the product page.
func parseProduct(c *upstream.Call, p *pages.Page) (any, error) {
	reg, err := regionOf(c.Param("region"))
	if err != nil {
		return nil, err
	}
	size := len(p.Body)
	queries, found, err := dehydratedQueries(p.Body)
	if err != nil {
		return nil, err
	}
	var initial, offers map[string]any
	var others []map[string]any    // the other queries' data, where a page may keep specifications or ratings
	var financing []map[string]any // queries about payment terms
	for _, q := range queries {
		qm, _ := q.(map[string]any)
		state, _ := qm["state"].(map[string]any)
		switch queryKind(qm["queryKey"]) {
		case "product-detail-initial":
			if initial != nil {
				continue
			}
			if str(state["status"]) == "error" {
				if notFoundError(state["error"]) {
					return nil, upstream.NotFoundFault("the page says the product does not exist")
				}
				return nil, upstream.MalformedFault("the page's product-detail-initial query failed (%d-byte page)", size)
			}
			initial, _ = state["data"].(map[string]any)
		case "product-detail-offers":
			if offers == nil {
				offers, _ = state["data"].(map[string]any)
			}
		default:
			d := obj(state["data"])
			if d == nil {
				continue
			}
			others = append(others, d)
			if k := strings.ToLower(queryKind(qm["queryKey"])); strings.Contains(k, "financ") || strings.Contains(k, "installment") || strings.Contains(k, "payment") {
				financing = append(financing, d)
			}
		}
	}
	ld := jsonLD(p.Body)
	prod := obj(initial["product"])
	if prod == nil && initial != nil && initial["name"] != nil {
		prod = initial // a flatter payload: the product's fields at the top
	}
	if prod == nil && ld.product == nil {
		what := "no initial_payload script"
		if found {
			what = "no product-detail-initial query with a product"
		}
		return nil, upstream.MalformedFault("the product page has %s and no JSON-LD Product (%d-byte page)", what, size)
	}

	shop := Origin + "/" + reg.path + "/shopping"
	out := Product{Platform: "shopping_comparison", Type: "product"}
	out.ID = firstText(prod["id"])
	if out.ID == nil {
		out.ID = text(strings.TrimSpace(c.Param("id"))) // the id the page was served for
	}
	out.Title = firstText(prod["name"], ld.product["name"])
	if out.Title == nil {
		return nil, upstream.MalformedFault("the product has no name in the page's data or JSON-LD (%d-byte page)", size)
	}
	out.Description = firstText(prod["description"], ld.product["description"])
	out.URL = link(shop, firstOf(prod["url"], ld.product["url"]))
	if out.URL == nil && p.URL != "" {
		out.URL = &p.URL // the page fetched (after redirects when the route reports them)
	}
	out.Article = firstText(prod["articleNumber"], prod["mpn"], prod["sku"], prod["ean"], prod["gtin"],
		ld.product["mpn"], ld.product["sku"], ld.product["gtin13"], ld.product["gtin"])
	out.Images = images(firstOf(prod["images"], prod["image"], offers["images"], ld.product["image"]))
	out.Brand = brand(firstOf(initial["brand"], prod["brand"]), ld.product["brand"])
	out.Category = ref(shop, firstOf(initial["category"], prod["category"]))
	out.Breadcrumbs = crumbs(shop, firstOf(initial["breadCrumbs"], initial["breadcrumbs"], prod["breadCrumbs"], prod["breadcrumbs"]))
	if out.Breadcrumbs == nil {
		out.Breadcrumbs = crumbs(shop, ld.breadcrumbs)
	}
	if out.Category == nil {
		out.Category = lastCategory(out.Breadcrumbs)
	}
	var assumedMax bool
	out.Rating, assumedMax = rating(firstOf(initial["reviewSummary"], prod["reviewSummary"], prod["rating"], initial["rating"], anyKey(others, "reviewSummary")),
		ld.product["aggregateRating"])
	out.Rank = rank(firstOf(prod["rank"], initial["rank"], prod["popularityRank"], initial["popularityRank"], prod["ranking"], initial["ranking"]), out.Category)
	out.RetailersCount = retailers(prod, offers)
	out.Specifications = specifications(firstOf(initial["specification"], prod["specification"], initial["specifications"], prod["specifications"],
		anyKey(others, "specification")))
	// Only the product's own queries: a site-wide banner must not pass for its plan.
	out.Installment = installment(append([]map[string]any{initial, prod, offers}, financing...)...)

	if prod == nil {
		// Only the cache has these; say which stayed null.
		var missing []string
		for _, f := range []struct {
			name string
			null bool
		}{
			{"rank", out.Rank == nil},
			{"installment", out.Installment == nil},
			{"specifications", out.Specifications == nil},
			{"retailers_count", out.RetailersCount == nil},
		} {
			if f.null {
				missing = append(missing, f.name)
			}
		}
		if len(missing) > 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf(warnJSONLDOnly, fieldList(missing)))
		}
	}
	if assumedMax {
		out.Warnings = append(out.Warnings, warnAssumedMax)
	}
	return out, nil
}

// fieldList is "a is", "a and b are", "a, b and c are".
func fieldList(names []string) string {
	if len(names) == 1 {
		return names[0] + " is"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " are"
}

// ---- the dehydrated React Query cache ----

// dehydratedQueries returns the cache's queries; found says whether the
// page had the payload at all.
func dehydratedQueries(page []byte) (queries []any, found bool, err error) {
	raw, err := htmldata.ScriptByID(page, "initial_payload")
	if err != nil {
		// Some pages carry the state in an unnamed JSON script.
		for s := range htmldata.Scripts(page) {
			if bytes.Contains(s.Text, []byte("__DEHYDRATED_QUERY_STATE__")) {
				raw = s.Text
				break
			}
		}
		if raw == nil {
			return nil, false, nil
		}
	}
	var top map[string]any
	if err := decode(bytes.TrimSpace(raw), &top); err != nil {
		return nil, true, upstream.MalformedFault("the initial_payload script is not a JSON object (%d-byte page)", len(page))
	}
	state := obj(top["__DEHYDRATED_QUERY_STATE__"])
	if state == nil {
		state = obj(obj(top["__INITIAL_PROPS__"])["__DEHYDRATED_QUERY_STATE__"])
	}
	qs, _ := state["queries"].([]any)
	return qs, true, nil
}

// queryKind is a query key's first element, its kind.
func queryKind(key any) string {
	k, _ := key.([]any)
	if len(k) == 0 {
		return ""
	}
	return str(k[0])
}

// notFoundError reads a failed query's error for a 404.
func notFoundError(e any) bool {
	b, _ := json.Marshal(e)
	s := strings.ToLower(string(b))
	return strings.Contains(s, "404") || strings.Contains(s, "not_found") || strings.Contains(s, "not found")
}

// decode reads JSON keeping numbers exact (json.Number).
func decode(b []byte, out any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(out)
}

// ---- JSON-LD ----

type ldData struct {
	product     map[string]any
	breadcrumbs any // the BreadcrumbList's itemListElement
}

// jsonLD reads the page's Product and BreadcrumbList; a page without them
// (or with broken blocks) has none.
func jsonLD(page []byte) ldData {
	var out ldData
	if objs, err := htmldata.JSONLDOfType(page, "Product"); err == nil && len(objs) > 0 {
		_ = decode(objs[0], &out.product)
	}
	if objs, err := htmldata.JSONLDOfType(page, "BreadcrumbList"); err == nil && len(objs) > 0 {
		var list map[string]any
		if decode(objs[0], &list) == nil {
			out.breadcrumbs = ldCrumbs(list["itemListElement"])
		}
	}
	return out
}

// ldCrumbs turns ListItems into the cache's {name, url} shape.
func ldCrumbs(v any) any {
	items, _ := v.([]any)
	var out []any
	for _, it := range items {
		m := obj(it)
		if m == nil {
			continue
		}
		c := map[string]any{"name": m["name"]}
		switch item := m["item"].(type) {
		case string:
			c["url"] = item
		case map[string]any:
			c["url"] = firstOf(item["@id"], item["url"])
			if c["name"] == nil {
				c["name"] = item["name"]
			}
		}
		out = append(out, c)
	}
	if out == nil {
		return nil
	}
	return out
}

// ---- field mappers ----

func brand(v, ld any) *Brand {
	var b Brand
	switch x := v.(type) {
	case map[string]any:
		b.ID = text(str(x["id"]))
		b.Name = text(str(x["name"]))
		b.LogoURL = imageURL(firstOf(x["logo"], x["logoUrl"], x["image"]))
	case string:
		b.Name = text(x)
	}
	if b.Name == nil {
		switch x := ld.(type) {
		case map[string]any:
			b.Name = text(str(x["name"]))
			if b.LogoURL == nil {
				b.LogoURL = imageURL(x["logo"])
			}
		case string:
			b.Name = text(x)
		}
	}
	if b.ID == nil && b.Name == nil && b.LogoURL == nil {
		return nil
	}
	return &b
}

func ref(shop string, v any) *Ref {
	m := obj(v)
	if m == nil {
		return nil
	}
	r := Ref{ID: text(str(m["id"])), Name: text(str(m["name"])), URL: link(shop, firstOf(m["url"], m["path"]))}
	if r.ID == nil {
		r.ID = pathID(r.URL)
	}
	if r.ID == nil && r.Name == nil && r.URL == nil {
		return nil
	}
	return &r
}

// lastCategory is the deepest breadcrumb that is a category (/cl/cl<id>/).
func lastCategory(bc []Ref) *Ref {
	for i := len(bc) - 1; i >= 0; i-- {
		if bc[i].URL != nil && strings.Contains(*bc[i].URL, "/shopping/cl/") {
			c := bc[i]
			return &c
		}
	}
	return nil
}

// pathID is the catalogue id a category or tree link carries
// (/shopping/cl/cl94/… or /shopping/t/t2/…), for JSON-LD breadcrumbs
// that have no id of their own.
func pathID(u *string) *string {
	if u == nil {
		return nil
	}
	_, rest, ok := strings.Cut(*u, "/shopping/")
	if !ok {
		return nil
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || (parts[0] != "cl" && parts[0] != "t") || !strings.HasPrefix(parts[1], parts[0]) || !digits(strings.TrimPrefix(parts[1], parts[0])) {
		return nil
	}
	return &parts[1]
}

// anyKey is the first value of key in the maps.
func anyKey(ms []map[string]any, key string) any {
	for _, m := range ms {
		if v, ok := m[key]; ok && v != nil {
			return v
		}
	}
	return nil
}

func crumbs(shop string, v any) []Ref {
	items, ok := v.([]any)
	if !ok {
		return nil
	}
	out := []Ref{}
	for _, it := range items {
		if r := ref(shop, it); r != nil {
			out = append(out, *r)
		}
	}
	return out
}

// images are absolute URLs, from strings or {path|url} objects.
func images(v any) []string {
	var list []any
	switch x := v.(type) {
	case []any:
		list = x
	case nil:
		return nil
	default:
		list = []any{x}
	}
	out := []string{}
	seen := map[string]bool{}
	for _, it := range list {
		if u := imageURL(it); u != nil && !seen[*u] {
			seen[*u] = true
			out = append(out, *u)
		}
	}
	return out
}

func imageURL(v any) *string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case map[string]any:
		s = str(firstOf(x["url"], x["path"], x["contentUrl"]))
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nil
	case strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "http://"):
		return &s
	case strings.HasPrefix(s, "//"):
		s = "https:" + s
		return &s
	case strings.HasPrefix(s, "/"):
		s = imageOrigin + s
		return &s
	}
	return nil
}

// link resolves a page link: the cache writes them relative to the
// catalogue (/pl/cl94/…), sometimes from the site root (/us/shopping/…).
func link(shop string, v any) *string {
	s := strings.TrimSpace(str(v))
	switch {
	case s == "":
		return nil
	case strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "http://"):
		return &s
	case strings.HasPrefix(s, "/"):
		root := strings.TrimPrefix(shop, Origin) // /us/shopping
		if strings.HasPrefix(s, root+"/") {
			s = Origin + s
		} else {
			s = shop + s
		}
		return &s
	}
	return nil
}

// rating reads the rating; assumedMax says max is the site's five-star
// scale because the page gave a value without one.
func rating(v, ld any) (_ *Rating, assumedMax bool) {
	var r Rating
	m := obj(v)
	if inner := obj(m["rating"]); inner != nil {
		m = inner // {rating: {average, count}}
	}
	if m != nil {
		r.Value = num(firstOf(m["averageRating"], m["average"], m["score"], m["ratingValue"], m["value"]))
		r.Votes = num(firstOf(m["numberOfRatings"], m["count"], m["scoreCount"], m["ratingCount"], m["reviewCount"], m["numberOfReviews"]))
		r.Max = num(firstOf(m["maxRating"], m["maxScore"], m["bestRating"], m["scale"]))
	}
	if m := obj(ld); m != nil {
		if r.Value == nil {
			r.Value = num(m["ratingValue"])
		}
		if r.Votes == nil {
			r.Votes = num(firstOf(m["ratingCount"], m["reviewCount"]))
		}
		if r.Max == nil {
			r.Max = num(m["bestRating"])
		}
	}
	if r.Value != nil && *r.Value == 0 && r.Votes != nil && *r.Votes == 0 {
		r.Value = nil // no ratings yet: an average of 0 is not a rating
	}
	if r.Value != nil && r.Max == nil {
		five := 5.0 // the site rates on five stars
		r.Max = &five
		assumedMax = true
	}
	if r.Value == nil && r.Votes == nil {
		return nil, false
	}
	return &r, assumedMax
}

func rank(v any, cat *Ref) *Rank {
	var r Rank
	switch x := v.(type) {
	case map[string]any:
		r.Rank = num(firstOf(x["rank"], x["position"], x["value"]))
		switch c := x["category"].(type) {
		case string:
			r.Category = text(c)
		case map[string]any:
			r.Category = text(str(c["name"]))
		}
		if r.Category == nil {
			r.Category = text(str(x["categoryName"]))
		}
	default:
		r.Rank = num(x)
	}
	if r.Rank == nil || *r.Rank <= 0 {
		return nil
	}
	if r.Category == nil && cat != nil {
		r.Category = cat.Name // the page ranks a product in its own category
	}
	return &r
}

// retailers is the number of shops listing the product: the product's own
// count, else the distinct merchants of the offers the page lists.
func retailers(prod, offers map[string]any) *int64 {
	if n := num(firstOf(prod["numberOfMerchants"], prod["merchantCount"], prod["numberOfStores"], obj(prod["previewMerchants"])["count"])); n != nil {
		v := int64(*n)
		return &v
	}
	if offers == nil {
		return nil
	}
	list, ok1 := offers["offers"].([]any)
	static, ok2 := offers["staticOffers"].([]any)
	if !ok1 && !ok2 {
		return nil
	}
	seen := map[string]bool{}
	for _, o := range append(append([]any{}, list...), static...) {
		m := obj(o)
		if m == nil {
			continue
		}
		id := str(firstOf(m["merchantId"], obj(m["merchant"])["id"]))
		if id == "" {
			id = "offer:" + str(m["id"])
		}
		seen[id] = true
	}
	v := int64(len(seen))
	return &v
}

// specifications flattens sections of attributes into rows.
func specifications(v any) []Spec {
	var sections []any
	switch x := v.(type) {
	case map[string]any:
		sections, _ = firstOf(x["sections"], x["groups"]).([]any)
	case []any:
		sections = x
	}
	if sections == nil {
		return nil
	}
	out := []Spec{}
	for _, s := range sections {
		sm := obj(s)
		if sm == nil {
			continue
		}
		group := text(str(firstOf(sm["name"], sm["title"])))
		attrs, _ := firstOf(sm["attributes"], sm["specifications"]).([]any)
		for _, a := range attrs {
			am := obj(a)
			if am == nil {
				continue
			}
			row := Spec{Group: group, Name: text(str(am["name"])), Description: text(str(am["description"])), Value: specValue(am)}
			if row.Name == nil && row.Value == nil {
				continue
			}
			out = append(out, row)
		}
	}
	return out
}

// specValue joins an attribute's values (and unit) as the page shows them.
func specValue(a map[string]any) *string {
	var parts []string
	switch vs := a["values"].(type) {
	case []any:
		for _, v := range vs {
			switch x := v.(type) {
			case map[string]any:
				if s := str(firstOf(x["name"], x["value"])); s != "" {
					parts = append(parts, s)
				}
			default:
				if s := str(x); s != "" {
					parts = append(parts, s)
				}
			}
		}
	default:
		if s := str(firstOf(a["value"], vs)); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	s := strings.Join(parts, ", ")
	if unit := str(a["unit"]); unit != "" {
		s += " " + unit
	}
	return &s
}

// financingKeys name the instalment plan in the page's data.
var financingKeys = []string{"klarnaFinancing", "financing", "installment", "installments", "installmentPlan", "paymentPlan", "klarnaInstallment"}

// installment finds the advertised instalment plan near the product.
func installment(sources ...map[string]any) *Installment {
	var plan map[string]any
	for _, src := range sources {
		if plan = findPlan(src, 0); plan != nil {
			break
		}
	}
	if plan == nil {
		return nil
	}
	var in Installment
	amount := firstOf(plan["monthlyPrice"], plan["monthlyAmount"], plan["installmentAmount"], plan["pricePerInterval"], plan["price"], plan["amount"])
	if m := obj(amount); m != nil {
		in.Price = num(m["amount"])
		in.Currency = text(str(m["currency"]))
	} else {
		in.Price = num(amount)
	}
	if in.Currency == nil {
		in.Currency = text(str(plan["currency"]))
	}
	in.TermLength = num(firstOf(plan["termLength"], plan["numberOfInstallments"], plan["numberOfPayments"], plan["term"], plan["months"], plan["duration"]))
	in.InterestRate = num(firstOf(plan["interestRate"], plan["apr"], plan["annualInterestRate"], plan["interest"]))
	in.Interval = text(str(firstOf(plan["interval"], plan["frequency"], plan["paymentInterval"], plan["period"])))
	if in.Price == nil && in.TermLength == nil && in.InterestRate == nil {
		return nil
	}
	return &in
}

// findPlan looks a few levels down for a financing object (an array's
// first object counts).
func findPlan(m map[string]any, depth int) map[string]any {
	if m == nil || depth > 3 {
		return nil
	}
	for _, k := range financingKeys {
		switch x := m[k].(type) {
		case map[string]any:
			return x
		case []any:
			for _, it := range x {
				if o := obj(it); o != nil {
					return o
				}
			}
		}
	}
	for _, k := range []string{"product", "offersSummary", "klarna", "paymentOptions", "klarnaOffer"} {
		if p := findPlan(obj(m[k]), depth+1); p != nil {
			return p
		}
	}
	return nil
}

// ---- loose JSON helpers: the page's data is read field by field, so a
// changed or missing field leaves that field null instead of failing.

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// str is a string or a number's exact text; "" otherwise.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case json.Number:
		return x.String()
	}
	return ""
}

var text = upstream.Text

// firstText is the first value that is non-empty text.
func firstText(vs ...any) *string {
	for _, v := range vs {
		if s := str(v); s != "" {
			return &s
		}
	}
	return nil
}

// firstOf is the first non-nil value.
func firstOf(vs ...any) any {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// num reads a JSON number or a plain numeric string ("4.60", "0%"); text
// such as "1,000+" is not a number.
func num(v any) *float64 {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSuffix(strings.TrimSpace(x), "%")
	default:
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil
	}
	return &f
}
