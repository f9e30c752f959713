package pages

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
)

// noDNS resolves nothing, so a fetch that is not moved is refused before
// it dials: no test reaches the internet.
type noDNS struct{}

func (noDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no DNS in tests")
}

var standInTargets = []FetchTarget{
	{Name: "linktree", Hosts: []string{"linktr.ee"}},
	{Name: "carrd", Hosts: []string{"carrd.co"}, Subdomains: true},
	{Name: "probe_gitlab", Hosts: []string{"gitlab.com"}},
	{Name: "probe_broken", Hosts: []string{"broken.example"}},
}

// A site's MERIDIAN_UPSTREAM_<NAME>_URL moves every fetch of a URL on its
// hosts to the operator's base URL, path and query kept and the host named
// in X-Forwarded-Host, even on loopback; a caller's own URL on that address
// is still refused, the stand-in alone answers (no paid service), and its
// redirects leave neither its host nor the policy's reach.
func TestPublicFetchMovesTargetsToTheirBaseURL(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	standIn, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RequestURI()+" "+r.Header.Get(ForwardedHostHeader))
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/blocked"):
			w.WriteHeader(http.StatusForbidden)
		case strings.HasSuffix(r.URL.Path, "/away"):
			http.Redirect(w, r, "http://10.0.0.1/admin", http.StatusFound)
		default:
			io.WriteString(w, "stand-in page")
		}
	})
	services, zyteHits, scraperHits := paidServices(t, "<html>paid</html>")
	env := map[string]string{
		"MERIDIAN_UPSTREAM_LINKTREE_URL":     standIn.URL + "/lt/",
		"MERIDIAN_UPSTREAM_CARRD_URL":        standIn.URL,
		"MERIDIAN_UPSTREAM_PROBE_GITLAB_URL": standIn.URL + "/gl",
		"MERIDIAN_UPSTREAM_PROBE_BROKEN_URL": "ftp://files.example/",
	}
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		return services(k)
	}
	f := NewPublicFetcher(PublicFetchSettings{Policy: &upstream.URLPolicy{Resolver: noDNS{}}, Lookup: lookup,
		Unblock: func(string) bool { return true }, Targets: standInTargets})

	for _, tc := range []struct {
		raw, want string
		status    int
	}{
		{"https://linktr.ee/ana.example?lang=en", "/lt/ana.example?lang=en linktr.ee", 200},
		{"https://www.linktr.ee/ana.example", "/lt/ana.example www.linktr.ee", 200},
		{"https://juno.carrd.co/", "/ juno.carrd.co", 200},
		{"https://gitlab.com/api/v4/users?username=ana.example", "/gl/api/v4/users?username=ana.example gitlab.com", 200},
		{"https://linktr.ee/blocked", "/lt/blocked linktr.ee", http.StatusForbidden},
		{"https://linktr.ee/away", "/lt/away linktr.ee", http.StatusFound},
	} {
		for name, fetch := range map[string]func(context.Context, string) (int, []byte, error){"Fetch": f.Fetch, "FetchUnblocking": f.FetchUnblocking} {
			mu.Lock()
			seen = nil
			mu.Unlock()
			status, body, err := fetch(context.Background(), tc.raw)
			mu.Lock()
			got := strings.Join(seen, ", ")
			mu.Unlock()
			if err != nil || status != tc.status || got != tc.want {
				t.Errorf("%s(%s): %d %q %v, the stand-in saw %q; want %d from %q", name, tc.raw, status, body, err, got, tc.status, tc.want)
			}
		}
	}
	if zyteHits.Load() != 0 || scraperHits.Load() != 0 {
		t.Errorf("a moved site's block asked the paid services: Zyte API %d, ScraperAPI %d", zyteHits.Load(), scraperHits.Load())
	}

	before := hits.Load()
	for _, raw := range []string{
		standIn.URL + "/lt/ana",            // the stand-in's address, named by a caller
		"https://user:pw@linktr.ee/ana",    // credentials, on a moved host
		"https://beacons.ai/ana",           // not moved: the policy, which cannot resolve it here
		"https://linktr.ee.evil.example/x", // not the site's host
	} {
		if _, _, err := f.Fetch(context.Background(), raw); !unsafeURLFault(err) {
			t.Errorf("%s: %v; want an unsafe_url refusal", raw, err)
		}
	}
	var fault *upstream.Fault
	if _, _, err := f.Fetch(context.Background(), "https://broken.example/ana"); !errors.As(err, &fault) || fault.Kind != upstream.Transport {
		t.Errorf("unusable base URL: %v; want a failed fetch, not the live site", err)
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("the stand-in was asked %d times for refused URLs", n)
	}
}

// In replay mode the replay upstream answers every page: no site is moved.
func TestPublicFetchReplayWinsOverMovedTargets(t *testing.T) {
	standIn, hits := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "stand-in") })
	replay, _, _ := zyteStub(t, upstream.ReplaySecret, "<html>recorded</html>")
	mux := http.NewServeMux()
	mux.Handle("/"+ZyteName+"/", http.StripPrefix("/"+ZyteName, replay.Config.Handler))
	front, _ := countingServer(t, mux.ServeHTTP)
	f := NewPublicFetcher(PublicFetchSettings{ReplayURL: front.URL, Targets: standInTargets,
		Lookup: func(k string) (string, bool) { return standIn.URL, k == "MERIDIAN_UPSTREAM_LINKTREE_URL" }})
	status, body, err := f.Fetch(context.Background(), "https://linktr.ee/ana")
	if err != nil || status != 200 || string(body) != "<html>recorded</html>" || hits.Load() != 0 {
		t.Errorf("replay: %d %q %v, stand-in asked %d times", status, body, err, hits.Load())
	}
}

func TestFetchTargetVariable(t *testing.T) {
	if v := (FetchTarget{Name: "bio_link"}).Variable(); v != "MERIDIAN_UPSTREAM_BIO_LINK_URL" {
		t.Errorf("variable %s", v)
	}
}
