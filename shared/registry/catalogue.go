package registry

import (
	"net/http"
	"sort"
	"sync"
	"time"
)

// The declarations below follow spec 4.2, 4.3, 4.6 and 4.7 parameter for
// parameter. Operations the spec names without details (Origin SpecNamed)
// carry a Decision saying what their upstream needs; ARCHITECTURE.md
// collects those choices.

// metered is the default 30-day fair-use ceiling of upstream attempts for
// an endpoint whose upstreams are scarce (browser sessions, fan-outs,
// pages fetched through paid web-unblocking services):
// generous for any real workload, a stop for runaway loops.
const metered = 20_000

// profilePlatforms have a profile operation ({platform}/profile), which
// web/social-profiles starts from.
var profilePlatforms = []string{"photo_social", "short_video_a", "microblog_a", "microblog_b", "microblog_c", "video_platform", "code_host"}

// The hosts whose pages a commerce platform's URL parameters may name
// (OnHosts): each host covers its subdomains, so country and mobile
// subdomains (es.aliexpress.com, m.aliexpress.com, www.etsy.com) need no
// entry of their own. Short-link domains of their own (amzn.to, etsy.me)
// are left out: what they point at is known only after a fetch, and the
// URL policy checks addresses, not platforms.
var (
	// marketplace_a (AliExpress): the global site, the US site and the
	// Russian site; country versions are subdomains of aliexpress.com.
	marketplaceAHosts = []string{"aliexpress.com", "aliexpress.us", "aliexpress.ru"}
	// marketplace_b (Amazon): one domain per marketplace, as the Selling
	// Partner API lists them (developer-docs.amazon.com/sp-api/docs/marketplace-ids):
	// North America, Europe (with the Middle East, Africa and India), Far East.
	marketplaceBHosts = []string{
		"amazon.com", "amazon.ca", "amazon.com.mx", "amazon.com.br",
		"amazon.ie", "amazon.es", "amazon.co.uk", "amazon.fr", "amazon.com.be", "amazon.nl", "amazon.de",
		"amazon.it", "amazon.se", "amazon.co.za", "amazon.pl", "amazon.eg", "amazon.com.tr", "amazon.sa",
		"amazon.ae", "amazon.in",
		"amazon.sg", "amazon.com.au", "amazon.co.jp",
	}
	// craft_market (Etsy): every listing and shop page is on etsy.com.
	craftMarketHosts = []string{"etsy.com"}
	// photo_social (Instagram): posts and reels on instagram.com (www., m.)
	// and the instagr.am short domain.
	photoSocialHosts = []string{"instagram.com", "instagr.am"}
)

var commerce = []Endpoint{
	{
		Platform: "marketplace_a", ID: "search", Family: Commerce, Kind: Data, Cost: 3, Origin: SpecListed, FairUse: metered,
		Name: "Marketplace A product search", Description: "Search products on global consumer marketplace A; 20 results per page.",
		Params: []Param{
			queryParam,
			pageParam,
			P("sort", String, "A sort id from the response's sorts list.").Len(100),
			P("category_id", String, "Category id from a categories endpoint.").Len(100),
			P("min_price", Number, "Lowest price.").AtLeast(0),
			P("max_price", Number, "Highest price.").AtLeast(0),
			countryParam.Named("ship_from", "Country the item ships from (two-letter code)."),
			countryParam.Named("region", "Storefront country (two-letter code)."),
			currencyParam,
			localeParam.Named("language", "Storefront locale, e.g. en_US.").Ex("en_US"),
		},
		Ordered: []Order{{Low: "min_price", High: "max_price"}},
	},
	{
		Platform: "marketplace_a", ID: "similar", Family: Commerce, Kind: Data, Cost: 3, Origin: SpecListed, LimitedCapacity: true, FairUse: metered,
		Name: "Marketplace A similar products", Description: "Products similar to a given product or query. Limited capacity: availability depends on small shared monthly allowances.",
		Params: []Param{
			P("product_id", String, "Product id or product URL.").Len(2048).Ex("1005006123456789").OnHosts(marketplaceAHosts...),
			P("query", String, "Search text, when no product_id is given.").Len(500),
			countryParam.Named("country", "Ship-to country (two-letter code)."),
			currencyParam,
		},
		AnyOf: [][]string{{"product_id", "query"}},
	},
	{
		Platform: "retailer_a", ID: "search", Family: Commerce, Kind: Data, Cost: 3, Origin: SpecListed, FairUse: metered,
		Name: "Retailer A product search", Description: "Search the department-store retailer's catalogue.",
		Params: []Param{
			queryParam.Ex("winter coat"),
			pageParam,
			P("limit", Integer, "Results per page, 1-120 (the source may return fewer).").Range(1, 120).Def("120"),
			P("sort", String, "A sort id from the response's sorts list.").Len(100),
		},
	},
	{
		Platform: "craft_market", ID: "reviews", Family: Commerce, Kind: Data, Cost: 4, Origin: SpecListed, FairUse: metered,
		Name: "Craft market reviews", Description: "Reviews of a handmade-goods listing or its shop; 8 per page.",
		Params: []Param{
			P("id", String, "Listing id or listing URL.").Req().Len(2048).Ex("1234567890").OnHosts(craftMarketHosts...),
			pageParam,
			P("scope", String, "Reviews of the listing or of the whole shop.").OneOf("listing", "shop"),
			P("sort", String, "Review order.").OneOf("relevancy", "recency", "highest", "lowest"),
			P("rating", Integer, "Only reviews with this star rating.").Range(1, 5),
		},
	},
	{
		Platform: "marketplace_b", ID: "deals", Family: Commerce, Kind: Data, Cost: 5, Origin: SpecListed, FairUse: metered,
		Name: "Marketplace B deals", Description: "Current deals on global consumer marketplace B.",
		Params: []Param{
			countryParam.Named("country", "Marketplace country (two-letter code).").Def("GB").Ex("GB"),
			P("categories", List, "Comma-separated category filters.").Len(1000),
			P("brands", List, "Comma-separated brand filters.").Len(1000),
			cursorParam.Named("cursor", "Offset from the previous page's cursor; pass it back unchanged."),
		},
	},
	{
		Platform: "marketplace_b", ID: "shop", Family: Commerce, Kind: Data, Cost: 14, Origin: SpecListed, FairUse: metered,
		Name: "Marketplace B shop", Description: "A creator storefront: its posts and products.",
		Params: []Param{
			P("url", String, "Shop page URL or shop name.").Req().Len(2048).Ex("example-shop").OnHosts(marketplaceBHosts...),
			countryParam.Named("country", "Marketplace country (two-letter code)."),
		},
	},
	{
		Platform: "shopping_comparison", ID: "product", Family: Commerce, Kind: Data, Cost: 3, Origin: SpecListed, FairUse: metered,
		Name: "Shopping comparison product", Description: "One product with specifications, retailers and instalment terms.",
		Params: []Param{
			P("id", String, "Product id as returned by search.").Req().Len(200).Match("[0-9]{1,20}", "a numeric product id").Ex("3201350617"),
			P("category", String, "Category id as returned by search, e.g. 94 or cl94.").Req().Len(200).Lower().Match("(cl)?[0-9]{1,10}", "a numeric category id (cl prefix allowed)").Ex("94"),
			P("region", String, "Catalogue region (gb is the same catalogue as uk); us when omitted.").Len(20).Lower().OneOf("us", "uk", "gb", "se", "de", "dk", "no", "fi", "at", "nl").Ex("us"),
		},
	},
}

