package replay

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func fixture(path string, query map[string]string, isDefault bool, body string) Fixture {
	var fx Fixture
	fx.Match.Path, fx.Match.Query, fx.Default = path, query, isDefault
	fx.Response.Body = json.RawMessage(body)
	return fx
}

func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestMatchingPrecedence(t *testing.T) {
	s := New()
	for name, fx := range map[string]Fixture{
		"default":  fixture("/users/*", nil, true, `"default"`),
		"pattern":  fixture("/users/*", map[string]string{"page": "*"}, false, `"pattern with page"`),
		"literal":  fixture("/users/golang", map[string]string{"page": "*"}, false, `"literal with page"`),
		"specific": fixture("/users/*", map[string]string{"page": "2", "per_page": "*"}, false, `"two constraints"`),
	} {
		if err := s.Add("p", name, fx); err != nil {
			t.Fatal(err)
		}
	}
	base, stop, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for path, want := range map[string]string{
		"/p/users/alice":                     `"default"`,
		"/p/users/alice?page=3":              `"pattern with page"`,
		"/p/users/golang?page=3":             `"literal with page"`,
		"/p/users/golang?page=2&per_page=10": `"two constraints"`,
		"/p/users/golang?per_page=10":        `"default"`,
	} {
		if code, body := get(t, base, path); code != 200 || body != want {
			t.Errorf("%s: %d %s; want %s", path, code, body, want)
		}
	}
	if code, _ := get(t, base, "/p/repos/x"); code != http.StatusBadRequest {
		t.Errorf("no fixture: %d; want 400, a refusal that is neither retried nor rests a route", code)
	}
	if n := len(s.Requests()); n != 6 {
		t.Errorf("recorded %d requests; want 6", n)
	}
}

func TestFixturesAreChecked(t *testing.T) {
	bad := fixture("/x", nil, false, `1`)
	bad.Fault = "truncate"
	if err := New().Add("p", "short", bad); err == nil {
		t.Error("a truncate fault on a 1-byte body injects nothing; it must be refused")
	}
	bad.Fault = "explode"
	if err := New().Add("p", "unknown", bad); err == nil {
		t.Error("an unknown fault is refused")
	}
	if err := New().Add("p", "nopath", fixture("", nil, false, `{}`)); err == nil {
		t.Error("a fixture without a path is refused")
	}
}

func TestShippedFixturesLoad(t *testing.T) {
	s, err := Load("../../../" + DefaultDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Providers()) < 6 {
		t.Fatalf("providers with fixtures: %v", s.Providers())
	}
}

