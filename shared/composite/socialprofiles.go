package composite

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/handleprobe"
	"github.com/meridian-data/meridian/shared/upstream/linkinbio"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// PageFetcher reads the public pages web/social-profiles follows; the
// production one is pages.PublicFetcher. Each method fetches a URL with a
// logged-out GET and returns the final status and body of any HTTP answer
// (a 404 is an answer), or an error when none came or the URL was refused;
// each must honour ctx and fetch only what the URL safety policy finds
// public. They differ in what they may cost, and the composite keeps them
// apart: the same-handle probe is handed Fetch alone.
type PageFetcher interface {
	// Fetch asks the site directly and nothing else: never a paid
	// web-unblocking service. The same-handle probe's fetches (URLs built
	// from a caller's handle) are made with it.
	Fetch(ctx context.Context, url string) (status int, body []byte, err error)
	// FetchUnblocking reads a link-in-bio page the source profile links
	// to: as Fetch, and through a paid web-unblocking service when the
	// page's own site blocked the direct fetch (LinkInBioPage says which
	// pages may).
	FetchUnblocking(ctx context.Context, url string) (status int, body []byte, err error)
}

// socialBounds bound one call of web/social-profiles. After the source
// profile's leg, the link-in-bio pages and the same-handle probe run
// together within discovery, then the back-link reads within backlinks:
// about 9 s after the profile leg at worst.
type socialBounds struct {
	discovery     time.Duration
	linkPages     int // link-in-bio pages fetched, each once
	probeSites    int
	probeParallel int
	probeSite     time.Duration
	backlinks     time.Duration
	backlinkReads int // profile legs run on found profiles
}

var socialDefaultBounds = socialBounds{
	discovery: 5 * time.Second, linkPages: 3,
	probeSites: 32, probeParallel: 10, probeSite: 3500 * time.Millisecond,
	backlinks: 4 * time.Second, backlinkReads: 4,
}

// socialMaxTextURLs bounds the URLs read from one text field.
const socialMaxTextURLs = 20

// Confidence levels (see SocialProfiles).
const (
	socialConfProfileLink  = 0.9
	socialConfPageLink     = 0.8
	socialConfOwnPageLink  = 0.85 // the page links back to the source profile
	socialConfCorroborated = 0.02
	socialConfLinksBack    = 0.7
	socialConfSharedLink   = 0.6
	socialConfCap          = 0.99
)

// socialSameHandleConf is the confidence of a same-handle candidate alone,
// by how sure the site's existence rule is: never above 0.3.
var socialSameHandleConf = map[string]float64{"high": 0.3, "medium": 0.2, "low": 0.1}

// SocialProfiles is web/social-profiles: from a known profile (platform,
// handle), the profiles, link-in-bio pages and websites it links to, and
// same-handle candidates on other sites, each profile with a confidence
// and the evidence for it.
//
//  1. The source profile: the leg {platform}/profile with the handle. Its
//     failure is the call's (a 404 is RESOURCE_NOT_FOUND); a platform
//     without a profile operation here is ENDPOINT_NOT_AVAILABLE.
//  2. Every URL of the profile (its link fields website, website_url,
//     bio_link, external_url, links, and URLs written in its bio or
//     description) is normalised and classified with linkinbio.Classify:
//     a profile on another platform (linked_profile_urls, confidence 0.9),
//     a link-in-bio page of a service linkinbio reads (link_in_bio_urls),
//     or a website (website_urls).
//  3. At most 3 link-in-bio pages are fetched with FetchUnblocking
//     (public URLs only) and read with linkinbio.Parse: their profiles join with
//     confidence 0.8 (0.85 when the page also links back to the source
//     profile, so it is the source's own), their websites join
//     website_urls; evidence names the page.
//  4. Same handle on other sites (handleprobe.Probe, its fetches direct
//     only: Fetch, never a paid service): at most 32 sites, 10 at once,
//     3.5 s each, 5 s in all, the source's platform skipped; an existing
//     profile is a candidate of confidence 0.3, 0.2 or 0.1 by how
//     sure the site's rule is, with evidence starting "same handle only".
//     has_more says a bound (sites, time, link-in-bio pages) stopped it.
//  5. Back links: up to 4 found profiles on platforms with a profile
//     operation (same-handle candidates first, they gain most) are read
//     through their {platform}/profile leg within 4 s; one that links to
//     the source profile rises to at least 0.7 (and 0.05 over its level),
//     one that links to the same link-in-bio page or website to at least
//     0.6 (and 0.03 over). A profile found by both the source and a
//     link-in-bio page gains 0.02. Confidences are capped at 0.99.
//
// Items are deduplicated by profile (platform and handle, read from the
// normalised URL; the first URL seen is kept), their evidence merged, and
// ordered by confidence. partial is true when a source failed (a page
// fetch, a probe site's fetch, a back-link leg), and _warnings say which.
func SocialProfiles(fetch PageFetcher) pipeline.Composite {
	return socialProfiles(fetch, socialDefaultBounds)
}

