package params

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

func endpoint(t *testing.T, key string) *registry.Endpoint {
	t.Helper()
	e, ok := registry.Default().Endpoint(key)
	if !ok {
		t.Fatalf("%s not registered", key)
	}
	return e
}

func validate(t *testing.T, key, rawQuery string) (Result, *envelope.Error) {
	t.Helper()
	q, err := Parse(rawQuery)
	if err != nil {
		t.Fatalf("Parse(%q): %v", rawQuery, err)
	}
	return Validate(endpoint(t, key), q, nil)
}

func TestUnknownParameters(t *testing.T) {
	cases := []struct {
		name, key, query string
		unknown          []string
		suggestions      map[string]string
	}{
		{"typo", "company_registry/search", "qery=acme", []string{"qery"}, map[string]string{"qery": "query"}},
		{"case", "company_registry/search", "query=a&Limit=5", []string{"Limit"}, map[string]string{"Limit": "limit"}},
		{"separator style", "video_platform/search", "query=a&max-results=5", []string{"max-results"}, map[string]string{"max-results": "max_results"}},
		{"camel case the other way", "video_platform/search", "query=a&sort_by=date", []string{"sort_by"}, map[string]string{"sort_by": "sortBy"}},
		{"transposition", "company_registry/search", "query=a&lmiit=5", []string{"lmiit"}, map[string]string{"lmiit": "limit"}},
		{"no near miss", "company_registry/search", "query=a&zzzzzz=1", []string{"zzzzzz"}, nil},
		{"several, sorted", "company_registry/search", "query=a&b=1&a=2", []string{"a", "b"}, nil},
		{"AI set only on AI endpoints", "company_registry/search", "query=a&judgments=off", []string{"judgments"}, nil},
		{"unknown beats missing", "company_registry/search", "qery=a", []string{"qery"}, map[string]string{"qery": "query"}},
		{"unknown beats bad values", "company_registry/search", "query=a&limit=999&x=1", []string{"x"}, nil},
		{"invalid UTF-8 name", "company_registry/search", "query=a&%ff=1", []string{"\xff"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := validate(t, c.key, c.query)
			if err == nil || err.Status != http.StatusBadRequest || err.Type != envelope.InvalidParameters {
				t.Fatalf("got %v, want 400 INVALID_PARAMETERS", err)
			}
			if got := err.Details["unknown_parameters"].([]string); !slices.Equal(got, c.unknown) {
				t.Errorf("unknown_parameters %q, want %q", got, c.unknown)
			}
			accepted := err.Details["accepted_parameters"].([]string)
			if !slices.Contains(accepted, "dry_run") || !slices.Contains(accepted, "query") {
				t.Errorf("accepted_parameters %v", accepted)
			}
			got, _ := err.Details["suggestions"].(map[string]string)
			for from, to := range c.suggestions {
				if got[from] != to {
					t.Errorf("suggestion for %s = %q, want %q (all: %v)", from, got[from], to, got)
				}
			}
			if c.suggestions == nil && len(got) > 0 {
				t.Errorf("no suggestion expected, got %v", got)
			}
		})
	}
}

func TestEmptyUndeclaredValueIsOmitted(t *testing.T) {
	for _, q := range []string{"query=a&utm_source=", "query=a&flag", "query=a&&", "query=a&x=&x="} {
		if _, err := validate(t, "company_registry/search", q); err != nil {
			t.Errorf("%q: %v", q, err)
		}
	}
}