func post(t *testing.T, base, path, body string) (int, string) {
	t.Helper()
	res, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestBodyMatching(t *testing.T) {
	s := New()
	withBody := func(body map[string]string, answer string) Fixture {
		fx := fixture("/v1/extract", nil, false, answer)
		fx.Match.Method = http.MethodPost
		fx.Match.Body = map[string]json.RawMessage{}
		for k, v := range body {
			fx.Match.Body[k] = json.RawMessage(v)
		}
		return fx
	}
	fallback := fixture("/v1/extract", nil, true, `"default"`)
	fallback.Match.Method = http.MethodPost
	for name, fx := range map[string]Fixture{
		"default": fallback,
		"any":     withBody(map[string]string{"url": `"https://shop.example/p/*"`}, `"any product"`),
		"gb":      withBody(map[string]string{"url": `"https://shop.example/p/*"`, "geolocation": `"GB"`}, `"product from GB"`),
		"exact":   withBody(map[string]string{"url": `"https://shop.example/p/42?x=1"`, "httpResponseBody": `true`}, `"product 42"`),
		"present": withBody(map[string]string{"url": `"*"`, "echoData": `{"n": 1}`}, `"echo"`),
	} {
		if err := s.Add("zyte", name, fx); err != nil {
			t.Fatal(err)
		}
	}
	base, stop, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for body, want := range map[string]string{
		`{"url": "https://shop.example/p/7"}`:                                 `"any product"`,
		`{"url": "https://shop.example/p/7", "geolocation": "GB"}`:            `"product from GB"`,
		`{"url": "https://shop.example/p/7", "geolocation": "US"}`:            `"any product"`,
		`{"url": "https://shop.example/p/42?x=1", "httpResponseBody": true}`:  `"product 42"`,
		`{"url": "https://shop.example/p/42?x=1", "httpResponseBody": false}`: `"any product"`,
		`{"url": "https://other.example/a/b", "echoData": {"n": 1.0}}`:        `"echo"`,
		`{"url": "https://shop.example/p/7/reviews"}`:                         `"default"`,
		`{"url": 7}`:                   `"default"`,
		`not json`:                     `"default"`,
		`["https://shop.example/p/7"]`: `"default"`,
		`{"geolocation": "GB", "httpResponseBody": true, "url": "nothing/a"}`:  `"default"`,
		`{"url": "https://shop.example/p/42?x=1", "httpResponseBody": "true"}`: `"any product"`,
	} {
		if code, got := post(t, base, "/zyte/v1/extract", body); code != 200 || got != want {
			t.Errorf("%s: %d %s; want %s", body, code, got, want)
		}
	}
	reqs := s.Requests()
	if len(reqs) == 0 || string(reqs[0].Body) == "" {
		t.Fatalf("the request body is not recorded: %+v", reqs)
	}
	// GET fixtures without a body constraint still match as before.
	if err := s.Add("zyte", "get", fixture("/status", nil, false, `"up"`)); err != nil {
		t.Fatal(err)
	}
	if code, got := get(t, base, "/zyte/status"); code != 200 || got != `"up"` {
		t.Errorf("GET: %d %s", code, got)
	}
}

func TestBodyPatternsAreChecked(t *testing.T) {
	fx := fixture("/v1/extract", nil, false, `{}`)
	fx.Match.Body = map[string]json.RawMessage{"url": json.RawMessage(`"https://x/[a"`)}
	if err := New().Add("p", "bad", fx); err == nil {
		t.Error("a malformed body pattern is refused, as a malformed path is")
	}
	fx.Match.Body = map[string]json.RawMessage{"url": json.RawMessage(`{"a":`)}
	if err := New().Add("p", "badjson", fx); err == nil {
		t.Error("a body constraint that is not JSON is refused")
	}
}

func TestBodyContainsMatching(t *testing.T) {
	s := New()
	withContains := func(contains []string, body map[string]string, answer string) Fixture {
		fx := fixture("/v1/chat/completions", nil, false, answer)
		fx.Match.Method = http.MethodPost
		fx.Match.BodyContains = contains
		if body != nil {
			fx.Match.Body = map[string]json.RawMessage{}
			for k, v := range body {
				fx.Match.Body[k] = json.RawMessage(v)
			}
		}
		return fx
	}
	fallback := fixture("/v1/chat/completions", nil, true, `"default"`)
	fallback.Match.Method = http.MethodPost
	for name, fx := range map[string]Fixture{
		"default":  fallback,
		"one":      withContains([]string{"ref-7"}, nil, `"mentions ref-7"`),
		"two":      withContains([]string{"ref-7", `\"category\"`}, nil, `"ref-7 and a quoted category"`),
		"model":    withContains(nil, map[string]string{"model": `"small"`}, `"small model"`),
		"modelref": withContains([]string{"ref-7"}, map[string]string{"model": `"small"`}, `"small model, ref-7"`),
	} {
		if err := s.Add("chat", name, fx); err != nil {
			t.Fatal(err)
		}
	}
	base, stop, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for body, want := range map[string]string{
		// Nested deep in the JSON: a body field matcher cannot see it.
		`{"messages": [{"role": "user", "content": "label ref-7"}]}`: `"mentions ref-7"`,
		// Each string counts as one constraint: two beat one.
		`{"messages": [{"content": "ref-7 as \"category\""}]}`: `"ref-7 and a quoted category"`,
		// A body field and a string (two) beat a lone body field (one).
		`{"model": "small", "messages": [{"content": "ref-7"}]}`: `"small model, ref-7"`,
		`{"model": "small", "messages": [{"content": "ref-8"}]}`: `"small model"`,
		// Every string must occur; the raw body need not be JSON.
		`{"messages": [{"content": "\"category\" only"}]}`: `"default"`,
		`plain text naming ref-7`:                          `"mentions ref-7"`,
		`REF-7`:                                            `"default"`,
	} {
		if code, got := post(t, base, "/chat/v1/chat/completions", body); code != 200 || got != want {
			t.Errorf("%s: %d %s; want %s", body, code, got, want)
		}
	}
	empty := withContains([]string{"x", ""}, nil, `{}`)
	if err := New().Add("chat", "empty", empty); err == nil {
		t.Error("an empty body_contains string matches everything; it must be refused")
	}
}