func socialProfiles(fetch PageFetcher, b socialBounds) pipeline.Composite {
	return pipeline.Composite{Legs: socialProfileLegs(), Serve: func(ctx context.Context, c *pipeline.Call, legs pipeline.LegRunner) (any, *envelope.Error) {
		return serveSocialProfiles(ctx, c, legs, fetch, b)
	}}
}

// LinkInBioPage reports whether rawURL is the page of a link-in-bio
// service web/social-profiles reads: the pages worth asking a paid
// web-unblocking service for when the service's site blocks a direct
// fetch (pages.PublicFetchSettings.Unblock, used by FetchUnblocking only).
// A probe URL may be one too (linktr.ee/<handle> is on the probing list),
// which is why probes are handed the direct Fetch, never FetchUnblocking.
func LinkInBioPage(rawURL string) bool {
	_, ok := linkinbio.Recognise(rawURL)
	return ok
}

// SocialFetchTargets are the sites web/social-profiles fetches pages of,
// each movable by its base URL variable (pages.FetchTarget), as every
// provider is: each link-in-bio service linkinbio reads, named by its id
// (MERIDIAN_UPSTREAM_LINKTREE_URL), then each same-handle probe site,
// named probe_<site id> (MERIDIAN_UPSTREAM_PROBE_GITLAB_URL), on the host
// its probe fetches. A probe on a link-in-bio service's host (linktree)
// is moved with that service: one site, one variable.
func SocialFetchTargets() []pages.FetchTarget {
	var out []pages.FetchTarget
	taken := map[string]bool{}
	for _, id := range linkinbio.Services() {
		hosts, subdomains := linkinbio.Hosts(id)
		out = append(out, pages.FetchTarget{Name: id, Hosts: hosts, Subdomains: subdomains})
		for _, h := range hosts {
			taken[h] = true
		}
	}
	for _, s := range handleprobe.Sites() {
		host, subdomains := s.FetchHost()
		if taken[host] || taken[strings.TrimPrefix(host, "www.")] {
			continue
		}
		taken[host] = true
		out = append(out, pages.FetchTarget{Name: "probe_" + s.ID, Hosts: []string{host}, Subdomains: subdomains})
	}
	return out
}

// socialProfileLegs are the {platform}/profile operations of the platforms
// web/social-profiles accepts (its platform parameter's values).
func socialProfileLegs() []string {
	reg := registry.Default()
	e, ok := reg.Endpoint("web/social-profiles")
	if !ok {
		return nil
	}
	var keys []string
	for _, p := range e.Params {
		if p.Name != "platform" {
			continue
		}
		for _, platform := range p.Enum {
			if leg, ok := reg.Endpoint(platform + "/profile"); ok && leg.Kind == registry.Data {
				keys = append(keys, leg.Key())
			}
		}
	}
	return keys
}

