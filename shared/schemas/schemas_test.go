package schemas

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/registry"
)

// liveDataKeys lists every data endpoint of the production registry that is
// not retired.
func liveDataKeys(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range registry.Default().Endpoints() {
		if e.Kind == registry.Data && !e.Retired() {
			out = append(out, e.Key())
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatal("registry has no live data endpoints")
	}
	return out
}

func TestEveryDataEndpointHasExactlyOneSchema(t *testing.T) {
	want := liveDataKeys(t)
	if got := Keys(); !slices.Equal(got, want) {
		missing, extra := diff(want, got), diff(got, want)
		t.Fatalf("schemas and live data endpoints differ:\nmissing schema: %v\nschema without live data endpoint: %v", missing, extra)
	}
	// The directory on disk holds nothing but those files: no file that
	// the embed pattern skips and no second spelling of a key.
	entries, err := os.ReadDir("data")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, de := range entries {
		files = append(files, de.Name())
	}
	var wantFiles []string
	for _, k := range want {
		wantFiles = append(wantFiles, FileName(k))
	}
	sort.Strings(files)
	sort.Strings(wantFiles)
	if !slices.Equal(files, wantFiles) {
		t.Fatalf("data/ holds unexpected files %v and lacks %v", diff(files, wantFiles), diff(wantFiles, files))
	}
	for _, e := range registry.Default().Endpoints() {
		if _, ok := For(e.Key()); ok != (e.Kind == registry.Data && !e.Retired()) {
			t.Errorf("For(%q) found=%v, kind %s retired=%v", e.Key(), ok, e.Kind, e.Retired())
		}
	}
}

func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestFileNaming(t *testing.T) {
	cases := map[string]string{
		"marketplace_a/search":    "marketplace_a__search.json",
		"code_host/profile/repos": "code_host__profile__repos.json",
		"web/jobs/{id}":           "web__jobs__{id}.json",
		"monitors/{id}/runs":      "monitors__{id}__runs.json",
		"status":                  "status.json",
	}
	for key, file := range cases {
		if got := FileName(key); got != file {
			t.Errorf("FileName(%q) = %q, want %q", key, got, file)
		}
		if got, ok := keyOf(file); !ok || got != key {
			t.Errorf("keyOf(%q) = %q, %v, want %q", file, got, ok, key)
		}
	}
	if got, want := ID("web/jobs/{id}"), "https://meridian.example/schemas/web/jobs/%7Bid%7D.json"; got != want {
		t.Errorf("ID = %q, want %q", got, want)
	}
	// Every registered key, data or not, round-trips.
	for _, e := range registry.Default().Endpoints() {
		if e.Platform == "" {
			continue
		}
		if got, ok := keyOf(FileName(e.Key())); !ok || got != e.Key() {
			t.Errorf("%s does not round-trip through its file name (%q)", e.Key(), got)
		}
	}
}

func TestEverySchemaCompilesAndCarriesTheContract(t *testing.T) {
	for _, key := range Keys() {
		raw, _ := For(key)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		for field, want := range map[string]any{
			"$schema":            Draft,
			"x-contract-version": ContractVersion,
			"$id":                ID(key),
			"type":               "object",
		} {
			if doc[field] != want {
				t.Errorf("%s: %s = %v, want %v", key, field, doc[field], want)
			}
		}
		for _, field := range []string{"title", "description"} {
			if s, _ := doc[field].(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s: %s is empty", key, field)
			}
		}
		if _, err := compile(key, raw); err != nil {
			t.Errorf("%s does not compile under draft 2020-12: %v", key, err)
		}
		if _, err := byKey[key].compiled(key); err != nil {
			t.Errorf("%s: cached compile: %v", key, err)
		}
	}
}

// TestConventions holds every schema to spec 2.4: documented fields are
// optional and nullable, and additional fields are never refused. The one
// exception is the rule spec 2.7 states for lodging_marketplace/locations.
func TestConventions(t *testing.T) {
	for _, key := range Keys() {
		raw, _ := For(key)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		walk(t, key, "", doc, key == "lodging_marketplace/locations")
	}
}

func walk(t *testing.T, key, at string, node map[string]any, lodging bool) {
	t.Helper()
	// An array says what its elements are, an empty schema where the spec
	// shows no element fields: OpenAPI linters and client generators need it.
	isArray := node["type"] == "array"
	if types, ok := node["type"].([]any); ok {
		isArray = slices.Contains(types, any("array"))
	}
	if _, ok := node["items"]; isArray && !ok {
		t.Errorf("%s%s: an array without items", key, at)
	}
	for kw, v := range node {
		switch kw {
		case "additionalProperties", "unevaluatedProperties":
			if b, ok := v.(bool); ok && !b {
				t.Errorf("%s%s: %s false refuses additional fields", key, at, kw)
			}
		case "required":
			if !(lodging && (at == "" || strings.Contains(at, "/anyOf/"))) {
				t.Errorf("%s%s: required %v; spec 2.4 makes every documented field optional", key, at, v)
			}
		}
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for name, p := range props {
			ps, _ := p.(map[string]any)
			here := at + "/properties/" + name
			exempt := lodging && (here == "/properties/items" || strings.Contains(at, "/anyOf/"))
			if types, ok := ps["type"].([]any); !exempt && (!ok || !slices.Contains(types, any("null"))) {
				t.Errorf("%s%s: type %v does not allow null", key, here, ps["type"])
			}
			walk(t, key, here, ps, lodging)
		}
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		walk(t, key, at+"/additionalProperties", ap, lodging)
	}
	if items, ok := node["items"].(map[string]any); ok {
		walk(t, key, at+"/items", items, lodging)
	}
	if branches, ok := node["anyOf"].([]any); ok {
		for i, b := range branches {
			bs, _ := b.(map[string]any)
			walk(t, key, at+"/anyOf/"+strconv.Itoa(i), bs, lodging)
		}
	}
}

// specShapes are the endpoints whose data spec 2.7 shows; every other
// schema is a shape Meridian chose and must say so.
var specShapes = map[string]bool{
	"marketplace_a/search": true, "marketplace_a/similar": true, "company_registry/search": true,
	"photo_social/post-stats": true, "retailer_a/search": true, "microblog_a/search": true,
	"bundle/creator-vetting": true, "microblog_b/search-posts": true, "microblog_b/profile": true,
	"web/social-profiles": true, "app_store_a/app-info": true, "craft_market/reviews": true,
	"marketplace_b/deals": true, "app_store_b/categories": true, "property_portal/search-sale": true,
	"social_a/search-people": true, "travel_booking/search-attractions": true, "travel_booking/hotel": true,
	"qa_site/question": true, "marketplace_b/shop": true, "shopping_comparison/product": true,
	"professional_network/search-people": true, "social_a/event": true, "social_a/events-search": true,
	"lodging_marketplace/locations": true,
}

func TestChosenShapesSaySo(t *testing.T) {
	for _, key := range Keys() {
		raw, _ := For(key)
		var doc struct{ Description string }
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.HasPrefix(doc.Description, "Shape chosen by Meridian: "), !specShapes[key]; got != want {
			t.Errorf("%s: description starts with \"Shape chosen by Meridian\" = %v, want %v", key, got, want)
		}
	}
	for key := range specShapes {
		if _, ok := For(key); !ok {
			t.Errorf("spec 2.7 shows %s, which has no schema", key)
		}
	}
}

// examples holds, for every schema, a minimal valid data object and one
// that breaks a stated type.
var examples = map[string]struct{ valid, invalid string }{
	"marketplace_a/search": {
		`{"items":[{"id":"1005006123456789","price":9.5,"rating":{"value":4.8,"max":5},"promotion_price":{"min":7,"max":8}}],"count":1,"cursor":null,"has_more":true}`,
		`{"items":[{"id":1005006123456789}]}`},
	"marketplace_a/similar": {
		`{"source_product_id":"1005","items":[{"id":"1","promotion_price":7.5,"category":{"id":"3","parent":null},"images":["https://img.example/1.jpg"]}]}`,
		`{"items":[{"promotion_price":{"min":1}}]}`},
	"company_registry/search": {
		`{"items":[{"company_number":"01234567","name":"ACME LTD"}],"total_results":1,"dropped":0}`,
		`{"items":[{"company_number":1234567}]}`},
	"photo_social/post-stats": {
		`{"id":"ABC123","stats":{"likes":10,"comments":null,"saves":null},"legs":[{"endpoint":"photo_social/post","ok":true,"status":200}],"retrieved_at":"2026-09-22T10:00:00Z"}`,
		`{"stats":{"likes":"10"}}`},
	"retailer_a/search": {
		`{"items":[{"id":"1","sku_ids":["a"],"ships":true,"rating":{"value":4,"max":5,"votes":12}}],"sorts":[{"id":"relevance","active":true}]}`,
		`{"items":[{"sku_ids":[1]}]}`},
	"microblog_a/search": {
		`{"items":[{"id":"at://did:example:abc/post/1","author":{"handle":"alice.example.com"},"likes":null,"is_repost":false}],"cursor":"c1","_warnings":[]}`,
		`{"items":[{"is_reply":"no"}]}`},
	"bundle/creator-vetting": {
		`{"output":{"posts_sampled":20,"posting_cadence_days":null},"post_evidence":[{"id":"1","count_sources":{"likes":{"endpoint":"microblog_b/posts","id":"1","field":"likes"},"views":null}}],"_meta":{"methodology_version":"1"},"comment_sample":[{"text":"nice"}]}`,
		`{"metrics_hydration":{"missing_ids":[123]}}`},
	"microblog_b/search-posts": {
		`{"items":[{"id":"1790000000000000000","stats":{"likes":3},"media":[]}],"has_more":null}`,
		`{"items":[{"author":{"handle":7}}]}`},
	"microblog_b/profile": {
		`{"id":"44196397","handle":"example","followers":10,"verified":false}`,
		`{"followers":"10k"}`},
	"web/social-profiles": {
		`{"items":[{"platform":"photo_social","handle":"ex","confidence":0.9,"evidence":["bio link"]}],"partial":false,"link_in_bio_urls":[]}`,
		`{"partial":"yes"}`},
	"app_store_a/app-info": {
		`{"id":"284882215","price":{"amount":0,"free":true},"rating":{"average":4.5},"similar_apps":[]}`,
		`{"id":284882215}`},
	"craft_market/reviews": {
		`{"items":[{"id":"1","rating":5,"author":{"name":"A"}}],"rating_distribution":{"All":12,"5 stars":10}}`,
		`{"rating_distribution":{"All":"12"}}`},
	"marketplace_b/deals": {
		`{"items":[{"asin":"B000TEST00","price":9.99,"savings_percentage":20}],"marketplace":{"country":"GB","domain":"example.co.uk"}}`,
		`{"items":[{"savings_percentage":"20%"}]}`},
	"app_store_b/categories": {
		`{"items":[{"code":"6014","name":"Games"}],"count":1,"has_more":false}`,
		`{"items":[{"code":6014}]}`},
	"property_portal/search-sale": {
		`{"items":[{"id":"1","price":350000,"floor_area":{"value":80,"units":"sqm"},"images":["https://img.example/1.jpg"]}],"location":{"identifier":"REGION^1"}}`,
		`{"items":[{"premium":"yes"}]}`},
	"social_a/search-people": {
		`{"items":[{"id":"100","name":"Jane","verified":null}],"query":"Jane"}`,
		`{"items":[{"id":100}]}`},
	"travel_booking/search-attractions": {
		`{"items":[{"id":"P1","price":{"amount":25,"currency":"EUR"},"offers":3}],"destination":{"id":"-2167973"}}`,
		`{"items":[{"price":25}]}`},
	"travel_booking/hotel": {
		`{"id":"123456","offers":[{"cancellation":"free"}],"rooms":[],"latitude":38.7,"facilities":["Wifi"]}`,
		`{"facilities":"Wifi"}`},
	"qa_site/question": {
		`{"id":"q1","answers":[{"id":"a1","author":{"anonymous":true},"upvotes":3}],"topics":[{"name":"Go"}]}`,
		`{"answers":[{"collapsed":"no"}]}`},
	"marketplace_b/shop": {
		`{"handle":"ex","products":[{"asin":"B0","rank":1}],"posts":[{"id":"p1","pinned":true}]}`,
		`{"products":[{"price":"9.99"}]}`},
	"shopping_comparison/product": {
		`{"id":"1","installment":{"price":10,"term_length":4},"specifications":[{"name":"RAM","value":"16 GB"}]}`,
		`{"installment":{"term_length":"4"}}`},
	"professional_network/search-people": {
		`{"items":[{"id":"ACoAAB","followers":500}],"count":1,"total":null}`,
		`{"items":[{"verified":"true"}]}`},
	"video_platform/search": {
		`{"items":[{"id":"dQw4w9WgXcQ","type":"video","views":"1.2M views","channel":{"id":"UC1"}}],"cursor":"tok"}`,
		`{"items":[{"id":42}]}`},
	"microblog_b/posts": {
		`{"items":[{"id":"2031265227600823506","type":"post","author":{"id":"1456789012345678901","handle":"sample_gopher"},"stats":{"likes":1480,"views":null},"hashtags":["golang"]}],"count":1,"cursor":null,"has_more":false}`,
		`{"items":[{"id":2031265227600823506}]}`},
	"microblog_b/comments": {
		`{"post_id":"2030920271262642177","items":[{"id":"2031097690321840129","author":{"id":"1500000000000000011","handle":"ana_reviews"},"likes":42,"replies":null,"in_reply_to_id":"2030920271262642177"}],"count":1,"cursor":"1jzu9lk96gu5","has_more":true,"_warnings":["older replies are missing"]}`,
		`{"items":[{"likes":"42"}]}`},
	"video_platform/profile": {
		`{"id":"UC_x5XG1OV2P6uZZ5FSM9Ttw","handle":"googledevelopers","followers":2400000,"follower_source_field":"statistics.subscriberCount","posts_count":6000}`,
		`{"followers":"2.4M"}`},
	"video_platform/posts": {
		`{"channel_id":"UC1","items":[{"id":"dQw4w9WgXcQ","duration":"PT4M13S","counts":{"likes":10,"comments":null,"shares":null,"views":100}}],"count":1,"cursor":"tok","has_more":true}`,
		`{"items":[{"counts":{"views":"100"}}]}`},
	"video_platform/comments": {
		`{"video_id":"dQw4w9WgXcQ","items":[{"id":"Ugz1","text":"nice","author":{"name":"@a","channel_id":"UC1"},"likes":3,"replies":0}],"has_more":false}`,
		`{"items":[{"author":{"channel_id":1}}]}`},
	"social_a/event": {
		`{"id":"123","location":{"latitude":1.2,"city":"Lisbon"},"hosts":[{"id":"9","verified":true}],"is_online":false}`,
		`{"is_canceled":"false"}`},
	"social_a/events-search": {
		`{"items":[{"id":"123","name":"Jazz night","starts_at":null}],"cursor":null}`,
		`{"items":[{"url":7}]}`},
	"lodging_marketplace/locations": {
		`{"items":[{"map_place_id":"ChIJ0"}],"query":"Lisbon","count":1}`,
		`{"items":[{"country_code":"","name":null}]}`},
	"microblog_a/profile": {
		`{"id":"did:example:abc","handle":"alice.example.com","followers":3}`,
		`{"handle":5}`},
	"code_host/profile": {
		`{"id":"4314092","handle":"golang","type":"organization","repos_count":50}`,
		`{"id":4314092}`},
	"code_host/profile/repos": {
		`{"items":[{"id":"23096959","full_name":"golang/go","stars":120000,"is_fork":false}],"cursor":"2"}`,
		`{"items":[{"stars":"120k"}]}`},
	"code_host/repo/issues": {
		`{"repo":"golang/go","items":[{"id":"1","number":1,"labels":["bug"],"state":"open"}]}`,
		`{"items":[{"labels":"bug"}]}`},
	"professional_network/locations": {
		`{"items":[{"id":"103035651","name":"Berlin"}],"query":"Berlin"}`,
		`{"items":[{"id":103035651}]}`},
	"professional_network/schools": {
		`{"items":[{"id":"1792","name":"Stanford University"}]}`,
		`{"items":[{"name":false}]}`},
	"professional_network/industries": {
		`{"items":[{"id":"4","name":"Software Development"}],"count":1}`,
		`{"count":"1"}`},
	"property_portal/locations": {
		`{"items":[{"identifier":"REGION^274","label":"Cambridge"}]}`,
		`{"items":[{"identifier":274}]}`},
	"travel_booking/locations": {
		`{"items":[{"id":"-2167973","city":"Lisbon","country_code":"pt"}]}`,
		`{"has_more":"no"}`},
	"travel_booking/search-hotels": {
		`{"items":[{"id":"123","price":{"amount":200,"currency":"EUR"},"sold_out":false}],"checkin_date":"2026-12-01"}`,
		`{"items":[{"price":200}]}`},
	"search/all": {
		`{"query":"golang","platforms":["microblog_a"],"items":[{"platform":"microblog_a","id":"x","likes":1}],"count":1}`,
		`{"platforms":"microblog_a"}`},
	"search/creators": {
		`{"items":[{"platform":"microblog_b","handle":"ex","followers":10,"verified":true}]}`,
		`{"items":[{"followers":"10"}]}`},
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad example %s: %v", s, err)
	}
	return v
}

