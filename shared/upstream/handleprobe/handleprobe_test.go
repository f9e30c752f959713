package handleprobe

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type resp struct {
	status int
	body   string
	err    error
}

// fake answers by URL and records the URLs asked for.
type fake struct {
	mu    sync.Mutex
	calls []string
	by    map[string]resp
	def   resp
}

func (f *fake) fetch(_ context.Context, u string) (int, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, u)
	r, ok := f.by[u]
	if !ok {
		r = f.def
	}
	return r.status, []byte(r.body), r.err
}

func (f *fake) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

var samples = []string{"janedoe", "jane_doe", "jane-doe", "jane.doe", "janedoe1", "janedoe12"}

func sampleHandle(t *testing.T, s Site) string {
	t.Helper()
	for _, h := range samples {
		if _, ok := s.Handle(h); ok {
			return h
		}
	}
	t.Fatalf("%s: accepts none of %v", s.ID, samples)
	return ""
}

func jsonWith(path string, v any) string {
	if path == "" || path == "." {
		b, _ := json.Marshal(v)
		return string(b)
	}
	keys := strings.Split(path, ".")
	var out any = v
	for i := len(keys) - 1; i >= 0; i-- {
		out = map[string]any{keys[i]: out}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// existsResp and absentResp build, from a site's rule, the answer its site
// gives for a profile and for none.
func existsResp(s Site, h string) resp {
	d := s.Detect
	switch {
	case d.JSON:
		return resp{status: d.ExistsStatus[0], body: jsonWith(d.JSONPath, []any{map[string]any{"username": h}})}
	case d.ExistsMarker != "":
		return resp{status: d.ExistsStatus[0], body: "<html>" + strings.ReplaceAll(d.ExistsMarker, "{handle}", strings.ToUpper(h)) + "</html>"}
	}
	return resp{status: d.ExistsStatus[0], body: "<html>profile of " + h + "</html>"}
}

func absentResp(s Site) resp {
	d := s.Detect
	switch {
	case len(d.AbsentStatus) > 0:
		return resp{status: d.AbsentStatus[0], body: "not found"}
	case d.JSON:
		return resp{status: d.ExistsStatus[0], body: jsonWith(d.JSONPath, nil)}
	case d.AbsentMarker != "":
		return resp{status: d.ExistsStatus[0], body: "<html>" + strings.ToUpper(d.AbsentMarker) + "</html>"}
	}
	return resp{status: d.ExistsStatus[0], body: "<html>" + d.PageMarker + "</html>"}
}

func TestSitesTable(t *testing.T) {
	all := Sites()
	if len(all) < 40 {
		t.Fatalf("%d sites, want about 40", len(all))
	}
	for _, id := range []string{"code_host", "microblog_a", "video_platform", "short_video_a", "microblog_c"} {
		if _, ok := Lookup(id); !ok {
			t.Errorf("neutral id %s missing", id)
		}
	}
	// Login-walled or key-only profile pages are left out.
	for _, id := range []string{"photo_social", "social_a", "professional_network", "microblog_b"} {
		if _, ok := Lookup(id); ok {
			t.Errorf("%s should be excluded", id)
		}
	}
	for _, s := range all {
		h, _ := s.Handle(sampleHandle(t, s))
		for _, bad := range []string{"", "a/b", "a?b=c", "a%2Fb", "a b", "a#b", "../x", "a@b", strings.Repeat("a", 300)} {
			if _, ok := s.Handle(bad); ok {
				t.Errorf("%s accepts %q", s.ID, bad)
			}
		}
		p, c := s.URLs(h)
		for _, raw := range []string{p, c} {
			u, err := url.Parse(raw)
			if err != nil || u.Scheme != "https" || u.Host == "" || strings.Contains(raw, "{") {
				t.Errorf("%s: bad URL %q (%v)", s.ID, raw, err)
			}
		}
	}
}

func TestEveryRuleDetects(t *testing.T) {
	for _, s := range Sites() {
		t.Run(s.ID, func(t *testing.T) {
			h := sampleHandle(t, s)
			hs, _ := s.Handle(h)
			profile, check := s.URLs(hs)
			cases := []struct {
				name string
				r    resp
				want *bool
			}{
				{"exists", existsResp(s, hs), ptr(true)},
				{"absent", absentResp(s), ptr(false)},
				{"error", resp{err: errors.New("connection reset")}, nil},
				{"rate limited", resp{status: 429, body: "slow down"}, nil},
				{"unavailable", resp{status: 503}, nil},
			}
			if s.Detect.JSON {
				cases = append(cases, struct {
					name string
					r    resp
					want *bool
				}{"not json", resp{status: s.Detect.ExistsStatus[0], body: "<html>challenge</html>"}, nil})
			}
			if s.Detect.ExistsMarker != "" {
				cases = append(cases, struct {
					name string
					r    resp
					want *bool
				}{"unrecognised page", resp{status: s.Detect.ExistsStatus[0], body: "<html>please verify you are human</html>"}, nil})
			}
			for _, tc := range cases {
				f := &fake{by: map[string]resp{check: tc.r}, def: resp{err: errors.New("unexpected URL")}}
				cands, more := Probe(context.Background(), h, Options{Fetch: f.fetch, Sites: []string{s.ID}})
				if len(cands) != 1 {
					t.Fatalf("%s: %d candidates", tc.name, len(cands))
				}
				c := cands[0]
				if got := f.called(); len(got) != 1 || got[0] != check {
					t.Errorf("%s: fetched %v, want %s", tc.name, got, check)
				}
				if c.Site != s.ID || c.URL != profile || c.Handle != hs {
					t.Errorf("%s: candidate %+v", tc.name, c)
				}
				if !same(c.Exists, tc.want) {
					t.Errorf("%s: exists %v, want %v (%s)", tc.name, str(c.Exists), str(tc.want), c.Evidence)
				}
				if !strings.HasPrefix(c.Evidence, EvidencePrefix) || !strings.Contains(c.Evidence, "rule confidence "+s.Confidence) {
					t.Errorf("%s: evidence %q", tc.name, c.Evidence)
				}
				if more {
					t.Errorf("%s: hasMore with nothing left", tc.name)
				}
			}
		})
	}
}

// Answers written as the sites give them, not derived from the rules.
func TestSiteAnswers(t *testing.T) {
	cases := []struct {
		site, handle string
		r            resp
		want         *bool
	}{
		{"hackernews", "pg", resp{status: 200, body: "null"}, ptr(false)},
		{"hackernews", "pg", resp{status: 200, body: `{"id":"pg","created":1160418092,"karma":157316}`}, ptr(true)},
		{"gitlab", "janedoe", resp{status: 200, body: "[]"}, ptr(false)},
		{"gitlab", "janedoe", resp{status: 200, body: `[{"id":42,"username":"janedoe","state":"active"}]`}, ptr(true)},
		{"gitlab", "janedoe", resp{status: 401, body: `{"message":"401 Unauthorized"}`}, nil},
		{"codeforces", "tourist", resp{status: 400, body: `{"status":"FAILED","comment":"handles: User with handle tourist not found"}`}, ptr(false)},
		{"codeforces", "tourist", resp{status: 200, body: `{"status":"OK","result":[{"handle":"tourist","rating":3500}]}`}, ptr(true)},
		{"microblog_a", "janedoe", resp{status: 400, body: `{"error":"InvalidRequest","message":"Profile not found"}`}, ptr(false)},
		{"microblog_a", "janedoe", resp{status: 200, body: `{"did":"did:plc:abc","handle":"janedoe.bsky.social"}`}, ptr(true)},
		{"reddit", "janedoe", resp{status: 200, body: `{"kind":"t2","data":{"is_suspended":true,"name":"janedoe"}}`}, ptr(true)},
		{"reddit", "janedoe", resp{status: 404, body: `{"message":"Not Found","error":404}`}, ptr(false)},
		{"reddit", "janedoe", resp{status: 403, body: "blocked"}, nil},
		{"duolingo", "janedoe", resp{status: 200, body: `{"users":[]}`}, ptr(false)},
		{"duolingo", "janedoe", resp{status: 200, body: `{"users":[{"username":"janedoe"}]}`}, ptr(true)},
		{"steam", "janedoe", resp{status: 200, body: `<div class="error_ctn"><h3>The specified profile could not be found.</h3></div>`}, ptr(false)},
		{"steam", "janedoe", resp{status: 200, body: `<div class="profile_header_bg"><div class="profile_header">`}, ptr(true)},
		{"steam", "janedoe", resp{status: 200, body: `<html>Access denied</html>`}, nil},
		{"telegram", "janedoe", resp{status: 200, body: `<div class="tgme_page"><div class="tgme_page_title">Telegram</div></div>`}, ptr(false)},
		{"telegram", "janedoe", resp{status: 200, body: `<div class="tgme_page"><div class="tgme_page_extra">@janedoe</div></div>`}, ptr(true)},
		{"video_platform", "JaneDoe", resp{status: 200, body: `{"canonicalBaseUrl":"/@janedoe"}`}, ptr(true)},
		{"video_platform", "JaneDoe", resp{status: 200, body: `<form action="https://consent.youtube.com/save">`}, nil},
		{"video_platform", "JaneDoe", resp{status: 404}, ptr(false)},
		{"short_video_a", "jane.doe", resp{status: 200, body: `{"statusCode":10221,"statusMsg":""}`}, ptr(false)},
		{"short_video_a", "jane.doe", resp{status: 200, body: `{"userInfo":{"user":{"uniqueId":"jane.doe"}}}`}, ptr(true)},
		{"code_host", "octocat", resp{status: 404}, ptr(false)},
		{"code_host", "octocat", resp{status: 200, body: "<html>octocat</html>"}, ptr(true)},
		{"mastodon_social", "Gargron", resp{status: 404, body: `{"error":"Record not found"}`}, ptr(false)},
	}
	for _, tc := range cases {
		s, ok := Lookup(tc.site)
		if !ok {
			t.Fatalf("no site %s", tc.site)
		}
		h, ok := s.Handle(tc.handle)
		if !ok {
			t.Fatalf("%s rejects %s", tc.site, tc.handle)
		}
		_, check := s.URLs(h)
		f := &fake{by: map[string]resp{check: tc.r}, def: resp{err: errors.New("unexpected URL")}}
		cands, _ := Probe(context.Background(), tc.handle, Options{Fetch: f.fetch, Sites: []string{tc.site}})
		if len(cands) != 1 || !same(cands[0].Exists, tc.want) {
			t.Errorf("%s %d %.40q: got %+v, want exists %s", tc.site, tc.r.status, tc.r.body, cands, str(tc.want))
		}
	}
}

func TestInvalidHandlesSkipped(t *testing.T) {
	f := &fake{def: resp{status: 404}}
	for _, h := range []string{"", "@", "bad/handle", "a b", "x?y=1", "../etc"} {
		cands, more := Probe(context.Background(), h, Options{Fetch: f.fetch})
		if len(cands) != 0 || more {
			t.Errorf("%q: %d candidates, hasMore %v", h, len(cands), more)
		}
	}
	if n := len(f.called()); n != 0 {
		t.Fatalf("fetched %d times for invalid handles", n)
	}

	// Valid on some sites only: GitHub refuses a double hyphen, Bluesky a
	// 19-character name, Telegram fewer than 5 characters.
	cands, _ := Probe(context.Background(), "jane--doe", Options{Fetch: f.fetch})
	if has(cands, "code_host") {
		t.Error("code_host probed with a double hyphen")
	}
	if !has(cands, "lichess") {
		t.Error("lichess should accept jane--doe")
	}
	cands, _ = Probe(context.Background(), strings.Repeat("a", 19), Options{Fetch: f.fetch})
	if has(cands, "microblog_a") || !has(cands, "code_host") {
		t.Errorf("19 characters: %v", ids(cands))
	}
	cands, _ = Probe(context.Background(), "jdoe", Options{Fetch: f.fetch})
	if has(cands, "telegram") {
		t.Error("telegram probed with 4 characters")
	}
	for _, c := range cands {
		s, _ := Lookup(c.Site)
		if _, ok := s.Handle("jdoe"); !ok {
			t.Errorf("%s probed with a handle it refuses", c.Site)
		}
	}

	// "@" and case: lower-case sites get the folded handle.
	cands, _ = Probe(context.Background(), " @JaneDoe ", Options{Fetch: f.fetch, Sites: []string{"chesscom", "code_host"}})
	if len(cands) != 2 || cands[0].Handle != "JaneDoe" || cands[1].Handle != "janedoe" ||
		cands[1].URL != "https://www.chess.com/member/janedoe" || cands[0].URL != "https://github.com/JaneDoe" {
		t.Errorf("normalised: %+v", cands)
	}
}

func TestMaxSitesSetsHasMore(t *testing.T) {
	f := &fake{def: resp{status: 404}}
	cands, more := Probe(context.Background(), "janedoe", Options{Fetch: f.fetch, MaxSites: 3})
	if len(cands) != 3 || !more || len(f.called()) != 3 {
		t.Fatalf("MaxSites 3: %d candidates, %d fetches, hasMore %v", len(cands), len(f.called()), more)
	}
	if cands[0].Site != Sites()[0].ID {
		t.Errorf("not in list order: %v", ids(cands))
	}
	all, more := Probe(context.Background(), "janedoe", Options{Fetch: (&fake{def: resp{status: 404}}).fetch})
	if more || len(all) < 30 {
		t.Errorf("unbounded: %d candidates, hasMore %v", len(all), more)
	}
	for i := 1; i < len(all); i++ {
		if index(all[i-1].Site) > index(all[i].Site) {
			t.Fatalf("not in list order: %v", ids(all))
		}
	}
}

func TestBudgetSetsHasMore(t *testing.T) {
	// A fetch that honours ctx.
	var fetched atomic.Int32
	slow := func(ctx context.Context, _ string) (int, []byte, error) {
		fetched.Add(1)
		<-ctx.Done()
		return 0, nil, ctx.Err()
	}
	start := time.Now()
	cands, more := Probe(context.Background(), "janedoe", Options{Fetch: slow, Budget: 80 * time.Millisecond, SiteTimeout: time.Minute, Concurrency: 2})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("took %v with an 80ms budget", el)
	}
	if !more {
		t.Fatal("budget spent but hasMore false")
	}
	if len(cands) != 2 || int(fetched.Load()) != 2 {
		t.Fatalf("%d candidates, %d fetches; want the 2 started", len(cands), fetched.Load())
	}
	for _, c := range cands {
		if c.Exists != nil || !strings.Contains(c.Evidence, "time budget") {
			t.Errorf("%+v", c)
		}
	}

	// A fetch that ignores ctx does not hold the probe past its budget.
	release := make(chan struct{})
	defer close(release)
	stuck := func(context.Context, string) (int, []byte, error) {
		<-release
		return 200, nil, nil
	}
	start = time.Now()
	cands, more = Probe(context.Background(), "janedoe", Options{Fetch: stuck, Budget: 80 * time.Millisecond, Concurrency: 3})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("stuck fetch held the probe %v", el)
	}
	if !more || len(cands) != 3 {
		t.Fatalf("stuck: %d candidates, hasMore %v", len(cands), more)
	}
	for _, c := range cands {
		if c.Exists != nil || !strings.Contains(c.Evidence, "time budget spent before the site answered") {
			t.Errorf("%+v", c)
		}
	}
}

