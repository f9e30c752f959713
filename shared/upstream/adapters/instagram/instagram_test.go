package instagram_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/instagram"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const endpoint = instagram.Endpoint

// Service keys: they must reach the services and never a fault's reason.
const (
	zyteKey    = "zk-instagram-test-41c7"
	scraperKey = "sk-instagram-test-9e2b"
)

// now is the runner's clock, so retrieved_at is stable in the goldens.
var now = time.Date(2026, 11, 3, 9, 30, 15, 0, time.FixedZone("CET", 3600))

func options() upstream.Options {
	o := adaptertest.Options
	o.Timeout = 20 * o.AttemptTimeout // room for the services' own attempt timeout
	o.Now = func() time.Time { return now }
	return o
}

func direct(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Direct(instagram.Site()), nil, options())
}

func zyte(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Zyte(instagram.Site()), map[string]string{pages.ZyteKeySecret: zyteKey}, options())
}

func scraperAPI(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.ScraperAPI(instagram.Site()), map[string]string{pages.ScraperAPIKeySecret: scraperKey}, options())
}

func all(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	site := instagram.Site()
	providers := []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	secrets := map[string]string{pages.ZyteKeySecret: zyteKey, pages.ScraperAPIKeySecret: scraperKey}
	return adaptertest.StartRoutes(t, providers, secrets, options())
}

func q(u string) string { return "url=" + url.QueryEscape(u) }

func stats(t *testing.T, p map[string]any) map[string]any {
	t.Helper()
	s, ok := p["stats"].(map[string]any)
	if !ok {
		t.Fatalf("stats %v", p["stats"])
	}
	return s
}

func TestPhoto(t *testing.T) {
	u := direct(t)
	p := u.Data(t, endpoint, q("https://www.instagram.com/p/C9pHoTo1abc/?utm_source=ig_web_copy_link&igsh=MzRlODBiNWFlZA=="), "post-photo")
	if r := u.LastRequest(t); r.Path != "/p/C9pHoTo1abc/" || len(r.Query) != 0 || r.Method != "GET" {
		t.Fatalf("request %s %s %v", r.Method, r.Path, r.Query)
	}
	// The page also holds the author's other posts: the requested one is read.
	if p["id"] != "3416295348528064220" || p["url"] != "https://www.instagram.com/p/C9pHoTo1abc/" || p["platform"] != "photo_social" ||
		p["retrieved_at"] != "2026-11-03T08:30:15Z" {
		t.Fatalf("post %v", p)
	}
	s := stats(t, p)
	if s["likes"] != 48213.0 || s["comments"] != 1294.0 {
		t.Errorf("stats %v", s)
	}
	// A photo has no plays: null, not 0, and nothing to warn about.
	for _, k := range []string{"plays", "shares", "saves", "reposts"} {
		if v, ok := s[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v); want null", k, v, ok)
		}
	}
	if _, ok := p["_warnings"]; ok {
		t.Errorf("warnings %v", p["_warnings"])
	}
	if p["legs"] != nil {
		t.Error("legs come from the runner's trace (the pipeline reports them), not the adapter")
	}
}

func TestReel(t *testing.T) {
	u := direct(t)
	p := u.Data(t, endpoint, q("https://www.instagram.com/reel/DAbCdReel12/"), "post-reel")
	if r := u.LastRequest(t); r.Path != "/p/DAbCdReel12/" {
		t.Fatalf("path %s", r.Path)
	}
	if p["id"] != "3466375145914522998" || p["url"] != "https://www.instagram.com/p/DAbCdReel12/" {
		t.Fatalf("post %v", p)
	}
	if s := stats(t, p); s["plays"] != 1893456.0 || s["likes"] != 120034.0 || s["comments"] != 2210.0 {
		t.Errorf("stats %v", s)
	}
}

func TestHiddenLikes(t *testing.T) {
	p := direct(t).Data(t, endpoint, q("https://instagram.com/p/C7HiDdenLk1"), "post-hidden-likes")
	s := stats(t, p)
	// The page's placeholder (3) is not the count: null, never a number.
	if v, ok := s["likes"]; !ok || v != nil || s["comments"] != 87.0 || s["plays"] != nil {
		t.Errorf("stats %v", s)
	}
	if w, _ := p["_warnings"].([]any); len(w) != 1 || w[0] != instagram.WarnLikesHidden {
		t.Errorf("warnings %v", p["_warnings"])
	}
}

// The 2024–2025 page shape: a feed video with a view count only, comments
// turned off, and a media id written as a bare JSON number beyond 2^53.
func TestLegacyWebInfo(t *testing.T) {
	p := direct(t).Data(t, endpoint, q("https://www.instagram.com/tv/C5LegacyWeb/"), "post-legacy-web-info")
	if p["id"] != "3335894117816821659" {
		t.Errorf("id %v (exact digits)", p["id"])
	}
	s := stats(t, p)
	if s["plays"] != 88012.0 || s["likes"] != 5120.0 || s["comments"] != nil {
		t.Errorf("stats %v", s)
	}
	if w, _ := p["_warnings"].([]any); len(w) != 2 || w[0] != instagram.WarnCommentsOff || w[1] != instagram.WarnPlaysAreViews {
		t.Errorf("warnings %v", p["_warnings"])
	}
}

