package bookingcom

import (
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

func TestLanguage(t *testing.T) {
	for in, want := range map[string]string{"": "en-gb", "en": "en-gb", "en-US": "en-us", "pt_BR": "pt-br", "pt": "pt-pt", "de": "de", "de-AT": "de", "zh": "zh-cn"} {
		got, err := Language(&upstream.Call{Params: map[string]string{"language": in}})
		if err != nil || got != want {
			t.Errorf("%q: %q %v; want %q", in, got, err, want)
		}
	}
	if _, err := Language(&upstream.Call{Params: map[string]string{"language": "deu"}}); err == nil {
		t.Error("a three-letter language was accepted")
	}
}

// Both routes refuse a stay the same way: a checkin past everywhere on
// Earth, a checkout not after it; a date still today at UTC-12 passes.
func TestDates(t *testing.T) {
	now := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC) // still 23 November at UTC-12
	for stay, code := range map[[2]string]string{
		{"2026-11-23", "2026-11-25"}: "",
		{"2026-11-22", "2026-11-25"}: "date_in_past",
		{"2026-12-01", "2026-12-01"}: "not_after_checkin",
		{"2026-12-1", "2026-12-03"}:  "invalid_date",
	} {
		_, _, err := Dates(&upstream.Call{Now: now, Params: map[string]string{"checkin": stay[0], "checkout": stay[1]}})
		f, _ := err.(*upstream.Fault)
		switch {
		case code == "" && err != nil:
			t.Errorf("%v: %v", stay, err)
		case code != "" && (f == nil || f.Kind != upstream.InvalidParameter || f.Code != code):
			t.Errorf("%v: %v, want %s", stay, err, code)
		}
	}
}
