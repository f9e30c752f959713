// Package zoopla serves property_portal/locations and
// property_portal/search-sale from Zoopla (www.zoopla.co.uk), the UK
// property portal, as a pages.Site read directly and through the
// web-unblocking services.
//
// # Which portal
//
// Spec 4.7's vocabulary is Zoopla's own search vocabulary: its search URLs
// take property_sub_type=detached|semi_detached|terraced|flats|bungalow|
// farms_land|park_home, feature=has_garden|has_parking_garage|
// has_balcony_terrace, tenure=leasehold|freehold|share_of_freehold,
// new_homes=include|exclude|only, radius in miles (0.25 to 40), and its
// front end's filters name chainFree and reducedPriceOnly and sort by
// newest, highest price, lowest price or most reduced. Its search pages
// carry three listing arrays, regular, featured and extended (the
// widened-radius fallback outside the searched area), which are spec 2.7's
// items, featured and extended. Rightmove, the other UK portal, spells
// these semi-detached, flat, land, park-home, mustHave=garden,parking and
// tenureTypes=FREEHOLD, and lists one mixed array.
//
// Zoopla publishes no data API today (its developer API of the 2010s is
// closed), so both operations read what the site's own front end reads.
//
// # The typeahead (property_portal/locations)
//
// The search box asks Zoopla's GraphQL API
// (https://api-graphql-lambda.prod.zoopla.co.uk/graphql) for
// geoSuggestion(locationPrefix) and gets [{geoIdentifier, geoLabel,
// geoSubLabel}]: "bath" → {"geoIdentifier": "bath", "geoLabel": "Bath,
// Somerset"}. The identifier is the path of the area's search page
// (/for-sale/property/<identifier>/, with slashes for nested areas and
// stations: "station/greenwich") and the label its q parameter. The API
// wants an x-api-key header: the key Zoopla's own apps embed is never
// shipped here, so the operator's own key (MERIDIAN_ZOOPLA_API_KEY, one of
// the Site's Secrets, which only the direct route declares) is sent when
// one is configured on the direct route; otherwise, and always on the
// unblocking services (which carry no site's credentials), the request
// goes without one. The
// query is sent as a GraphQL GET (operationName, variables, query in the
// URL, per the GraphQL-over-HTTP convention), because every page-fetch
// route fetches URLs.
//
// # The search page (property_portal/search-sale)
//
// GET /for-sale/property/<identifier>/?q=<label>&… (pn for the page, 25
// listings a page) is a Next.js page. Today's App Router pages stream their
// data as self.__next_f.push([1, "…"]) script chunks, whose strings
// concatenate into one React Server Components payload; the older pages
// router put the same props in <script id="__NEXT_DATA__">. Both are read
// (flight.go). The payload holds regularListingsFormatted,
// featuredListingsFormatted (featuredProperties on older pages),
// extendedListingsFormatted and the pagination (pageNumber, pageNumberMax,
// totalResults, totalResultsWasLimited).
//
// # Location text, resolved once
//
// search-sale takes an area identifier (and its label) from
// property_portal/locations, or free text in location. Text is resolved
// through the typeahead on the same route and remembered
// (upstream.Call.Remembered, keyed by the normalised text and the site's
// locale, en-GB, kept for 30 days in the store shared by every instance),
// so a second search of "Bath" asks no typeahead: search-sale is a Run
// operation, the typeahead and then the search page fetched on the route
// it runs on. With neither an identifier nor text
// (spec 4.7 requires no parameter) the search is the site's nationwide
// one, /for-sale/property/uk/?q=UK, which the portal caps.
package zoopla

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const (
	// Name is the direct route's provider name (MERIDIAN_UPSTREAM_ZOOPLA_URL,
	// testdata/upstream/zoopla/).
	Name = "zoopla"
	// Origin is the site's public origin.
	Origin = "https://www.zoopla.co.uk"
	// GraphQLHost is the host of the GraphQL API the site's search box asks.
	GraphQLHost = "api-graphql-lambda.prod.zoopla.co.uk"
	// KeySecret is the operator's own key for the GraphQL API (x-api-key).
	KeySecret = "MERIDIAN_ZOOPLA_API_KEY"

	// LocationsEndpoint and SearchEndpoint are the operations' endpoint keys.
	LocationsEndpoint = "property_portal/locations"
	SearchEndpoint    = "property_portal/search-sale"

	platform = "property_portal"
	// locale is the site's only locale; resolutions are kept under it.
	locale = "en-GB"
	// resolutionTTL is how long a text-to-area resolution is kept: areas
	// and their identifiers are stable, the typeahead's ranking less so.
	resolutionTTL = 30 * 24 * time.Hour
)

