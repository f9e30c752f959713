package replay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
)

// The local source's credentials: characters that URL and JSON encodings
// change, so a leak in any form shows.
const (
	proofKey          = "hdr-key/5f4e+3d2c=1b"
	proofToken        = "qry&token=0a9b/8c7d+e"
	proofCookie       = "sess<cookie>1234abcd"
	proofServerCookie = "srv-session-77aa88bb"
)

// proofServer is a source that requires an API key in a header, a token
// in the query (in a POST's JSON body) and a session cookie; it echoes them in its answers and
// sets a cookie of its own. GET /api/v1/profile/<name> redirects to
// /api/v1/users/<name> (within the host, so the client follows).
func proofServer(t *testing.T) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q struct{ Q, Token string }
		token := r.URL.Query().Get("token")
		if r.Method == http.MethodPost {
			_ = json.NewDecoder(r.Body).Decode(&q)
			token = q.Token
		}
		c, err := r.Cookie("session")
		if r.Header.Get("x-api-key") != proofKey || token != proofToken || err != nil || c.Value != url.QueryEscape(proofCookie) {
			http.Error(w, "unauthorised", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: proofServerCookie, Path: "/"})
		echo := map[string]any{
			"token": proofToken, "raw_query": r.URL.RawQuery, "key": r.Header.Get("x-api-key"), "cookie": r.Header.Get("cookie"),
			"basic": "Basic " + base64.StdEncoding.EncodeToString([]byte(proofKey+":")),
		}
		w.Header().Set("content-type", "application/json")
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/profile/"):
			http.Redirect(w, r, "/api/v1/users/"+strings.TrimPrefix(r.URL.Path, "/api/v1/profile/")+"?token="+url.QueryEscape(proofToken), http.StatusFound)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/users/"):
			_ = json.NewEncoder(w).Encode(map[string]any{
				"login": strings.TrimPrefix(r.URL.Path, "/api/v1/users/"), "followers": 42, "echo": echo,
				"avatar":   "https://scontent.example/a.jpg?_nc_ohc=abc&oh=00_sig&oe=67AB&w=100",
				"bio_html": `<a href="https://x.example/p?sig=zz&amp;token=` + url.QueryEscape(proofToken) + `&amp;id=1">me</a>`,
			})
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/search":
			_ = json.NewEncoder(w).Encode(map[string]any{"hits": []string{q.Q + "-1", q.Q + "-2"}, "echo": echo, "session_token": "sess-" + q.Token})
		default:
			http.NotFound(w, r)
		}
	}))
}

// proofProvider reads a profile (through the redirect) and searches by
// POST, sending all three credentials each time; its data holds only
// what the source says about the user, never the echoes.
func proofProvider() *upstream.Provider {
	creds := func(c *upstream.Call) (url.Values, http.Header) {
		h := http.Header{}
		h.Set("x-api-key", c.Secret("MERIDIAN_PROOF_KEY"))
		h.Set("cookie", "session="+url.QueryEscape(c.Secret("MERIDIAN_PROOF_COOKIE")))
		return url.Values{"token": {c.Secret("MERIDIAN_PROOF_TOKEN")}}, h
	}
	return &upstream.Provider{
		Name: "proof_source", BaseURL: "https://proof.invalid/api",
		Secrets: []upstream.Secret{{Name: "MERIDIAN_PROOF_KEY", Required: true}, {Name: "MERIDIAN_PROOF_TOKEN", Required: true},
			{Name: "MERIDIAN_PROOF_COOKIE", Required: true}},
		Endpoints: map[string]upstream.Adapter{"proof/profile": func(ctx context.Context, c *upstream.Call) (any, error) {
			q, h := creds(c)
			var user struct {
				Login     string `json:"login"`
				Followers int    `json:"followers"`
			}
			if _, err := c.GetJSON(ctx, "/v1/profile/"+url.PathEscape(c.Param("name")), q, h, &user); err != nil {
				return nil, err
			}
			_, h = creds(c)
			resp, err := c.Post(ctx, "/v1/search", h, map[string]any{"q": c.Param("name"), "token": c.Secret("MERIDIAN_PROOF_TOKEN"), "limit": 2})
			if err != nil {
				return nil, err
			}
			var found struct {
				Hits []string `json:"hits"`
			}
			if err := upstream.DecodeJSON(resp.Body, &found); err != nil {
				return nil, err
			}
			return map[string]any{"login": user.Login, "followers": user.Followers, "hits": found.Hits}, nil
		}},
	}
}

