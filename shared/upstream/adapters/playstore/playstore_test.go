package playstore

import (
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const endpoint = "app_store_b/categories"

func TestCategories(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	d := u.Data(t, endpoint, "", "default")

	items := d["items"].([]any)
	if d["count"] != float64(len(items)) || len(items) == 0 {
		t.Errorf("count = %v for %d items", d["count"], len(items))
	}
	if d["has_more"] != false {
		t.Errorf("has_more = %v, want false: the whole list is one page", d["has_more"])
	}
	codes := map[string]string{}
	for _, it := range items {
		m := it.(map[string]any)
		codes[m["code"].(string)] = m["name"].(string)
	}
	for code, name := range map[string]string{
		"ART_AND_DESIGN":    "Art & Design",
		"AUTO_AND_VEHICLES": "Auto & Vehicles",
		"GAME_ACTION":       "Action",
		"GAME_ROLE_PLAYING": "Role Playing",
		"VIDEO_PLAYERS":     "Video Players & Editors",
	} {
		if codes[code] != name {
			t.Errorf("%s = %q, want %q", code, codes[code], name)
		}
	}
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("a static provider made %d network requests", n)
	}
	if out := u.Serve(t, endpoint, ""); out.Trace.ServedBy != Name {
		t.Errorf("served by %q", out.Trace.ServedBy)
	}
}

// TestFileWellFormed guards the hand-maintained list.
func TestFileWellFormed(t *testing.T) {
	list, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Sources) == 0 {
		t.Error("the file names no source")
	}
	for _, s := range list.Sources {
		if u, err := url.Parse(s); err != nil || u.Scheme != "https" || u.Host == "" {
			t.Errorf("source %q is not an https URL", s)
		}
	}
	reviewed, err := time.Parse(time.DateOnly, list.Reviewed)
	if err != nil {
		t.Errorf("reviewed %q is not a YYYY-MM-DD date", list.Reviewed)
	} else if reviewed.After(time.Now().AddDate(0, 0, 1)) {
		t.Errorf("reviewed %s is in the future", list.Reviewed)
	}

	codeShape := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	groups := map[string]bool{"apps": true, "games": true, "collection": true}
	seen := map[string]bool{}
	perGroup := map[string]int{}
	for i, c := range list.Categories {
		if !codeShape.MatchString(c.Code) {
			t.Errorf("categories[%d]: code %q is not upper case with underscores", i, c.Code)
		}
		if seen[c.Code] {
			t.Errorf("categories[%d]: code %s is listed twice", i, c.Code)
		}
		seen[c.Code] = true
		if c.Name == "" {
			t.Errorf("categories[%d] (%s): empty name", i, c.Code)
		}
		if !groups[c.Group] {
			t.Errorf("categories[%d] (%s): group %q is not apps, games or collection", i, c.Code, c.Group)
		}
		perGroup[c.Group]++
		if c.Group == "games" && !regexp.MustCompile(`^GAME_`).MatchString(c.Code) {
			t.Errorf("game category %s does not use the GAME_ prefix", c.Code)
		}
	}
	if perGroup["apps"] == 0 || perGroup["games"] == 0 {
		t.Errorf("groups = %v, want both apps and games", perGroup)
	}
}
