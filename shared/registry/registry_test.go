package registry

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// specTable is spec 4.6 (and 4.2, 4.3): path, required params, any-of
// groups and list price, as written there.
var specTable = []struct {
	key      string
	required []string
	anyOf    [][]string
	cost     int64
	ai       bool
}{
	{"marketplace_a/search", []string{"query"}, nil, 3, false},
	{"marketplace_a/similar", nil, [][]string{{"product_id", "query"}}, 3, false},
	{"company_registry/search", []string{"query"}, nil, 1, false},
	{"photo_social/post-stats", []string{"url"}, nil, 5, false},
	{"retailer_a/search", []string{"query"}, nil, 3, false},
	{"microblog_a/search", []string{"query"}, nil, 3, true},
	{"bundle/creator-vetting", []string{"handle", "platform"}, nil, 8, false},
	{"microblog_b/search-posts", []string{"query"}, nil, 1, true},
	{"microblog_b/profile", []string{"handle"}, nil, 2, true},
	{"web/social-profiles", []string{"platform", "handle"}, nil, 15, false},
	{"app_store_a/app-info", []string{"app_id"}, nil, 1, false},
	{"craft_market/reviews", []string{"id"}, nil, 4, false},
	{"marketplace_b/deals", nil, nil, 5, false},
	{"marketplace_b/shop", []string{"url"}, nil, 14, false},
	{"app_store_b/categories", nil, nil, 0, false},
	{"property_portal/search-sale", nil, nil, 3, false},
	{"social_a/search-people", []string{"query"}, nil, 12, true},
	{"social_a/event", nil, [][]string{{"id", "url"}}, 2, false},
	{"social_a/events-search", []string{"query"}, nil, 2, true},
	{"travel_booking/search-attractions", nil, [][]string{{"location", "destination_id"}}, 3, false},
	{"travel_booking/hotel", []string{"id", "checkin", "checkout"}, nil, 3, false},
	{"qa_site/question", []string{"url"}, nil, 2, false},
	{"shopping_comparison/product", []string{"id", "category"}, nil, 3, false},
	{"professional_network/search-people", nil, [][]string{{"query", "search_url"}}, 8, true},
	{"video_platform/search", []string{"query"}, nil, 1, false},
	{"utility/endpoints", nil, nil, 0, false},
	{"utility/endpoint", nil, [][]string{{"id", "url"}}, 0, false},
	{"utility/quickstart", nil, nil, 0, false},
	{"utility/llms", nil, nil, 0, false},
	{"credits/balance", nil, nil, 0, false},
	{"credits/transactions", nil, nil, 0, false},
	{"status", nil, nil, 0, false},
	{"batch", nil, nil, 0, false},
}

// namedOnly are the operations spec 4.6 names without details.
var namedOnly = []string{
	"search/all", "search/creators", "code_host/profile", "code_host/profile/repos", "code_host/repo/issues",
	"microblog_a/profile", "monitors/{id}/runs", "web/jobs/{id}", "professional_network/locations",
	"professional_network/schools", "professional_network/industries", "property_portal/locations",
	"travel_booking/locations", "travel_booking/search-hotels", "lodging_marketplace/locations", "assist/recall",
}

func TestRegistryHasEverySpecEndpoint(t *testing.T) {
	r := Default()
	for _, row := range specTable {
		e, ok := r.Endpoint(row.key)
		if !ok {
			t.Errorf("%s is not registered", row.key)
			continue
		}
		if e.Cost != row.cost || e.AI != row.ai || e.Origin != SpecListed {
			t.Errorf("%s: cost %d ai %v origin %s; spec says cost %d ai %v", row.key, e.Cost, e.AI, e.Origin, row.cost, row.ai)
		}
		var required []string
		for _, p := range e.Params {
			if p.Required {
				required = append(required, p.Name)
			}
		}
		if !slices.Equal(required, row.required) {
			t.Errorf("%s required %v, spec %v", row.key, required, row.required)
		}
		if len(e.AnyOf) != len(row.anyOf) || (len(row.anyOf) > 0 && !slices.Equal(e.AnyOf[0], row.anyOf[0])) {
			t.Errorf("%s any-of %v, spec %v", row.key, e.AnyOf, row.anyOf)
		}
	}
	if e, _ := r.Endpoint("marketplace_a/similar"); !e.LimitedCapacity {
		t.Error("marketplace_a/similar is limited capacity")
	}
	if e, _ := r.Endpoint("batch"); e.HTTPMethod() != http.MethodPost || e.Family != Batch {
		t.Error("batch is POST /v1/batch on the batch function")
	}
	if e, _ := r.Endpoint("lodging_marketplace/locations"); e.Origin != SpecNamed {
		t.Error("lodging_marketplace/locations parameters are not shown by the spec")
	}
}

