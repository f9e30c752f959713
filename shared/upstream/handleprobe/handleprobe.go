// Package handleprobe looks for same-handle candidates: given a handle
// known on one platform, it builds the profile URL the same handle would
// have on other public sites and, within the caller's bounds, asks each
// site whether such a profile exists (the same-handle part of
// web/social-profiles).
//
// The list of sites is Meridian's own (sites.json, embedded): for each site
// its id (Meridian's neutral platform id where one exists), the profile-URL
// template, the usernames the site accepts (a handle the site cannot have
// is not probed there), how existence shows on a logged-out fetch (status,
// JSON endpoint the site's own front end or public API answers without a
// key, or a marker in the page), and how confident that rule is. Sites
// whose profile pages need a login or a key are left out: photo_social,
// social_a, professional_network and microblog_b serve logged-out clients a
// login wall or need a token to tell a profile from none.
//
// The prober never dials: the caller injects Options.Fetch, so every fetch
// goes through the URL-safety policy and the page-fetch layer, directly
// only (never through a paid web-unblocking service). One fetch
// per site is made; Options bound the number of sites (and so the cost),
// the total time, each site's time and the concurrency, and Probe's hasMore
// says when a bound stopped it early.
//
// Same-handle evidence is weak: a profile existing under the same name says
// nothing about it being the same person, and every Candidate's Evidence
// starts with "same handle only".
package handleprobe

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:embed sites.json
var sitesJSON []byte

// Site is one entry of the probing list.
type Site struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	ProfileURL string `json:"profile_url"`         // template: {handle} is replaced
	CheckURL   string `json:"check_url,omitempty"` // fetched instead of ProfileURL when set
	Username   string `json:"username"`            // RE2 regexp of usernames the site accepts
	MinLen     int    `json:"min_len,omitempty"`
	MaxLen     int    `json:"max_len,omitempty"`
	Lowercase  bool   `json:"lowercase,omitempty"` // the site folds case; its URLs use lower case
	Detect     Detect `json:"detect"`
	Confidence string `json:"confidence"` // high, medium or low: how sure the rule is
	Basis      string `json:"basis"`      // where the rule comes from

	re *regexp.Regexp
}

// Detect says how a logged-out fetch of the check URL shows whether the
// profile exists. It is applied in this order: a fetch error is unknown; a
// status in AbsentStatus is absent; a status outside ExistsStatus is
// unknown (blocks, rate limits, redirects to a login); with JSON, the value
// at JSONPath ("." for the whole body) decides: null or empty is absent,
// anything else exists, a body that does not parse or lacks the path is
// unknown; then AbsentMarker in the body is absent; then ExistsMarker must
// be in the body for the profile to exist, and when it is not the page
// reads as absent if PageMarker shows the page is the site's own, unknown
// otherwise. Markers match case-insensitively and may contain {handle}.
type Detect struct {
	ExistsStatus []int  `json:"exists_status"`
	AbsentStatus []int  `json:"absent_status,omitempty"`
	JSON         bool   `json:"json,omitempty"`
	JSONPath     string `json:"json_path,omitempty"`
	ExistsMarker string `json:"exists_marker,omitempty"`
	AbsentMarker string `json:"absent_marker,omitempty"`
	PageMarker   string `json:"page_marker,omitempty"`
}

// Candidate is one same-handle candidate. Exists is nil when the probe
// could not tell (fetch error, block, timeout, unrecognised page).
type Candidate struct {
	Site     string `json:"site"`
	URL      string `json:"url"`
	Handle   string `json:"handle"`
	Exists   *bool  `json:"exists"`
	Evidence string `json:"evidence"`
}

// FetchFunc fetches a public URL with a logged-out GET and returns the
// final status and body. It must honour ctx, and ask the site directly:
// a probe's URL is built from a caller's handle, so it must never reach a
// paid web-unblocking service (pages.PublicFetcher's Fetch, never its
// FetchUnblocking).
type FetchFunc func(ctx context.Context, url string) (status int, body []byte, err error)

