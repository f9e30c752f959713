package params

import (
	"fmt"
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
		{"craft_market/reviews", "id=https://www.etsy.com/listing/1"},
		{"marketplace_b/shop", "url=//amazon.de.evil.example/shop/x"},
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

// A URL in a parameter with declared hosts must be a page of the
// endpoint's platform (issue 15); an id stays an id.
func TestPlatformURLs(t *testing.T) {
	ok := []struct{ name, key, param, value, canonical string }{
		{"listing id", "craft_market/reviews", "id", "1234567890", "1234567890"},
		{"listing URL", "craft_market/reviews", "id", "https://www.etsy.com/listing/1234567890/a-mug", ""},
		{"the host itself", "craft_market/reviews", "id", "https://etsy.com/listing/1234567890", ""},
		{"http", "craft_market/reviews", "id", "http://www.etsy.com/listing/1234567890", ""},
		{"uppercase", "craft_market/reviews", "id", "HTTPS://WWW.ETSY.COM/listing/1234567890", ""},
		{"trailing dot", "craft_market/reviews", "id", "https://www.etsy.com./listing/1234567890", ""},
		{"port", "craft_market/reviews", "id", "https://www.etsy.com:8443/listing/1234567890", ""},
		{"bare host and path", "craft_market/reviews", "id", "www.etsy.com/listing/1234567890", "https://www.etsy.com/listing/1234567890"},
		{"scheme-relative", "craft_market/reviews", "id", "//www.etsy.com/listing/1234567890", "https://www.etsy.com/listing/1234567890"},
		{"the platform's host in the query", "craft_market/reviews", "id", "https://www.etsy.com/listing/1?ref=https://evil.example/", ""},
		{"product id", "marketplace_a/similar", "product_id", "1005006123456789", "1005006123456789"},
		{"a file name is an id", "marketplace_a/similar", "product_id", "1005006123456789.html", "1005006123456789.html"},
		{"product URL", "marketplace_a/similar", "product_id", "https://www.aliexpress.com/item/1005006123456789.html", ""},
		{"country subdomain", "marketplace_a/similar", "product_id", "https://es.aliexpress.com/item/1005006123456789.html", ""},
		{"US site", "marketplace_a/similar", "product_id", "https://www.aliexpress.us/item/1005006123456789.html", ""},
		{"Russian site", "marketplace_a/similar", "product_id", "https://aliexpress.ru/item/1005006123456789.html", ""},
		{"shop name", "marketplace_b/shop", "url", "example-shop", "example-shop"},
		{"a name with a dot is a name", "marketplace_b/shop", "url", "example.shop", "example.shop"},
		{"shop URL", "marketplace_b/shop", "url", "https://www.amazon.com/shop/example-shop", ""},
		{"another marketplace", "marketplace_b/shop", "url", "https://www.amazon.co.uk/shop/example-shop", ""},
		{"a three-label marketplace", "marketplace_b/shop", "url", "https://www.amazon.com.au/shop/example-shop", ""},
		{"the newest marketplace", "marketplace_b/shop", "url", "https://www.amazon.co.za/shop/example-shop", ""},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			res, err := validate(t, c.key, c.param+"="+url.QueryEscape(c.value))
			if err != nil {
				t.Fatalf("%s=%s refused: %v %v", c.param, c.value, err, err.Details)
			}
			want := c.canonical
			if want == "" {
				want = c.value
			}
			if got := res.Values[c.param]; got != want {
				t.Errorf("canonical %q, want %q", got, want)
			}
		})
	}
	refused := []struct{ name, key, param, value, reason string }{
		{"another site", "craft_market/reviews", "id", "https://evil.example/listing/1234567890", "wrong_host"},
		{"look-alike suffix", "craft_market/reviews", "id", "https://etsy.com.evil.example/listing/1", "wrong_host"},
		{"look-alike prefix", "craft_market/reviews", "id", "https://notetsy.com/listing/1", "wrong_host"},
		{"look-alike uppercase", "craft_market/reviews", "id", "HTTPS://ETSY.COM.EVIL.EXAMPLE/listing/1", "wrong_host"},
		{"platform host in a fragment", "craft_market/reviews", "id", "https://evil.example#@www.etsy.com/listing/1", "wrong_host"},
		{"platform host in the path", "craft_market/reviews", "id", "https://evil.example/www.etsy.com/listing/1", "wrong_host"},
		{"address", "craft_market/reviews", "id", "http://127.0.0.1:8080/listing/1", "wrong_host"},
		{"IPv6 address", "craft_market/reviews", "id", "http://[::1]/listing/1", "wrong_host"},
		{"bare foreign host", "craft_market/reviews", "id", "evil.example/listing/1", "wrong_host"},
		{"scheme-relative foreign host", "craft_market/reviews", "id", "//evil.example/listing/1", "wrong_host"},
		{"another platform's pages", "marketplace_a/similar", "product_id", "https://www.amazon.com/dp/B000000000", "wrong_host"},
		{"look-alike marketplace", "marketplace_b/shop", "url", "https://www.amazon.evil.example/shop/x", "wrong_host"},
		{"marketplace suffix look-alike", "marketplace_b/shop", "url", "https://amazon.com.evil.example/shop/x", "wrong_host"},
		{"credentials", "craft_market/reviews", "id", "https://user:pass@www.etsy.com/listing/1", "invalid_url"},
		{"empty credentials", "craft_market/reviews", "id", "https://@www.etsy.com/listing/1", "invalid_url"},
		{"credentials naming the platform", "marketplace_b/shop", "url", "https://www.amazon.com@evil.example/shop/x", "invalid_url"},
		{"non-http scheme", "craft_market/reviews", "id", "ftp://www.etsy.com/listing/1", "invalid_url"},
		{"javascript", "craft_market/reviews", "id", "javascript:alert(1)", "invalid_url"},
		{"file", "marketplace_a/similar", "product_id", "file:///etc/passwd", "invalid_url"},
		{"no slashes", "craft_market/reviews", "id", "https:www.etsy.com/listing/1", "invalid_url"},
		{"no host", "craft_market/reviews", "id", "https:///www.etsy.com/listing/1", "invalid_url"},
		{"empty label", "craft_market/reviews", "id", "https://.etsy.com/listing/1", "invalid_url"},
		{"bad escape in host", "craft_market/reviews", "id", "https://www.etsy.com%2eevil.example/", "invalid_url"},
		{"backslash", "craft_market/reviews", "id", `https://evil.example\@www.etsy.com/`, "invalid_url"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, err := validate(t, c.key, c.param+"="+url.QueryEscape(c.value))
			if err == nil || err.Status != http.StatusUnprocessableEntity || err.Type != envelope.InvalidParameters {
				t.Fatalf("%s=%s: got %v, want 422", c.param, c.value, err)
			}
			if err.Details["field"] != c.param || err.Details["reason"] != c.reason {
				t.Fatalf("details %v, want field %s reason %s", err.Details, c.param, c.reason)
			}
			platform := strings.SplitN(c.key, "/", 2)[0]
			if c.reason == "wrong_host" && (!strings.Contains(err.Message, platform) || err.Details["platform"] != platform) {
				t.Errorf("the refusal names the platform %s: %q %v", platform, err.Message, err.Details)
			}
			// The public API speaks neutral ids: no real host names.
			for _, real := range []string{"etsy", "amazon", "aliexpress"} {
				if strings.Contains(strings.ToLower(err.Message), real) || strings.Contains(strings.ToLower(fmt.Sprint(err.Details)), real) {
					t.Errorf("the refusal names a real host: %q %v", err.Message, err.Details)
				}
			}
		})
	}
}

