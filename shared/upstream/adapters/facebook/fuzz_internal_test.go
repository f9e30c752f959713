package facebook

import (
	"encoding/json"
	"testing"
)

// The page parser and the URL reader take any bytes without panicking,
// and whatever they map is JSON.
func FuzzScanPage(f *testing.F) {
	f.Add([]byte(`<script type="application/json">{"data":{"event":{"id":"1","name":"x","start_timestamp":1,"event_place":{"location":{"latitude":1e999}}}}}</script>`), "1")
	f.Add([]byte(`<script>a.handleWithCustomApplyEach(ScheduledApplyEach,{"x":[{"id":"1","name":"y","event_hosts_meet_your_host":[{"user_type_renderer":{"host":{"id":2}}}]}]});</script>`), "1")
	f.Add([]byte(`<script>ScheduledApplyEach,ScheduledApplyEach, {"`), "")
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		s := scanPage(body, id)
		if s.found() {
			if _, err := json.Marshal(s.event(id)); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzEventID(f *testing.F) {
	for _, s := range []string{"https://www.facebook.com/events/1/", "https://fb.com/event.php?eid=2", "https://x.facebook.com/events/a/b/3?event_time_id=4", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := EventID(raw)
		if err == nil && !numeric(id) {
			t.Fatalf("%q: id %q is not numeric", raw, id)
		}
	})
}