func TestMissingRequired(t *testing.T) {
	cases := []struct {
		name, key, query string
		missing          []string
		oneOf            bool
	}{
		{"absent", "company_registry/search", "", []string{"query"}, false},
		{"empty", "company_registry/search", "query=", []string{"query"}, false},
		{"blank", "company_registry/search", "query=%20%20", []string{"query"}, false},
		{"several", "travel_booking/hotel", "id=1", []string{"checkin", "checkout"}, false},
		{"any-of group", "marketplace_a/similar", "country=us", []string{"product_id", "query"}, true},
		{"any-of group (event)", "social_a/event", "", []string{"id", "url"}, true},
		{"required when fit=goal", "microblog_a/search", "query=a&fit=goal", []string{"goal"}, false},
		{"required when fit=goal, padded", "microblog_a/search", "query=a&fit=%20goal", []string{"goal"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := validate(t, c.key, c.query)
			if err == nil || err.Status != http.StatusUnprocessableEntity || err.Type != envelope.InvalidParameters {
				t.Fatalf("got %v, want 422", err)
			}
			if got := err.Details["missing"].([]string); !slices.Equal(got, c.missing) {
				t.Errorf("missing %v, want %v", got, c.missing)
			}
			if _, ok := err.Details["one_of"]; ok != c.oneOf {
				t.Errorf("one_of present %v, want %v", ok, c.oneOf)
			}
		})
	}
	if _, err := validate(t, "microblog_a/search", "query=a&fit=goal&goal=find+recipes"); err != nil {
		t.Errorf("goal given: %v", err)
	}
	if _, err := validate(t, "marketplace_a/similar", "query=a"); err != nil {
		t.Errorf("one of the group given: %v", err)
	}
}

func TestInvalidValues(t *testing.T) {
	cases := []struct {
		name, key, query, field, reason string
	}{
		{"below range", "company_registry/search", "query=a&limit=0", "limit", "out_of_range"},
		{"above range", "company_registry/search", "query=a&limit=101", "limit", "out_of_range"},
		{"not an integer", "company_registry/search", "query=a&limit=ten", "limit", "invalid_type"},
		{"fractional integer", "company_registry/search", "query=a&limit=1.5", "limit", "invalid_type"},
		{"exponent", "company_registry/search", "query=a&limit=1e1", "limit", "invalid_type"},
		{"hex", "company_registry/search", "query=a&limit=0x10", "limit", "invalid_type"},
		{"huge integer", "company_registry/search", "query=a&limit=99999999999999999999999", "limit", "invalid_type"},
		{"number NaN", "marketplace_a/search", "query=a&min_price=NaN", "min_price", "invalid_type"},
		{"negative price", "marketplace_a/search", "query=a&min_price=-1", "min_price", "out_of_range"},
		{"bad enum", "microblog_a/search", "query=a&sort=oldest", "sort", "not_allowed"},
		{"enum is case sensitive", "video_platform/search", "query=a&sortBy=Date", "sortBy", "not_allowed"},
		{"bad list element", "video_platform/search", "query=a&type=video,short", "type", "not_allowed"},
		{"list of only commas", "video_platform/search", "query=a&type=,,", "type", "empty_list"},
		{"numeric list element out of range", "travel_booking/hotel", "id=1&checkin=2026-12-01&checkout=2026-12-02&children_ages=4,18", "children_ages", "out_of_range"},
		{"numeric enum", "property_portal/search-sale", "radius=2", "radius", "not_allowed"},
		{"bad date", "travel_booking/hotel", "id=1&checkin=2026-13-01&checkout=2026-12-02", "checkin", "invalid_date"},
		{"date in another form", "travel_booking/hotel", "id=1&checkin=01/12/2026&checkout=2026-12-02", "checkin", "invalid_date"},
		{"checkout not after checkin", "travel_booking/hotel", "id=1&checkin=2026-12-02&checkout=2026-12-02", "checkout", "out_of_order"},
		{"min above max", "marketplace_a/search", "query=a&min_price=10&max_price=5", "max_price", "out_of_order"},
		{"from after to", "microblog_b/search-posts", "query=a&from_date=2026-02-01&to_date=2026-01-01", "to_date", "out_of_order"},
		{"unparseable URL", "photo_social/post-stats", "url=not%20a%20url", "url", "invalid_url"},
		{"URL without host", "photo_social/post-stats", "url=https://", "url", "invalid_url"},
		{"URL of another scheme", "qa_site/question", "url=ftp://example.com/q", "url", "invalid_url"},
		{"opaque URL", "qa_site/question", "url=mailto:a@example.com", "url", "invalid_url"},
		{"bad flag", "company_registry/search", "query=a&dry_run=maybe", "dry_run", "invalid_type"},
		{"pattern", "app_store_a/app-info", "app_id=not%20an%20id", "app_id", "invalid_format"},
		{"country pattern", "app_store_a/app-info", "app_id=284882215&country=usa", "country", "invalid_format"},
		{"leading @", "microblog_b/profile", "handle=@example", "handle", "invalid_format"},
		{"too long", "microblog_a/search", "query=a&goal=" + strings.Repeat("g", 601), "goal", "too_long"},
		{"global length cap", "microblog_a/search", "query=a&cursor=" + strings.Repeat("c", 4097), "cursor", "too_long"},
		{"NUL byte", "company_registry/search", "query=a%00b", "query", "invalid_characters"},
		{"control characters", "company_registry/search", "query=a%07", "query", "invalid_characters"},
		{"invalid UTF-8 value", "company_registry/search", "query=%ff%fe", "query", "invalid_encoding"},
		{"repeated", "company_registry/search", "query=a&query=b", "query", "repeated"},
		{"tokens out of range", "microblog_a/search", "query=a&tokens=100", "tokens", "out_of_range"},
		{"error names the alias used", "microblog_b/search-posts", "query=a&sort=oldest", "sort", "not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := validate(t, c.key, c.query)
			if err == nil || err.Status != http.StatusUnprocessableEntity || err.Type != envelope.InvalidParameters {
				t.Fatalf("got %v, want 422", err)
			}
			if err.Details["field"] != c.field || err.Details["reason"] != c.reason {
				t.Fatalf("details %v, want field %s reason %s", err.Details, c.field, c.reason)
			}
			if err.Message == "" {
				t.Error("a message is required")
			}
		})
	}
}

