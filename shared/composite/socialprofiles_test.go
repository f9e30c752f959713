package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/handleprobe"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// The production fetcher is a PageFetcher, and its direct Fetch a probe's
// fetch, as wired.
var (
	_ PageFetcher           = pages.NewPublicFetcher(pages.PublicFetchSettings{Unblock: LinkInBioPage})
	_ handleprobe.FetchFunc = pages.NewPublicFetcher(pages.PublicFetchSettings{}).Fetch
)

// socialFakeLegs answers profile legs from canned data by key and handle;
// an unlisted profile is a 404, as the blocks answer an unknown account.
type socialFakeLegs struct {
	mu          sync.Mutex
	answers     map[string]pipeline.LegResult // key + "?" + canonical params
	unavailable map[string]bool
	calls       []string
}

func socialLegID(key string, p map[string]string) string {
	names := make([]string, 0, len(p))
	for k := range p {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, k+"="+p[k])
	}
	return key + "?" + strings.Join(parts, "&")
}

func (f *socialFakeLegs) Available(key string) bool {
	e, ok := registry.Default().Endpoint(key)
	return ok && e.Kind == registry.Data && !f.unavailable[key]
}

func (f *socialFakeLegs) Emit(string, any, bool) bool { return false }

func (f *socialFakeLegs) Run(_ context.Context, req pipeline.LegRequest) pipeline.LegResult {
	id := socialLegID(req.Key, req.Params)
	f.mu.Lock()
	f.calls = append(f.calls, id)
	r, ok := f.answers[id]
	f.mu.Unlock()
	if !ok {
		r = socialLegFailure(req.Key, envelope.ResourceNotFound, http.StatusNotFound, "The profile does not exist.")
	}
	return r
}

func (f *socialFakeLegs) RunAll(ctx context.Context, reqs []pipeline.LegRequest, done func(int, pipeline.LegResult)) []pipeline.LegResult {
	out := make([]pipeline.LegResult, len(reqs))
	for i, req := range reqs {
		out[i] = f.Run(ctx, req)
		if done != nil {
			done(i, out[i])
		}
	}
	return out
}

func (f *socialFakeLegs) ran() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *socialFakeLegs) set(key, handle string, r pipeline.LegResult) {
	if f.answers == nil {
		f.answers = map[string]pipeline.LegResult{}
	}
	f.answers[socialLegID(key, map[string]string{"handle": handle})] = r
}

func socialLegOK(key string, data any) pipeline.LegResult {
	raw, _ := json.Marshal(data)
	platform, _, _ := strings.Cut(key, "/")
	env, _ := json.Marshal(map[string]any{"success": true, "data": json.RawMessage(raw)})
	return pipeline.LegResult{Key: key, Platform: platform, Endpoint: "/v1/" + key, RequestID: "req_leg_" + platform,
		Status: http.StatusOK, Data: raw, Envelope: env, Attempts: 1, ServedBy: "direct"}
}

func socialLegFailure(key string, typ envelope.Type, status int, message string) pipeline.LegResult {
	platform, _, _ := strings.Cut(key, "/")
	env, _ := envelope.Marshal(envelope.NewFailure(envelope.New(typ, status, message, nil), "req_leg_"+platform, ""))
	return pipeline.LegResult{Key: key, Platform: platform, Endpoint: "/v1/" + key, RequestID: "req_leg_" + platform,
		Status: status, Envelope: env, ErrorType: string(typ), Attempts: 1}
}

// socialFakeWeb answers fetches by URL; an unlisted URL is a plain 404.
// With withPaid, FetchUnblocking stands in for the production fetcher's
// with a paid service configured: a URL LinkInBioPage accepts that answers
// 403, 429 or 503 directly is asked of the service (recorded in paid),
// which answers socialPaidAnswer.
type socialFakeWeb struct {
	mu         sync.Mutex
	pages      map[string]socialAnswer
	withPaid   bool
	calls      []string // every fetch, in order
	unblocking []string // the fetches through FetchUnblocking
	paid       []string // the URLs asked of a paid service
}

// socialPaidAnswer is what the paid service answers.
const socialPaidAnswer = "<html><title>through a paid service</title></html>"

