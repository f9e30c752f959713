package mcpserver

import (
	"strings"
	"testing"
)

// The parser reads events across writes, in any line ending, with
// comments skipped, multi-line data joined by "\n", and an unfinished
// event dropped.
func TestEventParser(t *testing.T) {
	stream := ": keep-alive\n\nevent: leg\r\ndata: {\"a\":1}\r\n\r\n" +
		"event:result\ndata: line one\ndata:line two\nid: 7\nretry\n\n" +
		"data: no name\n\n" +
		"event: leg\n\n" + // no data: not dispatched
		"event: leg\ndata: unfinished\n"
	var got []string
	p := &eventParser{}
	for _, chunk := range []string{stream[:3], stream[3:20], stream[20:41], stream[41:]} {
		p.feed([]byte(chunk), func(event string, data []byte) {
			got = append(got, event+"="+string(data))
		})
	}
	want := []string{`leg={"a":1}`, "result=line one\nline two", "=no name"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// Progress messages name the platform and how its leg ended.
func TestLegMessage(t *testing.T) {
	one := 1
	for _, c := range []struct {
		ev   legEvent
		want string
	}{
		{legEvent{Platform: "microblog_a", Status: 200, OK: true, Count: &one}, "microblog_a: ok (200), 1 item"},
		{legEvent{Platform: "social_a", Status: 200, OK: true, Cached: true}, "social_a: ok (200), cached"},
		{legEvent{Platform: "video_platform", Status: 0}, "video_platform: failed (error, did not run)"},
	} {
		if got := c.ev.message(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}
