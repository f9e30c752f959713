package registry

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/envelope"
)

func TestResolveSpecForms(t *testing.T) {
	r := Default()
	cases := []struct {
		name, path, key string
		lifted          map[string]string
	}{
		{"ordinary form", "/v1/company_registry/search", "company_registry/search", nil},
		{"ordinary, hyphenated id", "/v1/microblog_b/search-posts", "microblog_b/search-posts", nil},
		{"multi-segment endpoint id", "/v1/code_host/profile/repos", "code_host/profile/repos", nil},
		{"multi-segment endpoint id (2)", "/v1/code_host/repo/issues", "code_host/repo/issues", nil},
		{"platform index", "/v1/marketplace_a", "marketplace_a", nil},
		{"platform index of a service platform", "/v1/status", "status", nil},
		{"API index", "/v1", "", nil},
		{"collection get", "/v1/social_a/event/1234567890", "social_a/event", map[string]string{"id": "1234567890"}},
		{"collection get (hotel)", "/v1/travel_booking/hotel/987654", "travel_booking/hotel", map[string]string{"id": "987654"}},
		{"collection get, id with underscore", "/v1/web/jobs/job_abc", "web/jobs/{id}", map[string]string{"id": "job_abc"}},
		{"collection get, long id", "/v1/web/jobs/abcdefghijklmnopqrstuvwxyz", "web/jobs/{id}", map[string]string{"id": "abcdefghijklmnopqrstuvwxyz"}},
		{"id lifted between words", "/v1/monitors/mon_01/runs", "monitors/{id}/runs", map[string]string{"id": "mon_01"}},
		{"escaped identifier is unescaped", "/v1/social_a/event/12%33", "social_a/event", map[string]string{"id": "123"}},
		{"one trailing slash forgiven", "/v1/company_registry/search/", "company_registry/search", nil},
		{"batch", "/v1/batch", "batch", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := r.Resolve(c.path)
			if err != nil {
				t.Fatalf("Resolve(%s): %v", c.path, err)
			}
			if res.Endpoint.Key() != c.key || !maps.Equal(res.PathParams, c.lifted) {
				t.Fatalf("Resolve(%s) = %s %v, want %s %v", c.path, res.Endpoint.Key(), res.PathParams, c.key, c.lifted)
			}
		})
	}
}

func TestResolveUnknownPaths(t *testing.T) {
	r := Default()
	cases := []struct {
		name, path         string
		platform, endpoint any
	}{
		{"unknown platform", "/v1/nope/search", "nope", "search"},
		{"unknown endpoint", "/v1/marketplace_a/nope", "marketplace_a", "nope"},
		{"unknown multi-segment", "/v1/code_host/profile/stars", "code_host", "profile/stars"},
		{"word where an identifier belongs", "/v1/social_a/event/concert", "social_a", "event/concert"},
		{"identifier where a word belongs", "/v1/marketplace_a/search2", "marketplace_a", "search2"},
		{"collection get of an endpoint without one", "/v1/company_registry/search/123", "company_registry", "search/123"},
		{"no index for a platform without one", "/v1/utility", "utility", ""},
		{"platform never lifted as an id", "/v1/123/search", "123", "search"},
		{"unescaped as parsed", "/v1/no%20pe/x", "no pe", "x"},
		{"escaped platform name", "/v1/marketplace%5Fa/search", "marketplace_a", "search"},
		{"escaped route word", "/v1/code_host/profile/rep%6Fs", "code_host", "profile/repos"},
		{"placeholder-looking segment", "/v1/monitors/%7B%7D/runs", "monitors", "{}/runs"},
		{"placeholder-looking identifier slot", "/v1/social_a/event/%7B%7D", "social_a", "event/{}"},
		{"NUL word", "/v1/web/jobs/%00", "web", "jobs/\x00"},
		{"empty segment", "/v1//search", nil, nil},
		{"two trailing slashes", "/v1/company_registry/search//", nil, nil},
		{"encoded slash", "/v1/company_registry%2Fsearch", nil, nil},
		{"bad escape", "/v1/company_registry/%zz", nil, nil},
		{"outside /v1", "/v2/company_registry/search", nil, nil},
		{"prefix lookalike", "/v1x/company_registry/search", nil, nil},
		{"very long path", "/v1/" + strings.Repeat("a", 5000), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Resolve(c.path)
			if err == nil || err.Type != envelope.EndpointNotFound || err.Status != http.StatusNotFound {
				t.Fatalf("Resolve(%s) = %v, want 404 ENDPOINT_NOT_FOUND", c.path, err)
			}
			if err.Details["platform"] != c.platform || err.Details["endpoint"] != c.endpoint {
				t.Fatalf("details %v, want platform %v endpoint %v", err.Details, c.platform, c.endpoint)
			}
		})
	}
}

func TestResolveRetired(t *testing.T) {
	_, err := Default().Resolve("/v1/microblog_b/search-tweets")
	if err == nil || err.Status != http.StatusGone || err.Type != envelope.EndpointNotFound {
		t.Fatalf("got %v, want 410 ENDPOINT_NOT_FOUND", err)
	}
	if err.Details["reason"] != "endpoint_removed" || err.Details["successor"] != "/v1/microblog_b/search-posts" ||
		err.Details["platform"] != "microblog_b" || err.Details["endpoint"] != "search-tweets" {
		t.Fatalf("details %v", err.Details)
	}
}

func TestNotFoundEchoIsBounded(t *testing.T) {
	_, err := Default().Resolve("/v1/" + strings.Repeat("é", 150) + "/x")
	p := err.Details["platform"].(string)
	if !utf8.ValidString(p) || len(p) > maxEcho+len("…") {
		t.Fatalf("echo not bounded or cut mid-rune: %d bytes", len(p))
	}
}

func FuzzResolve(f *testing.F) {
	for _, seed := range []string{
		"/v1", "/v1/", "/v1/company_registry/search", "/v1/social_a/event/123", "/v1/monitors/mon_1/runs",
		"/v1/code_host/profile/repos", "/v1/microblog_b/search-tweets", "/v1//x", "/v1/%00/x", "/v1/%ff%fe",
		"/v1/a%2Fb", "/sandbox/x", "/v1/" + strings.Repeat("x/", 100), "/v1/web/jobs/" + strings.Repeat("9", 30),
	} {
		f.Add(seed)
	}
	r := Default()
	f.Fuzz(func(t *testing.T, path string) {
		res, err := r.Resolve(path)
		if err != nil {
			if err.Type != envelope.EndpointNotFound || (err.Status != 404 && err.Status != 410) {
				t.Fatalf("Resolve(%q) = %v", path, err)
			}
			return
		}
		for name := range res.PathParams {
			if _, ok := res.Endpoint.Lookup(name); !ok {
				t.Fatalf("lifted %s is not a parameter of %s", name, res.Endpoint.Key())
			}
		}
	})
}