func TestRecordProofReplaysTheAnswerWithoutSecrets(t *testing.T) {
	src := proofServer(t)
	defer src.Close()
	vars := map[string]string{
		"MERIDIAN_UPSTREAM_PROOF_SOURCE_URL": src.URL + "/api",
		"MERIDIAN_PROOF_KEY":                 proofKey, "MERIDIAN_PROOF_TOKEN": proofToken, "MERIDIAN_PROOF_COOKIE": proofCookie,
	}
	lookup := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	dir := t.TempDir()
	ctx := context.Background()
	params := map[string]string{"name": "ada"}

	// Live, recorded.
	client := upstream.NewAPIClient()
	rec := NewRecorder(dir, []string{proofKey, proofToken, proofCookie}, client.Transport)
	client.Transport = rec
	live := upstream.NewRunner([]*upstream.Provider{proofProvider()}, upstream.Settings{Lookup: lookup, Client: client}).Serve(ctx, "proof/profile", params)
	if live.Fault != nil {
		t.Fatalf("live call failed: %v", live.Fault)
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	written := rec.Written()
	if len(written) != 2 || rec.Unrouted() != 0 {
		t.Fatalf("written %+v, unrouted %d; want the profile (its redirect's final answer) and the search", written, rec.Unrouted())
	}
	for _, w := range written {
		if w.Provider != "proof_source" || w.Status != http.StatusOK || filepath.Dir(w.Path) != filepath.Join(dir, "proof_source") {
			t.Errorf("written %+v", w)
		}
	}

	// Replayed from what was written: the same data.
	srv, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	replayed := upstream.NewRunner([]*upstream.Provider{proofProvider()}, upstream.Settings{Lookup: lookup, ReplayURL: base}).Serve(ctx, "proof/profile", params)
	if replayed.Fault != nil {
		t.Fatalf("replayed call failed: %v (requests %+v)", replayed.Fault, srv.Requests())
	}
	if !reflect.DeepEqual(live.Data, replayed.Data) {
		t.Errorf("replayed data %v, live %v", replayed.Data, live.Data)
	}
	for _, r := range srv.Requests() {
		if r.Fixture == "" || !strings.HasPrefix(r.Fixture, "rec-") {
			t.Errorf("%s %s answered by %q", r.Method, r.Path, r.Fixture)
		}
	}

	// No secret, in any form, anywhere in what was written.
	secrets := []string{proofKey, proofToken, proofCookie, proofServerCookie}
	files := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := p + "\n" + string(raw)
		for _, s := range secrets {
			for _, form := range forms(s) {
				if strings.Contains(text, form) {
					t.Errorf("%s holds a secret in the form %q:\n%s", p, form, raw)
				}
			}
		}
		for _, gone := range []string{"set-cookie", "sid=", "oh=", "_nc_ohc", "sig="} {
			if strings.Contains(strings.ToLower(text), gone) {
				t.Errorf("%s holds %q:\n%s", p, gone, raw)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 2 {
		t.Errorf("%d files written, want 2", files)
	}

	// Recording the same calls again rewrites the same two files.
	live = upstream.NewRunner([]*upstream.Provider{proofProvider()}, upstream.Settings{Lookup: lookup, Client: client}).Serve(ctx, "proof/profile", params)
	entries, _ := os.ReadDir(filepath.Join(dir, "proof_source"))
	if live.Fault != nil || len(entries) != 2 {
		t.Errorf("re-recorded: fault %v, %d files", live.Fault, len(entries))
	}
}

func TestRecorderPassesUnroutedRequestsThrough(t *testing.T) {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer src.Close()
	dir := t.TempDir()
	rec := NewRecorder(dir, nil, nil)
	res, err := (&http.Client{Transport: rec}).Get(src.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	entries, _ := os.ReadDir(dir)
	if string(body) != "ok" || rec.Unrouted() != 1 || len(rec.Written()) != 0 || len(entries) != 0 {
		t.Errorf("body %q, unrouted %d, written %v, entries %d", body, rec.Unrouted(), rec.Written(), len(entries))
	}
}