type socialAnswer struct {
	status int
	body   string
	err    error
	hang   bool // wait for the caller's deadline
}

func (w *socialFakeWeb) Fetch(ctx context.Context, u string) (int, []byte, error) {
	return w.fetch(ctx, u, false)
}

func (w *socialFakeWeb) FetchUnblocking(ctx context.Context, u string) (int, []byte, error) {
	return w.fetch(ctx, u, true)
}

func (w *socialFakeWeb) fetch(ctx context.Context, u string, unblocking bool) (int, []byte, error) {
	w.mu.Lock()
	w.calls = append(w.calls, u)
	if unblocking {
		w.unblocking = append(w.unblocking, u)
	}
	a, ok := w.pages[u]
	w.mu.Unlock()
	if !ok {
		a = socialAnswer{status: http.StatusNotFound, body: "<html><title>Not found</title></html>"}
	}
	if a.hang {
		<-ctx.Done()
		return 0, nil, ctx.Err()
	}
	if unblocking && w.withPaid && LinkInBioPage(u) && (a.status == 403 || a.status == 429 || a.status == 503) {
		w.mu.Lock()
		w.paid = append(w.paid, u)
		w.mu.Unlock()
		return 200, []byte(socialPaidAnswer), nil
	}
	return a.status, []byte(a.body), a.err
}

func (w *socialFakeWeb) record() (unblocking, paid []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.unblocking), slices.Clone(w.paid)
}

func (w *socialFakeWeb) fetched(u string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.calls, u)
}