// socialProfilesData is the answer (spec 2.7, with additional fields:
// source.name and bio, probes, legs).
type socialProfilesData struct {
	Source               socialSource          `json:"source"`
	Items                []*socialItem         `json:"items"`
	Count                int                   `json:"count"`
	WebsiteURLs          []string              `json:"website_urls"`
	LinkInBioURLs        []*socialLinkPage     `json:"link_in_bio_urls"`
	LinkedProfileURLs    []string              `json:"linked_profile_urls"`
	SameHandleCandidates []string              `json:"same_handle_candidates"`
	Probes               []socialProbe         `json:"probes"`
	HasMore              bool                  `json:"has_more"`
	Partial              bool                  `json:"partial"`
	Legs                 []pipeline.LegSummary `json:"legs"`
	Warnings             []string              `json:"_warnings,omitempty"`
}

type socialSource struct {
	Platform string  `json:"platform"`
	Handle   string  `json:"handle"`
	URL      *string `json:"url"`
	Name     *string `json:"name"`
	Bio      *string `json:"bio"`
}

// socialItem is one profile found.
type socialItem struct {
	Platform   string   `json:"platform"`
	Handle     string   `json:"handle"`
	URL        string   `json:"url"`
	Confidence float64  `json:"confidence"`
	Evidence   []string `json:"evidence"`

	base        float64 // the strongest link's level
	fromProfile bool
	fromPage    bool
	sameHandle  bool
}

// socialLinkPage is a link-in-bio page the source profile links to.
type socialLinkPage struct {
	URL       string   `json:"url"`
	Service   string   `json:"service"`
	FoundIn   string   `json:"found_in"`
	Fetched   bool     `json:"fetched"`
	OK        bool     `json:"ok"`
	Status    *int     `json:"status"`
	Error     *string  `json:"error"`
	Title     *string  `json:"title"`
	LinksBack *bool    `json:"links_back"`
	Profiles  []string `json:"profiles"`
	Websites  []string `json:"websites"`
}

// socialProbe is one site the same handle was probed on.
type socialProbe struct {
	Site     string `json:"site"`
	URL      string `json:"url"`
	Exists   *bool  `json:"exists"`
	Evidence string `json:"evidence"`
}

// socialFound is one URL a profile carries and where it was; bare is a
// URL written in text without a scheme.
type socialFound struct {
	url   string
	field string
	bare  bool
}

// classify normalises and classifies a found URL. A bare host and path in
// text is kept as a website only when written with www. ("Node.js/React"
// is no website); as a profile or a link-in-bio page it is kept.
func (f socialFound) classify() (linkinbio.Classified, bool) {
	cl, ok := linkinbio.Classify(f.url)
	if !ok || (f.bare && cl.Kind == linkinbio.KindWebsite && !strings.HasPrefix(socialHost(cl.URL), "www.")) {
		return linkinbio.Classified{}, false
	}
	return cl, true
}

// socialRun is one call's state.
type socialRun struct {
	out      *socialProfilesData
	items    map[string]*socialItem // by profile key
	order    []*socialItem
	websites map[string]bool
	pages    map[string]bool
	linked   map[string]bool
	self     map[string]bool // the source profile's keys
	bounds   socialBounds
}

