package registry

import (
	"os"
	"strings"
	"testing"
)

// ARCHITECTURE.md must list every operation whose parameters Meridian chose.
func TestArchitectureDocumentsEveryDecision(t *testing.T) {
	doc, err := os.ReadFile("../../ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Default().Endpoints() {
		if e.Origin != SpecNamed {
			continue
		}
		short := "/" + e.ID
		if !strings.Contains(string(doc), "`"+e.Path()+"`") && !strings.Contains(string(doc), "`"+short+"`") {
			t.Errorf("ARCHITECTURE.md does not document %s", e.Path())
		}
	}
}
