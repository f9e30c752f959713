package app_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// noDNS resolves nothing: a page fetch that is not moved to a test server
// is refused before it dials.
type noDNS struct{}

func (noDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no DNS in tests")
}

// A tester serves captured pages to web/social-profiles through the base
// URL variables alone, as for any provider: the source profile (the
// code-host API), its Linktree page (MERIDIAN_UPSTREAM_LINKTREE_URL, which
// also moves the linktree probe) and a probe site
// (MERIDIAN_UPSTREAM_PROBE_GITLAB_URL) all answered by one test server on
// loopback, told apart by X-Forwarded-Host.
func TestSocialProfilesReadsSitesMovedToATestServer(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(repoRoot(t), "testdata", "linkinbio", "linktree_standin.html"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	standIn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Header.Get("x-forwarded-host")
		mu.Lock()
		asked = append(asked, host+" "+r.URL.RequestURI())
		mu.Unlock()
		switch host + " " + r.URL.RequestURI() {
		case " /users/riverstudio": // the code-host API, its own moved base URL
			w.Header().Set("content-type", "application/json; charset=utf-8")
			io.WriteString(w, `{"login":"riverstudio","id":90412207,"node_id":"U_kgDOBWOxLw","avatar_url":"https://avatars.githubusercontent.com/u/90412207?v=4",`+
				`"gravatar_id":"","url":"https://api.github.com/users/riverstudio","html_url":"https://github.com/riverstudio","type":"User",`+
				`"user_view_type":"public","site_admin":false,"name":"River Studio","company":null,"blog":"https://linktr.ee/riverstudio",`+
				`"location":"Leeds","email":null,"hireable":null,"bio":"Print tooling","twitter_username":null,"public_repos":7,`+
				`"public_gists":0,"followers":41,"following":3,"created_at":"2021-09-02T10:11:12Z","updated_at":"2024-05-06T07:08:09Z"}`)
		case "linktr.ee /riverstudio":
			w.Header().Set("content-type", "text/html; charset=utf-8")
			w.Write(page)
		case "gitlab.com /api/v4/users?username=riverstudio":
			w.Header().Set("content-type", "application/json")
			io.WriteString(w, `[{"id":18840561,"username":"riverstudio","name":"River Studio","state":"active","locked":false,`+
				`"avatar_url":"https://secure.gravatar.com/avatar/0f3c?s=80\u0026d=identicon","web_url":"https://gitlab.com/riverstudio"}]`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer standIn.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	env := map[string]string{
		"MERIDIAN_UPSTREAM_GITHUB_REST_URL":  standIn.URL,
		"MERIDIAN_UPSTREAM_LINKTREE_URL":     standIn.URL,
		"MERIDIAN_UPSTREAM_PROBE_GITLAB_URL": standIn.URL,
	}
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		if strings.HasPrefix(k, "MERIDIAN_UPSTREAM_") && strings.HasSuffix(k, "_URL") {
			return closed.URL, true // every other source: nothing listens, nothing live
		}
		return "", false
	}
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, key := newAccount(t, s, 1000, nil)
	runner := upstream.NewRunner(adapters.All(), upstream.Settings{Lookup: lookup, URLPolicy: &upstream.URLPolicy{Resolver: noDNS{}}})
	h := app.LocalHandler(quietLogger(), app.Deps{Store: s, Upstream: runner, Pages: app.PublicPages(runner, lookup, "")})

	code, body := serve(h, "/v1/web/social-profiles?platform=code_host&handle=riverstudio", key)
	if code != http.StatusOK {
		t.Fatalf("%d %v", code, body)
	}
	data := body["data"].(map[string]any)
	pages := data["link_in_bio_urls"].([]any)
	if len(pages) != 1 {
		t.Fatalf("link-in-bio pages %v", pages)
	}
	lt := pages[0].(map[string]any)
	if lt["url"] != "https://linktr.ee/riverstudio" || lt["ok"] != true || lt["title"] != "River Studio" {
		t.Errorf("the Linktree page was not read from the test server: %v", lt)
	}
	var profiles []string
	for _, p := range lt["profiles"].([]any) {
		profiles = append(profiles, p.(string))
	}
	wantProfiles := []string{"https://instagram.com/riverstudio.prints", "https://www.youtube.com/@RiverStudioPrints", "https://twitter.com/riverstudio"}
	if !slices.Equal(profiles, wantProfiles) {
		t.Errorf("profiles on the page %v, want %v", profiles, wantProfiles)
	}
	if sites := data["website_urls"].([]any); !slices.Contains(sites, any("https://riverstudio-prints.example/shop")) {
		t.Errorf("websites %v", sites)
	}
	exists := map[string]any{}
	for _, p := range data["probes"].([]any) {
		p := p.(map[string]any)
		exists[p["site"].(string)] = p["exists"]
	}
	if exists["gitlab"] != true || exists["linktree"] != true {
		t.Errorf("the moved probe sites: gitlab %v, linktree %v; want both found", exists["gitlab"], exists["linktree"])
	}
	if cands := data["same_handle_candidates"].([]any); !slices.Contains(cands, any("https://gitlab.com/riverstudio")) {
		t.Errorf("same-handle candidates %v", cands)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"linktr.ee /riverstudio", "gitlab.com /api/v4/users?username=riverstudio"} {
		if !slices.Contains(asked, want) {
			t.Errorf("the test server was not asked for %q: %v", want, asked)
		}
	}
}
