package pages

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

// A FetchTarget is a site a PublicFetcher reads whose base URL an operator
// may move, as every provider's can be: MERIDIAN_UPSTREAM_<NAME>_URL
// (upstream.BaseURLVar(Name)) sends every fetch of a URL on the site's
// hosts to that base URL instead (a test server, a proxy), keeping the
// URL's path and query and naming the URL's host in X-Forwarded-Host.
//
// The URL fetched is still the caller's (a profile's bio link, a probe
// built from a handle): it must pass the URL safety policy's offline check
// (CheckOffline, as in replay mode: its own host is never dialled), and
// only the operator's base URL, never a caller's choice, is dialled
// outside the policy, as a provider's configured base URL is. A moved site
// is answered by whoever listens there alone: no web-unblocking service is
// asked (they would fetch the real site). In replay mode the replay
// upstream answers every page and no site is moved.
type FetchTarget struct {
	// Name names the variable, lowercase (linktree: MERIDIAN_UPSTREAM_LINKTREE_URL).
	Name string
	// Hosts are the site's host names; a URL on one of them, or on www.
	// and the name, is the site's.
	Hosts []string
	// Subdomains: a URL on any subdomain of Hosts is the site's too
	// (<site>.carrd.co).
	Subdomains bool
}

// Variable is the target's base URL variable.
func (t FetchTarget) Variable() string { return upstream.BaseURLVar(t.Name) }

// owns reports whether host (lowercase, no trailing dot) is the target's.
func (t FetchTarget) owns(host string) bool {
	for _, h := range t.Hosts {
		if host == h || host == "www."+h || (t.Subdomains && strings.HasSuffix(host, "."+h)) {
			return true
		}
	}
	return false
}

// movedTarget is a target whose variable is set.
type movedTarget struct {
	FetchTarget
	// base is the variable's value, parsed; nil when it is not an absolute
	// http(s) URL, and then every fetch of the site fails (rather than
	// quietly reaching the live site the operator meant to move).
	base *url.URL
}

// moveTargets reads the targets' variables.
func moveTargets(targets []FetchTarget, lookup func(string) (string, bool)) []movedTarget {
	var out []movedTarget
	for _, t := range targets {
		v, _ := lookup(t.Variable())
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		m := movedTarget{FetchTarget: t}
		m.Hosts = slices.Clone(t.Hosts)
		if u, err := url.Parse(strings.TrimSuffix(v, "/")); err == nil && (u.Scheme == "http" || u.Scheme == "https") &&
			u.Host != "" && u.User == nil && u.RawQuery == "" && u.Fragment == "" {
			m.base = u
		}
		out = append(out, m)
	}
	return out
}

// movedTo finds the moved target rawURL is on; nil when none.
func (f *PublicFetcher) movedTo(rawURL string) *movedTarget {
	if len(f.moved) == 0 {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil // the policy refuses it
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	for i := range f.moved {
		if f.moved[i].owns(host) {
			return &f.moved[i]
		}
	}
	return nil
}

// fetchMoved asks a moved site's base URL for rawURL's path and query.
func (f *PublicFetcher) fetchMoved(ctx context.Context, m *movedTarget, rawURL string) (int, []byte, error) {
	u, err := f.policy.CheckOffline(rawURL)
	if err != nil {
		return 0, nil, refusal(err)
	}
	if m.base == nil {
		return 0, nil, &upstream.Fault{Kind: upstream.Transport,
			Reason: "the site's configured base URL is not an absolute http(s) URL, so it was not fetched"}
	}
	target := *m.base
	target.Path = m.base.Path + u.Path
	target.RawPath = ""
	if m.base.RawPath != "" || u.RawPath != "" {
		target.RawPath = m.base.EscapedPath() + u.EscapedPath()
	}
	target.RawQuery = u.RawQuery
	a := f.directWith(ctx, f.standIns, target.String(), u.Host)
	return a.status, a.body, a.err
}

// standInClient dials operator-configured base URLs, as the runner's
// client does its providers': they may be on a private address (a test
// server), and redirects are followed only within the same scheme and
// host, so an answer there cannot send the fetch elsewhere.
func standInClient() *http.Client {
	return &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if len(via) >= maxRedirects || req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// maxRedirects bounds a stand-in's redirect chain, as the runner's.
const maxRedirects = 5