func TestExamples(t *testing.T) {
	for _, key := range Keys() {
		ex, ok := examples[key]
		if !ok {
			t.Errorf("%s: no examples; add a valid and an invalid one", key)
			continue
		}
		if err := Validate(key, decode(t, ex.valid)); err != nil {
			t.Errorf("%s: valid example refused: %v", key, err)
		}
		if err := Validate(key, decode(t, ex.invalid)); err == nil {
			t.Errorf("%s: invalid example accepted: %s", key, ex.invalid)
		}
		// Additional fields are accepted (spec 2.4).
		extra := decode(t, ex.valid).(map[string]any)
		extra["x_new_field"] = map[string]any{"any": []any{1.0, "two", nil}}
		if err := Validate(key, extra); err != nil {
			t.Errorf("%s: an additional field is refused: %v", key, err)
		}
		// Every documented field is optional, except lodging's items.
		err := Validate(key, map[string]any{})
		if want := key == "lodging_marketplace/locations"; (err != nil) != want {
			t.Errorf("%s: Validate({}) = %v", key, err)
		}
		// data is an object.
		if err := Validate(key, []any{}); err == nil {
			t.Errorf("%s: an array is accepted as data", key)
		}
	}
	for key := range examples {
		if _, ok := For(key); !ok {
			t.Errorf("examples for %s, which has no schema", key)
		}
	}
}

