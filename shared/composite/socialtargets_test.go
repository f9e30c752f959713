package composite

import (
	"slices"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/handleprobe"
	"github.com/meridian-data/meridian/shared/upstream/linkinbio"
)

// Every site web/social-profiles fetches is movable: each link-in-bio
// service by its id, each probe site as probe_<id> on the host its probe
// fetches, one variable per host (the linktree probe moves with linktree).
func TestSocialFetchTargetsCoverEverySite(t *testing.T) {
	targets := SocialFetchTargets()
	byName := map[string][]string{}
	subdomains := map[string]bool{}
	hostOwner := map[string]string{}
	for _, tg := range targets {
		if _, dup := byName[tg.Name]; dup {
			t.Errorf("target %s is listed twice", tg.Name)
		}
		byName[tg.Name] = tg.Hosts
		subdomains[tg.Name] = tg.Subdomains
		for _, h := range tg.Hosts {
			if other, taken := hostOwner[h]; taken {
				t.Errorf("host %s is both %s's and %s's: one variable would never apply", h, other, tg.Name)
			}
			hostOwner[h] = tg.Name
		}
	}
	for _, id := range linkinbio.Services() {
		if len(byName[id]) == 0 {
			t.Errorf("link-in-bio service %s has no target", id)
		}
	}
	for _, s := range handleprobe.Sites() {
		host, _ := s.FetchHost()
		if owner := hostOwner[host]; owner == "" {
			t.Errorf("probe site %s (%s) has no target", s.ID, host)
		}
	}
	if hostOwner["linktr.ee"] != "linktree" || byName["probe_linktree"] != nil {
		t.Errorf("linktr.ee is moved by %q; probe_linktree %v", hostOwner["linktr.ee"], byName["probe_linktree"])
	}
	for name, want := range map[string][]string{
		"beacons": {"beacons.ai", "beacons.page"}, "carrd": {"carrd.co"}, "probe_microblog_a": {"public.api.bsky.app"},
		"probe_gitlab": {"gitlab.com"}, "probe_itchio": {"itch.io"},
	} {
		if !slices.Equal(byName[name], want) {
			t.Errorf("%s hosts %v, want %v", name, byName[name], want)
		}
	}
	if !subdomains["carrd"] || !subdomains["probe_itchio"] || subdomains["linktree"] || subdomains["probe_gitlab"] {
		t.Errorf("subdomains %v", subdomains)
	}
}