// Site is Zoopla, with both operations. The integrator lists
// pages.Direct(Site()) among the direct routes and passes Site() to
// pages.Zyte and pages.ScraperAPI.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.zoopla.co.uk", "zoopla.co.uk", GraphQLHost},
		Header:  pages.BrowserHeader("en-GB,en;q=0.9"),
		Blocked: pages.BlockedBody(htmldata.Challenge),
		Operations: map[string]pages.Operation{
			LocationsEndpoint: {Build: locationsRequest, Parse: parseLocations},
			SearchEndpoint:    {Run: runSearch},
		},
		// The key is the direct route's only: the unblocking services serve
		// every site, and their providers carry no site's credentials.
		Secrets: []upstream.Secret{keySecret},
	}
}

// keySecret declares the operator's GraphQL key on the direct route:
// optional, so the route stays eligible without it.
var keySecret = upstream.Secret{
	Name: KeySecret,
	Doc: "Optional: the operator's own API key for Zoopla's GraphQL API, sent as x-api-key with the location " +
		"typeahead (property_portal/locations, and search-sale's location text). Without it the typeahead is " +
		"asked without a key, which the API may refuse; search-sale with an identifier needs no key.",
}

// runSearch runs search-sale with an area: the caller's identifier, or
// the remembered (else freshly looked up) resolution of the location text
// on the same route; with neither, the search is nationwide.
func runSearch(ctx context.Context, c *upstream.Call, fetch pages.Fetch) (any, error) {
	if text := normalise(c.Param("location")); strings.TrimSpace(c.Param("identifier")) == "" && text != "" {
		v, err := c.Remembered(ctx, memoKey(text), resolutionTTL, func(ctx context.Context) (string, error) {
			a, err := resolve(ctx, c, fetch, text)
			if err != nil {
				return "", err
			}
			return a.identifier + "\n" + a.label, nil
		})
		if err != nil {
			return nil, err
		}
		id, label, _ := strings.Cut(v, "\n")
		c = withParams(c, map[string]string{"identifier": id, "label": label})
	}
	r, err := searchRequest(c)
	if err != nil {
		return nil, err
	}
	p, err := fetch(ctx, r)
	if err != nil {
		return nil, err
	}
	return parseSearch(c, p)
}

// memoKey is the remembered resolution's key: the site's locale and the
// normalised text, so "Bath", " bath " and "BATH" share one resolution.
func memoKey(text string) string { return "typeahead|" + locale + "|" + text }

// normalise lowercases the text and collapses its white space.
func normalise(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// area is one resolved area.
type area struct{ identifier, label string }

// resolve asks the route's typeahead for the text, as
// property_portal/locations does, and picks the area.
func resolve(ctx context.Context, c *upstream.Call, fetch pages.Fetch, text string) (area, error) {
	lc := withParams(c, map[string]string{"query": text, "limit": "10"})
	r, err := locationsRequest(lc)
	if err != nil {
		return area{}, err
	}
	p, err := fetch(ctx, r)
	if err != nil {
		return area{}, err
	}
	out, err := parseLocations(lc, p)
	if err != nil {
		return area{}, err
	}
	res, ok := out.(Locations)
	if !ok {
		return area{}, upstream.MalformedFault("the typeahead mapped %T", out)
	}
	a, ok := pick(res.Items, text)
	if !ok {
		return area{}, upstream.InvalidParameterFault("location", "unknown_location",
			"The portal's location lookup knows no area for this text; try a town, area or postcode, or an identifier from property_portal/locations.")
	}
	return a, nil
}

// pick chooses the suggestion a person typing the text would take: one
// whose label (or its part before the first comma) is the text, else the
// typeahead's first area that is not a school's catchment, else its first.
func pick(items []Location, text string) (area, bool) {
	var first, firstArea *Location
	for i := range items {
		it := &items[i]
		if it.Identifier == nil || *it.Identifier == "" {
			continue
		}
		label := deref(it.Label)
		head, _, _ := strings.Cut(label, ",")
		if normalise(label) == text || normalise(head) == text {
			return area{*it.Identifier, label}, true
		}
		if first == nil {
			first = it
		}
		if firstArea == nil && !strings.HasPrefix(*it.Identifier, "schools/") {
			firstArea = it
		}
	}
	switch {
	case firstArea != nil:
		return area{*firstArea.Identifier, deref(firstArea.Label)}, true
	case first != nil:
		return area{*first.Identifier, deref(first.Label)}, true
	}
	return area{}, false
}

// withParams is a copy of the call with some parameters set; the copy
// shares the attempt's admission, client and memory.
func withParams(c *upstream.Call, set map[string]string) *upstream.Call {
	cp := *c
	cp.Params = make(map[string]string, len(c.Params)+len(set))
	for k, v := range c.Params {
		cp.Params[k] = v
	}
	for k, v := range set {
		cp.Params[k] = v
	}
	return &cp
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

var str = upstream.Text

// absolute makes a site path absolute on the origin; other values pass
// only when they already are http(s) URLs.
func absolute(v string) *string {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return nil
	case strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "//"):
		s := Origin + v
		return &s
	}
	if u, err := url.Parse(v); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		return &v
	}
	return nil
}