func serveSocialProfiles(ctx context.Context, c *pipeline.Call, legs pipeline.LegRunner, fetch PageFetcher, b socialBounds) (any, *envelope.Error) {
	platform, handle := c.Params.Values["platform"], c.Params.Values["handle"]
	key := platform + "/profile"
	if !legs.Available(key) {
		return nil, envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"Profiles on "+platform+" cannot be read on this deployment, so there is no source profile to start from.",
			map[string]any{"platform": platform, "leg": key})
	}
	leg := legs.Run(ctx, pipeline.LegRequest{Key: key, Params: socialProfileParams(platform, handle)})
	if !leg.OK() {
		le := leg.Error()
		details := map[string]any{"leg": key}
		for k, v := range le.Details {
			if _, taken := details[k]; !taken {
				details[k] = v
			}
		}
		return nil, envelope.New(envelope.Type(le.Type), le.Status, "The source profile could not be read: "+le.Message, details)
	}

	run := &socialRun{
		out: &socialProfilesData{Items: []*socialItem{}, WebsiteURLs: []string{}, LinkInBioURLs: []*socialLinkPage{},
			LinkedProfileURLs: []string{}, SameHandleCandidates: []string{}, Probes: []socialProbe{}},
		items: map[string]*socialItem{}, websites: map[string]bool{}, pages: map[string]bool{}, linked: map[string]bool{},
		self: map[string]bool{}, bounds: b,
	}
	run.out.Legs = append(run.out.Legs, leg.Summary())
	profile := socialReadProfile(leg.Data)
	run.out.Source = socialSource{Platform: platform, Handle: cmp.Or(profile.str("handle"), handle),
		URL: profile.ptr("url"), Name: profile.ptr("name"), Bio: profile.ptr("bio", "description")}
	run.self[socialKey(platform, handle)] = true
	run.self[socialKey(platform, run.out.Source.Handle)] = true
	if id := profile.str("id"); id != "" {
		run.self[socialKey(platform, id)] = true
	}

	// 2. The source profile's own links.
	for _, f := range profile.links() {
		run.addFromSource(f)
	}

	// 3 and 4, together.
	if fetch == nil {
		run.fail("Page fetching is not configured here: link-in-bio pages were not read and the handle was not probed on other sites.")
		for _, p := range run.out.LinkInBioURLs {
			p.Error = socialStr("not fetched: page fetching is not configured")
		}
	} else {
		dctx, cancel := context.WithTimeout(ctx, b.discovery)
		var wg sync.WaitGroup
		var read []socialPageResult
		var cands []handleprobe.Candidate
		var probeMore bool
		wg.Go(func() { read = run.fetchPages(dctx, fetch.FetchUnblocking) })
		wg.Go(func() {
			// Direct only: a probe's URL is built from the caller's handle.
			cands, probeMore = handleprobe.Probe(dctx, socialProbeHandle(platform, run.out.Source.Handle), handleprobe.Options{
				Fetch: fetch.Fetch, MaxSites: b.probeSites, Budget: b.discovery,
				SiteTimeout: b.probeSite, Concurrency: b.probeParallel, Skip: []string{platform},
			})
		})
		wg.Wait()
		cancel()
		for _, p := range read {
			run.addPage(p)
		}
		run.pageBound()
		run.addProbes(cands, probeMore)
	}

	// 5. Back links.
	run.checkBackLinks(ctx, legs)

	for _, it := range run.order {
		it.Confidence = socialRound(it.Confidence)
	}
	items := append([]*socialItem{}, run.order...) // [] when none, never null
	slices.SortStableFunc(items, func(a, b *socialItem) int { return cmp.Compare(b.Confidence, a.Confidence) })
	run.out.Items, run.out.Count = items, len(items)
	return run.out, nil
}

// socialProfileParams are a profile leg's parameters for a handle: a
// video channel named by its id takes channel_id.
func socialProfileParams(platform, handle string) map[string]string {
	if platform == "video_platform" && socialChannelID.MatchString(handle) {
		return map[string]string{"channel_id": handle}
	}
	return map[string]string{"handle": handle}
}

var socialChannelID = regexp.MustCompile(`^UC[A-Za-z0-9_-]{22}$`)

// socialProbeHandle is the name probed on other sites: a microblog_a
// handle on the network's default domain is probed by its first label.
func socialProbeHandle(platform, handle string) string {
	if platform == "microblog_a" {
		if name, ok := strings.CutSuffix(strings.ToLower(handle), ".bsky.social"); ok {
			return name
		}
	}
	return handle
}

func (r *socialRun) warn(s string) { r.out.Warnings = append(r.out.Warnings, s) }

func (r *socialRun) fail(s string) {
	r.out.Partial = true
	r.warn(s)
}

