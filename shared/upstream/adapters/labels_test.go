package adapters

import (
	"regexp"
	"testing"
)

// Answers that show their legs (spec 2.7) name routes by neutral labels
// only: the platform's own route is "direct", a third-party service has a
// label of its own kind, never its or a site's real name.
func TestPublicLabelsAreNeutral(t *testing.T) {
	neutral := regexp.MustCompile(`^(direct|web_unblocker_[a-z]|data_provider_[a-z])$`)
	seen := map[string]string{}
	for _, p := range All() {
		label := p.PublicLabel()
		if !neutral.MatchString(label) {
			t.Errorf("%s: label %q is not neutral", p.Name, label)
		}
		if other, dup := seen[label]; dup && label != "direct" {
			t.Errorf("%s and %s share the label %q", p.Name, other, label)
		}
		seen[label] = p.Name
	}
	for _, service := range []string{"zyte_api", "scraperapi", "harvestapi", "lix_api", "facebook_scraper3"} {
		for _, p := range All() {
			if p.Name == service && p.PublicLabel() == "direct" {
				t.Errorf("%s is a third-party service, labelled direct", service)
			}
		}
	}
}