// Options bound a Probe.
type Options struct {
	// Fetch makes every request; without it nothing is fetched and each
	// candidate's existence is unknown.
	Fetch FetchFunc
	// MaxSites is the most sites probed (one fetch each); 0 means every
	// site the handle is valid on.
	MaxSites int
	// Budget is the time the whole probe may take; 0 means DefaultBudget.
	Budget time.Duration
	// SiteTimeout is the time one site's fetch may take; 0 means
	// DefaultSiteTimeout.
	SiteTimeout time.Duration
	// Concurrency is the most fetches in flight; 0 means
	// DefaultConcurrency.
	Concurrency int
	// Sites, when not empty, limits the probe to these site ids.
	Sites []string
	// Skip lists site ids not to probe (the platform the handle came from).
	Skip []string
}

// Defaults used for zero Options fields.
const (
	DefaultBudget      = 12 * time.Second
	DefaultSiteTimeout = 5 * time.Second
	DefaultConcurrency = 4
)

// EvidencePrefix starts every Candidate's Evidence.
const EvidencePrefix = "same handle only"

var (
	sites     []*Site
	sitesByID map[string]*Site
)

func init() {
	var err error
	sites, err = parseSites(sitesJSON)
	if err != nil {
		panic("handleprobe: sites.json: " + err.Error())
	}
	sitesByID = make(map[string]*Site, len(sites))
	for _, s := range sites {
		sitesByID[s.ID] = s
	}
}