// addFromSource files one URL of the source profile.
func (r *socialRun) addFromSource(f socialFound) {
	cl, ok := f.classify()
	if !ok {
		return
	}
	where := "the source profile's " + f.field
	switch cl.Kind {
	case linkinbio.KindSocial:
		r.addProfile(cl.Social.Platform, cl.Social.Handle, cl.URL, socialConfProfileLink, "linked from "+where, func(it *socialItem) { it.fromProfile = true })
	case linkinbio.KindOther:
		service, ok := linkinbio.Recognise(cl.URL)
		if !ok || r.pages[cl.URL] {
			return
		}
		r.pages[cl.URL] = true
		r.out.LinkInBioURLs = append(r.out.LinkInBioURLs, &socialLinkPage{URL: cl.URL, Service: service, FoundIn: where,
			Profiles: []string{}, Websites: []string{}})
	case linkinbio.KindWebsite:
		r.addWebsite(cl.URL)
	}
}

func (r *socialRun) addWebsite(u string) {
	if !r.websites[u] {
		r.websites[u] = true
		r.out.WebsiteURLs = append(r.out.WebsiteURLs, u)
	}
}

// addProfile files a profile found, merging it with the same profile
// found before. It reports false for the source profile itself.
func (r *socialRun) addProfile(platform, handle, u string, level float64, evidence string, mark func(*socialItem)) bool {
	key := socialKey(platform, handle)
	if r.self[key] {
		return false
	}
	it := r.items[key]
	if it == nil {
		it = &socialItem{Platform: platform, Handle: handle, URL: u}
		r.items[key] = it
		r.order = append(r.order, it)
	}
	if !slices.Contains(it.Evidence, evidence) {
		it.Evidence = append(it.Evidence, evidence)
	}
	if mark != nil {
		mark(it)
	}
	it.base = max(it.base, level)
	it.Confidence = it.base
	if it.fromProfile && it.fromPage {
		it.Confidence = min(it.base+socialConfCorroborated, socialConfCap)
	}
	if (it.fromProfile || it.fromPage) && !r.linked[key] {
		r.linked[key] = true
		r.out.LinkedProfileURLs = append(r.out.LinkedProfileURLs, it.URL)
	}
	return true
}

func socialKey(platform, handle string) string {
	return platform + "\x00" + strings.ToLower(strings.TrimPrefix(handle, "@"))
}

// socialPageResult is one link-in-bio page's fetch.
type socialPageResult struct {
	page   *socialLinkPage
	parsed *linkinbio.Page
	status int
	err    error
}

// fetchPages fetches and reads the first bounds.linkPages link-in-bio
// pages, concurrently.
func (r *socialRun) fetchPages(ctx context.Context, fetch func(ctx context.Context, url string) (int, []byte, error)) []socialPageResult {
	pages := r.out.LinkInBioURLs
	if len(pages) > r.bounds.linkPages {
		pages = pages[:r.bounds.linkPages]
	}
	out := make([]socialPageResult, len(pages))
	var wg sync.WaitGroup
	for i, p := range pages {
		wg.Go(func() {
			res := socialPageResult{page: p}
			status, body, err := fetch(ctx, p.URL)
			res.status = status
			switch {
			case err != nil:
				res.err = err
			case status >= 200 && status <= 299:
				parsed, perr := linkinbio.Parse(p.Service, body, p.URL)
				if perr != nil {
					res.err = perr
				} else {
					res.parsed = &parsed
				}
			}
			out[i] = res
		})
	}
	wg.Wait()
	return out
}

