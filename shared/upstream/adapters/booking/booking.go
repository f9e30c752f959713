// Package booking reads travel_booking from Booking.com's public front end,
// logged out, on the page-fetch routes (the site itself, then Zyte API,
// then ScraperAPI), with no embedded key, affiliate id or cookie:
//
//   - travel_booking/locations: the destination autocomplete its search box
//     calls, POST https://accommodations.booking.com/autocomplete.json with
//     {"query", "language", "size"}, answering {"results": [{dest_id,
//     dest_type, label, value, cc1, city_name, region, latitude, longitude,
//     nr_hotels, …}]}.
//   - travel_booking/search-attractions: the GraphQL its attractions front
//     end calls, POST https://www.booking.com/dml/graphql with the
//     SearchProducts operation (attractionsProduct.searchProducts: products,
//     filterStats, filterOptions, sorters) for a city's ufi; a location text
//     is resolved once through the autocomplete and remembered.
//   - travel_booking/search-hotels: the search results page,
//     GET /searchresults.html?dest_id=&dest_type=&checkin=&checkout=&
//     group_adults=&no_rooms=&group_children=&age=&selected_currency=&lang=&
//     offset=, whose <script type="application/json"
//     data-capla-store-data="apollo"> holds the Apollo cache of the page's
//     own FullSearch query (ROOT_QUERY.searchQueries["search({…})"]: results,
//     pagination, destinationLocation, sorters); a location text is
//     resolved as for attractions.
//   - travel_booking/hotel: the hotel page, /hotel/<cc>/<pagename>.html with
//     the stay in its query, read from its JSON-LD Hotel and the
//     b_rooms_available_and_soldout array of booking.env (rooms, their rate
//     blocks with price, meal plan, cancellation type and pay-later flag).
//     A hotel number gives no page name, so it is looked up once on the
//     results page for that one property (dest_id=<id>&dest_type=hotel,
//     whose Apollo result carries basicPropertyData.id, pageName and
//     location.countryCode) and the path is remembered.
//
// The hotel and hotel search operations are the second route after the
// site's partner API (shared/upstream/adapters/bookingdemand) where its
// credentials are configured.
//
// # Why not a plain pages.Site
//
// Two things pages.Operation does not do are needed here: a JSON POST (the
// autocomplete and the GraphQL take bodies) and a call in two fetches (a
// text or a hotel number resolved first, remembered, then the search or the
// page). So each endpoint is a composite adapter per route: HTML pages are
// still fetched by the pages layer (a one-operation Site whose request is
// given in the call's parameters, so blocks, statuses and decoding are
// classified as for every site), and JSON POSTs by post.go, which speaks
// each route's protocol (Zyte API's httpRequestMethod and httpRequestText,
// ScraperAPI's forwarded POST) with the same fault mapping. Direct is the
// site's own provider; AddToZyte and AddToScraperAPI put the endpoints on
// the shared service providers, so their names, keys and base URLs stay
// theirs.
//
// Resolutions are remembered per route (upstream.Call.Remembered keys by
// provider): a text one route resolved is resolved once more on another.
//
// Blocks: Booking.com sits behind AWS WAF, which answers a browser-less
// client with a 202 (or 405) JavaScript challenge page (window.
// awsWafCookieDomainList, gokuProps, a challenge.js from *.awswaf.com) or
// an x-amzn-waf-action header; those are Rejected, so the next route tries.
package booking

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const (
	// Name is the direct route's provider name (MERIDIAN_UPSTREAM_BOOKING_URL,
	// testdata/upstream/booking/).
	Name = "booking"
	// Origin is the site's public origin.
	Origin = "https://www.booking.com"
	// AutocompleteHost serves the destination autocomplete.
	AutocompleteHost = "accommodations.booking.com"

	platform = "travel_booking"

	// The endpoint keys.
	LocationsEndpoint    = "travel_booking/locations"
	AttractionsEndpoint  = "travel_booking/search-attractions"
	HotelEndpoint        = "travel_booking/hotel"
	SearchHotelsEndpoint = "travel_booking/search-hotels"
)

// How long resolutions are remembered: destination ids and hotel page
// names change rarely, and a stale one fails typed (404), never silently.
const (
	destinationTTL = 30 * 24 * time.Hour
	hotelPathTTL   = 30 * 24 * time.Hour
)

// pageOp is the one pages.Operation of the internal site: a GET whose
// request travels in the call's parameters (see getReq).
const pageOp = "booking#page"