var (
	idRE     = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	safeChar = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

func parseSites(data []byte) ([]*Site, error) {
	var doc struct {
		About string  `json:"about"`
		Sites []*Site `json:"sites"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range doc.Sites {
		if !idRE.MatchString(s.ID) || seen[s.ID] {
			return nil, fmt.Errorf("site id %q: empty, malformed or repeated", s.ID)
		}
		seen[s.ID] = true
		if !strings.HasPrefix(s.ProfileURL, "https://") || !strings.Contains(s.ProfileURL, "{handle}") {
			return nil, fmt.Errorf("%s: profile_url must be https and contain {handle}", s.ID)
		}
		if s.CheckURL != "" && (!strings.HasPrefix(s.CheckURL, "https://") || !strings.Contains(s.CheckURL, "{handle}")) {
			return nil, fmt.Errorf("%s: check_url must be https and contain {handle}", s.ID)
		}
		if host, _ := s.FetchHost(); host == "" || strings.Contains(host, "{handle}") {
			return nil, fmt.Errorf("%s: the fetched URL's host must be fixed or {handle}.<domain>", s.ID)
		}
		if !strings.HasPrefix(s.Username, "^") || !strings.HasSuffix(s.Username, "$") {
			return nil, fmt.Errorf("%s: username regexp must be anchored", s.ID)
		}
		re, err := regexp.Compile(s.Username)
		if err != nil {
			return nil, fmt.Errorf("%s: username: %w", s.ID, err)
		}
		s.re = re
		if len(s.Detect.ExistsStatus) == 0 {
			return nil, fmt.Errorf("%s: detect.exists_status is empty", s.ID)
		}
		d := s.Detect
		if len(d.AbsentStatus) == 0 && !d.JSON && d.AbsentMarker == "" && d.PageMarker == "" {
			return nil, fmt.Errorf("%s: detect has no way to see an absent profile", s.ID)
		}
		switch s.Confidence {
		case "high", "medium", "low":
		default:
			return nil, fmt.Errorf("%s: confidence %q", s.ID, s.Confidence)
		}
		if s.Basis == "" || s.Name == "" {
			return nil, fmt.Errorf("%s: name and basis are required", s.ID)
		}
	}
	return doc.Sites, nil
}

// Sites returns a copy of the probing list, in probing order.
func Sites() []Site {
	out := make([]Site, len(sites))
	for i, s := range sites {
		out[i] = *s
	}
	return out
}

// Lookup returns the site with this id.
func Lookup(id string) (Site, bool) {
	s, ok := sitesByID[id]
	if !ok {
		return Site{}, false
	}
	return *s, true
}

// Normalize trims spaces and one leading "@" from a handle.
func Normalize(handle string) string {
	return strings.TrimPrefix(strings.TrimSpace(handle), "@")
}

// Handle returns the handle as the site would have it and whether the site
// accepts it at all.
func (s Site) Handle(handle string) (string, bool) {
	h := Normalize(handle)
	if s.Lowercase {
		h = strings.ToLower(h)
	}
	if h == "" || !safeChar.MatchString(h) {
		return h, false
	}
	if (s.MinLen > 0 && len(h) < s.MinLen) || (s.MaxLen > 0 && len(h) > s.MaxLen) {
		return h, false
	}
	re := s.re
	if re == nil {
		var err error
		if re, err = regexp.Compile(s.Username); err != nil {
			return h, false
		}
	}
	return h, re.MatchString(h)
}

// URLs returns the profile URL and the URL fetched to check it for a handle
// the site accepts (see Handle).
func (s Site) URLs(handle string) (profile, check string) {
	esc := url.PathEscape(handle)
	profile = strings.ReplaceAll(s.ProfileURL, "{handle}", esc)
	check = profile
	if s.CheckURL != "" {
		check = strings.ReplaceAll(s.CheckURL, "{handle}", esc)
	}
	return profile, check
}

// FetchHost is the host a probe of the site fetches (its check URL's, else
// its profile URL's); with subdomains the host is the handle's subdomain
// of it ({handle}.itch.io).
func (s Site) FetchHost() (host string, subdomains bool) {
	tmpl := cmp.Or(s.CheckURL, s.ProfileURL)
	host, _, _ = strings.Cut(strings.TrimPrefix(tmpl, "https://"), "/")
	host, _, _ = strings.Cut(host, "?")
	if rest, ok := strings.CutPrefix(host, "{handle}."); ok {
		return strings.ToLower(rest), true
	}
	return strings.ToLower(host), false
}

// Verdict reads one fetch's outcome with the site's rule: exists is nil
// when it cannot tell, and why says what decided.
func (s Site) Verdict(handle string, status int, body []byte, err error) (exists *bool, why string) {
	yes, no := true, false
	d := s.Detect
	if err != nil {
		return nil, "fetch failed: " + err.Error()
	}
	if slices.Contains(d.AbsentStatus, status) {
		return &no, fmt.Sprintf("status %d", status)
	}
	if !slices.Contains(d.ExistsStatus, status) {
		return nil, fmt.Sprintf("status %d not understood", status)
	}
	if d.JSON {
		var v any
		if json.Unmarshal(body, &v) != nil {
			return nil, fmt.Sprintf("status %d, body not JSON", status)
		}
		val, ok := jsonAt(v, d.JSONPath)
		if !ok {
			return nil, fmt.Sprintf("status %d, JSON lacks %s", status, d.JSONPath)
		}
		if emptyJSON(val) {
			return &no, fmt.Sprintf("status %d, JSON %s empty", status, d.JSONPath)
		}
		return &yes, fmt.Sprintf("status %d, JSON %s present", status, d.JSONPath)
	}
	lower := bytes.ToLower(body)
	has := func(marker string) bool {
		m := strings.ToLower(strings.ReplaceAll(marker, "{handle}", handle))
		return bytes.Contains(lower, []byte(m))
	}
	if d.AbsentMarker != "" && has(d.AbsentMarker) {
		return &no, fmt.Sprintf("status %d, page says not found", status)
	}
	if d.ExistsMarker != "" {
		if has(d.ExistsMarker) {
			return &yes, fmt.Sprintf("status %d, profile marker found", status)
		}
		if d.PageMarker != "" && has(d.PageMarker) {
			return &no, fmt.Sprintf("status %d, site page without a profile", status)
		}
		return nil, fmt.Sprintf("status %d, page not recognised", status)
	}
	return &yes, fmt.Sprintf("status %d", status)
}

func jsonAt(v any, path string) (any, bool) {
	if path == "" || path == "." {
		return v, true
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func emptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	case string:
		return t == ""
	}
	return false
}

func evidence(s *Site, check, why string, exists *bool) string {
	what := "existence unknown"
	if exists != nil && *exists {
		what = "a profile exists"
	} else if exists != nil {
		what = "no such profile"
	}
	return fmt.Sprintf("%s; %s (%s: %s; rule confidence %s)", EvidencePrefix, what, check, why, s.Confidence)
}

// Probe checks the handle on the listed sites that accept it, in list
// order, within opts' bounds. It returns one Candidate per site it started
// (in list order; sites the handle cannot be valid on are skipped and not
// returned) and hasMore true when a bound (MaxSites, the budget, a site's
// timeout) or ctx stopped it before every eligible site was answered.
func Probe(ctx context.Context, handle string, opts Options) (cands []Candidate, hasMore bool) {
	type job struct {
		site           *Site
		h              string
		profile, check string
	}
	var jobs []job
	for _, s := range sites {
		if len(opts.Sites) > 0 && !slices.Contains(opts.Sites, s.ID) {
			continue
		}
		if slices.Contains(opts.Skip, s.ID) {
			continue
		}
		h, ok := s.Handle(handle)
		if !ok {
			continue
		}
		p, c := s.URLs(h)
		jobs = append(jobs, job{s, h, p, c})
	}
	if opts.MaxSites > 0 && len(jobs) > opts.MaxSites {
		jobs, hasMore = jobs[:opts.MaxSites], true
	}
	if len(jobs) == 0 {
		return nil, hasMore
	}
	if opts.Fetch == nil {
		for _, j := range jobs {
			cands = append(cands, Candidate{Site: j.site.ID, URL: j.profile, Handle: j.h,
				Evidence: evidence(j.site, j.check, "not fetched", nil)})
		}
		return cands, hasMore
	}
	budget := opts.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	perSite := opts.SiteTimeout
	if perSite <= 0 {
		perSite = DefaultSiteTimeout
	}
	workers := opts.Concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	workers = min(workers, len(jobs))

	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	type result struct {
		i       int
		exists  *bool
		why     string
		stopped bool // a bound or ctx cut this site short
	}
	results := make(chan result, len(jobs)) // buffered: late workers never block
	var (
		mu      sync.Mutex
		started = make([]bool, len(jobs))
		next    int
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(jobs) || bctx.Err() != nil {
			return 0, false
		}
		i := next
		next++
		started[i] = true
		return i, true
	}
	for range workers {
		go func() {
			for {
				i, ok := take()
				if !ok {
					return
				}
				j := jobs[i]
				sctx, scancel := context.WithTimeout(bctx, perSite)
				status, body, err := opts.Fetch(sctx, j.check)
				stopped := false
				if err != nil && sctx.Err() != nil {
					stopped = true
					switch {
					case ctx.Err() != nil:
						err = fmt.Errorf("probe cancelled: %w", err)
					case bctx.Err() != nil:
						err = fmt.Errorf("time budget spent: %w", err)
					default:
						err = fmt.Errorf("site timeout %s: %w", perSite, err)
					}
				}
				scancel()
				exists, why := j.site.Verdict(j.h, status, body, err)
				results <- result{i, exists, why, stopped}
			}
		}()
	}

	done := make([]*result, len(jobs))
	got := 0
collect:
	for got < len(jobs) {
		select {
		case r := <-results:
			done[r.i] = &r
			got++
		case <-bctx.Done():
			// Take what already arrived, then stop waiting.
			for {
				select {
				case r := <-results:
					done[r.i] = &r
					got++
					continue
				default:
				}
				break collect
			}
		}
	}
	mu.Lock()
	startedNow := slices.Clone(started)
	mu.Unlock()
	for i, j := range jobs {
		r := done[i]
		switch {
		case r != nil:
			if r.stopped {
				hasMore = true
			}
			cands = append(cands, Candidate{Site: j.site.ID, URL: j.profile, Handle: j.h, Exists: r.exists,
				Evidence: evidence(j.site, j.check, r.why, r.exists)})
		case startedNow[i]:
			hasMore = true
			why := "time budget spent before the site answered"
			if ctx.Err() != nil {
				why = "probe cancelled before the site answered"
			}
			cands = append(cands, Candidate{Site: j.site.ID, URL: j.profile, Handle: j.h,
				Evidence: evidence(j.site, j.check, why, nil)})
		default:
			hasMore = true // never started
		}
	}
	return cands, hasMore
}
