package tiktok_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/tiktok"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Service keys: they must reach the services and never a fault's reason.
const (
	zyteKey    = "zk-tiktok-test-5d21"
	scraperKey = "sk-tiktok-test-0b7c"
)

func clock() time.Time { return now }

func direct(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Direct(tiktok.Site()), nil, options(clock))
}

func zyte(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Zyte(tiktok.Site()), map[string]string{pages.ZyteKeySecret: zyteKey}, options(clock))
}

func scraperAPI(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.ScraperAPI(tiktok.Site()), map[string]string{pages.ScraperAPIKeySecret: scraperKey}, options(clock))
}

// allRoutes is the profile's route order as adapters.All lists it: the
// Research API, the page directly, then the unblocking services.
func allRoutes(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	site := tiktok.Site()
	providers := []*upstream.Provider{tiktok.ResearchProvider(), pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	s := map[string]string{pages.ZyteKeySecret: zyteKey, pages.ScraperAPIKeySecret: scraperKey}
	for k, v := range secrets {
		s[k] = v
	}
	return adaptertest.StartRoutes(t, providers, s, options(clock))
}

func TestProfilePage(t *testing.T) {
	u := direct(t)
	data := u.Data(t, tiktok.ProfileEndpoint, "handle=samplecreator", "profile-samplecreator")
	r := u.LastRequest(t)
	if r.Method != "GET" || r.Path != "/@samplecreator" || len(r.Query) != 0 || !strings.Contains(r.Header.Get("user-agent"), "Chrome/") {
		t.Fatalf("request %s %s %v", r.Method, r.Path, r.Query)
	}
	for _, h := range []string{"cookie", "authorization"} {
		if r.Header.Get(h) != "" {
			t.Errorf("the page was asked with %s: only what a logged-out browser sends", h)
		}
	}
	// statsV2 holds the exact counts; stats the rounded display ones.
	want := map[string]any{
		"id": "6812345678901234567", "handle": "samplecreator", "name": "Sample Creator", "url": "https://www.tiktok.com/@samplecreator",
		"followers": 48291.0, "follower_source_field": "userInfo.statsV2.followerCount", "following": 182.0,
		"likes_count": 1204567.0, "posts_count": 7.0, "verified": true, "private": false, "bio_link": "sample.example.com/links",
		"sec_uid": "MS4wLjABAAAAsamplesamplecreatorQ2xvbmVkU2VjVWlk", "created_at": "2020-05-11T15:52:25Z",
		"description": "Sample bio line one\nsecond line \U0001F3AC",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("%s = %#v; want %#v", k, data[k], v)
		}
	}
	if _, ok := data["_warnings"]; ok {
		t.Errorf("_warnings %v", data["_warnings"])
	}
}

// Every route maps the same page to the same data.
func TestProfilePageServices(t *testing.T) {
	z := zyte(t)
	adaptertest.MatchesGolden(t, tiktok.ProfileEndpoint, z.Serve(t, tiktok.ProfileEndpoint, "handle=samplecreator"), tiktok.Name, "profile-samplecreator")
	var b map[string]any
	r := z.LastRequest(t)
	if err := json.Unmarshal(r.Body, &b); err != nil || b["url"] != "https://www.tiktok.com/@samplecreator" || b["httpResponseBody"] != true {
		t.Errorf("Zyte request %s", r.Body)
	}
	s := scraperAPI(t)
	adaptertest.MatchesGolden(t, tiktok.ProfileEndpoint, s.Serve(t, tiktok.ProfileEndpoint, "handle=SampleCreator"), tiktok.Name, "profile-samplecreator")
	if q := url.Values(s.LastRequest(t).Query); q.Get("url") != "https://www.tiktok.com/@samplecreator" || q.Get("api_key") != scraperKey {
		t.Errorf("ScraperAPI query %v", q)
	}
}

func TestProfilePageShapes(t *testing.T) {
	u := direct(t)
	// Display counts only: followers say where they came from, and that
	// they may be rounded.
	rounded := u.Data(t, tiktok.ProfileEndpoint, "handle=samplerounded", "profile-samplerounded")
	if rounded["followers"] != 1300000.0 || rounded["follower_source_field"] != "userInfo.stats.followerCount" ||
		rounded["likes_count"] != 9800000.0 || !strings.Contains(warningsOf(rounded), tiktok.WarnRoundedFollowers) {
		t.Errorf("rounded %v", rounded)
	}
	// A private account still shows its header.
	private := u.Data(t, tiktok.ProfileEndpoint, "handle=sampleprivate", "profile-sampleprivate")
	if private["private"] != true || private["followers"] != 210.0 || !strings.Contains(warningsOf(private), tiktok.WarnPrivate) {
		t.Errorf("private %v", private)
	}
	// The 2022–2023 page (SIGI_STATE), whose id is a bare JSON number
	// beyond 2^53: its exact digits.
	legacy := u.Data(t, tiktok.ProfileEndpoint, "handle=samplelegacy", "profile-samplelegacy")
	if legacy["id"] != "6712345678901234567" || legacy["followers"] != 5123.0 || legacy["follower_source_field"] != "UserModule.stats.followerCount" ||
		legacy["posts_count"] != 61.0 || legacy["created_at"] != "2018-11-03T08:42:47Z" {
		t.Errorf("legacy %v", legacy)
	}
}

