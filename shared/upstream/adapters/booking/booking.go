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
// # One site, several fetches
//
// booking.Site() is a pages.Site like every other, read directly, then
// through Zyte API and ScraperAPI (the integrator lists it in Sites()).
// Locations is one POST (Build and Parse); the other operations are Run
// operations of two fetches on the route they run on: a location text or
// a hotel number resolved first and remembered, then the GraphQL POST,
// the results page or the hotel page. The pages layer speaks each
// route's protocol for the POSTs too (Zyte API's httpRequestMethod and
// httpRequestText, ScraperAPI's forwarded POST) and classifies every
// answer the same way. The accept-language of the requested language and
// the sec-fetch-site of the autocomplete's sibling host are the direct
// route's browser's only (Request.DirectHeader); the lang parameter
// decides the language on every route.
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

// Site is Booking.com's public front end with its four operations. The
// integrator lists it in adapters.Sites(), after the partner API's
// provider (bookingdemand) in route order.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.booking.com", "booking.com", AutocompleteHost},
		Header:  pages.BrowserHeader("en-GB,en;q=0.9"),
		Blocked: blocked,
		Protocol: "Booking.com's public front end over HTTPS with browser-like headers: the destination autocomplete " +
			"(POST accommodations.booking.com/autocomplete.json), the attractions GraphQL (POST /dml/graphql, SearchProducts), " +
			"the search results page's Apollo data and the hotel page's JSON-LD and booking.env",
		Operations: map[string]pages.Operation{
			LocationsEndpoint:    {Build: locationsRequest, Parse: parseLocations},
			AttractionsEndpoint:  {Run: run(fetcher.attractions)},
			SearchHotelsEndpoint: {Run: run(fetcher.searchHotels)},
			HotelEndpoint:        {Run: run(fetcher.hotel)},
		},
	}
}

// run adapts an operation of several fetches to pages.Operation.Run.
func run(op func(fetcher, context.Context, *upstream.Call) (any, error)) func(context.Context, *upstream.Call, pages.Fetch) (any, error) {
	return func(ctx context.Context, c *upstream.Call, fetch pages.Fetch) (any, error) {
		return op(fetcher{fetch: fetch}, ctx, c)
	}
}

// fetcher fetches the site's pages and JSON on the route an operation
// runs on.
type fetcher struct{ fetch pages.Fetch }

// get fetches a page of www.booking.com; the pages layer classifies
// blocks, statuses and encodings. The direct route's browser asks for the
// page's language; the services send a browser's headers of their own
// (custom ones weaken their ban avoidance), and the page's lang parameter
// decides its language on every route.
func (f fetcher) get(ctx context.Context, path string, query url.Values, lang string) (*pages.Page, error) {
	return f.fetch(ctx, pages.Request{Path: path, Query: query, DirectHeader: http.Header{"Accept-Language": {acceptLanguage(lang)}}})
}

// postReq is a JSON POST the site's own front end makes.
type postReq struct {
	host  string // "" for www.booking.com
	path  string
	query url.Values
	// header holds what the site's fetch sends beyond a browser's defaults
	// (its referer, its own x-booking-* headers).
	header http.Header
	body   []byte
	lang   string
}

// request is r as the pages layer sends it: the front end's fetch() from
// a www.booking.com page, same-site for the autocomplete's host.
func (r postReq) request() pages.Request {
	browser := http.Header{"Accept-Language": {acceptLanguage(r.lang)}}
	if r.host != "" {
		browser.Set("Sec-Fetch-Site", "same-site")
	}
	return pages.Request{Method: http.MethodPost, Host: r.host, Path: r.path, Query: r.query, Header: r.header,
		DirectHeader: browser, JSON: true, Body: r.body, ContentType: "application/json"}
}

// post sends r; the pages layer classifies the answer.
func (f fetcher) post(ctx context.Context, r postReq) (*pages.Page, error) {
	return f.fetch(ctx, r.request())
}

// trimmed is s without surrounding space, nil when empty.
func trimmed(s string) *string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	return &s
}