// socialLinktree writes a Linktree profile page in the service's format:
// the Next.js payload in <script id="__NEXT_DATA__"> with
// props.pageProps.account (username, pageTitle, description,
// profilePictureUrl, socialLinks of {type, url, position}) and
// props.pageProps.links of {id, type, title, url, position, locked}.
func socialLinktree(username, title string, socials [][2]string, links [][2]string) string {
	var sl []map[string]any
	for i, s := range socials {
		sl = append(sl, map[string]any{"type": s[0], "url": s[1], "position": i})
	}
	ll := []map[string]any{{"id": "80000001", "type": "HEADER", "title": "Links", "url": "", "position": 0, "locked": nil}}
	for i, l := range links {
		ll = append(ll, map[string]any{"id": fmt.Sprint(80000002 + i), "type": "CLASSIC", "title": l[0], "url": l[1], "position": i + 1, "locked": nil})
	}
	next := map[string]any{
		"props": map[string]any{"pageProps": map[string]any{
			"account": map[string]any{"id": 51000001, "uuid": "00000000-0000-4000-8000-000000000051", "username": username,
				"tier": "free", "isActive": true, "profilePictureUrl": "https://ugc.production.linktr.ee/avatar/" + username + ".jpg",
				"pageTitle": title, "description": "Ceramics and slow travel.", "socialLinksPosition": "TOP",
				"links": []any{}, "socialLinks": sl, "theme": map[string]any{"key": "spray"}},
			"links": ll, "username": username, "pageTitle": title, "__N_SSP": true,
		}},
		"page": "/[profile]", "query": map[string]any{"profile": username}, "buildId": "build-0051", "isFallback": false, "gssp": true,
	}
	raw, _ := json.Marshal(next)
	return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>` + title + ` | Linktree</title>` +
		`<meta property="og:title" content="` + title + ` | Linktree"></head><body><div id="__next"><main><h1>` + title +
		`</h1></main></div><script id="__NEXT_DATA__" type="application/json">` + string(raw) + `</script></body></html>`
}

const socialPage = "https://linktr.ee/ana.example"

// socialWorld is a creator known on microblog_b as anaexample: the profile
// links to a Linktree page and a website; the page lists the creator's
// other profiles (and the source profile, so it is the creator's own);
// GitHub has the same handle; the photo profile links back.
func socialWorld() (*socialFakeLegs, *socialFakeWeb) {
	legs := &socialFakeLegs{}
	legs.set("microblog_b/profile", "anaexample", socialLegOK("microblog_b/profile", map[string]any{
		"id": "1500000000000000001", "handle": "anaexample", "name": "Ana Example", "url": "https://x.com/anaexample",
		"bio": "Ceramics & slow travel. Shop: www.ana-ceramics.example — videos youtube.com/@AnaMakes.", "bio_link": socialPage,
		"followers": 1200,
	}))
	// The photo profile links back to the source in its bio.
	legs.set("photo_social/profile", "ana.example", socialLegOK("photo_social/profile", map[string]any{
		"handle": "ana.example", "url": "https://www.instagram.com/ana.example/", "description": "Also on x.com/anaexample",
		"website": socialPage,
	}))
	// The same-handle GitHub account shares the website.
	legs.set("code_host/profile", "anaexample", socialLegOK("code_host/profile", map[string]any{
		"handle": "anaexample", "url": "https://github.com/anaexample", "website_url": "ana-ceramics.example",
	}))
	// The short-video profile links elsewhere: no back link.
	legs.set("short_video_a/profile", "ana.example", socialLegOK("short_video_a/profile", map[string]any{
		"handle": "ana.example", "bio_link": "https://other.example/",
	}))
	web := &socialFakeWeb{pages: map[string]socialAnswer{
		socialPage: {status: 200, body: socialLinktree("ana.example", "Ana Example",
			[][2]string{{"INSTAGRAM", "https://www.instagram.com/Ana.Example/?igsh=abc"}, {"TIKTOK", "https://www.tiktok.com/@ana.example?lang=en"},
				{"TWITTER", "https://twitter.com/AnaExample"}},
			[][2]string{{"Shop", "https://ana-ceramics.example/shop?utm_source=linktree"}, {"Channel", "https://youtube.com/@AnaMakes"},
				{"Studio blog", "https://studio.example/blog"}})},
		"https://github.com/anaexample": {status: 200, body: "<html><title>anaexample</title></html>"},
	}}
	return legs, web
}

// socialWide lets the probe reach every site, so has_more says only what
// a test makes it say.
var socialWide = socialBounds{discovery: 5 * time.Second, linkPages: 3, probeSites: 100, probeParallel: 8,
	probeSite: 3 * time.Second, backlinks: 4 * time.Second, backlinkReads: 4}

func socialServe(t *testing.T, comp pipeline.Composite, legs pipeline.LegRunner, platform, handle string) (*socialProfilesData, *envelope.Error) {
	t.Helper()
	c := &pipeline.Call{RequestID: "req_social", Params: params.Result{Values: map[string]string{"platform": platform, "handle": handle}}}
	v, e := comp.Serve(context.Background(), c, legs)
	if e != nil {
		return nil, e
	}
	d := v.(*socialProfilesData)
	socialValid(t, d)
	return d, nil
}

// socialValid checks the answer against the published schema.
func socialValid(t *testing.T, d *socialProfilesData) {
	t.Helper()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate("web/social-profiles", v); err != nil {
		t.Fatalf("the answer does not validate: %v\n%s", err, raw)
	}
}

func socialItemBy(d *socialProfilesData, platform string) *socialItem {
	for _, it := range d.Items {
		if it.Platform == platform {
			return it
		}
	}
	return nil
}

func socialWarned(d *socialProfilesData, part string) bool {
	return slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.Contains(w, part) })
}

func TestSocialProfilesLegsAreTheProfileBlocks(t *testing.T) {
	legs := SocialProfiles(nil).Legs
	for _, want := range []string{"photo_social/profile", "short_video_a/profile", "microblog_a/profile", "microblog_b/profile",
		"microblog_c/profile", "video_platform/profile", "code_host/profile"} {
		if !slices.Contains(legs, want) {
			t.Errorf("legs %v lack %s", legs, want)
		}
	}
	for _, leg := range legs {
		if !strings.HasSuffix(leg, "/profile") {
			t.Errorf("leg %s is not a profile", leg)
		}
		if _, ok := registry.Default().Endpoint(leg); !ok {
			t.Errorf("leg %s is not in the registry", leg)
		}
	}
}

func TestSocialProfilesFromAProfile(t *testing.T) {
	legs, web := socialWorld()
	d, e := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
	if e != nil {
		t.Fatal(e)
	}
	if d.Source.Platform != "microblog_b" || d.Source.Handle != "anaexample" || d.Source.URL == nil || *d.Source.URL != "https://x.com/anaexample" {
		t.Errorf("source %+v", d.Source)
	}
	if d.Partial || d.HasMore {
		t.Errorf("partial %v, has_more %v; warnings %q", d.Partial, d.HasMore, d.Warnings)
	}

	// The Linktree page was read; it links back to the source.
	if len(d.LinkInBioURLs) != 1 {
		t.Fatalf("link_in_bio_urls %+v", d.LinkInBioURLs)
	}
	p := d.LinkInBioURLs[0]
	if p.URL != socialPage || p.Service != "linktree" || !p.OK || p.LinksBack == nil || !*p.LinksBack || p.FoundIn != "the source profile's bio_link" {
		t.Errorf("link-in-bio page %+v", p)
	}
	if len(p.Profiles) != 3 || !slices.Contains(p.Websites, "https://studio.example/blog") {
		t.Errorf("page lists profiles %v, websites %v", p.Profiles, p.Websites)
	}
	// Websites from the bio and the page, normalised, once each.
	wantSites := []string{"https://www.ana-ceramics.example", "https://ana-ceramics.example/shop", "https://studio.example/blog"}
	if !slices.Equal(d.WebsiteURLs, wantSites) {
		t.Errorf("website_urls %v, want %v", d.WebsiteURLs, wantSites)
	}

	// Confidence: the photo profile is on the page (0.85, the page being
	// the source's own) and links back (+0.05); the channel is linked from
	// the bio and the page (0.9 + 0.02); TikTok only from the page (0.85);
	// GitHub is the same handle (0.3) sharing the website (0.6).
	want := []struct {
		platform, handle, url string
		conf                  float64
	}{
		{"video_platform", "AnaMakes", "https://youtube.com/@AnaMakes", 0.92},
		{"photo_social", "ana.example", "https://www.instagram.com/Ana.Example/", 0.9},
		{"short_video_a", "ana.example", "https://www.tiktok.com/@ana.example", 0.85},
		{"code_host", "anaexample", "https://github.com/anaexample", 0.6},
	}
	if len(d.Items) != len(want) || d.Count != len(want) {
		t.Fatalf("items %s", socialJSON(d.Items))
	}
	for i, w := range want {
		it := d.Items[i]
		if it.Platform != w.platform || it.Handle != w.handle || it.URL != w.url || it.Confidence != w.conf {
			t.Errorf("item %d = %s; want %+v", i, socialJSON(it), w)
		}
	}
	if !slices.IsSortedFunc(d.Items, func(a, b *socialItem) int { return -compareFloat(a.Confidence, b.Confidence) }) {
		t.Error("items are not ordered by confidence")
	}
	gh := socialItemBy(d, "code_host")
	if !strings.HasPrefix(gh.Evidence[0], "same handle only") || !strings.Contains(gh.Evidence[1], "same website ana-ceramics.example") {
		t.Errorf("github evidence %q", gh.Evidence)
	}
	photo := socialItemBy(d, "photo_social")
	if !slices.ContainsFunc(photo.Evidence, func(s string) bool { return strings.Contains(s, "links back to the source profile") }) ||
		!slices.ContainsFunc(photo.Evidence, func(s string) bool { return strings.Contains(s, "link-in-bio page "+socialPage) }) {
		t.Errorf("photo evidence %q", photo.Evidence)
	}
	yt := socialItemBy(d, "video_platform")
	if !slices.Contains(yt.Evidence, "linked from the source profile's bio") {
		t.Errorf("channel evidence %q", yt.Evidence)
	}
	// The source itself (twitter.com/AnaExample on the page) is no item.
	if socialItemBy(d, "microblog_b") != nil {
		t.Error("the source profile is listed as found")
	}
	if !slices.Contains(d.SameHandleCandidates, "https://github.com/anaexample") || len(d.SameHandleCandidates) != 1 {
		t.Errorf("same_handle_candidates %v", d.SameHandleCandidates)
	}
	if len(d.LinkedProfileURLs) != 3 || slices.Contains(d.LinkedProfileURLs, "https://github.com/anaexample") {
		t.Errorf("linked_profile_urls %v", d.LinkedProfileURLs)
	}
	// The source's own platform is not probed.
	for _, pr := range d.Probes {
		if pr.Site == "microblog_b" {
			t.Error("the source platform was probed")
		}
	}
	// legs: the source, then the back-link reads (the same handle first).
	if len(d.Legs) != 5 || d.Legs[0].Endpoint != "/v1/microblog_b/profile" || d.Legs[1].Endpoint != "/v1/code_host/profile" {
		t.Errorf("legs %s", socialJSON(d.Legs))
	}
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func socialJSON(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

func TestSocialProfilesSourceProfileFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leg    pipeline.LegResult
		typ    envelope.Type
		status int
	}{
		{"not found", socialLegFailure("microblog_b/profile", envelope.ResourceNotFound, 404, "No such account."), envelope.ResourceNotFound, 404},
		{"upstream error", socialLegFailure("microblog_b/profile", envelope.UpstreamError, 502, "The source answered 500."), envelope.UpstreamError, 502},
		{"timeout", socialLegFailure("microblog_b/profile", envelope.UpstreamTimeout, 504, "No answer in time."), envelope.UpstreamTimeout, 504},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legs := &socialFakeLegs{}
			legs.set("microblog_b/profile", "anaexample", tc.leg)
			web := &socialFakeWeb{}
			_, e := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
			if e == nil || e.Type != tc.typ || e.Status != tc.status || e.Details["leg"] != "microblog_b/profile" {
				t.Fatalf("error %+v; want %s %d naming the leg", e, tc.typ, tc.status)
			}
			if len(web.calls) != 0 || len(legs.ran()) != 1 {
				t.Errorf("after the failed profile: fetches %v, legs %v", web.calls, legs.ran())
			}
		})
	}
}

func TestSocialProfilesPlatformWithoutProfileOperation(t *testing.T) {
	legs := &socialFakeLegs{}
	_, e := socialServe(t, SocialProfiles(nil), legs, "social_a", "ana.example")
	if e == nil || e.Type != envelope.EndpointNotAvailable || e.Status != http.StatusNotImplemented {
		t.Fatalf("error %+v", e)
	}
	if len(legs.ran()) != 0 {
		t.Errorf("legs ran: %v", legs.ran())
	}
}

func TestSocialProfilesLinkInBioFetchFails(t *testing.T) {
	legs, web := socialWorld()
	web.pages[socialPage] = socialAnswer{err: &upstream.Fault{Kind: upstream.Transport, Reason: "read: connection reset by peer"}}
	d, e := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
	if e != nil {
		t.Fatal(e)
	}
	if !d.Partial || !socialWarned(d, "The link-in-bio page "+socialPage+" could not be read") {
		t.Errorf("partial %v, warnings %q", d.Partial, d.Warnings)
	}
	p := d.LinkInBioURLs[0]
	if p.OK || !p.Fetched || p.Error == nil || !strings.Contains(*p.Error, "connection reset") {
		t.Errorf("page %s", socialJSON(p))
	}
	// What the profile itself links to is still there.
	if it := socialItemBy(d, "video_platform"); it == nil || it.Confidence != 0.9 {
		t.Errorf("channel %s", socialJSON(it))
	}
	if socialItemBy(d, "short_video_a") != nil {
		t.Error("a profile only the unread page lists is present")
	}
}

func TestSocialProfilesLinkInBioPageGoneOrBlocked(t *testing.T) {
	for _, tc := range []struct {
		answer  socialAnswer
		partial bool
		warn    string
	}{
		{socialAnswer{status: 404, body: "gone"}, false, "no longer exists (HTTP 404)"},
		{socialAnswer{status: 403, body: "<html><title>Just a moment...</title></html>"}, true, "answered HTTP 403"},
		{socialAnswer{status: 200, body: "<html><body>a changed page</body></html>"}, true, "could not be read"},
	} {
		legs, web := socialWorld()
		web.pages[socialPage] = tc.answer
		d, e := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
		if e != nil {
			t.Fatal(e)
		}
		if d.Partial != tc.partial || !socialWarned(d, tc.warn) {
			t.Errorf("page %d: partial %v, warnings %q", tc.answer.status, d.Partial, d.Warnings)
		}
		if d.LinkInBioURLs[0].OK {
			t.Errorf("page %d read as OK", tc.answer.status)
		}
	}
}

func TestSocialProfilesProbeBounds(t *testing.T) {
	t.Run("sites", func(t *testing.T) {
		legs, web := socialWorld()
		b := socialWide
		b.probeSites = 2
		d, _ := socialServe(t, socialProfiles(web, b), legs, "microblog_b", "anaexample")
		if !d.HasMore || len(d.Probes) != 2 || !socialWarned(d, "stopped early (at most 2 sites") {
			t.Errorf("has_more %v, probes %d, warnings %q", d.HasMore, len(d.Probes), d.Warnings)
		}
		if d.Partial {
			t.Errorf("a bound is not a failure: warnings %q", d.Warnings)
		}
	})
	t.Run("time", func(t *testing.T) {
		legs, web := socialWorld()
		web.pages["https://github.com/anaexample"] = socialAnswer{hang: true}
		b := socialWide
		b.discovery = 300 * time.Millisecond
		start := time.Now()
		d, _ := socialServe(t, socialProfiles(web, b), legs, "microblog_b", "anaexample")
		if time.Since(start) > 3*time.Second {
			t.Errorf("the probe took %s past its budget", time.Since(start))
		}
		if !d.HasMore || d.Partial {
			t.Errorf("has_more %v, partial %v, warnings %q", d.HasMore, d.Partial, d.Warnings)
		}
		if socialItemBy(d, "code_host") != nil {
			t.Error("a site that never answered is a candidate")
		}
	})
	t.Run("link-in-bio pages", func(t *testing.T) {
		legs := &socialFakeLegs{}
		legs.set("microblog_c/profile", "ana.example", socialLegOK("microblog_c/profile", map[string]any{
			"handle":      "ana.example",
			"description": "linktr.ee/one https://linktr.ee/two beacons.ai/three bio.link/four",
		}))
		web := &socialFakeWeb{}
		b := socialWide
		b.probeSites = 1
		d, _ := socialServe(t, socialProfiles(web, b), legs, "microblog_c", "ana.example")
		if len(d.LinkInBioURLs) != 4 || !d.HasMore || !socialWarned(d, "Only the first 3 link-in-bio pages") {
			t.Fatalf("pages %s, has_more %v", socialJSON(d.LinkInBioURLs), d.HasMore)
		}
		if web.fetched("https://bio.link/four") || !web.fetched("https://beacons.ai/three") || d.LinkInBioURLs[3].Fetched {
			t.Errorf("fetched %v", web.calls)
		}
	})
}

func TestSocialProfilesProbeFetchErrorIsPartial(t *testing.T) {
	legs, web := socialWorld()
	web.pages["https://codeberg.org/api/v1/users/anaexample"] = socialAnswer{err: errors.New("dial tcp: connection refused")}
	d, _ := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
	if !d.Partial || !socialWarned(d, "could not reach these sites, so their answer is unknown: codeberg") {
		t.Errorf("partial %v, warnings %q", d.Partial, d.Warnings)
	}
	for _, pr := range d.Probes {
		if pr.Site == "codeberg" && pr.Exists != nil {
			t.Errorf("codeberg %+v", pr)
		}
	}
}

func TestSocialProfilesBackLinkLegFails(t *testing.T) {
	legs, web := socialWorld()
	legs.set("code_host/profile", "anaexample", socialLegFailure("code_host/profile", envelope.UpstreamError, 502, "bad gateway"))
	d, _ := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
	if !d.Partial || !socialWarned(d, "Reading https://github.com/anaexample through code_host/profile failed") {
		t.Errorf("partial %v, warnings %q", d.Partial, d.Warnings)
	}
	if it := socialItemBy(d, "code_host"); it == nil || it.Confidence != 0.3 || len(it.Evidence) != 1 {
		t.Errorf("github %s", socialJSON(it))
	}
	for _, l := range d.Legs {
		if l.Endpoint == "/v1/code_host/profile" && (l.OK || l.ErrorType != "UPSTREAM_ERROR") {
			t.Errorf("leg summary %+v", l)
		}
	}
}

func TestSocialProfilesSameHandleAloneIsWeak(t *testing.T) {
	legs := &socialFakeLegs{}
	legs.set("code_host/profile", "anaexample", socialLegOK("code_host/profile", map[string]any{"handle": "anaexample"}))
	web := &socialFakeWeb{pages: map[string]socialAnswer{
		"https://gitlab.com/api/v4/users?username=anaexample": {status: 200, body: `[{"id":1,"username":"anaexample"}]`},
		"https://dev.to/api/users/by_username?url=anaexample": {status: 200, body: `{"id":7,"username":"anaexample"}`},
	}}
	d, e := socialServe(t, socialProfiles(web, socialWide), legs, "code_host", "anaexample")
	if e != nil {
		t.Fatal(e)
	}
	if len(d.Items) == 0 {
		t.Fatalf("no candidates; probes %s", socialJSON(d.Probes))
	}
	for _, it := range d.Items {
		if it.Confidence > 0.3 || !strings.HasPrefix(it.Evidence[0], "same handle only") {
			t.Errorf("item %s", socialJSON(it))
		}
	}
	if len(d.LinkedProfileURLs) != 0 {
		t.Errorf("linked_profile_urls %v", d.LinkedProfileURLs)
	}
}

func TestSocialProfilesWithoutAFetcher(t *testing.T) {
	legs, _ := socialWorld()
	d, e := socialServe(t, SocialProfiles(nil), legs, "microblog_b", "anaexample")
	if e != nil {
		t.Fatal(e)
	}
	if !d.Partial || !socialWarned(d, "Page fetching is not configured") || len(d.Probes) != 0 {
		t.Errorf("partial %v, warnings %q", d.Partial, d.Warnings)
	}
	if p := d.LinkInBioURLs[0]; p.Fetched || p.Error == nil {
		t.Errorf("page %s", socialJSON(p))
	}
	if it := socialItemBy(d, "video_platform"); it == nil || it.Confidence < 0.9 {
		t.Errorf("channel %s", socialJSON(it))
	}
}

func TestSocialProfileLinksFromText(t *testing.T) {
	p := socialProfile{
		"bio_link":    "linktr.ee/ana",
		"website_url": "https://ana.example/",
		"links":       []any{"https://a.example/1", map[string]any{"url": "b.example/2"}},
		"bio":         "Shop at www.ana-shop.example. Videos: (https://youtube.com/@ana). Mail me@ana.example, v1.2 is out, see Node.js/React and x.com/ana",
	}
	var got []string
	for _, f := range p.links() {
		if _, ok := f.classify(); ok {
			got = append(got, f.field+" "+f.url)
		}
	}
	want := []string{
		"website_url https://ana.example/", "bio_link https://linktr.ee/ana", "links https://a.example/1", "links https://b.example/2",
		"bio https://youtube.com/@ana", "bio https://www.ana-shop.example", "bio https://x.com/ana",
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("links\n got %q\nwant %q", got, want)
	}
}

func TestSocialProbeHandle(t *testing.T) {
	for in, want := range map[string]string{"alice.bsky.social": "alice", "Alice.bsky.social": "alice", "alice.example.com": "alice.example.com"} {
		if got := socialProbeHandle("microblog_a", in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := socialProbeHandle("code_host", "a.bsky.social"); got != "a.bsky.social" {
		t.Errorf("code_host handle changed: %s", got)
	}
}

func TestLinkInBioPage(t *testing.T) {
	for u, want := range map[string]bool{
		"https://linktr.ee/ana": true, "https://beacons.ai/ana": true, "https://ana.carrd.co/": true,
		"https://linktr.ee/login": false, "https://github.com/ana": false, "https://www.youtube.com/@ana": false,
	} {
		if got := LinkInBioPage(u); got != want {
			t.Errorf("LinkInBioPage(%s) = %v", u, got)
		}
	}
}

// socialChallengeText is what a caller can write into a page of its own:
// a Cloudflare challenge's title, ids and script and an Akamai reference.
const socialChallengeText = `<div id="challenge-running"></div><div id="cf-please-wait">cf-chl captcha</div>` +
	`<script>window._cf_chl_opt={cvId:'3'};</script>` +
	`<p>Access Denied. Reference #18.4f1c2a.1700000000. Powered and protected by Akamai</p>`

// A same-handle probe fetches directly only. Linktree is on the probing
// list, so linktr.ee/<handle> is a probe URL that is also a link-in-bio
// page; when the site blocks it, no paid service is asked, while the
// link-in-bio page the profile links to, blocked the same way, is.
func TestSocialProfilesProbesFetchDirectOnly(t *testing.T) {
	legs, web := socialWorld()
	web.withPaid = true
	const probe = "https://linktr.ee/anaexample"
	if !LinkInBioPage(probe) {
		t.Fatalf("%s is no link-in-bio page: the test proves nothing", probe)
	}
	blocked := socialAnswer{status: http.StatusForbidden,
		body: `<html><head><title>Just a moment...</title></head><body>` + socialChallengeText + `</body></html>`}
	web.pages[probe] = blocked
	web.pages[socialPage] = blocked
	d, e := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
	if e != nil {
		t.Fatal(e)
	}
	unblocking, paid := web.record()
	if !slices.Equal(unblocking, []string{socialPage}) || !slices.Equal(paid, []string{socialPage}) {
		t.Errorf("through the unblocking fetch %v, asked of a paid service %v; want the profile's link-in-bio page only", unblocking, paid)
	}
	probed := false
	for _, pr := range d.Probes {
		if pr.URL == probe {
			probed = true
			if pr.Exists != nil {
				t.Errorf("a blocked probe says exists %v", *pr.Exists)
			}
		}
	}
	if !probed || !web.fetched(probe) {
		t.Errorf("linktree was not probed: %s", socialJSON(d.Probes))
	}
}

// A link-in-bio page that answers 200 is read as the page it is, whatever
// challenge text its owner wrote into it (a Carrd site's title and HTML
// are its owner's): no paid service, no "could not be read".
func TestSocialProfilesChallengeTextOnALinkInBioPageIsRead(t *testing.T) {
	legs, web := socialWorld()
	web.withPaid = true
	const carrd = "https://anaexample.carrd.co/"
	legs.set("microblog_b/profile", "anaexample", socialLegOK("microblog_b/profile", map[string]any{
		"id": "1500000000000000001", "handle": "anaexample", "name": "Ana Example", "url": "https://x.com/anaexample",
		"bio": "Ceramics.", "bio_link": carrd,
	}))
	web.pages[carrd] = socialAnswer{status: 200, body: `<!DOCTYPE html><html><head><title>Just a moment...</title>` +
		`<meta property="og:title" content="Just a moment..."></head><body>` + socialChallengeText +
		`<a href="https://www.instagram.com/ana.example/">Instagram</a><a href="https://ana-ceramics.example/">Shop</a>` +
		`<a href="https://x.com/anaexample">X</a></body></html>`}
	d, e := socialServe(t, socialProfiles(web, socialWide), legs, "microblog_b", "anaexample")
	if e != nil {
		t.Fatal(e)
	}
	if _, paid := web.record(); len(paid) != 0 {
		t.Errorf("asked of a paid service: %v", paid)
	}
	if len(d.LinkInBioURLs) != 1 || !d.LinkInBioURLs[0].OK || d.LinkInBioURLs[0].Error != nil {
		t.Fatalf("the page was not read: %s", socialJSON(d.LinkInBioURLs))
	}
	if p := d.LinkInBioURLs[0]; p.LinksBack == nil || !*p.LinksBack {
		t.Errorf("the page links back: %s", socialJSON(p))
	}
	if it := socialItemBy(d, "photo_social"); it == nil || !slices.ContainsFunc(it.Evidence, func(ev string) bool { return strings.Contains(ev, "carrd.co") }) {
		t.Errorf("the page's profile: %s", socialJSON(it))
	}
	if !slices.Contains(d.WebsiteURLs, "https://ana-ceramics.example/") || socialWarned(d, "could not be read") {
		t.Errorf("websites %v, warnings %q", d.WebsiteURLs, d.Warnings)
	}
}