// An unknown account is a definitive 404 on any route, never asked again.
func TestProfilePageNotFound(t *testing.T) {
	d := direct(t)
	for _, h := range []string{"samplenobody", "samplehidden", "samplegone", "samplelegacygone"} {
		d.Fault(t, tiktok.ProfileEndpoint, "handle="+h, upstream.NotFound)
	}
	scraperAPI(t).Fault(t, tiktok.ProfileEndpoint, "handle=samplegone", upstream.NotFound)
	a := allRoutes(t)
	out := a.Fault(t, tiktok.ProfileEndpoint, "handle=samplenobody", upstream.NotFound)
	if len(out.Trace.Legs) != 1 || out.Trace.Legs[0].ServedBy != tiktok.ResearchName {
		t.Errorf("legs %+v", out.Trace.Legs)
	}
}

// The site's bot check and a login wall fail over (Rejected); a changed
// page is Malformed, with a reason that names what is missing and the
// page's size, never its content.
func TestProfilePageFaults(t *testing.T) {
	d := direct(t)
	out := d.Fault(t, tiktok.ProfileEndpoint, "handle=sampleblocked", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "proof-of-work") {
		t.Errorf("reason %q", out.Fault.Reason)
	}
	out = zyte(t).Fault(t, tiktok.ProfileEndpoint, "handle=samplewall", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "login") || strings.Contains(out.Fault.Reason, zyteKey) {
		t.Errorf("reason %q", out.Fault.Reason)
	}
	for h, want := range map[string]string{
		"samplechanged": "no account in the page's data",
		"samplenojson":  "no __UNIVERSAL_DATA_FOR_REHYDRATION__ or SIGI_STATE data",
		"sampleother":   "another account",
	} {
		out := d.Fault(t, tiktok.ProfileEndpoint, "handle="+h, upstream.Malformed)
		if !strings.Contains(out.Fault.Reason, want) || !strings.Contains(out.Fault.Reason, "-byte page") ||
			strings.Contains(out.Fault.Reason, "Sample") || strings.Contains(out.Fault.Reason, "someoneelse") {
			t.Errorf("%s: reason %q", h, out.Fault.Reason)
		}
	}
}

// The research client refused, the site's bot check on the direct route:
// the first unblocking service serves the page.
func TestProfileFailsOver(t *testing.T) {
	a := allRoutes(t)
	out := a.Serve(t, tiktok.ProfileEndpoint, "handle=sampleblocked")
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if err := schemas.Validate(tiktok.ProfileEndpoint, out.Data); err != nil {
		t.Fatal(err)
	}
	p := out.Data.(tiktok.Profile)
	if *p.ID != "6890000000000000004" || *p.Followers != 48291 || *p.Handle != "sampleblocked" {
		t.Errorf("profile %+v", p)
	}
	want := []upstream.Leg{
		{ServedBy: tiktok.ResearchName, Attempts: 1, Status: 403, Fault: upstream.Rejected},
		{ServedBy: tiktok.Name, Attempts: 1, Status: 200, Fault: upstream.Rejected},
		{ServedBy: pages.ZyteName, Attempts: 1, OK: true},
	}
	if len(out.Trace.Legs) != len(want) {
		t.Fatalf("legs %+v", out.Trace.Legs)
	}
	for i := range want {
		if out.Trace.Legs[i] != want[i] {
			t.Errorf("leg %d = %+v; want %+v", i, out.Trace.Legs[i], want[i])
		}
	}
	// With the research client working, the page is never fetched.
	a = allRoutes(t)
	if out := a.Serve(t, tiktok.ProfileEndpoint, "handle=samplecreator"); out.Fault != nil || out.Trace.ServedBy != tiktok.ResearchName {
		t.Errorf("served by %q: %v", out.Trace.ServedBy, out.Fault)
	}
	for _, r := range a.Replay.Requests() {
		if r.Provider != tiktok.ResearchName {
			t.Errorf("%s was asked", r.Provider)
		}
	}
}

// Ids stay strings and counts numbers in what every adapter hands over.
func TestIDsAreStrings(t *testing.T) {
	for _, c := range []struct {
		u               *adaptertest.Upstream
		endpoint, query string
	}{
		{research(t), tiktok.ProfileEndpoint, "handle=samplecreator"},
		{research(t), tiktok.PostsEndpoint, "handle=samplecreator"},
		{research(t), tiktok.CommentsEndpoint, "post_id=" + nov01},
		{direct(t), tiktok.ProfileEndpoint, "handle=samplelegacy"},
	} {
		out := c.u.Serve(t, c.endpoint, c.query)
		raw, err := json.Marshal(out.Data)
		if err != nil || out.Fault != nil {
			t.Fatalf("%s: %v %v", c.endpoint, err, out.Fault)
		}
		var doc map[string]any
		d := json.NewDecoder(strings.NewReader(string(raw)))
		d.UseNumber()
		_ = d.Decode(&doc)
		check := func(where string, m map[string]any) {
			for _, k := range []string{"id", "post_id", "in_reply_to_id"} {
				if v, ok := m[k]; ok && v != nil {
					if _, isString := v.(string); !isString {
						t.Errorf("%s %s %s is %T", c.endpoint, where, k, v)
					}
				}
			}
		}
		check("data", doc)
		items, _ := doc["items"].([]any)
		for _, it := range items {
			check("item", it.(map[string]any))
		}
	}
}