func TestNamedOnlyOperationsDocumentTheirChoice(t *testing.T) {
	r := Default()
	for _, key := range namedOnly {
		e, ok := r.Endpoint(key)
		if !ok {
			t.Errorf("%s is not registered", key)
			continue
		}
		if e.Origin != SpecNamed || len(e.Decision) < 40 {
			t.Errorf("%s must be SpecNamed with a written decision", key)
		}
	}
	var named []string
	for _, e := range r.Endpoints() {
		if e.Origin == SpecNamed {
			named = append(named, e.Key())
		}
	}
	if len(named) != len(namedOnly) {
		t.Errorf("unexpected SpecNamed set %v", named)
	}
}

func TestSpecDetailsOfParameters(t *testing.T) {
	r := Default()
	param := func(key, name string) *Param {
		e, ok := r.Endpoint(key)
		if !ok {
			t.Fatalf("%s missing", key)
		}
		p, ok := e.Lookup(name)
		if !ok {
			t.Fatalf("%s has no %s", key, name)
		}
		return p
	}
	bounds := []struct {
		key, name string
		min, max  float64
	}{
		{"company_registry/search", "limit", 1, 100},
		{"microblog_a/search", "limit", 1, 100},
		{"retailer_a/search", "limit", 1, 120},
		{"video_platform/search", "max_results", 1, 50},
		{"bundle/creator-vetting", "posts_limit", 1, 20},
		{"bundle/creator-vetting", "comment_posts", 0, 10},
		{"bundle/creator-vetting", "comments_per_post", 1, 50},
		{"travel_booking/hotel", "adults", 1, 30},
		{"travel_booking/hotel", "rooms", 1, 30},
		{"microblog_a/search", "tokens", 256, 32000},
		{"craft_market/reviews", "rating", 1, 5},
	}
	for _, b := range bounds {
		p := param(b.key, b.name)
		if p.Min == nil || p.Max == nil || *p.Min != b.min || *p.Max != b.max {
			t.Errorf("%s %s bounds %v..%v, spec %v..%v", b.key, b.name, p.Min, p.Max, b.min, b.max)
		}
	}
	defaults := map[[2]string]string{
		{"company_registry/search", "limit"}:            "20",
		{"retailer_a/search", "limit"}:                  "120",
		{"bundle/creator-vetting", "posts_limit"}:       "20",
		{"bundle/creator-vetting", "comment_posts"}:     "3",
		{"bundle/creator-vetting", "comments_per_post"}: "20",
		{"marketplace_b/deals", "country"}:              "GB",
		{"app_store_a/app-info", "country"}:             "us",
		{"microblog_b/search-posts", "mode"}:            "latest",
		{"microblog_b/profile", "judgments"}:            "on",
	}
	for k, want := range defaults {
		if got := param(k[0], k[1]).Default; got != want {
			t.Errorf("%s %s default %q, spec %q", k[0], k[1], got, want)
		}
	}
	if got := param("microblog_b/search-posts", "mode").Aliases; !slices.Equal(got, []string{"sort", "sort_by"}) {
		t.Errorf("mode aliases in precedence order: %v", got)
	}
	if got := param("professional_network/search-people", "location").Aliases; !slices.Equal(got, []string{"geocode_location"}) {
		t.Errorf("geocode_location is an alias of location: %v", got)
	}
	if got := param("microblog_a/search", "goal"); got.MaxLength != 600 || got.RequiredWhen != [2]string{"fit", "goal"} {
		t.Errorf("goal: %+v", got)
	}
	if got := param("property_portal/search-sale", "radius").Enum; !slices.Equal(got, []string{"0", "0.25", "0.5", "1", "3", "5", "10", "15", "20", "30", "40"}) {
		t.Errorf("radius: %v", got)
	}
	if got := param("property_portal/search-sale", "added").Enum; !slices.Equal(got, []string{"1", "3", "7", "14", "30"}) {
		t.Errorf("added: %v", got)
	}
	if got := param("bundle/creator-vetting", "platform").Enum; !slices.Equal(got, []string{"short_video_a", "photo_social", "video_platform", "microblog_b", "microblog_c"}) {
		t.Errorf("creator-vetting platform: %v", got)
	}
}

func TestEveryDataEndpointAcceptsDryRunAndOnlyAIEndpointsTheAISet(t *testing.T) {
	for _, e := range Default().Endpoints() {
		_, dry := e.Lookup("dry_run")
		if dry != (e.Kind == Data) {
			t.Errorf("%s: dry_run accepted %v, kind %s", e.Key(), dry, e.Kind)
		}
		for _, name := range []string{"judgments", "label", "label_evidence", "exclude", "fit", "goal", "tokens"} {
			p, ok := e.Lookup(name)
			own := ok && slices.ContainsFunc(e.Params, func(q Param) bool { return q.Name == p.Name })
			if ok != e.AI && !own { // property_portal's own "label" is not the AI one
				t.Errorf("%s: AI parameter %s accepted %v, AI %v", e.Key(), name, ok, e.AI)
			}
		}
	}
}