// site is Booking.com as the pages layer reads its HTML pages.
func site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.booking.com", "booking.com", AutocompleteHost},
		Header:  pages.BrowserHeader("en-GB,en;q=0.9"),
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			pageOp: {Build: buildGet, Parse: func(_ *upstream.Call, p *pages.Page) (any, error) { return p, nil }},
		},
	}
}

// route is one way of fetching the site.
type route int

const (
	direct route = iota
	zyte
	scraperAPI
)

// fetcher fetches the site's pages and JSON on one route.
type fetcher struct {
	route route
	// page is the pages layer's adapter of pageOp on this route.
	page upstream.Adapter
}

// Direct is the site's own route: the provider "booking", whose base URL
// is the origin (MERIDIAN_UPSTREAM_BOOKING_URL moves it; a request for the
// autocomplete host then carries X-Forwarded-Host). It needs no
// credentials.
func Direct() *upstream.Provider {
	p := pages.Direct(site())
	p.Protocol = "Booking.com's public front end over HTTPS with browser-like headers: the destination autocomplete " +
		"(POST accommodations.booking.com/autocomplete.json), the attractions GraphQL (POST /dml/graphql, SearchProducts), " +
		"the search results page's Apollo data and the hotel page's JSON-LD and booking.env"
	p.Docs = Origin
	p.Endpoints = endpoints(fetcher{route: direct, page: p.Endpoints[pageOp]})
	return p
}

// AddToZyte adds the endpoints to the Zyte API route p (pages.Zyte(…)) and
// returns p.
func AddToZyte(p *upstream.Provider) *upstream.Provider {
	return mount(p, fetcher{route: zyte, page: pages.Zyte(site()).Endpoints[pageOp]})
}

// AddToScraperAPI adds the endpoints to the ScraperAPI route p
// (pages.ScraperAPI(…)) and returns p.
func AddToScraperAPI(p *upstream.Provider) *upstream.Provider {
	return mount(p, fetcher{route: scraperAPI, page: pages.ScraperAPI(site()).Endpoints[pageOp]})
}

func mount(p *upstream.Provider, f fetcher) *upstream.Provider {
	if p.Endpoints == nil {
		p.Endpoints = map[string]upstream.Adapter{}
	}
	for key, a := range endpoints(f) {
		if _, dup := p.Endpoints[key]; dup {
			panic("booking: " + p.Name + " already serves " + key)
		}
		p.Endpoints[key] = a
	}
	return p
}

// endpoints are the four operations on one route.
func endpoints(f fetcher) map[string]upstream.Adapter {
	return map[string]upstream.Adapter{
		LocationsEndpoint:    f.locations,
		AttractionsEndpoint:  f.attractions,
		SearchHotelsEndpoint: f.searchHotels,
		HotelEndpoint:        f.hotel,
	}
}

// The parameters that carry a GET through the pages layer. They are set
// on a copy of the call by get, never by a caller: the registry refuses
// undeclared names before any adapter runs.
const (
	paramPath  = "\x00path"
	paramQuery = "\x00query"
	paramLang  = "\x00accept-language"
)

// buildGet is pageOp's Build: the request get put in the parameters.
func buildGet(c *upstream.Call) (pages.Request, error) {
	r := pages.Request{Path: c.Params[paramPath]}
	if raw := c.Params[paramQuery]; raw != "" {
		q, err := parseQuery(raw)
		if err != nil {
			return r, upstream.MalformedFault("unusable page query: %v", err)
		}
		r.Query = q
	}
	if al := c.Params[paramLang]; al != "" {
		r.Header = http.Header{"Accept-Language": {al}}
	}
	return r, nil
}

// get fetches a page of www.booking.com on f's route; the pages layer
// classifies blocks, statuses and encodings.
func (f fetcher) get(ctx context.Context, c *upstream.Call, path string, query url.Values, lang string) (*pages.Page, error) {
	cc := *c
	cc.Params = map[string]string{paramPath: path, paramQuery: encodeQuery(query)}
	if f.route == direct {
		// The services send a browser's headers of their own (custom ones
		// weaken their ban avoidance); the page's lang parameter decides
		// its language on every route.
		cc.Params[paramLang] = acceptLanguage(lang)
	}
	v, err := f.page(ctx, &cc)
	if err != nil {
		return nil, err
	}
	p, ok := v.(*pages.Page)
	if !ok {
		return nil, upstream.MalformedFault("the page route answered %T", v)
	}
	return p, nil
}

// trimmed is s without surrounding space, nil when empty.
func trimmed(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return &s
}