// The web GraphQL shape (xdt_shortcode_media) with edge counters.
func TestGraphQLShape(t *testing.T) {
	p := direct(t).Data(t, endpoint, q("https://www.instagram.com/example_studio/p/CxGraphQL12/"), "post-graphql")
	s := stats(t, p)
	if p["id"] == nil || s["likes"] != 3310.0 || s["comments"] != 152.0 || s["plays"] != 61877.0 {
		t.Errorf("post %v", p)
	}
	if _, ok := p["_warnings"]; ok {
		t.Errorf("warnings %v", p["_warnings"])
	}
}

// Every route maps the same page to the same data.
func TestServices(t *testing.T) {
	z := zyte(t)
	adaptertest.MatchesGolden(t, endpoint, z.Serve(t, endpoint, q("https://www.instagram.com/p/C9pHoTo1abc/")), instagram.Name, "post-photo")
	r := z.LastRequest(t)
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if r.Path != "/v1/extract" || body["url"] != "https://www.instagram.com/p/C9pHoTo1abc/" || body["httpResponseBody"] != true ||
		body["requestCookies"] != nil || !strings.HasPrefix(r.Header.Get("authorization"), "Basic ") {
		t.Errorf("Zyte request %s %s", r.Path, r.Body)
	}
	s := scraperAPI(t)
	adaptertest.MatchesGolden(t, endpoint, s.Serve(t, endpoint, q("https://m.instagram.com/reels/C9pHoTo1abc/")), instagram.Name, "post-photo")
	if qv := url.Values(s.LastRequest(t).Query); qv.Get("url") != "https://www.instagram.com/p/C9pHoTo1abc/" || qv.Get("api_key") != scraperKey {
		t.Errorf("ScraperAPI query %v", qv)
	}
	adaptertest.MatchesGolden(t, endpoint, z.Serve(t, endpoint, q("https://www.instagram.com/reel/DAbCdReel12/")), instagram.Name, "post-reel")
}

// A login wall on the direct route fails over to Zyte, which serves it.
func TestLoginWallFailsOver(t *testing.T) {
	d := direct(t)
	for _, code := range []string{"CLoginWall1", "CgAted12345"} {
		out := d.Fault(t, endpoint, q("https://www.instagram.com/p/"+code+"/"), upstream.Rejected)
		if !strings.Contains(out.Fault.Reason, "login") {
			t.Errorf("%s: reason %q", code, out.Fault.Reason)
		}
	}
	// The services report the redirect to the login page.
	z := zyte(t)
	out := z.Fault(t, endpoint, q("https://www.instagram.com/p/CrEdirect12/"), upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "login") || strings.Contains(out.Fault.Reason, zyteKey) {
		t.Errorf("reason %q", out.Fault.Reason)
	}

	res := all(t).Serve(t, endpoint, q("https://www.instagram.com/p/CLoginWall1/"))
	if res.Fault != nil {
		t.Fatalf("fault %v", res.Fault)
	}
	if err := schemas.Validate(endpoint, res.Data); err != nil {
		t.Fatal(err)
	}
	p := res.Data.(*instagram.PostStats)
	if *p.Stats.Likes != 20480 || *p.Stats.Comments != 301 || p.URL != "https://www.instagram.com/p/CLoginWall1/" {
		t.Errorf("post %+v", p)
	}
	if res.Trace.ServedBy != pages.ZyteName || len(res.Trace.Legs) != 2 || res.Trace.Legs[0].ServedBy != instagram.Name ||
		res.Trace.Legs[0].OK || res.Trace.Legs[0].Fault != upstream.Rejected || !res.Trace.Legs[1].OK {
		t.Errorf("trace %+v", res.Trace)
	}
}

// Deleted, unavailable and private posts are definitive 404s, not failovers.
func TestNotFound(t *testing.T) {
	d := direct(t)
	for _, code := range []string{"CdEleted123", "CgOne12345a", "CpRivate123"} {
		d.Fault(t, endpoint, q("https://www.instagram.com/p/"+code+"/"), upstream.NotFound)
	}
	zyte(t).Fault(t, endpoint, q("https://www.instagram.com/p/CdEleted123/"), upstream.NotFound)
	scraperAPI(t).Fault(t, endpoint, q("https://www.instagram.com/p/CdEleted123/"), upstream.NotFound)
	// Over every route, the direct 404 ends the call.
	a := all(t)
	before := len(a.Replay.Requests())
	res := a.Serve(t, endpoint, q("https://www.instagram.com/p/CdEleted123/"))
	if res.Fault == nil || res.Fault.Kind != upstream.NotFound || len(a.Replay.Requests()) != before+1 {
		t.Errorf("fault %v, %d requests", res.Fault, len(a.Replay.Requests())-before)
	}
	if e := res.Error(); e.Status != 404 {
		t.Errorf("status %d", e.Status)
	}
}