var knowledge = []Endpoint{
	{
		Platform: "company_registry", ID: "search", Family: Knowledge, Kind: Data, Cost: 1, Origin: SpecListed, CacheTTL: time.Hour,
		Name: "Company register search", Description: "Search the national company register by name or company number.",
		Params: []Param{
			P("query", String, "Company name or number.").Req().Len(500).Ex("acme"),
			P("limit", Integer, "Rows per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
	},
	{
		Platform: "qa_site", ID: "question", Family: Knowledge, Kind: Data, Cost: 2, Origin: SpecListed,
		Name: "Q&A question", Description: "A question page with its answers, topics and related questions.",
		Params: []Param{P("url", URL, "Question page URL.").Req().Ex("https://www.quora.com/What-is-the-best-way-to-learn-Go-programming").OnHosts(qaSiteHosts...)},
	},
	{
		Platform: "code_host", ID: "profile", Family: Knowledge, Kind: Data, Cost: 1, Origin: SpecNamed,
		Name: "Code host profile", Description: "A public user or organisation profile on the code host.",
		Params:   []Param{codeHandle.Req()},
		Decision: "The code host's public users API needs only the login; logins are 1-39 letters, digits or hyphens, not starting with a hyphen.",
	},
	{
		Platform: "code_host", ID: "profile/repos", Family: Knowledge, Kind: Data, Cost: 1, Origin: SpecNamed,
		Name: "Code host repositories", Description: "Public repositories of a user or organisation.",
		Params: []Param{
			codeHandle.Req(),
			P("limit", Integer, "Repositories per page, 1-100.").Range(1, 100).Def("30"),
			cursorParam,
		},
		Decision: "Spec names handle, limit and cursor. The upstream pages by page number and caps pages at 100, so limit is 1-100 (its default of 30) and cursor carries the next page.",
	},
	{
		Platform: "code_host", ID: "repo/issues", Family: Knowledge, Kind: Data, Cost: 1, Origin: SpecNamed,
		Name: "Code host repository issues", Description: "Issues of a public repository.",
		Params: []Param{
			P("repo", String, "Repository as owner/name.").Req().Match(`[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}`, "owner/name, e.g. golang/go").Ex("golang/go"),
			P("state", String, "Issue state.").OneOf("open", "closed", "all").Def("open"),
			P("labels", List, "Comma-separated label names; issues must carry all of them.").Len(500),
			P("sort", String, "Order of issues.").OneOf("created", "updated", "comments"),
			P("limit", Integer, "Issues per page, 1-100.").Range(1, 100).Def("30"),
			cursorParam,
		},
		Decision: "The upstream issues API is addressed by owner and repository, so one repo=owner/name parameter; state, labels and sort are its documented filters; pages of at most 100.",
	},
}

var codeHandle = P("handle", String, "User or organisation login.").Match(`[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})`, "a login of letters, digits and hyphens, at most 39 characters").Ex("golang")

// qaSiteHosts are the Q&A site's hosts (its language editions are
// subdomains).
var qaSiteHosts = []string{"quora.com"}

// socialAHosts are the hosts of social_a's pages (any subdomain: www., m.,
// web.); fb.me short links are not among them, as only a fetch resolves them.
var socialAHosts = []string{"facebook.com", "fb.com"}

var social = []Endpoint{
	{
		Platform: "photo_social", ID: "post-stats", Family: Social, Kind: Data, Cost: 5, Origin: SpecListed, CacheTTL: 5 * time.Minute,
		Name: "Photo social post stats", Description: "Public counters of a post or reel (not private creator analytics). A fresh lookup costs at least 5: " +
			"today exactly 5, whatever routes it took; legs[] shows each route tried (neutral labels: direct, web_unblocker_a, web_unblocker_b), " +
			"with the charge on the leg that answered. A variable charge would settle the sum of the legs' credits, never less than 5, and " +
			"would be announced in this description and the catalogue's cost first.",
		Params: []Param{P("url", URL, "Public post or reel URL.").Req().Ex("https://www.instagram.com/p/C9pHoTo1abc/").OnHosts(photoSocialHosts...)},
	},
	{
		Platform: "microblog_a", ID: "search", Family: Social, Kind: Data, Cost: 3, Origin: SpecListed, AI: true, Records: postRecords, CacheTTL: 2 * time.Minute,
		Name: "Microblog A post search", Description: "Search posts on the decentralised microblog network.",
		Params: []Param{
			queryParam.Ex("golang"),
			P("limit", Integer, "Posts per page, 1-100.").Range(1, 100),
			P("sort", String, "Ranking.").OneOf("top", "latest"),
			cursorParam,
		},
	},
	{
		Platform: "microblog_a", ID: "profile", Family: Social, Kind: Data, Cost: 1, Origin: SpecNamed,
		Name: "Microblog A profile", Description: "A public profile on the decentralised microblog network.",
		Params:   []Param{P("handle", String, "Handle (e.g. alice.example.com) or DID, without a leading @.").Req().Match(`[^@\s][^\s]*`, "a handle or DID without a leading @").Len(253).Ex("alice.example.com")},
		Decision: "The network's public profile lookup takes one actor: a domain handle or a DID, so handle is the only parameter.",
	},
	{
		Platform: "microblog_b", ID: "search-posts", Family: Social, Kind: Data, Cost: 1, Origin: SpecListed, AI: true, Records: postRecords, CacheTTL: 2 * time.Minute,
		Name: "Microblog B post search", Description: "Search posts on microblog B; source operators (from, to, language, minimum likes, exact phrase, exclusion) work in query.",
		Params: []Param{
			P("query", String, "Search text with source operators.").Req().Len(500).Ex("from:example golang"),
			P("mode", String, "Latest or top posts.").OneOf("latest", "top").Def("latest").Alias("sort", "sort_by"),
			cursorParam,
			dateParam("from_date", "Earliest post date (YYYY-MM-DD)."),
			dateParam("to_date", "Latest post date (YYYY-MM-DD)."),
			P("include_reposts", Boolean, "true or false; set it explicitly and keep it across pages."),
		},
		Ordered: []Order{{Low: "from_date", High: "to_date"}},
	},
	{
		Platform: "microblog_b", ID: "search-tweets", Family: Social, Kind: Data, Cost: 1, Origin: Derived,
		Name: "Microblog B post search (old path)", Description: "Retired: the branded path of post search.",
		RetiredFor: "/v1/microblog_b/search-posts",
	},
	{
		Platform: "microblog_b", ID: "profile", Family: Social, Kind: Data, Cost: 2, Origin: SpecListed, AI: true, Records: &AIRecords{ID: "id", Text: []string{"name", "bio", "location"}},
		Name: "Microblog B profile", Description: "A public profile on microblog B.",
		Params: []Param{handleParam.Req().Ex("example")},
	},
	{
		Platform: "social_a", ID: "search-people", Family: Social, Kind: Data, Cost: 12, Origin: SpecListed, AI: true, Records: &AIRecords{List: "items", ID: "id", Text: []string{"name", "type"}}, FairUse: metered,
		Name: "Social A people search", Description: "Ranked people search (not substring match) on the large general social network.",
		Params: []Param{queryParam.Ex("Jane Doe"), cursorParam},
	},
	{
		Platform: "social_a", ID: "event", Family: Social, Kind: Data, Cost: 2, Origin: SpecListed, GetParam: "id",
		Name: "Social A event", Description: "One public event in full; also at /v1/social_a/event/{id}.",
		Params: []Param{
			P("id", String, "Event id.").Match("[0-9]{1,30}", "a numeric event id").Ex("1234567890"),
			P("url", URL, "Event page URL.").Ex("https://www.facebook.com/events/1234567890/").OnHosts(socialAHosts...),
		},
		AnyOf: [][]string{{"id", "url"}},
	},
	{
		Platform: "social_a", ID: "events-search", Family: Social, Kind: Data, Cost: 2, Origin: SpecListed, AI: true, Records: &AIRecords{List: "items", ID: "id", Text: []string{"name"}},
		Name: "Social A event search", Description: "Search public events; timing and place are read with social_a/event.",
		Params: []Param{queryParam.Ex("jazz festival"), cursorParam},
	},
	{
		Platform: "professional_network", ID: "search-people", Family: Social, Kind: Data, Cost: 8, Origin: SpecListed, AI: true, Records: &AIRecords{List: "items", ID: "id", Text: []string{"name", "headline", "location"}}, FairUse: metered,
		Name: "Professional network people search", Description: "Search people by name or by a people-search URL.",
		Params: []Param{
			P("query", String, "A person's name.").Len(500).Ex("Jane Doe"),
			P("search_url", URL, "People-search URL with keywords; single selected location, company, school, industry and language filters only.").
				Ex("https://www.linkedin.com/search/results/people/?keywords=Jane%20Doe&geoUrn=%5B%22103644278%22%5D").
				OnHosts(professionalNetworkHosts...).Checked(peopleSearchURLRule),
			P("title", String, "Job title.").Len(200),
			P("location", String, "Location id from professional_network/locations.").Len(100).Alias("geocode_location"),
			P("current_company", String, "Current company: a numeric company id, a company page URL, or a name (matched as text).").Len(200),
			P("past_company", String, "Past company: a numeric company id or a company page URL.").Len(200),
			P("school", String, "School id from professional_network/schools (a school page URL or a name also work).").Len(100),
			P("industry", String, "Industry id from professional_network/industries.").Len(100),
			pageParam,
		},
		AnyOf: [][]string{{"query", "search_url"}},
	},
	lookup("professional_network", "locations", Social, "Professional network location lookup", "Location ids for the location filter of search-people.", "Berlin",
		"The people-search location filter takes a geographic id; the site's typeahead maps text to ids, so query (text) and limit."),
	lookup("professional_network", "schools", Social, "Professional network school lookup", "School ids for the school filter of search-people.", "Stanford",
		"The school filter takes a school id; the site's typeahead maps text to ids, so query (text) and limit."),
	lookup("professional_network", "industries", Social, "Professional network industry lookup", "Industry ids for the industry filter of search-people.", "software",
		"The industry filter takes an industry id; the site's typeahead maps text to ids, so query (text) and limit."),
}

// lookup declares a text-to-id typeahead operation the spec names only.
func lookup(platform, id string, f Family, name, description, example, decision string) Endpoint {
	return Endpoint{
		Platform: platform, ID: id, Family: f, Kind: Data, Cost: 1, Origin: SpecNamed, CacheTTL: 24 * time.Hour,
		Name: name, Description: description, Decision: decision,
		Params: []Param{
			P("query", String, "Text to look up.").Req().Len(200).Ex(example),
			P("limit", Integer, "Rows, 1-50.").Range(1, 50).Def("10"),
		},
	}
}

var media = []Endpoint{
	{
		Platform: "video_platform", ID: "search", Family: Media, Kind: Data, Cost: 1, Origin: SpecListed,
		Name: "Video platform search", Description: "Search videos, channels and playlists.",
		Params: []Param{
			queryParam.Ex("go concurrency"),
			P("type", List, "Result types, comma-separable.").OneOf("video", "channel", "playlist"),
			P("sortBy", String, "Result order.").OneOf("relevance", "date", "rating", "title", "views"),
			P("duration", String, "Video length; forces video results.").OneOf("short", "medium", "long"),
			P("uploadDate", String, "Upload window.").OneOf("hour", "today", "week", "month", "year"),
			countryParam.Named("region", "Region (ISO 3166-1 alpha-2 code)."),
			P("max_results", Integer, "Results per page, at most 50.").Range(1, 50),
			cursorParam.Named("cursor", "Opaque page token from the previous response."),
		},
	},
}

var apps = []Endpoint{
	{
		Platform: "app_store_a", ID: "app-info", Family: Apps, Kind: Data, Cost: 1, Origin: SpecListed, CacheTTL: 6 * time.Hour,
		Name: "App store A app info", Description: "One app's store record: developer, price, rating, version and size.",
		Params: []Param{
			P("app_id", String, "Numeric track id or bundle id.").Req().Match(`[0-9]{1,20}|[A-Za-z][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)+`, "a numeric track id or a bundle id such as com.example.app").Ex("284882215"),
			countryParam.Named("country", "Store country (two-letter code).").Lower().Def("us").Ex("us"),
			localeParam.Named("language", "Store language, e.g. en_us.").Lower().Ex("en_us"),
		},
	},
	{
		Platform: "app_store_b", ID: "categories", Family: Apps, Kind: Data, Cost: 0, Origin: SpecListed, CacheTTL: 24 * time.Hour,
		Name: "App store B categories", Description: "The store's category codes and names.",
	},
}

var places = []Endpoint{
	{
		Platform: "property_portal", ID: "search-sale", Family: Places, Kind: Data, Cost: 3, Origin: SpecListed,
		Name: "Property portal homes for sale", Description: "Search property listings for sale (spec 4.7 filters).",
		Params: []Param{
			P("location", String, "Postcode, town or area; resolved once and remembered.").Len(200).Ex("Cambridge"),
			P("identifier", String, "Area identifier from property_portal/locations.").Len(100),
			P("label", String, "Area label, sent with identifier.").Len(200),
			pageParam,
			P("radius", Number, "Search radius in miles.").OneOf("0", "0.25", "0.5", "1", "3", "5", "10", "15", "20", "30", "40"),
			P("min_price", Number, "Lowest price in pounds.").AtLeast(0),
			P("max_price", Number, "Highest price in pounds.").AtLeast(0),
			P("min_bedrooms", Integer, "Fewest bedrooms.").Range(0, 50),
			P("max_bedrooms", Integer, "Most bedrooms.").Range(0, 50),
			P("min_bathrooms", Integer, "Fewest bathrooms.").Range(0, 50),
			P("max_bathrooms", Integer, "Most bathrooms.").Range(0, 50),
			P("property_type", List, "Comma list of property types.").OneOf("detached", "semi_detached", "terraced", "flats", "bungalow", "farms_land", "park_home"),
			P("sort", String, "Listing order.").OneOf("newest", "highest_price", "lowest_price", "most_reduced"),
			P("keywords", String, "Keywords in the listing.").Len(500),
			P("must_have", List, "Comma list of site must-haves, e.g. has_garden, has_parking_garage, has_balcony_terrace.").Match("[a-z][a-z0-9_]*", "lowercase codes such as has_garden"),
			P("features", List, "Comma list of feature codes.").Match("[A-Za-z0-9_-]+", "feature codes"),
			P("added", Integer, "Listed within this many days.").OneOf("1", "3", "7", "14", "30"),
			P("include_sold", Boolean, "Include under-offer and sold-subject-to-contract listings."),
			P("new_homes", String, "New homes.").OneOf("include", "exclude", "only"),
			P("retirement_homes", String, "Retirement homes.").OneOf("include", "exclude", "only"),
			P("auction", String, "Auction listings.").OneOf("include", "exclude", "only"),
			P("shared_ownership", String, "Shared-ownership listings.").OneOf("include", "exclude", "only"),
			P("show_only", List, "Comma list of chainFree, reducedPriceOnly.").OneOf("chainFree", "reducedPriceOnly"),
			P("ownership", List, "Comma list of tenures.").OneOf("leasehold", "freehold", "share_of_freehold"),
		},
		Ordered: []Order{{Low: "min_price", High: "max_price"}, {Low: "min_bedrooms", High: "max_bedrooms"}, {Low: "min_bathrooms", High: "max_bathrooms"}},
	},
	lookup("property_portal", "locations", Places, "Property portal location lookup", "Area identifiers and labels for search-sale.", "Cambridge",
		"search-sale takes an identifier and label from the portal's location typeahead, which maps free text to areas: query (text) and limit."),
	{
		Platform: "travel_booking", ID: "search-attractions", Family: Places, Kind: Data, Cost: 3, Origin: SpecListed,
		Name: "Travel booking attractions", Description: "Search attractions and tours at a destination.",
		Params: []Param{
			P("location", String, "City; resolved once and remembered.").Len(200).Ex("Lisbon"),
			P("destination_id", String, "Destination id from travel_booking/locations.").Len(100),
			pageParam,
			P("sort", String, "Result order.").OneOf("trending", "attr_book_score", "lowest_price"),
			dateParam("start_date", "First day (YYYY-MM-DD)."),
			dateParam("end_date", "Last day (YYYY-MM-DD)."),
			currencyParam,
			localeParam,
			P("types", List, "Comma list of site type filters.").Len(1000),
			P("labels", List, "Comma list of site label filters.").Len(1000),
			P("prices", List, "Comma list of site price filters.").Len(1000),
			P("areas", List, "Comma list of site area filters.").Len(1000),
		},
		AnyOf:   [][]string{{"location", "destination_id"}}, // spec 4.6: "location … or destination_id"
		Ordered: []Order{{Low: "start_date", High: "end_date"}},
	},
	{
		Platform: "travel_booking", ID: "hotel", Family: Places, Kind: Data, Cost: 3, Origin: SpecListed, GetParam: "id",
		Name: "Travel booking hotel", Description: "One hotel with rooms and offers for given dates; also at /v1/travel_booking/hotel/{id}.",
		Params:  append([]Param{P("id", String, "Hotel number.").Req().Match("[0-9]{1,20}", "a numeric hotel number").Ex("123456")}, stayParams...),
		Ordered: []Order{{Low: "checkin", High: "checkout", Strict: true}},
	},
	{
		Platform: "travel_booking", ID: "search-hotels", Family: Places, Kind: Data, Cost: 3, Origin: SpecNamed,
		Name: "Travel booking hotel search", Description: "Hotels with availability at a destination for given dates.",
		Params: append([]Param{
			P("location", String, "City or area; resolved to a destination.").Len(200).Ex("Lisbon"),
			P("destination_id", String, "Destination id from travel_booking/locations.").Len(100),
			pageParam,
			P("sort", String, "A sort id offered by the site.").Len(100),
		}, stayParams...),
		AnyOf:    [][]string{{"location", "destination_id"}},
		Ordered:  []Order{{Low: "checkin", High: "checkout", Strict: true}},
		Decision: "Hotel search needs a destination (text or id, as search-attractions) and a stay: the same dates, occupancy and display options as travel_booking/hotel, plus page and the site's sort id.",
	},
	lookup("travel_booking", "locations", Places, "Travel booking location lookup", "Destination ids for search-attractions and search-hotels.", "Lisbon",
		"search-attractions and search-hotels take a destination_id, which the site's destination typeahead maps from text: query (text) and limit."),
	{
		Platform: "lodging_marketplace", ID: "locations", Family: Places, Kind: Data, Cost: 1, Origin: SpecNamed,
		Name: "Lodging marketplace location lookup", Description: "Places matching a text, with map place ids.",
		Params: []Param{
			P("query", String, "Place name to look up.").Req().Len(200).Ex("Lisbon"),
			P("limit", Integer, "Rows, 1-20.").Range(1, 20).Def("10"),
			localeParam,
		},
		Decision: "The data shape (spec 2.7) echoes query and lists places with map place ids, which the site's location autocomplete returns for a text and locale; it returns short lists, so limit is 1-20.",
	},
}

var stayParams = []Param{
	dateParam("checkin", "Check-in date (YYYY-MM-DD).").Req(),
	dateParam("checkout", "Check-out date (YYYY-MM-DD), after checkin.").Req().ExDaysAfter(2),
	P("adults", Integer, "Adults, 1-30.").Range(1, 30),
	P("children_ages", List, "Comma list of children's ages, 0-17.").Of(Integer).Range(0, 17).Ex("4,9"),
	P("rooms", Integer, "Rooms, 1-30.").Range(1, 30),
	currencyParam,
	localeParam,
	P("units", String, "Distance units.").OneOf("metric", "imperial"),
	P("temperature_unit", String, "Temperature unit.").OneOf("c", "f"),
}

var webAndBundles = []Endpoint{
	{
		Platform: "web", ID: "social-profiles", Family: Web, Kind: Data, Cost: 15, Origin: SpecListed, FairUse: metered, Async: true,
		Name: "Linked social profiles", Description: "Profiles on other platforms linked to a known profile, with evidence. " +
			"Charged its price once; the profile reads it makes are legs that cost nothing, read the response cache and never fill it.",
		Params: []Param{
			P("platform", String, "Platform of the known profile.").Req().OneOf(profilePlatforms...).Ex("microblog_b"),
			handleParam.Req().Ex("example"),
		},
	},
	{
		Platform: "web", ID: "jobs/{id}", Family: Web, Kind: ServiceOwned, Cost: 0, Origin: SpecNamed,
		Name: "Web job", Description: "State and result of an asynchronous web job.",
		Params:     []Param{P("id", String, "Job id, from the 202 that accepted the call.").Req().Match("job_[a-z0-9]{26}", "a job id such as job_01jb2c3d4e5f6g7h8j9k0m1n2p").Ex("job_01jb2c3d4e5f6g7h8j9k0m1n2p")},
		MayNotFind: true,
		Decision: "A job is read by its id alone, lifted from the path, by the account that started it (any other: 404); " +
			"reading it is free because the job's own call was charged. data: id, state (queued, running, succeeded, failed), " +
			"progress {done, total}, the operation (platform, endpoint, params), attempts, created_at, started_at, finished_at, " +
			"expires_at (7 days after creation), and once finished status and result: the full envelope the call would have returned. " +
			"A job reads as running until its charge is settled or refunded; one whose reservation was refunded before it could be " +
			"charged fails with 500 INTERNAL_ERROR, details.reason reservation_expired, and no data.",
	},
	{
		Platform: "bundle", ID: "creator-vetting", Family: Bundle, Kind: Data, Cost: 8, Origin: SpecListed, FairUse: metered / 4, Async: true,
		Name: "Creator vetting bundle",
		Description: "Engagement evidence for a creator from sampled posts and comments; no authenticity grade is inferred. " +
			"Built from the platform's profile, posts and comments operations (legs cost nothing; the bundle charges its price once, and nothing when the posts cannot be read; its legs read the response cache but never fill it, so their data never reaches a direct call below its own price). " +
			"interactions = the reported likes + comments + shares of a post (views excluded; null when none is reported); avg_engagement_per_post averages posts with engagement only (an unreported counter is never counted as 0); " +
			"engagement_rate = avg_engagement_per_post / the profile's followers (null when unknown or 0); view_engagement_rate = interactions / views; posting_cadence_days = (newest - oldest post date) / (dated posts - 1). " +
			"Comments come from the comment_posts newest sampled posts that do not report 0 comments, at most comments_per_post each. count_sources cite the endpoint, post id and field of every counter.",
		Params: []Param{
			handleParam.Req().Ex("example"),
			P("platform", String, "The creator's platform.").Req().OneOf("short_video_a", "photo_social", "video_platform", "microblog_b", "microblog_c").Ex("microblog_b"),
			P("posts_limit", Integer, "Posts to sample, 1-20.").Range(1, 20).Def("20"),
			P("comment_posts", Integer, "Posts whose comments are sampled, 0-10.").Range(0, 10).Def("3"),
			P("comments_per_post", Integer, "Comments per sampled post, 1-50.").Range(1, 50).Def("20"),
			P("content_review", Boolean, "Flag advisory text in at most eight returned posts; no extra charge (default off).").Def("false"),
		},
	},
	{
		Platform: "search", ID: "all", Family: Search, Kind: Data, Cost: 5, Origin: SpecNamed, Streams: true, FairUse: metered * 4,
		Name: "Search all platforms",
		Description: "One query across the searchable platforms' own search endpoints, at most limit results from each; legs[] says how each platform's search went, _warnings names those that failed or timed out (20 s each). " +
			streamRule,
		Params: []Param{
			queryParam.Ex("golang"),
			P("platforms", List, "Comma list of platforms to search; all searchable platforms when omitted.").OneOf(searchablePlatforms...),
			P("limit", Integer, "Results per platform, 1-50.").Range(1, 50).Def("10"),
			P("stream", Boolean, "1 streams server-sent events; the final result event carries the envelope."),
		},
		Decision: "A fan-out over the platforms' own search endpoints: the query, which platforms, how many results from each, and stream (spec 4.4). No cursor: each platform pages differently, so continuation is done on the platform's own endpoint. Cost 5 covers several upstream searches.",
	},
	{
		Platform: "search", ID: "creators", Family: Search, Kind: Data, Cost: 5, Origin: SpecNamed, Streams: true, FairUse: metered * 4,
		Name: "Search creators",
		Description: "Find creator accounts across social and video platforms: their people and channel searches, and the distinct authors of matching posts where a platform has no people search (found_by says which). " +
			streamRule,
		Params: []Param{
			queryParam.Ex("home baking"),
			P("platforms", List, "Comma list of platforms to search; all creator platforms when omitted.").OneOf(creatorPlatforms...),
			P("limit", Integer, "Creators per platform, 1-50.").Range(1, 50).Def("10"),
			P("stream", Boolean, "1 streams server-sent events; the final result event carries the envelope."),
		},
		Decision: "A fan-out over the people and channel searches of the creator platforms: query, platforms, a per-platform limit and stream (spec 4.4). Cost 5, as search/all.",
	},
}

// streamRule is how the fan-outs charge, stream and count against limits.
const streamRule = "Charged its price once when at least one platform answered, else nothing; each platform's search runs as a leg that is validated and counted for fair use under its own endpoint, " +
	"reads the response cache but never fills it (a direct call of that search pays its own price, whatever fan-out ran before), costs nothing itself, and takes one of the key's free in-flight slots while it runs (never more than are free; the call's own slot always serves one); legs do not count against the per-minute rate. " +
	"stream=1 answers text/event-stream: a leg event per platform as it finishes (platform, status, items or error, progress), : keep-alive comments while quiet, then one result event whose data is the full response envelope. " +
	"A caller who disconnects stops the remaining legs and is charged only if a successful platform's event had been delivered before."

var searchablePlatforms = []string{"marketplace_a", "retailer_a", "company_registry", "microblog_a", "microblog_b", "social_a", "professional_network", "video_platform"}
var creatorPlatforms = []string{"microblog_a", "microblog_b", "social_a", "professional_network", "video_platform"}

var service = []Endpoint{
	{
		Platform: "", ID: "", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "API index", Description: "What this API is, how to authenticate and where to look next. Accepts Bearer.",
	},
	{
		Platform: "utility", ID: "endpoints", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Endpoint catalogue", Description: "Every active endpoint with id, name, credit_cost, params, description and available (whether this deployment can serve it now).",
		Params: []Param{
			P("platform", String, "Only this platform's endpoints.").Len(64).Ex("microblog_b"),
			P("search", String, "Text to match in ids, names and descriptions.").Len(200),
			P("method", String, "Only endpoints answering this HTTP method.").OneOf("GET", "POST"),
			P("available", Boolean, "true: only the endpoints this deployment can serve now; false: only those it cannot (they answer 501 ENDPOINT_NOT_AVAILABLE; data endpoints' free synthetic twins under /sandbox still answer)."),
		},
	},
	{
		Platform: "utility", ID: "endpoint", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Endpoint description", Description: "One endpoint in full: exact parameter schema and a ready-to-run request.",
		Params: []Param{
			P("id", String, "Endpoint id in the form platform/endpoint.").Len(200).Ex("company_registry/search"),
			P("url", String, "A request URL or path of the endpoint.").Len(2048),
		},
		AnyOf:      [][]string{{"id", "url"}},
		MayNotFind: true,
	},
	{
		Platform: "utility", ID: "quickstart", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Quickstart", Description: "A low-cost endpoint with its request and the envelope it returns.",
		Params:     []Param{P("platform", String, "Pick the quickstart from this platform.").Len(64)},
		MayNotFind: true,
	},
	{
		Platform: "utility", ID: "llms", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Catalogue for agents", Description: "Base URL, auth header, envelopes, error types and every endpoint with cost and parameters.",
		Params: []Param{
			P("platform", String, "Only this platform's endpoints.").Len(64),
			P("format", String, "Output format.").OneOf("markdown", "json").Def("markdown"),
		},
	},
	{
		Platform: "credits", ID: "balance", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Credit balance", Description: "credits_remaining, credits_lifetime and when the balance last changed.",
	},
	{
		Platform: "credits", ID: "transactions", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Credit ledger", Description: "Ledger entries, newest first, each with the request_id that caused it.",
		Params: []Param{
			P("limit", Integer, "Entries per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
			P("request_id", String, "Only entries caused by this request.").Match("req_[A-Za-z0-9]{1,64}", "a request id such as req_0192...").Ex(""),
		},
	},
	{
		Platform: "credits", ID: "usage", Family: Service, Kind: ServiceOwned, Origin: Addition,
		Name: "Credit usage", Description: "The account's calls, credits spent and errors per UTC day (today included) and per endpoint, " +
			"with totals and error rates. Counted from usage events shortly after each call; free.",
		Params: []Param{P("days", Integer, "Days to report, ending today (UTC), 1-30.").Range(1, 30).Def("30")},
		Decision: "Beyond spec 4.2: the ledger lists charges one by one, this sums an account's calls per day and endpoint " +
			"(every call with a resolved endpoint, free and failed ones included; a composite's legs count as its one call; the sandbox not), " +
			"zero-filled day by day, for clients and the console to chart spend and error rates. Kept 62 days; days 1-30.",
	},
	{
		Platform: "status", ID: "", Family: Service, Kind: ServiceOwned, Origin: SpecListed,
		Name: "Status", Description: "Per-platform requests, error rate, p50 and p95 latency and state over the last 15 minutes.",
	},
	{
		Platform: "monitors", ID: "", Family: Service, Kind: ServiceOwned, Origin: Addition,
		Name: "Monitors", Description: "The account's monitors, oldest first: each one's operation, schedule, state and latest run.",
		Decision: "Issue 23: monitors are listed per account (the key's); at most 50, so one page holds them all.",
	},
	{
		Platform: "monitors", ID: "create", Family: Service, Kind: ServiceOwned, Method: "POST", Origin: Addition,
		Name: "Create monitor", Description: "Schedule one data operation with fixed parameters: a run every interval_minutes, " +
			"each a real call made with this key (billed, limited and ledgered like any call, with its own request_id).",
		Params: []Param{
			P("platform", String, "Platform of the operation, e.g. company_registry.").Req().Len(64).Ex("company_registry"),
			P("endpoint", String, "Endpoint of the operation after the platform, e.g. search or profile/repos.").Req().Len(128).Ex("search"),
			P("params", String, "The operation's parameters as a JSON object of strings, numbers and booleans, e.g. {\"query\":\"acme\"}; "+
				"{} when it takes none; validated now as the operation validates them.").Req().Len(8192).Ex(`{"query":"acme"}`),
			P("interval_minutes", Integer, "Minutes between runs, 5 to 10080 (a week).").Range(5, 10080).Def("60"),
			P("name", String, "A name to recognise the monitor by.").Len(100).Ex("Acme filings"),
		},
		Decision: "Issue 23: the fields of a batch item (platform, endpoint, params) plus the schedule, as query parameters " +
			"so that validation, OpenAPI and MCP read one declaration; the monitor runs with the key that created it.",
	},
	{
		Platform: "monitors", ID: "{id}", Family: Service, Kind: ServiceOwned, Origin: Addition,
		Name: "Monitor", Description: "One monitor: its operation, schedule, state (and why it is paused) and latest run.",
		Params:     []Param{monitorID()},
		MayNotFind: true,
		Decision:   "Issue 23: read by the id lifted from the path, by the account that owns it (any other: 404).",
	},
	{
		Platform: "monitors", ID: "{id}/pause", Family: Service, Kind: ServiceOwned, Method: "POST", Origin: Addition,
		Name: "Pause monitor", Description: "Stop scheduling runs until resumed; a run already started still finishes.",
		Params:     []Param{monitorID()},
		MayNotFind: true,
		Decision:   "Issue 23: a POST per state change (the registry gives each path one method).",
	},
	{
		Platform: "monitors", ID: "{id}/resume", Family: Service, Kind: ServiceOwned, Method: "POST", Origin: Addition,
		Name: "Resume monitor", Description: "Schedule runs again; clears the pause reason and the count of failed runs.",
		Params:     []Param{monitorID()},
		MayNotFind: true,
		Decision:   "Issue 23: a POST per state change (the registry gives each path one method).",
	},
	{
		Platform: "monitors", ID: "{id}/delete", Family: Service, Kind: ServiceOwned, Method: "POST", Origin: Addition,
		Name: "Delete monitor", Description: "Delete the monitor and its schedule; its runs are no longer readable. No undo.",
		Params:     []Param{monitorID()},
		MayNotFind: true,
		Decision:   "Issue 23: a POST rather than DELETE on the monitor's path, which answers GET (the registry gives each path one method).",
	},
	{
		Platform: "monitors", ID: "{id}/runs", Family: Service, Kind: ServiceOwned, Origin: SpecNamed,
		Name: "Monitor runs", Description: "Runs of a monitor, newest first: time, status, credits, request_id, data (kept 30 days) and what changed since the previous successful run.",
		Params: []Param{
			monitorID(),
			P("limit", Integer, "Runs per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		MayNotFind: true,
		Decision:   "Runs are read by the monitor id lifted from the path, newest first, paged with limit and an opaque cursor like the ledger.",
	},
	{
		Platform: "assist", ID: "recall", Family: Service, Kind: ServiceOwned, Origin: SpecNamed, GetParam: "id",
		Name: "AI-assist recall", Description: "The full records an AI-assist answer removed (exclude=engagement_bait) or replaced with recall stubs (fit=goal), " +
			"with their labels, for 24 hours after the call, to the account that made it only (any other account gets 404); also at /v1/assist/recall/{id}. Free.",
		Params: []Param{
			P("id", String, "Recall id, from _assist.recall.id of the answer.").Req().Match("rcl_[A-Za-z0-9]{26}", "a recall id such as rcl_01jd8x3k4m5n6p7q8r9s0t1v2w").Ex("rcl_01jd8x3k4m5n6p7q8r9s0t1v2w"),
		},
		MayNotFind: true,
		Decision: "Spec 4.5 returns an owner-bound recall reference for excluded records and recall stubs kept 24 hours for fitted ones; " +
			"one free endpoint reads them by the id the answer gives, for the account that made the call only.",
	},
	{
		Platform: "batch", ID: "", Family: Batch, Kind: ServiceOwned, Method: "POST", Origin: SpecListed,
		Name: "Batch", Description: "Up to 20 requests run independently; the wrapper costs 0 and each item is charged under its own rules.",
	},
}

// Surfaces are declared here beside the endpoints, so the route table has
// one source.
var Surfaces = []Surface{
	{http.MethodGet, "/openapi.json", Service, "OpenAPI 3.1 description of the registry, JSON."},
	{http.MethodGet, "/openapi.yaml", Service, "OpenAPI 3.1 description of the registry, YAML."},
	{"ANY", "/mcp", MCP, "MCP server: every endpoint as a tool (Bearer accepted)."},
	{"ANY", "/sandbox", Sandbox, "Sandbox index (Bearer accepted)."},
	{"ANY", "/sandbox/{proxy+}", Sandbox, "Free synthetic twins of the data endpoints."},
	{http.MethodGet, "/docs", Service, "API reference page, rendered in the browser from /openapi.json (also at /docs/; its files at /docs/assets/..., which reach the service function as unrouted paths do)."},
	{http.MethodGet, "/docs/errors", Service, "The errors reference that error.doc_url anchors into."},
	{http.MethodGet, "/docs/ai-labels", Service, "The AI-assist label set, its values, confidence and rules (spec 4.5)."},
	{http.MethodGet, "/console", Service, "Console web page (also at /console/): sign in with the console token."},
	{"ANY", "/console/{proxy+}", Service, "Console page files (/console/assets/...), session (/console/session) and console API: an account's keys, balance, ledger, usage and status (Bearer console token or the page's session cookie)."},
	{"ANY", "/admin", Service, "Operator API root (x-admin-token; IAM-protected in AWS)."},
	{"ANY", "/admin/{proxy+}", Service, "Operator API: accounts and grants (x-admin-token; IAM-protected in AWS)."},
}

// Named is a parameter shape reused under another name and description.
func (p Param) Named(name, description string) Param {
	p.Name, p.Description = name, description
	return p
}

// platformIndexes adds a free index to every platform with data endpoints,
// so /v1/{platform} lists what the platform offers (spec 4.1).
func platformIndexes(eps []Endpoint) []Endpoint {
	families := map[string]Family{}
	for _, e := range eps {
		if e.Kind == Data {
			families[e.Platform] = e.Family
		}
	}
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		eps = append(eps, Endpoint{
			Platform: name, Family: families[name], Kind: ServiceOwned, Origin: Derived,
			Name: name + " index", Description: "The endpoints of " + name + ", with cost and parameters.",
		})
	}
	return eps
}

// Declarations returns every declaration of the production registry.
func Declarations() []Endpoint {
	var all []Endpoint
	for _, group := range [][]Endpoint{commerce, knowledge, social, media, apps, places, webAndBundles, service, creators()} {
		all = append(all, group...)
	}
	return platformIndexes(all)
}

var (
	defaultOnce sync.Once
	defaultReg  *Registry
)

// Default is the production registry. Its declarations are checked by
// tests, so a bad one fails the build rather than a request.
func Default() *Registry {
	defaultOnce.Do(func() {
		r, err := New(Declarations())
		if err != nil {
			panic(err)
		}
		defaultReg = r
	})
	return defaultReg
}

// monitorID is the id every monitor endpoint lifts from its path.
func monitorID() Param {
	return P("id", String, "Monitor id.").Req().Match("mon_[a-z0-9]{26}", "a monitor id such as mon_01jb2c3d4e5f6g7h8j9k0m1n2p").Ex("mon_01jb2c3d4e5f6g7h8j9k0m1n2p")
}
