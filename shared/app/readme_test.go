package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
