package app_test

import (
	"reflect"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// photo_social/post-stats shows the legs of spec 2.7 from the runner's
// trace: the route by its neutral label, the charge on the leg that
// answered.
func TestPostStatsShowsItsLegs(t *testing.T) {
	base, s := replayAndStore(t, quietLogger())
	_, key := newAccount(t, s, 20, nil)
	runner := upstream.NewRunner(adapters.All(), upstream.Settings{ReplayURL: base})
	h := app.LocalHandler(quietLogger(), app.Deps{Store: s, Upstream: runner})
	code, body := serve(h, "/v1/photo_social/post-stats?url=https://www.instagram.com/p/C9pHoTo1abc/", key)
	if code != 200 {
		t.Fatalf("%d %v", code, body)
	}
	legs := body["data"].(map[string]any)["legs"]
	want := []any{map[string]any{
		"attempts": 1.0, "credits": 5.0, "endpoint": "/v1/photo_social/post-stats", "ok": true, "served_by": "direct", "status": 200.0,
	}}
	if !reflect.DeepEqual(legs, want) {
		t.Fatalf("legs %v", legs)
	}
}
