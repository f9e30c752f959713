package app_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
)

// The OpenAPI document as a deployment serves it, JSON and YAML, passes
// the linters client generators trust: Redocly CLI's recommended rules
// and Spectral's spectral:oas ruleset, with no error or warning beyond
// what scripts/openapi-lint/ explains (scripts/openapi-lint.sh).
func TestOpenAPIPassesRedoclyAndSpectral(t *testing.T) {
	script := filepath.Join(repoRoot(t), "scripts", "openapi-lint.sh")
	if out, err := exec.Command(filepath.Join(repoRoot(t), "scripts", "npm-tools.sh"), "install").CombinedOutput(); err != nil {
		if ciRun() {
			t.Fatalf("cannot install Redocly CLI and Spectral: %v\n%s", err, out)
		}
		t.Skipf("cannot install Redocly CLI and Spectral (set CI=true to fail instead): %v", err)
	}
	srv := httptest.NewServer(app.New(app.Config("", quietLogger(), app.Deps{})))
	t.Cleanup(srv.Close)
	for _, name := range []string{"openapi.json", "openapi.yaml"} {
		t.Run(name, func(t *testing.T) {
			resp, err := http.Get(srv.URL + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			file := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(file, body, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(script, file).CombinedOutput(); err != nil {
				t.Fatalf("lint failed: %v\n%s", err, out)
			}
		})
	}
}