func TestIdentifierRule(t *testing.T) {
	cases := map[string]bool{
		"search":                    false,
		"search-posts":              false,
		"profile":                   false,
		"abcdefghijklmnopqrstuvwx":  false, // 24 characters: still a word
		"abcdefghijklmnopqrstuvwxy": true,  // 25
		"12345":                     true,
		"mon_abc":                   true,
		"a1":                        true,
		"_":                         true,
		"ééééééééééééééééééééééé":    false, // 23 runes, 46 bytes: counted in characters
		"éééééééééééééééééééééééééé": true,
	}
	for seg, want := range cases {
		if got := IsIdentifier(seg); got != want {
			t.Errorf("IsIdentifier(%q) = %v", seg, got)
		}
	}
}

func TestPlatformsAreServedByOneFamily(t *testing.T) {
	r := Default()
	for _, e := range r.Endpoints() {
		if f, _ := r.FamilyOf(e.Platform); f != e.Family {
			t.Errorf("%s: family %s, platform family %s", e.Key(), e.Family, f)
		}
	}
	want := map[string]Family{
		"marketplace_a": Commerce, "marketplace_b": Commerce, "retailer_a": Commerce, "craft_market": Commerce, "shopping_comparison": Commerce,
		"photo_social": Social, "microblog_a": Social, "microblog_b": Social, "social_a": Social, "professional_network": Social,
		"video_platform": Media, "app_store_a": Apps, "app_store_b": Apps,
		"property_portal": Places, "travel_booking": Places, "lodging_marketplace": Places,
		"company_registry": Knowledge, "qa_site": Knowledge, "code_host": Knowledge,
		"web": Web, "bundle": Bundle, "search": Search,
		"utility": Service, "credits": Service, "status": Service, "monitors": Service, "batch": Batch,
	}
	for p, f := range want {
		if got, ok := r.FamilyOf(p); !ok || got != f {
			t.Errorf("%s is served by %q, want %s", p, got, f)
		}
	}
}

