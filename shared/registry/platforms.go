package registry

// PlatformKinds says what each platform segment is (spec part 1's table of
// neutral identifiers, and the service-owned segments). Catalogues and the
// OpenAPI tags read it; a test keeps it complete.
var PlatformKinds = map[string]string{
	"marketplace_a":        "Global consumer marketplace (A).",
	"marketplace_b":        "Global consumer marketplace (B).",
	"retailer_a":           "Department-store retailer.",
	"craft_market":         "Handmade-goods marketplace.",
	"shopping_comparison":  "Shopping comparison and instalment-payments site.",
	"company_registry":     "National company register.",
	"photo_social":         "Photo and reel social network.",
	"short_video_a":        "Short-video social network.",
	"microblog_a":          "Decentralised microblog network.",
	"microblog_b":          "Microblog network (B).",
	"microblog_c":          "Threaded-text social network.",
	"social_a":             "Large general social network (people, events).",
	"professional_network": "Professional networking site.",
	"video_platform":       "Video sharing platform.",
	"app_store_a":          "Mobile app store (A).",
	"app_store_b":          "Mobile app store (B).",
	"property_portal":      "Property listing portal.",
	"travel_booking":       "Travel booking site.",
	"lodging_marketplace":  "Lodging marketplace.",
	"qa_site":              "Question-and-answer site.",
	"code_host":            "Source-code hosting site.",
	"web":                  "Generic web operations: linked profiles and asynchronous web jobs.",
	"bundle":               "Cross-platform research bundles.",
	"search":               "Search across platforms.",
	"utility":              "Discovery: the catalogue, one endpoint in full, a quickstart and the catalogue for agents. Free.",
	"credits":              "The account's balance and ledger. Free.",
	"status":               "Per-platform health over the last 15 minutes. Free.",
	"monitors":             "Monitors and their runs.",
	"assist":               "AI-assist: records an answer removed or stubbed, recalled for 24 hours by their owner. Free.",
	"batch":                "Up to 20 requests in one call, each billed on its own.",
}