// A wrong host is one more invalid field: reported beside the others.
func TestWrongHostIsReportedWithOtherFields(t *testing.T) {
	_, err := validate(t, "craft_market/reviews", "id=https://evil.example/listing/1&rating=9")
	if err == nil || err.Details["reason"] != "wrong_host" {
		t.Fatalf("%v", err)
	}
	if all, _ := err.Details["errors"].([]map[string]any); len(all) != 2 || all[1]["field"] != "rating" {
		t.Errorf("every invalid field: %v", err.Details)
	}
}

// URL-typed parameters take hosts the same way (photo_social, qa_site and
// the others get theirs later): the scheme rules of the URL type first,
// then the host.
func TestURLTypedParameterWithHosts(t *testing.T) {
	reg, rerr := registry.New([]registry.Endpoint{{
		Platform: "qa_test", ID: "question", Family: registry.Knowledge, Kind: registry.Data, Cost: 1,
		Origin: registry.SpecListed, Name: "Question",
		Params: []registry.Param{registry.P("url", registry.URL, "Question page URL.").Req().OnHosts("qa.example")},
	}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	e, _ := reg.Endpoint("qa_test/question")
	for value, reason := range map[string]string{
		"https://www.qa.example/q/1":       "",
		"https://qa.example.evil/q/1":      "wrong_host",
		"https://u@qa.example/q/1":         "invalid_url",
		"www.qa.example/q/1":               "invalid_url", // the URL type needs a scheme
		"ftp://qa.example/q/1":             "invalid_url",
		"https://evil.example/?qa.example": "wrong_host",
	} {
		res, err := Validate(e, url.Values{"url": {value}}, nil)
		switch {
		case reason == "" && (err != nil || res.Values["url"] != value):
			t.Errorf("%s: %v %v", value, err, res.Values)
		case reason != "" && (err == nil || err.Details["reason"] != reason):
			t.Errorf("%s: got %v, want %s", value, err, reason)
		case reason == "wrong_host" && strings.Contains(err.Message, "or an id"):
			t.Errorf("%s: a URL parameter takes no id: %q", value, err.Message)
		}
	}
}

// Every declared example of a parameter with hosts passes, unchanged: the
// catalogue's ready-to-run requests and the sandbox tests send them.
func TestPlatformURLExamplesValidate(t *testing.T) {
	n := 0
	for _, e := range registry.Default().Endpoints() {
		for _, p := range e.Accepted() {
			if len(p.Hosts) == 0 {
				continue
			}
			n++
			if p.Example == "" {
				t.Errorf("%s %s: a parameter with hosts needs an example", e.Key(), p.Name)
				continue
			}
			v, problem := check(p, p.Example)
			if problem == nil {
				v, problem = checkHost(e.Platform, p, v)
			}
			if problem != nil || v != p.Example {
				t.Errorf("%s %s: example %q -> %q %v", e.Key(), p.Name, p.Example, v, problem)
			}
		}
	}
	if n < 3 {
		t.Errorf("%d parameters with hosts; the commerce ones have them", n)
	}
}

// A parameter's Check rule refuses with its own reason, naming the field,
// before anything is charged; a value it accepts passes unchanged.
func TestCheckRule(t *testing.T) {
	reg, rerr := registry.New([]registry.Endpoint{{
		Platform: "qa_test", ID: "checked", Family: registry.Knowledge, Kind: registry.Data, Cost: 1,
		Origin: registry.SpecListed, Name: "Checked",
		Params: []registry.Param{registry.P("query", registry.String, "A query.").Checked(func(v string) (string, string) {
			if v == "bad" {
				return "bad_query", "query must not be bad."
			}
			return "", ""
		})},
	}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	e, _ := reg.Endpoint("qa_test/checked")
	if _, err := Validate(e, Query{"query": {"bad"}}, nil); err == nil || err.Status != 422 {
		t.Fatalf("a refused value: %v", err)
	} else if err.Details["reason"] != "bad_query" || err.Details["field"] != "query" {
		t.Fatalf("details %v", err.Details)
	}
	if res, err := Validate(e, Query{"query": {"good"}}, nil); err != nil || res.Values["query"] != "good" {
		t.Fatalf("an accepted value: %v %v", res, err)
	}
}

// A parameter with hosts may also take ids written as URIs of the
// platform's own scheme (OrScheme): those pass unchanged; other schemes
// are still refused, and URLs still need an allowed host.
func TestIDSchemesBesideHosts(t *testing.T) {
	reg, rerr := registry.New([]registry.Endpoint{{
		Platform: "qa_test", ID: "post", Family: registry.Knowledge, Kind: registry.Data, Cost: 1,
		Origin: registry.SpecListed, Name: "Post",
		Params: []registry.Param{registry.P("post_id", registry.String, "A post.").Req().OnHosts("qa.example").OrScheme("at")},
	}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	e, _ := reg.Endpoint("qa_test/post")
	for value, reason := range map[string]string{
		"at://did:plc:abc/app.bsky.feed.post/3l": "",
		"AT://did:plc:abc/app.bsky.feed.post/3l": "",
		"https://qa.example/p/1":                 "",
		"ftp://qa.example/p/1":                   "invalid_url",
		"https://elsewhere.example/p/1":          "wrong_host",
	} {
		res, err := Validate(e, Query{"post_id": {value}}, nil)
		switch {
		case reason == "" && (err != nil || res.Values["post_id"] == ""):
			t.Errorf("%s: %v", value, err)
		case reason != "" && (err == nil || err.Details["reason"] != reason):
			t.Errorf("%s: %v, want %s", value, err, reason)
		}
	}
}

// TestCacheKeyIsTheEncodedQuery pins CacheKey to url.Values.Encode, the
// form cache entries were keyed by before it was built by hand.
func TestCacheKeyIsTheEncodedQuery(t *testing.T) {
	for _, values := range []map[string]string{
		{},
		{"query": "acme"},
		{"query": "a b&c=d/é", "limit": "20", "country": "gb", "cursor": "x+y%z"},
		{"b": "", "a": "1", "a_b": "2", "A": "3"},
	} {
		want := url.Values{}
		for k, v := range values {
			want.Set(k, v)
		}
		if got := (Result{Values: values}).CacheKey(); got != want.Encode() {
			t.Errorf("CacheKey(%v) = %q, want %q", values, got, want.Encode())
		}
	}
}