func TestSiteTimeout(t *testing.T) {
	gh, _ := Lookup("code_host")
	_, ghCheck := gh.URLs("janedoe")
	fetch := func(ctx context.Context, u string) (int, []byte, error) {
		if u == ghCheck {
			<-ctx.Done()
			return 0, nil, ctx.Err()
		}
		return 404, nil, nil
	}
	cands, more := Probe(context.Background(), "janedoe", Options{Fetch: fetch, SiteTimeout: 30 * time.Millisecond, Sites: []string{"code_host", "codeberg", "lichess"}})
	if len(cands) != 3 || !more {
		t.Fatalf("%d candidates, hasMore %v", len(cands), more)
	}
	for _, c := range cands {
		if c.Site == "code_host" {
			if c.Exists != nil || !strings.Contains(c.Evidence, "site timeout") {
				t.Errorf("timed-out site: %+v", c)
			}
		} else if c.Exists == nil || *c.Exists {
			t.Errorf("answered site: %+v", c)
		}
	}
}

func TestCancelSetsHasMore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	fetch := func(fctx context.Context, _ string) (int, []byte, error) {
		if n.Add(1) == 2 {
			cancel()
		}
		<-fctx.Done()
		return 0, nil, fctx.Err()
	}
	cands, more := Probe(ctx, "janedoe", Options{Fetch: fetch, Concurrency: 2})
	if len(cands) != 2 {
		t.Errorf("want the 2 started sites, got %v", ids(cands))
	}
	if !more || len(cands) == 0 || len(cands) > 2 {
		t.Fatalf("%d candidates, hasMore %v", len(cands), more)
	}
	if !strings.Contains(cands[len(cands)-1].Evidence, "cancel") {
		t.Errorf("%+v", cands[len(cands)-1])
	}
}

