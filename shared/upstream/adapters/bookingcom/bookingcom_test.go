package bookingcom

import (
	"testing"

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
