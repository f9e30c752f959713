package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/composite"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// The README's upstream table names every shipped provider, each of its
// settings and its base URL variable, so an operator can configure what
// the code reads.
func TestREADMENamesEveryProviderAndItsSettings(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	for _, p := range adapters.All() {
		names := []string{p.Name}
		if !p.Static {
			names = append(names, p.BaseURLVar())
		}
		for _, s := range p.Secrets {
			names = append(names, s.Name)
		}
		for _, name := range names {
			if !strings.Contains(readme, "`"+name+"`") {
				t.Errorf("README.md does not name %s (provider %s)", name, p.Name)
			}
		}
	}
}

// The sites web/social-profiles fetches have base URL variables too: the
// README names each, and none is a provider's.
func TestREADMENamesEverySocialFetchTarget(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	providers := map[string]bool{}
	for _, p := range adapters.All() {
		providers[p.BaseURLVar()] = true
	}
	for _, tg := range composite.SocialFetchTargets() {
		v := tg.Variable()
		if providers[v] {
			t.Errorf("%s moves both a provider and the social-profiles site %s", v, tg.Name)
		}
		if !strings.Contains(readme, "`"+v+"`") {
			t.Errorf("README.md does not name %s (the social-profiles site %s)", v, tg.Name)
		}
	}
}