func TestConcurrencyLimit(t *testing.T) {
	for _, limit := range []int{1, 3, 8} {
		var inflight, peak atomic.Int32
		fetch := func(ctx context.Context, _ string) (int, []byte, error) {
			n := inflight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			inflight.Add(-1)
			return 404, nil, nil
		}
		cands, more := Probe(context.Background(), "janedoe", Options{Fetch: fetch, Concurrency: limit, Budget: time.Minute})
		if more || len(cands) < 30 {
			t.Fatalf("limit %d: %d candidates, hasMore %v", limit, len(cands), more)
		}
		if p := peak.Load(); p > int32(limit) || p < 1 {
			t.Errorf("limit %d: peak %d in flight", limit, p)
		}
		if limit == 3 && peak.Load() < 2 {
			t.Errorf("limit 3 never overlapped (peak %d)", peak.Load())
		}
	}
}

func TestSkipAndNoFetch(t *testing.T) {
	cands, more := Probe(context.Background(), "janedoe", Options{Skip: []string{"code_host"}})
	if more || has(cands, "code_host") || len(cands) < 30 {
		t.Fatalf("%d candidates, hasMore %v", len(cands), more)
	}
	for _, c := range cands {
		if c.Exists != nil || !strings.Contains(c.Evidence, "not fetched") {
			t.Errorf("%+v", c)
		}
	}
}

