package zoopla

import (
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const (
	// perPage is the portal's page size for search results.
	perPage = 25
	// nationwide is the portal's area of the whole country, and its label.
	nationwide, nationwideLabel = "uk", "UK"
)

// The site's own values for spec 4.7's enumerations.
var (
	sortValues = map[string]string{
		"newest": "newest_listings", "highest_price": "highest_price",
		"lowest_price": "lowest_price", "most_reduced": "most_reduced",
	}
	addedValues = map[string]string{"1": "24_hours", "3": "3_days", "7": "7_days", "14": "14_days", "30": "30_days"}
	// The three flags the site takes as is_<kind>=false (exclude) or true
	// (only), and leaves out to include; new_homes takes the word itself.
	flagParams  = map[string]string{"retirement_homes": "is_retirement_home", "auction": "is_auction", "shared_ownership": "is_shared_ownership"}
	showOnly    = map[string]string{"chainFree": "chain_free", "reducedPriceOnly": "reduced_price_only"}
	rangeParams = [][2]string{
		{"min_price", "price_min"}, {"max_price", "price_max"},
		{"min_bedrooms", "beds_min"}, {"max_bedrooms", "beds_max"},
		{"min_bathrooms", "baths_min"}, {"max_bathrooms", "baths_max"},
	}
)

// segment is one part of an area identifier: the site's lowercase slugs.
var segment = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// searchRequest builds the area's search page URL in the site's own form.
func searchRequest(c *upstream.Call) (pages.Request, error) {
	id, err := identifier(c.Param("identifier"))
	if err != nil {
		return pages.Request{}, err
	}
	label := strings.Join(strings.Fields(c.Param("label")), " ")
	if id == "" {
		if strings.TrimSpace(c.Param("location")) != "" {
			// runSearch resolves the text before this runs.
			return pages.Request{}, upstream.MalformedFault("search-sale's location text was not resolved")
		}
		// No area at all (spec 4.7 requires none): the whole country.
		id, label = nationwide, nationwideLabel
	}
	q := url.Values{}
	if label == "" {
		label = id
	}
	q.Set("q", label)
	q.Set("search_source", "for-sale")
	if v := c.Param("radius"); v != "" {
		q.Set("radius", v)
	}
	for _, r := range rangeParams {
		if v := c.Param(r[0]); v != "" {
			q.Set(r[1], wholeNumber(v))
		}
	}
	for _, t := range list(c.Param("property_type")) {
		q.Add("property_sub_type", t)
	}
	if v, ok := sortValues[c.Param("sort")]; ok {
		q.Set("results_sort", v)
	}
	if v := strings.TrimSpace(c.Param("keywords")); v != "" {
		q.Set("keywords", v)
	}
	// Must-haves and feature codes are both the site's feature filter.
	var features []string
	for _, f := range append(list(c.Param("must_have")), list(c.Param("features"))...) {
		if !slices.Contains(features, f) {
			features = append(features, f)
		}
	}
	for _, f := range features {
		q.Add("feature", f)
	}
	if v, ok := addedValues[c.Param("added")]; ok {
		q.Set("added", v)
	}
	switch strings.ToLower(c.Param("include_sold")) {
	case "true":
		q.Set("include_sold", "true")
	case "false":
		q.Set("include_sold", "false")
	}
	if v := c.Param("new_homes"); v != "" {
		q.Set("new_homes", v)
	}
	for name, param := range flagParams {
		switch c.Param(name) {
		case "exclude":
			q.Set(param, "false")
		case "only":
			q.Set(param, "true")
		}
	}
	for _, s := range list(c.Param("show_only")) {
		if param, ok := showOnly[s]; ok {
			q.Set(param, "true")
		}
	}
	for _, t := range list(c.Param("ownership")) {
		q.Add("tenure", t)
	}
	if page := pageOf(c); page > 1 {
		q.Set("pn", strconv.Itoa(page))
	}
	return pages.Request{Path: "/for-sale/property/" + id + "/", Query: q, Country: "GB"}, nil
}

// identifier checks an area identifier: slash-separated lowercase slugs
// (bath, london/ealing, station/greenwich), so it can only name a search
// page on the site. "" when none was given.
func identifier(v string) (string, error) {
	id := strings.Trim(strings.ToLower(strings.TrimSpace(v)), "/")
	if id == "" {
		return "", nil
	}
	parts := strings.Split(id, "/")
	for _, p := range parts {
		if !segment.MatchString(p) {
			return "", upstream.InvalidParameterFault("identifier", "invalid_identifier",
				"identifier is an area identifier from property_portal/locations, such as bath or station/greenwich.")
		}
	}
	if len(parts) > 6 {
		return "", upstream.InvalidParameterFault("identifier", "invalid_identifier", "identifier has too many parts.")
	}
	return id, nil
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

// wholeNumber writes 250000.0 as 250000; the site's filters are whole.
func wholeNumber(v string) string {
	if f, err := strconv.ParseFloat(v, 64); err == nil && f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return v
}

func pageOf(c *upstream.Call) int {
	if n, err := strconv.Atoi(c.Param("page")); err == nil && n >= 1 {
		return n
	}
	return 1
}

// Result is the data of property_portal/search-sale.
type Result struct {
	Warnings []string  `json:"_warnings,omitempty"`
	Channel  string    `json:"channel"`
	Count    int       `json:"count"`
	Cursor   *string   `json:"cursor"`
	Extended []Listing `json:"extended"`
	Featured []Listing `json:"featured"`
	HasMore  *bool     `json:"has_more"`
	Items    []Listing `json:"items"`
	Location Place     `json:"location"`
	Page     int       `json:"page"`
	Pages    *int      `json:"pages"`
	Total    *float64  `json:"total"`
}

// Place is the searched area.
type Place struct {
	Identifier string  `json:"identifier"`
	Name       *string `json:"name"`
}

// Listing is one property for sale.
type Listing struct {
	Address        *string    `json:"address"`
	Agent          *Agent     `json:"agent"`
	Bathrooms      *float64   `json:"bathrooms"`
	Bedrooms       *float64   `json:"bedrooms"`
	Currency       string     `json:"currency"`
	Flag           *string    `json:"flag"`
	FloorArea      *FloorArea `json:"floor_area"`
	FloorplanCount *float64   `json:"floorplan_count"`
	Highlights     []any      `json:"highlights"`
	ID             string     `json:"id"`
	ImageCount     *float64   `json:"image_count"`
	ImageURL       *string    `json:"image_url"`
	Images         []string   `json:"images"`
	ListedOn       *string    `json:"listed_on"`
	LivingRooms    *float64   `json:"living_rooms"`
	Platform       string     `json:"platform"`
	Premium        *bool      `json:"premium"`
	Price          *float64   `json:"price"`
	PriceDrop      *bool      `json:"price_drop"`
	PriceLabel     *string    `json:"price_label"`
	PriceQualifier *string    `json:"price_qualifier"`
	PropertyType   *string    `json:"property_type"`
	ShortPrice     *string    `json:"short_price"`
	Summary        *string    `json:"summary"`
	Tags           []string   `json:"tags"`
	Title          *string    `json:"title"`
	Transports     []any      `json:"transports"`
	Type           string     `json:"type"`
	UnderOffer     *bool      `json:"under_offer"`
	URL            *string    `json:"url"`
	VideoCount     *float64   `json:"video_count"`
}

// Agent is the listing's branch.
type Agent struct {
	ID      *string `json:"id"`
	LogoURL *string `json:"logo_url"`
	Name    *string `json:"name"`
	Phone   *string `json:"phone"`
	URL     *string `json:"url"`
}

// FloorArea is the floor area the listing states: the value in its units
// (sq_ft or sq_m), the text shown, and where the site took it from.
type FloorArea struct {
	Label  *string  `json:"label"`
	Source *string  `json:"source"`
	Units  *string  `json:"units"`
	Value  *float64 `json:"value"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	warnCapped = "The portal serves only the first pages of this search's matches (pages says how many); " +
		"narrow the filters to reach the listings beyond them."
	warnBeyond   = "The page asked for is beyond the last page the portal serves for this search."
	warnExtended = "extended holds listings outside the searched area that the portal adds when few match; " +
		"they are not in items or count."
	warnNoArea = "No listing states a floor area; floor_area is null for those."
)

// parseSearch maps the search page's embedded listings and pagination.
func parseSearch(c *upstream.Call, p *pages.Page) (any, error) {
	text, stream, err := embedded(p.Body)
	if err != nil {
		return nil, err
	}
	regular, ok, err := listingArray(text, stream, "regularListingsFormatted")
	if err == nil && !ok {
		// The search API's form: listings {regular, featured, extended}.
		regular, ok, err = nestedListings(text, stream, "regular")
	}
	if err != nil {
		return nil, upstream.MalformedFault("the regular listings do not decode (%s) in a %d-byte page", err, len(p.Body))
	}
	if !ok {
		return nil, upstream.MalformedFault("no regularListingsFormatted in the embedded data of a %d-byte page", len(p.Body))
	}
	featured, _, err := firstListings(text, stream, "featuredListingsFormatted", "featuredProperties")
	if err == nil && featured == nil {
		featured, _, err = nestedListings(text, stream, "featured")
	}
	if err != nil {
		return nil, upstream.MalformedFault("the featured listings do not decode (%s) in a %d-byte page", err, len(p.Body))
	}
	extended, _, err := listingArray(text, stream, "extendedListingsFormatted")
	if err == nil && extended == nil {
		extended, _, err = nestedListings(text, stream, "extended")
	}
	if err != nil {
		return nil, upstream.MalformedFault("the extended listings do not decode (%s) in a %d-byte page", err, len(p.Body))
	}

	id, _ := identifier(c.Param("identifier"))
	label := strings.Join(strings.Fields(c.Param("label")), " ")
	if id == "" {
		id, label = nationwide, nationwideLabel
	}
	res := Result{
		Channel:  "for-sale",
		Items:    mapListings(regular),
		Featured: mapListings(featured),
		Extended: mapListings(extended),
		Location: Place{Identifier: id, Name: str(label)},
		Page:     pageOf(c),
	}
	if res.Featured == nil {
		res.Featured = []Listing{}
	}
	if res.Extended == nil {
		res.Extended = []Listing{}
	}
	res.Count = len(res.Items)
	if n, ok := number(text, "pageNumber"); ok && n >= 1 {
		res.Page = int(n)
	}
	if n, ok := number(text, "pageNumberMax"); ok && n >= 0 {
		pages := int(n)
		res.Pages = &pages
	}
	if n, ok := number(text, "totalResults"); ok && n >= 0 {
		res.Total = &n
	}
	switch {
	case res.Pages != nil:
		more := res.Page < *res.Pages
		res.HasMore = &more
	case res.Total != nil:
		more := float64(res.Page*perPage) < *res.Total
		res.HasMore = &more
	case res.Count == 0:
		more := false
		res.HasMore = &more
	}

	limited := false
	if v, ok := member(text, "totalResultsWasLimited"); ok {
		_ = json.Unmarshal(v, &limited)
	}
	if limited || (res.Pages != nil && res.Total != nil && *res.Total > float64(*res.Pages*perPage)) {
		res.Warnings = append(res.Warnings, warnCapped)
	}
	if res.Pages != nil && *res.Pages > 0 && res.Page > *res.Pages && res.Count == 0 {
		res.Warnings = append(res.Warnings, warnBeyond)
	}
	if len(res.Extended) > 0 {
		res.Warnings = append(res.Warnings, warnExtended)
	}
	if res.Count > 0 && !slices.ContainsFunc(res.Items, func(l Listing) bool { return l.FloorArea != nil }) {
		res.Warnings = append(res.Warnings, warnNoArea)
	}
	return res, nil
}

// listingArray decodes the first member named key that is a list; ok is
// false when there is none (a null counts as none).
func listingArray(text []byte, stream bool, key string) ([]map[string]any, bool, error) {
	for _, raw := range members(text, key) {
		rows, ok, err := rowsOf(raw, stream)
		if err != nil || ok {
			return rows, ok, err
		}
	}
	return nil, false, nil
}

func firstListings(text []byte, stream bool, keys ...string) ([]map[string]any, bool, error) {
	for _, k := range keys {
		if rows, ok, err := listingArray(text, stream, k); err != nil || ok {
			return rows, ok, err
		}
	}
	return nil, false, nil
}

// nestedListings reads listings.<kind>, the search API's form.
func nestedListings(text []byte, stream bool, kind string) ([]map[string]any, bool, error) {
	for _, raw := range members(text, "listings") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			continue
		}
		if v, ok := obj[kind]; ok {
			return rowsOf(v, stream)
		}
	}
	return nil, false, nil
}

// rowsOf decodes a list of listing objects; entries that are not objects
// are skipped.
func rowsOf(raw json.RawMessage, stream bool) ([]map[string]any, bool, error) {
	v, err := decodeLoose(raw, stream)
	if err != nil {
		return nil, false, err
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false, nil
	}
	rows := make([]map[string]any, 0, len(list))
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			rows = append(rows, m)
		}
	}
	return rows, true, nil
}

// number is the first member named key holding a number (or a numeric
// string, as the analytics copies write them).
func number(text []byte, key string) (float64, bool) {
	for _, raw := range members(text, key) {
		if f, ok := num(jsonValue(raw)); ok {
			return f, true
		}
	}
	return 0, false
}

func jsonValue(raw json.RawMessage) any {
	v, err := decodeLoose(raw, false)
	if err != nil {
		return nil
	}
	return v
}

func mapListings(rows []map[string]any) []Listing {
	if rows == nil {
		return nil
	}
	out := make([]Listing, 0, len(rows))
	for _, m := range rows {
		if l, ok := mapListing(m); ok {
			out = append(out, l)
		}
	}
	return out
}

// mapListing maps one formatted listing; one without an id is not a
// listing anyone could open, and is left out.
func mapListing(m map[string]any) (Listing, bool) {
	id := idOf(m["listingId"])
	if id == "" {
		return Listing{}, false
	}
	l := Listing{
		ID:             id,
		Platform:       platform,
		Type:           "listing",
		Currency:       "GBP",
		Address:        strField(m, "address"),
		Title:          strField(m, "title"),
		Summary:        strField(m, "summaryDescription"),
		Flag:           strField(m, "flag"),
		PriceLabel:     strField(m, "price"),
		PriceQualifier: strField(m, "priceTitle"),
		ShortPrice:     strField(m, "shortPriceTitle"),
		PropertyType:   strField(m, "propertyType"),
		Premium:        boolean(m, "isPremium"),
		UnderOffer:     boolean(m, "underOffer"),
		ImageCount:     count(m, "numberOfImages"),
		FloorplanCount: count(m, "numberOfFloorPlans"),
		VideoCount:     count(m, "numberOfVideos"),
		Highlights:     array(m, "highlights"),
		Transports:     array(m, "transports"),
		Tags:           tags(m["tags"]),
		ListedOn:       isoDay(m["publishedOn"]),
		PriceDrop:      priceDrop(m),
		FloorArea:      floorArea(m),
	}
	if uris, ok := m["listingUris"].(map[string]any); ok {
		l.URL = absolute(textOf(uris["detail"]))
	}
	if l.URL == nil {
		u := Origin + "/for-sale/details/" + url.PathEscape(id) + "/"
		l.URL = &u
	}
	l.Price = price(m)
	l.Bedrooms = feature(m, "bed")
	l.Bathrooms = feature(m, "bath")
	l.LivingRooms = feature(m, "chair")
	if b, ok := m["branch"].(map[string]any); ok {
		a := Agent{
			ID:      str(idOf(b["branchId"])),
			Name:    strField(b, "name"),
			Phone:   strField(b, "phone"),
			LogoURL: absolute(textOf(b["logoUrl"])),
			URL:     absolute(textOf(b["branchDetailsUri"])),
		}
		// A branch object that names nothing ({"__typename":"Branch"}) is
		// no agent.
		if a != (Agent{}) {
			l.Agent = &a
		}
	}
	l.ImageURL, l.Images = pictures(m)
	return l, true
}

// price is the asking price in pounds: the listing's unformatted number,
// else the shown price when it is nothing but a sum ("£450,000"). A price
// shown only as words ("POA", "Offers invited") stays in price_label.
func price(m map[string]any) *float64 {
	if f, ok := num(m["priceUnformatted"]); ok && f > 0 {
		return &f
	}
	s := strings.TrimSpace(textOf(m["price"]))
	if !strings.HasPrefix(s, "£") {
		return nil
	}
	digits := strings.ReplaceAll(strings.TrimSpace(strings.TrimPrefix(s, "£")), ",", "")
	if f, err := strconv.ParseFloat(digits, 64); err == nil && f > 0 && !strings.ContainsAny(digits, "eE+-") {
		return &f
	}
	return nil
}

// priceDrop reads priceDrop: null, or an object that states nothing
// ({"__typename":"PriceDrop","lastPriceChangeDate":"",…} on every
// listing of 2022 pages), is no drop; one with a date or a percentage is a
// drop; absent is unknown.
func priceDrop(m map[string]any) *bool {
	v, present := m["priceDrop"]
	if !present {
		return nil
	}
	drop := stated(v)
	return &drop
}

// stated reports whether a value says anything: a non-blank string, true,
// a non-zero number, or a list or object holding one. GraphQL's meta
// members (__typename, __isNode) name the schema's types and are never
// data, so an object of them and empty fields states nothing.
func stated(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x) != ""
	case bool:
		return x
	case json.Number, float64:
		f, ok := num(x)
		return ok && f != 0
	case []any:
		return slices.ContainsFunc(x, stated)
	case map[string]any:
		for k, f := range x {
			if !isMeta(k) && stated(f) {
				return true
			}
		}
	}
	return false
}

// isMeta tells GraphQL's meta members (__typename, __isNode, …).
func isMeta(key string) bool { return strings.HasPrefix(key, "__") }

// withoutMeta is a copy of a passed-through value without GraphQL's meta
// members at any depth.
func withoutMeta(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutMeta(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !isMeta(k) {
				out[k] = withoutMeta(e)
			}
		}
		return out
	}
	return v
}

// feature reads one of the little figures under a result,
// {"iconId": "bed", "content": 3}: bed, bath, chair (living rooms).
func feature(m map[string]any, icon string) *float64 {
	for _, e := range asList(m["features"]) {
		f, ok := e.(map[string]any)
		if !ok || textOf(f["iconId"]) != icon {
			continue
		}
		if n, ok := num(f["content"]); ok && n >= 0 {
			return &n
		}
		return nil
	}
	return nil
}

// floorArea is the stated floor area: a floorArea object, the area figure
// under the result, or sizeSqft; sizeSource says where the site took it.
func floorArea(m map[string]any) *FloorArea {
	fa := &FloorArea{Source: strField(m, "sizeSource")}
	if o, ok := m["floorArea"].(map[string]any); ok {
		if v, ok := num(o["value"]); ok {
			fa.Value = &v
		}
		fa.Label = strField(o, "label")
		fa.Units = unitsOf(firstText(o, "units", "unitsLabel"))
		if s := strField(o, "source"); s != nil {
			fa.Source = s
		}
	}
	if fa.Value == nil {
		for _, e := range asList(m["features"]) {
			f, ok := e.(map[string]any)
			if !ok || textOf(f["iconId"]) != "area" {
				continue
			}
			switch c := f["content"].(type) {
			case string:
				fa.Label = str(strings.TrimSpace(c))
				fa.Value, fa.Units = areaText(c)
			default:
				if v, ok := num(c); ok {
					fa.Value, fa.Units = &v, str("sq_ft") // the site's figures are square feet
				}
			}
			break
		}
	}
	if fa.Value == nil {
		if v, ok := num(m["sizeSqft"]); ok && v > 0 {
			fa.Value, fa.Units = &v, str("sq_ft")
		}
	}
	if fa.Value == nil && fa.Label == nil {
		return nil
	}
	return fa
}

// areaText reads "1,100 sq. ft" or "102 sq. m".
func areaText(s string) (*float64, *string) {
	fields := strings.Fields(strings.ReplaceAll(s, ",", ""))
	if len(fields) == 0 {
		return nil, nil
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || v <= 0 {
		return nil, nil
	}
	return &v, unitsOf(strings.Join(fields[1:], " "))
}

// unitsOf names area units sq_ft or sq_m; others pass through.
func unitsOf(s string) *string {
	l := strings.ToLower(strings.TrimSpace(s))
	switch {
	case l == "":
		return nil
	case strings.Contains(l, "ft"), strings.Contains(l, "feet"):
		return str("sq_ft")
	case strings.Contains(l, "m²"), strings.Contains(l, "sq. m"), strings.Contains(l, "sq m"), l == "sqm", l == "sq_m", l == "m2", strings.Contains(l, "metre"), strings.Contains(l, "meter"):
		return str("sq_m")
	}
	return &l
}

// webURL passes an absolute http(s) URL (pictures live on the image CDN,
// never on the site's own paths).
func webURL(v string) *string {
	if strings.HasPrefix(strings.TrimSpace(v), "/") {
		return nil
	}
	return absolute(v)
}

// pictures are the listing's main image and its gallery's images. 2022
// pages had no gallery but otherPropertyImages, [{small, large, caption}]
// without the main image, which then leads the list.
func pictures(m map[string]any) (*string, []string) {
	var main *string
	if img, ok := m["image"].(map[string]any); ok {
		main = webURL(textOf(img["src"]))
	}
	var images []string
	gallery, ok := m["gallery"].([]any)
	if ok {
		images = []string{}
	} else if gallery, ok = m["otherPropertyImages"].([]any); ok {
		images = []string{}
		if main != nil {
			images = append(images, *main)
		}
	}
	for _, e := range gallery {
		var u *string
		switch x := e.(type) {
		case string:
			u = webURL(x)
		case []any:
			for _, y := range x {
				if u = webURL(textOf(y)); u != nil {
					break
				}
			}
		case map[string]any:
			u = webURL(firstString(textOf(x["src"]), textOf(x["url"]), textOf(x["large"]), textOf(x["small"])))
		}
		if u != nil && !slices.Contains(images, *u) {
			images = append(images, *u)
		}
	}
	if main == nil && len(images) > 0 {
		main = &images[0]
	}
	return main, images
}

// tags are the listing's tags as text: strings, or {"content": …}.
func tags(v any) []string {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	out := []string{}
	for _, e := range l {
		var s string
		switch x := e.(type) {
		case string:
			s = x
		case map[string]any:
			s = firstString(textOf(x["content"]), textOf(x["label"]))
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// isoDay reads the site's "30th May 2022" as 2022-05-30.
func isoDay(v any) *string {
	f := strings.Fields(textOf(v))
	if len(f) != 3 {
		return nil
	}
	day := strings.TrimRight(strings.ToLower(f[0]), "stndrh")
	month := f[1]
	if len(month) > 3 {
		month = month[:3]
	}
	t, err := time.Parse("2 Jan 2006", day+" "+strings.ToUpper(month[:1])+strings.ToLower(month[1:])+" "+f[2])
	if err != nil {
		return nil
	}
	s := t.Format("2006-01-02")
	return &s
}

// idOf is an id exactly as the source writes it, string or number.
func idOf(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case json.Number:
		return x.String()
	}
	return ""
}

func num(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(x), ",", ""), 64)
		return f, err == nil
	}
	return 0, false
}

func count(m map[string]any, key string) *float64 {
	if f, ok := num(m[key]); ok && f >= 0 {
		return &f
	}
	return nil
}

func boolean(m map[string]any, key string) *bool {
	if b, ok := m[key].(bool); ok {
		return &b
	}
	return nil
}

func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func strField(m map[string]any, key string) *string { return str(strings.TrimSpace(textOf(m[key]))) }

func firstText(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s := strings.TrimSpace(textOf(m[k])); s != "" {
			return s
		}
	}
	return ""
}

func firstString(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// array passes an element list through as the site gives it (elements
// not shown by the spec) but for GraphQL's meta members; absent is null.
func array(m map[string]any, key string) []any {
	l, ok := m[key].([]any)
	if !ok {
		return nil
	}
	return withoutMeta(l).([]any)
}
