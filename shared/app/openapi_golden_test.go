package app_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
)

// envUpdateOpenAPIGolden rewrites testdata/openapi.{json,yaml} from the
// served documents: MERIDIAN_UPDATE_OPENAPI_GOLDEN=1 go test ./shared/app -run TestOpenAPIGolden
const envUpdateOpenAPIGolden = "MERIDIAN_UPDATE_OPENAPI_GOLDEN"

// The OpenAPI document the local handler serves is byte for byte the one
// recorded in testdata (issue 44: moving the service's endpoints out of the
// pipeline's package changes no byte of it). A deliberate change to the
// document rewrites the golden files with MERIDIAN_UPDATE_OPENAPI_GOLDEN=1.
func TestOpenAPIGolden(t *testing.T) {
	t.Setenv(app.EnvContactURL, "")
	t.Setenv(app.EnvContactEmail, "")
	h := app.LocalHandler(quietLogger(), app.Deps{})
	for _, tc := range []struct{ name, contentType string }{
		{"openapi.json", "application/json"},
		{"openapi.yaml", "application/yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test/"+tc.name, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /%s: %d %s", tc.name, rec.Code, rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); got != tc.contentType {
				t.Errorf("GET /%s: content-type %q, want %q", tc.name, got, tc.contentType)
			}
			golden := filepath.Join("testdata", tc.name)
			if os.Getenv(envUpdateOpenAPIGolden) != "" {
				if err := os.WriteFile(golden, rec.Body.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (write it with %s=1)", err, envUpdateOpenAPIGolden)
			}
			if got := rec.Body.Bytes(); !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Fatalf("GET /%s differs from %s at byte %d of %d (golden %d bytes): %q vs %q", tc.name, golden, i, len(got), len(want),
					got[i:min(len(got), i+80)], want[i:min(len(want), i+80)])
			}
		})
	}
}