func ptr(b bool) *bool { return &b }

func same(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func str(b *bool) string {
	if b == nil {
		return "unknown"
	}
	if *b {
		return "true"
	}
	return "false"
}

func has(cands []Candidate, id string) bool {
	for _, c := range cands {
		if c.Site == id {
			return true
		}
	}
	return false
}

func ids(cands []Candidate) []string {
	var out []string
	for _, c := range cands {
		out = append(out, c.Site)
	}
	return out
}

func index(id string) int {
	for i, s := range Sites() {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// FetchHost is the host a probe dials: the check URL's when there is one,
// and a {handle}. subdomain is reported as such.
func TestFetchHost(t *testing.T) {
	for id, want := range map[string]struct {
		host       string
		subdomains bool
	}{
		"gitlab": {"gitlab.com", false}, "microblog_a": {"public.api.bsky.app", false}, "chesscom": {"api.chess.com", false},
		"code_host": {"github.com", false}, "itchio": {"itch.io", true},
	} {
		s, ok := Lookup(id)
		if !ok {
			t.Fatalf("no site %s", id)
		}
		if host, sub := s.FetchHost(); host != want.host || sub != want.subdomains {
			t.Errorf("%s: %s %v, want %s %v", id, host, sub, want.host, want.subdomains)
		}
	}
}