// addPage files a link-in-bio page's profiles and websites.
func (r *socialRun) addPage(res socialPageResult) {
	p := res.page
	p.Fetched = true
	if res.status != 0 {
		status := res.status
		p.Status = &status
	}
	switch {
	case res.err != nil:
		p.Error = socialStr(socialErrorText(res.err))
		r.fail(fmt.Sprintf("The link-in-bio page %s could not be read (%s); its links are missing.", p.URL, *p.Error))
		return
	case res.status == http.StatusNotFound || res.status == http.StatusGone:
		p.Error = socialStr(fmt.Sprintf("the page answered %d: it no longer exists", res.status))
		r.warn(fmt.Sprintf("The link-in-bio page %s no longer exists (HTTP %d).", p.URL, res.status))
		return
	case res.parsed == nil:
		p.Error = socialStr(fmt.Sprintf("the page answered %d", res.status))
		r.fail(fmt.Sprintf("The link-in-bio page %s answered HTTP %d; its links are missing.", p.URL, res.status))
		return
	}
	p.OK = true
	if res.parsed.Title != "" {
		p.Title = socialStr(res.parsed.Title)
	}
	back := false
	for _, s := range res.parsed.Socials {
		if r.self[socialKey(s.Platform, s.Handle)] {
			back = true
		}
	}
	p.LinksBack = &back
	level := socialConfPageLink
	evidence := "linked from the link-in-bio page " + p.URL
	if back {
		level = socialConfOwnPageLink
		evidence += ", which links back to the source profile"
	}
	for _, s := range res.parsed.Socials {
		if r.addProfile(s.Platform, s.Handle, s.URL, level, evidence, func(it *socialItem) { it.fromPage = true }) {
			p.Profiles = append(p.Profiles, s.URL)
		}
	}
	for _, l := range res.parsed.Links {
		if l.Kind == linkinbio.KindWebsite {
			p.Websites = append(p.Websites, l.URL)
			r.addWebsite(l.URL)
		}
	}
}

// addProbes files the same-handle probe's answers.
func (r *socialRun) addProbes(cands []handleprobe.Candidate, more bool) {
	var failed, unknown []string
	for _, c := range cands {
		r.out.Probes = append(r.out.Probes, socialProbe{Site: c.Site, URL: c.URL, Exists: c.Exists, Evidence: c.Evidence})
		switch {
		case c.Exists == nil && socialProbeFailed(c.Evidence):
			failed = append(failed, c.Site)
		case c.Exists == nil:
			unknown = append(unknown, c.Site)
		case *c.Exists:
			r.out.SameHandleCandidates = append(r.out.SameHandleCandidates, c.URL)
			platform, handle := c.Site, c.Handle
			if cl, ok := linkinbio.Classify(c.URL); ok && cl.Kind == linkinbio.KindSocial {
				platform, handle = cl.Social.Platform, cl.Social.Handle
			}
			level := socialSameHandleConf["low"]
			if s, ok := handleprobe.Lookup(c.Site); ok {
				level = socialSameHandleConf[s.Confidence]
			}
			r.addProfile(platform, handle, c.URL, level, c.Evidence, func(it *socialItem) { it.sameHandle = true })
		}
	}
	if len(failed) > 0 {
		r.fail("The same-handle probe could not reach these sites, so their answer is unknown: " + strings.Join(failed, ", ") + ".")
	}
	if len(unknown) > 0 {
		r.warn("These sites did not say whether the handle exists there (blocked, timed out or an unrecognised page): " + strings.Join(unknown, ", ") + ".")
	}
	if more {
		r.out.HasMore = true
		r.warn(fmt.Sprintf("The same-handle probe stopped early (at most %d sites, %s in all): other sites were not probed or did not answer in time.",
			r.bounds.probeSites, r.bounds.discovery))
	}
}

// pageBound reports the link-in-bio pages past the bound, not fetched.
func (r *socialRun) pageBound() {
	n := r.bounds.linkPages
	if len(r.out.LinkInBioURLs) <= n {
		return
	}
	r.out.HasMore = true
	for _, p := range r.out.LinkInBioURLs[n:] {
		p.Error = socialStr(fmt.Sprintf("not fetched: at most %d link-in-bio pages are read", n))
	}
	r.warn(fmt.Sprintf("Only the first %d link-in-bio pages were read.", n))
}

