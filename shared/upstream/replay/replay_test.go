package replay

import (
	"encoding/json"
	"io"
	"net/http"
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