func TestLodgingLocationsFollowsTheSpec(t *testing.T) {
	const key = "lodging_marketplace/locations"
	raw, ok := For(key)
	if !ok {
		t.Fatal("no schema")
	}
	var doc struct {
		Required   []string
		Properties map[string]struct {
			Type  any
			Items struct {
				Type       any
				Properties map[string]struct{ Type []string }
				AnyOf      []struct {
					Required   []string
					Properties map[string]struct {
						Type      string
						MinLength int
					}
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(doc.Required, []string{"items"}) {
		t.Errorf("required = %v, want [items]", doc.Required)
	}
	items := doc.Properties["items"]
	if items.Type != "array" || items.Items.Type != "object" {
		t.Errorf("items type %v of %v, want array of object", items.Type, items.Items.Type)
	}
	for field, typ := range map[string]string{"count": "number", "has_more": "boolean", "query": "string"} {
		if got, want := doc.Properties[field].Type, []any{typ, "null"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s type = %v, want %v", field, got, want)
		}
	}
	five := []string{"country_code", "display_name", "map_place_id", "id", "name"}
	if len(items.Items.Properties) != len(five) || len(items.Items.AnyOf) != len(five) {
		t.Fatalf("item declares %d fields and %d anyOf branches, want %d each", len(items.Items.Properties), len(items.Items.AnyOf), len(five))
	}
	for i, f := range five {
		if got := items.Items.Properties[f].Type; !slices.Equal(got, []string{"string", "null"}) {
			t.Errorf("item %s type = %v, want string or null", f, got)
		}
		b := items.Items.AnyOf[i]
		if p := b.Properties[f]; !slices.Equal(b.Required, []string{f}) || p.Type != "string" || p.MinLength != 1 || len(b.Properties) != 1 {
			t.Errorf("anyOf[%d] = %+v, want %s required as a non-empty string", i, b, f)
		}
	}

	cases := []struct {
		data  string
		valid bool
	}{
		{`{"items":[]}`, true},
		{`{"items":[{"id":"1"}]}`, true},
		{`{"items":[{"country_code":"PT"}]}`, true},
		{`{"items":[{"display_name":"Lisbon, Portugal"}]}`, true},
		{`{"items":[{"name":"Lisbon","id":null,"map_place_id":"","extra":{"a":1}}]}`, true},
		{`{"items":[{"id":"1"}],"count":null,"has_more":null,"query":null}`, true},
		{`{"items":[{"id":"1"}],"count":1,"has_more":false,"query":"Lisbon","_warnings":["x"]}`, true},
		{`{}`, false},
		{`{"items":null}`, false},
		{`{"items":{}}`, false},
		{`{"items":[{}]}`, false},
		{`{"items":[null]}`, false},
		{`{"items":["Lisbon"]}`, false},
		{`{"items":[{"extra":"Lisbon"}]}`, false},
		{`{"items":[{"country_code":null,"display_name":null,"map_place_id":null,"id":null,"name":null}]}`, false},
		{`{"items":[{"country_code":"","display_name":"","map_place_id":"","id":"","name":""}]}`, false},
		{`{"items":[{"id":"1"},{"name":""}]}`, false},
		{`{"items":[{"id":1}]}`, false},
		{`{"items":[{"id":"1","name":5}]}`, false},
		{`{"items":[{"id":"1"}],"count":"1"}`, false},
		{`{"items":[{"id":"1"}],"has_more":"yes"}`, false},
		{`{"items":[{"id":"1"}],"query":1}`, false},
	}
	for _, c := range cases {
		if err := Validate(key, decode(t, c.data)); (err == nil) != c.valid {
			t.Errorf("Validate(%s) = %v, want valid=%v", c.data, err, c.valid)
		}
	}
}

func TestAPI(t *testing.T) {
	if err := Validate("no_such/endpoint", map[string]any{}); !errors.Is(err, ErrUnknownEndpoint) {
		t.Errorf("unknown key: %v", err)
	}
	if _, ok := For("no_such/endpoint"); ok {
		t.Error("For found an unknown key")
	}
	keys := Keys()
	if !sort.StringsAreSorted(keys) {
		t.Error("Keys is not sorted")
	}
	keys[0] = "mutated"
	if Keys()[0] == "mutated" {
		t.Error("Keys shares its slice")
	}
	a, _ := For("marketplace_a/search")
	a[0] = 'X'
	if b, _ := For("marketplace_a/search"); b[0] != '{' {
		t.Error("For shares its bytes")
	}

	const key = "app_store_b/categories"
	// Raw JSON, typed Go values and json.Number are all accepted.
	if err := Validate(key, json.RawMessage(`{"items":[{"code":"6014"}],"count":1}`)); err != nil {
		t.Errorf("RawMessage: %v", err)
	}
	if err := Validate(key, []byte(`{"count":"1"}`)); err == nil {
		t.Error("[]byte: invalid data accepted")
	}
	type item struct {
		Code string `json:"code"`
	}
	typed := struct {
		Items []item `json:"items"`
		Count int    `json:"count"`
	}{[]item{{"6014"}}, 1}
	if err := Validate(key, typed); err != nil {
		t.Errorf("typed value: %v", err)
	}
	if err := Validate(key, map[string]any{"count": json.Number("1"), "items": []map[string]int{{"code": 1}}}); err == nil {
		t.Error("typed invalid value accepted")
	}
	if err := Validate(key, json.RawMessage(`{`)); err == nil {
		t.Error("malformed JSON accepted")
	}
}

func TestValidateConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, key := range Keys() {
				if err := Validate(key, map[string]any{"items": []any{map[string]any{"id": "1"}}}); err != nil {
					t.Errorf("%s: %v", key, err)
				}
			}
		}()
	}
	wg.Wait()
}