func TestNewRejectsAmbiguousDeclarations(t *testing.T) {
	base := func() Endpoint {
		return Endpoint{Platform: "p", ID: "things", Name: "n", Family: Commerce, Kind: Data, Origin: SpecListed,
			Params: []Param{P("id", String, "")}}
	}
	with := func(f func(*Endpoint)) Endpoint { e := base(); f(&e); return e }
	cases := map[string][]Endpoint{
		"duplicate":              {base(), base()},
		"identifier word":        {with(func(e *Endpoint) { e.ID = "things2" })},
		"uppercase word":         {with(func(e *Endpoint) { e.ID = "Things" })},
		"undeclared path param":  {with(func(e *Endpoint) { e.ID = "things/{nope}" })},
		"undeclared get param":   {with(func(e *Endpoint) { e.GetParam = "nope" })},
		"undeclared any-of":      {with(func(e *Endpoint) { e.AnyOf = [][]string{{"nope"}} })},
		"paid service endpoint":  {with(func(e *Endpoint) { e.Kind = ServiceOwned; e.Cost = 1 })},
		"named without decision": {with(func(e *Endpoint) { e.Origin = SpecNamed })},
		"missing name":           {with(func(e *Endpoint) { e.Name = "" })},
		"duplicate param":        {with(func(e *Endpoint) { e.Params = append(e.Params, P("id", Integer, "")) })},
		"alias clash":            {with(func(e *Endpoint) { e.Params = append(e.Params, P("key", String, "").Alias("id")) })},
		"bad pattern":            {with(func(e *Endpoint) { e.Params[0].Pattern = "(" })},
		"typeless param":         {with(func(e *Endpoint) { e.Params[0].Type = "" })},
		"split platform":         {base(), with(func(e *Endpoint) { e.ID = "other"; e.Family = Social })},
		"same shape twice": {with(func(e *Endpoint) { e.GetParam = "id" }),
			with(func(e *Endpoint) { e.ID = "things/{id}" })},
		"retired for unknown": {with(func(e *Endpoint) { e.RetiredFor = "/v1/p/gone" })},
	}
	for name, eps := range cases {
		if _, err := New(eps); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := New([]Endpoint{base(), with(func(e *Endpoint) { e.ID = "old"; e.RetiredFor = "/v1/p/things" })}); err != nil {
		t.Errorf("a valid retirement was refused: %v", err)
	}
}

func TestRoutesCoverEveryPlatformAndSurface(t *testing.T) {
	r := Default()
	routes := r.Routes()
	cases := []struct {
		method, path string
		want         Family
	}{
		{"GET", "/v1", Service},
		{"GET", "/v1/marketplace_a/search", Commerce},
		{"GET", "/v1/marketplace_a", Commerce},
		{"GET", "/v1/social_a/event/123", Social},
		{"GET", "/v1/code_host/profile/repos", Knowledge},
		{"GET", "/v1/monitors/mon_1/runs", Service},
		{"GET", "/v1/web/jobs/job_1", Web},
		{"GET", "/v1/search/all", Search},
		{"POST", "/v1/batch", Batch},
		{"GET", "/v1/status", Service},
		{"GET", "/v1/utility/endpoints", Service},
		{"GET", "/sandbox", Sandbox},
		{"GET", "/sandbox/marketplace_a/search", Sandbox},
		{"POST", "/mcp", MCP},
		{"GET", "/openapi.json", Service},
		{"GET", "/docs/errors", Service},
		{"GET", "/v1/unknown/thing", Service}, // $default
		{"GET", "/elsewhere", Service},
		{"GET", "/v1/marketplace_ab/search", Service}, // prefix of a platform name is not that platform
	}
	table := NewRouteTable(routes)
	for _, c := range cases {
		if got := table.Match(c.method, c.path); got.Family != c.want {
			t.Errorf("%s %s -> %s (%s), want %s", c.method, c.path, got.Family, got.Path, c.want)
		}
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		key := rt.Method + " " + rt.Path
		if seen[key] {
			t.Errorf("route %s twice", key)
		}
		seen[key] = true
	}
	for _, p := range r.Platforms() {
		if p != "" && !seen["ANY /v1/"+p+"/{proxy+}"] {
			t.Errorf("platform %s has no route", p)
		}
	}
}

func TestLiveEntries(t *testing.T) {
	r := Default()
	for _, e := range r.Live() {
		if e.Retired() {
			t.Fatalf("%s is retired", e.Key())
		}
		entry := e.Entry()
		if entry.ID != e.Key() || entry.Name == "" || entry.Description == "" || entry.Params == nil {
			t.Errorf("%s: incomplete entry %+v", e.Key(), entry)
		}
		if e.Kind == Data && !strings.HasPrefix(e.SandboxPath(), "/sandbox/"+e.Platform+"/") {
			t.Errorf("%s sandbox path %s", e.Key(), e.SandboxPath())
		}
	}
}

// Every platform segment says what kind of platform it is (spec part 1):
// the OpenAPI tags and catalogues describe platforms with it.
func TestEveryPlatformHasAKind(t *testing.T) {
	for _, name := range Default().Platforms() {
		if name == "" {
			continue
		}
		if PlatformKinds[name] == "" {
			t.Errorf("%s has no entry in PlatformKinds", name)
		}
	}
}

// TestRouteTablePrecedence checks API Gateway's precedence on a table
// built to make each rule decide: exact beats greedy, the longest greedy
// prefix wins, a named method beats ANY at the same path, {proxy+} needs
// a character after its slash, and $default takes the rest.
func TestRouteTablePrecedence(t *testing.T) {
	table := NewRouteTable([]Route{
		{Method: "ANY", Path: "/a/{proxy+}", Family: "greedy-a"},
		{Method: "GET", Path: "/a/b/{proxy+}", Family: "greedy-ab-get"},
		{Method: "ANY", Path: "/a/b/{proxy+}", Family: "greedy-ab-any"},
		{Method: "ANY", Path: "/a/b/c", Family: "exact-abc-any"},
		{Method: "POST", Path: "/a/b/c", Family: "exact-abc-post"},
		{Method: "GET", Path: "/x", Family: "exact-x-get"},
		{Method: "ANY", Path: DefaultRoute, Family: "default"},
	})
	cases := []struct {
		method, path string
		want         Family
	}{
		{"POST", "/a/b/c", "exact-abc-post"},
		{"GET", "/a/b/c", "exact-abc-any"},
		{"GET", "/a/b/d", "greedy-ab-get"},
		{"PUT", "/a/b/d", "greedy-ab-any"},
		{"GET", "/a/b/c/d", "greedy-ab-get"},
		{"GET", "/a/b/", "greedy-a"}, // nothing after /a/b/, so /a/{proxy+} with "b/"
		{"GET", "/a/b", "greedy-a"},
		{"GET", "/a/", "default"},
		{"GET", "/a", "default"},
		{"GET", "/x", "exact-x-get"},
		{"POST", "/x", "default"}, // the only /x route names GET
		{"GET", "/", "default"},
		{"GET", "", "default"},
	}
	for _, c := range cases {
		if got := table.Match(c.method, c.path); got.Family != c.want {
			t.Errorf("%s %q -> %s, want %s", c.method, c.path, got.Family, c.want)
		}
	}
	if got := NewRouteTable(nil).Match("GET", "/v1"); got != (Route{}) {
		t.Errorf("an empty table matched %+v", got)
	}
}