// socialProbeFailed tells a probe whose fetch failed (an error of a
// source) from one a bound cut short, which has_more reports.
func socialProbeFailed(evidence string) bool {
	if !strings.Contains(evidence, "fetch failed: ") {
		return false
	}
	for _, bound := range []string{"time budget spent", "probe cancelled", "site timeout"} {
		if strings.Contains(evidence, bound) {
			return false
		}
	}
	return true
}

// checkBackLinks reads found profiles through their platform's profile
// leg and raises those that link back to the source.
func (r *socialRun) checkBackLinks(ctx context.Context, legs pipeline.LegRunner) {
	var pick []*socialItem
	for _, it := range r.order {
		if legs.Available(it.Platform + "/profile") {
			pick = append(pick, it)
		}
	}
	if len(pick) == 0 {
		return
	}
	// Same-handle candidates gain most; then the strongest links.
	slices.SortStableFunc(pick, func(a, b *socialItem) int {
		if a.sameOnly() != b.sameOnly() {
			if a.sameOnly() {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.Confidence, a.Confidence)
	})
	if n := r.bounds.backlinkReads; len(pick) > n {
		skipped := make([]string, 0, len(pick)-n)
		for _, it := range pick[n:] {
			skipped = append(skipped, it.URL)
		}
		r.warn(fmt.Sprintf("At most %d found profiles are read to see whether they link back; not read: %s.", n, strings.Join(skipped, ", ")))
		pick = pick[:n]
	}
	reqs := make([]pipeline.LegRequest, len(pick))
	for i, it := range pick {
		reqs[i] = pipeline.LegRequest{Key: it.Platform + "/profile", Params: socialProfileParams(it.Platform, it.Handle)}
	}
	bctx, cancel := context.WithTimeout(ctx, r.bounds.backlinks)
	defer cancel()
	results := legs.RunAll(bctx, reqs, nil)
	for i, res := range results {
		r.out.Legs = append(r.out.Legs, res.Summary())
		r.backLink(pick[i], res)
	}
}

// sameOnly: found by the same handle alone.
func (it *socialItem) sameOnly() bool { return it.sameHandle && !it.fromProfile && !it.fromPage }

// backLink reads one found profile's links.
func (r *socialRun) backLink(it *socialItem, res pipeline.LegResult) {
	if !res.OK() {
		le := res.Error()
		switch envelope.Type(le.Type) {
		case envelope.ResourceNotFound:
			r.warn(fmt.Sprintf("%s was not found by %s, so whether it links back is unknown.", it.URL, res.Key))
		case envelope.InvalidParameters:
			r.warn(fmt.Sprintf("%s cannot be read by %s (%s), so whether it links back is unknown.", it.URL, res.Key, le.Message))
		default:
			r.fail(fmt.Sprintf("Reading %s through %s failed (%s), so whether it links back is unknown.", it.URL, res.Key, le.Type))
		}
		return
	}
	pageSet := map[string]bool{}
	for _, p := range r.out.LinkInBioURLs {
		pageSet[p.URL] = true
	}
	hosts := map[string]bool{}
	for _, w := range r.out.WebsiteURLs {
		if h := socialSiteHost(w); h != "" {
			hosts[h] = true
		}
	}
	back, shared := "", ""
	for _, f := range socialReadProfile(res.Data).links() {
		cl, ok := f.classify()
		if !ok {
			continue
		}
		switch {
		case cl.Kind == linkinbio.KindSocial && r.self[socialKey(cl.Social.Platform, cl.Social.Handle)]:
			back = fmt.Sprintf("its profile (%s) links back to the source profile in its %s", res.Key, f.field)
		case cl.Kind == linkinbio.KindOther && pageSet[cl.URL] && shared == "":
			shared = fmt.Sprintf("its profile (%s) links to the same link-in-bio page %s", res.Key, cl.URL)
		case cl.Kind == linkinbio.KindWebsite && hosts[socialSiteHost(cl.URL)] && shared == "":
			shared = fmt.Sprintf("its profile (%s) links to the same website %s", res.Key, socialSiteHost(cl.URL))
		}
	}
	switch {
	case back != "":
		it.Evidence = append(it.Evidence, back)
		it.Confidence = min(max(it.Confidence+0.05, socialConfLinksBack), socialConfCap)
	case shared != "":
		it.Evidence = append(it.Evidence, shared)
		it.Confidence = min(max(it.Confidence+0.03, socialConfSharedLink), socialConfCap)
	}
}

// socialSiteHost is a website's host without www.
func socialSiteHost(raw string) string { return strings.TrimPrefix(socialHost(raw), "www.") }

func socialHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// socialProfile is a profile leg's data, read loosely: every platform's
// block names its fields a little differently.
type socialProfile map[string]any

func socialReadProfile(data json.RawMessage) socialProfile {
	var p socialProfile
	if json.Unmarshal(data, &p) != nil || p == nil {
		return socialProfile{}
	}
	return p
}

// str is the first non-empty string among fields.
func (p socialProfile) str(fields ...string) string {
	for _, f := range fields {
		if s, ok := p[f].(string); ok && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

func (p socialProfile) ptr(fields ...string) *string {
	if s := p.str(fields...); s != "" {
		return &s
	}
	return nil
}

// socialLinkFields are the profile blocks' fields that hold one link
// (photo_social website, code_host website_url, microblog_b and
// short_video_a bio_link), or a list of them (links).
var socialLinkFields = []string{"website", "website_url", "bio_link", "external_url", "links"}

// socialTextFields hold text in which URLs may be written.
var socialTextFields = []string{"bio", "description"}

// links are the URLs the profile carries: its link fields, then URLs
// written in its bio, each made absolute (https when written without a
// scheme).
func (p socialProfile) links() []socialFound {
	var out []socialFound
	for _, f := range socialLinkFields {
		switch v := p[f].(type) {
		case string:
			if u := socialAbsolute(v); u != "" {
				out = append(out, socialFound{url: u, field: f})
			}
		case []any:
			for _, e := range v {
				s, _ := e.(string)
				if m, ok := e.(map[string]any); ok {
					s, _ = m["url"].(string)
				}
				if u := socialAbsolute(s); u != "" {
					out = append(out, socialFound{url: u, field: f})
				}
			}
		}
	}
	for _, f := range socialTextFields {
		text, _ := p[f].(string)
		for _, m := range socialTextURL.FindAllString(text, socialMaxTextURLs) {
			if u := socialAbsolute(strings.TrimRight(m, ".,;:!?)]}'\"")); u != "" {
				out = append(out, socialFound{url: u, field: f, bare: !strings.Contains(m, "://")})
			}
		}
	}
	return out
}

// socialTextURL finds URLs written in text: with a scheme, or a bare
// host and path (linktr.ee/name), or a bare www. host. Bare hosts without
// a path are left out (too many words look like one).
var socialTextURL = regexp.MustCompile(`(?i)\bhttps?://[^\s<>"'` + "`" + `]+` +
	`|\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}/[^\s<>"'` + "`" + `]*` +
	`|\bwww\.(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}\b`)

// socialAbsolute makes a profile's link absolute: https:// when it has no
// scheme. "" for what cannot be a link.
func socialAbsolute(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return ""
	}
	if strings.Contains(s, "://") || strings.HasPrefix(strings.ToLower(s), "mailto:") {
		return s
	}
	return "https://" + strings.TrimPrefix(s, "//")
}

// socialErrorText says why a fetch failed, without the fault's prefix.
func socialErrorText(err error) string {
	var f *upstream.Fault
	if errors.As(err, &f) {
		if f.Status != 0 {
			return fmt.Sprintf("%s, HTTP %d: %s", f.Kind, f.Status, f.Reason)
		}
		return string(f.Kind) + ": " + f.Reason
	}
	return err.Error()
}

func socialStr(s string) *string { return &s }

func socialRound(v float64) float64 { return math.Round(v*100) / 100 }