func TestAllInvalidFieldsAreReported(t *testing.T) {
	_, err := validate(t, "company_registry/search", "query=a&limit=0&cursor=%00")
	if err == nil {
		t.Fatal("accepted")
	}
	all, _ := err.Details["errors"].([]map[string]any)
	if len(all) != 2 || err.Details["field"] != "limit" {
		t.Fatalf("details %v", err.Details)
	}
}

func TestCanonicalValues(t *testing.T) {
	res, err := validate(t, "company_registry/search", "query=%20acme%20&dry_run=1")
	if err != nil {
		t.Fatal(err)
	}
	if !res.DryRun || res.Values["query"] != "acme" || res.Values["limit"] != "20" {
		t.Errorf("values %v dry %v", res.Values, res.DryRun)
	}
	if _, ok := res.Values["dry_run"]; ok {
		t.Error("dry_run is not part of the canonical request")
	}
	res, _ = validate(t, "property_portal/search-sale", "radius=0.50&property_type=flats,%20detached,&include_sold=YES")
	if res.Values["radius"] != "0.5" || res.Values["property_type"] != "flats,detached" || res.Values["include_sold"] != "true" {
		t.Errorf("canonical forms: %v", res.Values)
	}
}

func TestAliasesShareTheCanonicalRequest(t *testing.T) {
	keys := map[string]string{}
	for _, q := range []string{"query=a&mode=top", "query=a&sort=top", "query=a&sort_by=top", "sort_by=top&query=a&dry_run=1"} {
		res, err := validate(t, "microblog_b/search-posts", q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		keys[res.CacheKey()] = q
	}
	if len(keys) != 1 {
		t.Fatalf("equivalent spellings must share one cache key: %v", keys)
	}
	// Precedence: mode, then sort, then sort_by.
	for q, want := range map[string]string{
		"query=a&mode=latest&sort=top&sort_by=top": "latest",
		"query=a&sort=latest&sort_by=top":          "latest",
		"query=a&sort_by=top":                      "top",
		"query=a":                                  "latest",
	} {
		res, err := validate(t, "microblog_b/search-posts", q)
		if err != nil || res.Values["mode"] != want {
			t.Errorf("%s: mode %q (%v), want %s", q, res.Values["mode"], err, want)
		}
	}
	res, err := validate(t, "professional_network/search-people", "query=a&geocode_location=103&location=104")
	if err != nil || res.Values["location"] != "104" {
		t.Errorf("the canonical location wins: %v %v", res.Values, err)
	}
}

func TestPathParameters(t *testing.T) {
	e := endpoint(t, "social_a/event")
	res, err := Validate(e, url.Values{}, map[string]string{"id": "123"})
	if err != nil || res.Values["id"] != "123" {
		t.Fatalf("lifted id: %v %v", res.Values, err)
	}
	if _, err := Validate(e, url.Values{"id": {"123"}}, map[string]string{"id": "123"}); err != nil {
		t.Errorf("the same id twice is fine: %v", err)
	}
	_, err = Validate(e, url.Values{"id": {"456"}}, map[string]string{"id": "123"})
	if err == nil || err.Details["reason"] != "conflicts_with_path" {
		t.Errorf("conflicting ids: %v", err)
	}
	_, err = Validate(e, url.Values{}, map[string]string{"id": "12ab"})
	if err == nil || err.Details["field"] != "id" {
		t.Errorf("a lifted id is validated like a query one: %v", err)
	}
}

func TestParse(t *testing.T) {
	q, err := Parse("api_key=x&q=" + strings.Repeat("a", MaxQueryBytes))
	if err == nil || err.Status != 400 || err.Details["reason"] != "query_too_long" || q.Get("api_key") != "x" {
		t.Errorf("long query: %v (a key in it must still be seen)", err)
	}
	for _, raw := range []string{"query=%zz", "query=a;b=c", "a=%"} {
		if _, err := Parse(raw); err == nil || err.Status != 400 || err.Details["reason"] != "malformed_query" {
			t.Errorf("%q: %v", raw, err)
		}
	}
	q, err = Parse("api_key=x&query=%zz")
	if err == nil || q.Get("api_key") != "x" {
		t.Error("a malformed query still shows what parsed, so a key in it is refused")
	}
}

func FuzzValidate(f *testing.F) {
	seeds := []struct{ key, query string }{
		{"company_registry/search", "query=acme&limit=20"},
		{"microblog_b/search-posts", "query=a&sort=top&from_date=2026-01-01"},
		{"travel_booking/hotel", "id=1&checkin=2026-12-01&checkout=2026-12-03&children_ages=1,2"},
		{"property_portal/search-sale", "radius=0.25&property_type=flats&min_price=1&max_price=2"},
		{"microblog_a/search", "query=a&fit=goal&goal=x&tokens=300"},
		{"photo_social/post-stats", "url=https://example.com/p/1"},
		{"company_registry/search", "query=%00&limit=%ff"},
		{"company_registry/search", "q=1&q=2&;&%"},
	}
	for _, s := range seeds {
		f.Add(s.key, s.query)
	}
	keys := map[string]*registry.Endpoint{}
	for _, e := range registry.Default().Endpoints() {
		keys[e.Key()] = e
	}
	f.Fuzz(func(t *testing.T, key, raw string) {
		e, ok := keys[key]
		if !ok {
			e = keys["company_registry/search"]
		}
		q, perr := Parse(raw)
		if perr != nil {
			if perr.Status != 400 || perr.Type != envelope.InvalidParameters {
				t.Fatalf("Parse(%q) = %v", raw, perr)
			}
			return
		}
		res, err := Validate(e, q, nil)
		if err != nil {
			if err.Type != envelope.InvalidParameters || (err.Status != 400 && err.Status != 422) {
				t.Fatalf("Validate(%s, %q) = %v", key, raw, err)
			}
			return
		}
		for name := range res.Values {
			if _, ok := e.Lookup(name); !ok {
				t.Fatalf("canonical value for undeclared %s", name)
			}
		}
	})
}

// A default is already canonical, so a request that spells it out and one
// that omits it share one cache key.
func TestDefaultsAreCanonical(t *testing.T) {
	for _, e := range registry.Default().Endpoints() {
		for _, p := range e.Accepted() {
			if p.Default == "" {
				continue
			}
			got, problem := check(p, p.Default)
			if problem != nil || got != p.Default {
				t.Errorf("%s %s: default %q is not canonical (%q, %v)", e.Key(), p.Name, p.Default, got, problem)
			}
		}
	}
	a, _ := validate(t, "marketplace_b/deals", "")
	b, _ := validate(t, "marketplace_b/deals", "country=gb")
	c, _ := validate(t, "app_store_a/app-info", "app_id=1&country=US&language=EN_us")
	if a.CacheKey() != b.CacheKey() || c.Values["country"] != "us" || c.Values["language"] != "en_us" {
		t.Errorf("case-insensitive codes fold: %q %q %v", a.CacheKey(), b.CacheKey(), c.Values)
	}
}