// A changed page is Malformed (502, refunded), never an empty success; the
// reason names what is missing and the page size, never page content.
func TestChangedShape(t *testing.T) {
	d := direct(t)
	for code, want := range map[string]string{
		"CChanged123": "no media with the requested shortcode",
		"CnOjson1234": "no JSON data script",
	} {
		out := d.Fault(t, endpoint, q("https://www.instagram.com/p/"+code+"/"), upstream.Malformed)
		if !strings.Contains(out.Fault.Reason, want) || !strings.Contains(out.Fault.Reason, "-byte page") ||
			strings.Contains(out.Fault.Reason, "Sample") || strings.Contains(out.Fault.Reason, "secret") {
			t.Errorf("%s: reason %q", code, out.Fault.Reason)
		}
	}
	out := zyte(t).Fault(t, endpoint, q("https://www.instagram.com/p/CChanged123/"), upstream.Malformed)
	if strings.Contains(out.Fault.Reason, zyteKey) || strings.Contains(out.Fault.Reason, "Sample") {
		t.Errorf("reason %q", out.Fault.Reason)
	}
}

func TestShortcode(t *testing.T) {
	for raw, want := range map[string]string{
		"https://www.instagram.com/p/C9pHoTo1abc/":                   "C9pHoTo1abc",
		"https://www.instagram.com/p/C9pHoTo1abc":                    "C9pHoTo1abc",
		"https://instagram.com/p/C9pHoTo1abc/?img_index=2":           "C9pHoTo1abc",
		"http://www.instagram.com/reel/DAbCdReel12/?igsh=abc#c":      "DAbCdReel12",
		"https://www.instagram.com/reels/DAbCdReel12/":               "DAbCdReel12",
		"https://www.instagram.com/tv/B-a_b-c_d12/":                  "B-a_b-c_d12",
		"https://m.instagram.com/p/C9pHoTo1abc/":                     "C9pHoTo1abc",
		"https://WWW.Instagram.COM./p/C9pHoTo1abc/":                  "C9pHoTo1abc",
		"https://instagr.am/p/C9pHoTo1abc/":                          "C9pHoTo1abc",
		"https://www.instagram.com/natgeo/p/C9pHoTo1abc/":            "C9pHoTo1abc",
		"https://www.instagram.com/natgeo/reel/DAbCdReel12/":         "DAbCdReel12",
		" https://www.instagram.com/p/C9pHoTo1abc/ ":                 "C9pHoTo1abc",
		"https://www.instagram.com/p/AbCdEfGhIjKlMnOpQrStUvWxYz0123": "AbCdEfGhIjKlMnOpQrStUvWxYz0123",
	} {
		got, err := instagram.Shortcode(raw)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", raw, got, err, want)
		}
	}
	for raw, code := range map[string]string{
		"https://www.instagram.com/natgeo/":                   "not_a_post",
		"https://www.instagram.com/stories/natgeo/3416295348": "not_a_post",
		"https://www.instagram.com/explore/tags/cats/":        "not_a_post",
		"https://www.instagram.com/p/":                        "not_a_post",
		"https://www.instagram.com/p/C9pHoTo1abc/comments/":   "not_a_post",
		"https://www.instagram.com/a/b/p/C9pHoTo1abc/":        "not_a_post",
		"https://www.instagram.com/p/C9p%2FHo/":               "not_a_post",
		"https://www.instagram.com/p/abc/":                    "invalid_shortcode",
		"https://www.instagram.com/p/C9p.HoTo1a/":             "invalid_shortcode",
		"https://photos.example.com/p/ABC123/":                "not_a_post",
		"https://instagram.com.evil.example/p/C9pHoTo1abc/":   "not_a_post",
		"https://evilinstagram.com/p/C9pHoTo1abc/":            "not_a_post",
		"https://user@www.instagram.com/p/C9pHoTo1abc/":       "invalid_url",
		"ftp://www.instagram.com/p/C9pHoTo1abc/":              "invalid_url",
		"C9pHoTo1abc":                                         "invalid_url",
	} {
		_, err := instagram.Shortcode(raw)
		f, ok := err.(*upstream.Fault)
		if !ok || f.Kind != upstream.InvalidParameter || f.Field != "url" || f.Code != code {
			t.Errorf("%q: %v; want invalid_parameter %s", raw, err, code)
			continue
		}
		if strings.Contains(strings.ToLower(f.Reason), "instagram") {
			t.Errorf("%q: the message names the platform: %q", raw, f.Reason)
		}
	}
}

// An unusable URL is the caller's 422, before any request.
func TestInvalidURLNotFetched(t *testing.T) {
	d := direct(t)
	for _, raw := range []string{"https://www.instagram.com/natgeo/", "https://photos.example.com/p/ABC123/"} {
		before := len(d.Replay.Requests())
		out := d.Runner.Serve(context.Background(), endpoint, map[string]string{"url": raw})
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "url" {
			t.Fatalf("%s: fault %v", raw, out.Fault)
		}
		if e := out.Error(); e.Status != 422 {
			t.Errorf("%s: status %d", raw, e.Status)
		}
		if len(d.Replay.Requests()) != before {
			t.Errorf("%s: the site was asked", raw)
		}
	}
}

// ---- helpers ----
