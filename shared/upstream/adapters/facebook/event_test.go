package facebook_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/facebook"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const eventEndpoint = facebook.EventEndpoint

// Service keys: they must reach the services and never a fault's reason.
const (
	zyteKey    = "zk-facebook-test-5d1e"
	scraperKey = "sk-facebook-test-77c3"
)

func options() upstream.Options {
	o := adaptertest.Options
	o.Timeout = 20 * o.AttemptTimeout // room for the services' own attempt timeout
	return o
}

// start serves testdata/upstream plus the web-unblocking services' pages
// of this site, kept in testdata/upstream/facebook/services/<service>/,
// to providers in route order.
func start(t *testing.T, providers []*upstream.Provider, secrets map[string]string) *adaptertest.Upstream {
	t.Helper()
	srv, err := replay.Load(adaptertest.FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, service := range []string{pages.ZyteName, pages.ScraperAPIName} {
		files, err := filepath.Glob(filepath.Join(adaptertest.FixturesDir(t), facebook.Name, "services", service, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var fx replay.Fixture
			if err := json.Unmarshal(raw, &fx); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if err := srv.Add(service, filepath.Base(f), fx); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	values := map[string]string{}
	for _, p := range providers {
		values[p.BaseURLVar()] = base + "/" + p.Name
	}
	for k, v := range secrets {
		values[k] = v
	}
	lookup := func(name string) (string, bool) { v, ok := values[name]; return v, ok }
	runner := upstream.NewRunner(providers, upstream.Settings{Lookup: lookup, Options: options()})
	return &adaptertest.Upstream{Provider: providers[0], Replay: srv, Runner: runner}
}

var serviceKeys = map[string]string{pages.ZyteKeySecret: zyteKey, pages.ScraperAPIKeySecret: scraperKey}

func direct(t *testing.T) *adaptertest.Upstream {
	return start(t, []*upstream.Provider{pages.Direct(facebook.Site())}, nil)
}

func zyte(t *testing.T) *adaptertest.Upstream {
	return start(t, []*upstream.Provider{pages.Zyte(facebook.Site())}, serviceKeys)
}

func scraperAPI(t *testing.T) *adaptertest.Upstream {
	return start(t, []*upstream.Provider{pages.ScraperAPI(facebook.Site())}, serviceKeys)
}

func all(t *testing.T) *adaptertest.Upstream {
	site := facebook.Site()
	return start(t, []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}, serviceKeys)
}

func q(u string) string { return "url=" + url.QueryEscape(u) }

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %v", v)
	}
	return m
}

func TestEventInPerson(t *testing.T) {
	u := direct(t)
	e := u.Data(t, eventEndpoint, "id=1234567890", "event-example")
	r := u.LastRequest(t)
	if r.Path != "/events/1234567890/" || len(r.Query) != 0 || r.Method != "GET" || !strings.Contains(r.Header.Get("user-agent"), "Chrome/") {
		t.Fatalf("request %s %s %v %q", r.Method, r.Path, r.Query, r.Header.Get("user-agent"))
	}
	if e["id"] != "1234567890" || e["name"] != "Riverside Jazz Night" || e["platform"] != "social_a" ||
		e["url"] != "https://www.facebook.com/events/1234567890/" || e["starts_at"] != "2026-06-13T19:00:00Z" ||
		e["ends_at"] != "2026-06-13T22:30:00Z" || e["when_text"] != "Saturday, June 13, 2026 at 8:00 PM – 11:30 PM BST" ||
		e["attendance_count"] != 1387.0 || e["is_online"] != false || e["is_canceled"] != false || e["is_past"] != false ||
		e["kind"] != "PUBLIC_TYPE" || e["privacy"] != "public" ||
		e["ticket_url"] != "https://tickets.example.org/riverside-jazz-night" {
		t.Fatalf("event %v", e)
	}
	loc := obj(t, e["location"])
	if loc["name"] != "Riverside Arts Centre" || loc["address"] != "12 Quay Street" || loc["city"] != "Bristol, United Kingdom" ||
		loc["latitude"] != 51.4536 || loc["longitude"] != -2.5975 {
		t.Errorf("location %v", loc)
	}
	creator := obj(t, e["creator"])
	if creator["id"] != "104500112233445" || creator["name"] != "Riverside Arts Centre" || creator["type"] != "Page" {
		t.Errorf("creator %v", creator)
	}
	// Two host lists (a full and a compact card) merge by id; the
	// suggested event elsewhere on the page is not this event.
	hosts, _ := e["hosts"].([]any)
	if len(hosts) != 2 {
		t.Fatalf("hosts %v", e["hosts"])
	}
	h0, h1 := obj(t, hosts[0]), obj(t, hosts[1])
	if h0["id"] != "104500112233445" || h0["type"] != "Page" || h0["verified"] != true || h0["url"] != "https://www.facebook.com/riversideartscentre" ||
		h1["id"] != "100064123456789" || h1["type"] != "User" || h1["verified"] != false {
		t.Errorf("hosts %v", hosts)
	}
	if !strings.HasPrefix(e["cover_url"].(string), "https://scontent.xx.fbcdn.net/") || !strings.Contains(e["description"].(string), "live jazz") {
		t.Errorf("cover %v description %v", e["cover_url"], e["description"])
	}
	if _, ok := e["_warnings"]; ok {
		t.Errorf("warnings %v", e["_warnings"])
	}
}

// An online event with a hidden guest list: hosts come from the "meet
// your host" card, the end time from a part apart from the event, and a
// host id written as a bare number beyond 2^53 keeps its digits.
func TestEventOnline(t *testing.T) {
	e := direct(t).Data(t, eventEndpoint, "id=2345678901234567", "event-online")
	if e["is_online"] != true || e["location"] != nil || e["is_past"] != true || e["ends_at"] != "2026-03-03T19:30:00Z" ||
		e["ticket_url"] != nil || e["cover_url"] != "https://scontent.xx.fbcdn.net/v/t15.5256-10/990011223344551_n.jpg" {
		t.Fatalf("event %v", e)
	}
	if v, ok := e["attendance_count"]; !ok || v != nil {
		t.Errorf("attendance_count %v (present %v); want null", v, ok)
	}
	if w, _ := e["_warnings"].([]any); len(w) != 1 || w[0] != facebook.WarnAttendanceHidden {
		t.Errorf("warnings %v", e["_warnings"])
	}
	hosts, _ := e["hosts"].([]any)
	if len(hosts) != 1 {
		t.Fatalf("hosts %v", e["hosts"])
	}
	h := obj(t, hosts[0])
	if h["id"] != "100087654321098765" || h["name"] != "Sample Baker" || h["url"] != "https://www.facebook.com/samplebaker" || h["type"] != "User" {
		t.Errorf("host %v", h)
	}
	if c := obj(t, e["creator"]); c["id"] != "100087654321098765" {
		t.Errorf("creator id %v (exact digits)", c["id"])
	}
}

// TestEventOnlinePlaceIsNoLocation reads an online event whose page sends
// event_place as Facebook does for one: a FreeformPlace named "Online
// event", with no address or coordinates. It is no location.
func TestEventOnlinePlaceIsNoLocation(t *testing.T) {
	e := direct(t).Data(t, eventEndpoint, "id=2345678901234589", "event-online-place")
	if e["is_online"] != true || e["location"] != nil || e["id"] != "2345678901234589" {
		t.Fatalf("event %v", e)
	}
}

// A canceled past event at a text-only place; attendance from the older
// going and interested counts.
func TestEventCanceled(t *testing.T) {
	e := direct(t).Data(t, eventEndpoint, "id=3456789012345678", "event-canceled")
	if e["is_canceled"] != true || e["is_past"] != true || e["attendance_count"] != 253.0 || e["ends_at"] != nil || e["cover_url"] != nil {
		t.Fatalf("event %v", e)
	}
	loc := obj(t, e["location"])
	if loc["name"] != "Harbour Green" || loc["latitude"] != nil || loc["address"] != nil || loc["city"] != nil {
		t.Errorf("location %v", loc)
	}
}

// The 2023 page layout: the Relay payloads are arguments of inline
// ServerJS calls, with strings holding braces and quotes.
func TestEventLegacyInline(t *testing.T) {
	e := direct(t).Data(t, eventEndpoint, "id=4567890123456789", "event-legacy-inline")
	if e["name"] != `Night Market "Lanterns" {Summer}` || e["attendance_count"] != 611.0 || e["starts_at"] != "2023-07-08T00:00:00Z" {
		t.Fatalf("event %v", e)
	}
	loc := obj(t, e["location"])
	if loc["address"] != nil || loc["city"] != "Calgary, Alberta" || loc["latitude"] != 51.0374 {
		t.Errorf("location %v (an empty street is unknown)", loc)
	}
	hosts, _ := e["hosts"].([]any)
	if len(hosts) != 1 || obj(t, hosts[0])["id"] != "1234567890123456789" {
		t.Errorf("hosts %v (exact digits)", e["hosts"])
	}
}

// The page repeats the place: a stub (name, id) in the header query, the
// full place with street, city and coordinates in a later payload. The
// copies merge field by field, as do the creator's (the first has no id).
func TestEventPlaceStubThenFull(t *testing.T) {
	e := direct(t).Data(t, eventEndpoint, "id=6123456789012345", "event-place-stub")
	loc := obj(t, e["location"])
	if loc["name"] != "Millbrook Exchange Hall" || loc["address"] != "48 Foundry Lane" || loc["city"] != "Hereford, United Kingdom" ||
		loc["latitude"] != 52.0571 || loc["longitude"] != -2.7163 {
		t.Errorf("location %v", loc)
	}
	if c := obj(t, e["creator"]); c["id"] != "104455667788990" || c["name"] != "Millbrook Cider Society" || c["type"] != "Page" {
		t.Errorf("creator %v", c)
	}
	if e["starts_at"] != "2026-10-10T09:00:00Z" || e["ends_at"] != "2026-10-10T16:00:00Z" || e["attendance_count"] != 742.0 {
		t.Errorf("event %v", e)
	}
}

// Every URL form of one event fetches its canonical page.
func TestEventByURL(t *testing.T) {
	u := direct(t)
	for _, raw := range []string{
		"https://www.facebook.com/events/1234567890/",
		"https://m.facebook.com/events/1234567890?ref=newsfeed",
		"https://facebook.com/events/riverside-arts-centre/riverside-jazz-night/1234567890/",
		"https://www.facebook.com/events/1234567890/permalink/1234567999/",
		"https://www.facebook.com/events/555000111/?event_time_id=1234567890",
		"https://www.facebook.com/events/555000111/1234567890/",
		"https://fb.com/events/1234567890",
		"https://de-de.facebook.com/event.php?eid=1234567890",
	} {
		out := u.Serve(t, eventEndpoint, q(raw))
		adaptertest.MatchesGolden(t, eventEndpoint, out, facebook.Name, "event-example")
		if r := u.LastRequest(t); r.Path != "/events/1234567890/" {
			t.Errorf("%s: path %s", raw, r.Path)
		}
	}
	// id and url together must agree.
	if out := u.Serve(t, eventEndpoint, "id=1234567890&"+q("https://www.facebook.com/events/1234567890/")); out.Fault != nil {
		t.Errorf("agreeing id and url: %v", out.Fault)
	}
	before := len(u.Replay.Requests())
	out := u.Fault(t, eventEndpoint, "id=42&"+q("https://www.facebook.com/events/1234567890/"), upstream.InvalidParameter)
	if out.Fault.Field != "url" || out.Fault.Code != "conflicting_id" || len(u.Replay.Requests()) != before {
		t.Errorf("conflict: %+v, %d requests", out.Fault, len(u.Replay.Requests())-before)
	}
}

// Every route maps the same page to the same data.
func TestServices(t *testing.T) {
	z := zyte(t)
	adaptertest.MatchesGolden(t, eventEndpoint, z.Serve(t, eventEndpoint, "id=1234567890"), facebook.Name, "event-example")
	r := z.LastRequest(t)
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if r.Path != "/v1/extract" || body["url"] != "https://www.facebook.com/events/1234567890/" || body["httpResponseBody"] != true ||
		!strings.HasPrefix(r.Header.Get("authorization"), "Basic ") {
		t.Errorf("Zyte request %s %s", r.Path, r.Body)
	}
	s := scraperAPI(t)
	adaptertest.MatchesGolden(t, eventEndpoint, s.Serve(t, eventEndpoint, q("https://m.facebook.com/events/1234567890/")), facebook.Name, "event-example")
	if qv := url.Values(s.LastRequest(t).Query); qv.Get("url") != "https://www.facebook.com/events/1234567890/" || qv.Get("api_key") != scraperKey {
		t.Errorf("ScraperAPI query %v", qv)
	}
}

// A login wall on the direct route fails over to Zyte, which serves the
// event; a checkpoint and the site's temporary block are walls too.
func TestWallsFailOver(t *testing.T) {
	d := direct(t)
	for id, want := range map[string]string{"1111111111111111": "login", "5000000000000003": "temporary block"} {
		out := d.Fault(t, eventEndpoint, "id="+id, upstream.Rejected)
		if !strings.Contains(out.Fault.Reason, want) {
			t.Errorf("%s: reason %q", id, out.Fault.Reason)
		}
	}
	out := zyte(t).Fault(t, eventEndpoint, "id=2222222222222222", upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "checkpoint") || strings.Contains(out.Fault.Reason, zyteKey) {
		t.Errorf("reason %q", out.Fault.Reason)
	}

	res := all(t).Serve(t, eventEndpoint, "id=1111111111111111")
	if res.Fault != nil {
		t.Fatalf("fault %v", res.Fault)
	}
	if err := schemas.Validate(eventEndpoint, res.Data); err != nil {
		t.Fatal(err)
	}
	e := res.Data.(facebook.Event)
	if *e.Name != "Community Garden Open Day" || *e.AttendanceCount != 58 || len(e.Hosts) != 1 || *e.Hosts[0].Type != "Group" ||
		e.Creator != nil || *e.Location.City != "Leeds, United Kingdom" {
		t.Errorf("event %+v", e)
	}
	if res.Trace.ServedBy != pages.ZyteName || len(res.Trace.Legs) != 2 || res.Trace.Legs[0].ServedBy != facebook.Name ||
		res.Trace.Legs[0].OK || res.Trace.Legs[0].Fault != upstream.Rejected || !res.Trace.Legs[1].OK {
		t.Errorf("trace %+v", res.Trace)
	}
}

// A deleted or private event, an event query answered with null and a
// 404 are definitive 404s, not failovers.
func TestNotFound(t *testing.T) {
	d := direct(t)
	for _, id := range []string{"4040404040404040", "4040404040404041", "4040404040404042"} {
		d.Fault(t, eventEndpoint, "id="+id, upstream.NotFound)
	}
	zyte(t).Fault(t, eventEndpoint, "id=4040404040404040", upstream.NotFound)
	scraperAPI(t).Fault(t, eventEndpoint, "id=4040404040404040", upstream.NotFound)
	a := all(t)
	before := len(a.Replay.Requests())
	res := a.Serve(t, eventEndpoint, "id=4040404040404040")
	if res.Fault == nil || res.Fault.Kind != upstream.NotFound || len(a.Replay.Requests()) != before+1 {
		t.Errorf("fault %v, %d requests", res.Fault, len(a.Replay.Requests())-before)
	}
	if e := res.Error(); e.Status != 404 {
		t.Errorf("status %d", e.Status)
	}
}

// A changed page is Malformed (502, refunded), never an empty success;
// the reason names what is missing and the page's size, never content.
func TestChangedShape(t *testing.T) {
	d := direct(t)
	for id, want := range map[string]string{
		"5000000000000001": "no part of the requested event",
		"5000000000000002": "no JSON data",
	} {
		out := d.Fault(t, eventEndpoint, "id="+id, upstream.Malformed)
		if !strings.Contains(out.Fault.Reason, want) || !strings.Contains(out.Fault.Reason, "-byte page") ||
			strings.Contains(out.Fault.Reason, "Sample Secret") {
			t.Errorf("%s: reason %q", id, out.Fault.Reason)
		}
		if e := out.Error(); e.Status != 502 {
			t.Errorf("%s: status %d", id, e.Status)
		}
	}
}

func TestEventID(t *testing.T) {
	for raw, want := range map[string]string{
		"https://www.facebook.com/events/1234567890/":                         "1234567890",
		"https://www.facebook.com/events/1234567890":                          "1234567890",
		" http://facebook.com/events/1234567890/?acontext=%7B%7D#x ":          "1234567890",
		"https://m.facebook.com/events/1234567890/":                           "1234567890",
		"https://mbasic.facebook.com/events/1234567890":                       "1234567890",
		"https://WWW.Facebook.COM./events/1234567890/":                        "1234567890",
		"https://web.facebook.com/events/1234567890/":                         "1234567890",
		"https://fb.com/events/1234567890/":                                   "1234567890",
		"https://www.facebook.com/events/some-venue/some-title/602005831971/": "602005831971",
		"https://www.facebook.com/events/1137956700212933/1137956706879599/":  "1137956706879599",
		"https://www.facebook.com/events/1137956700212933/?event_time_id=77":  "77",
		"https://www.facebook.com/events/1234567890/permalink/99887766/":      "1234567890",
		"https://www.facebook.com/event.php?eid=1234567890":                   "1234567890",
	} {
		got, err := facebook.EventID(raw)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", raw, got, err, want)
		}
	}
	for raw, code := range map[string]string{
		"https://www.facebook.com/riversideartscentre/events/":             "not_an_event",
		"https://www.facebook.com/events/":                                 "not_an_event",
		"https://www.facebook.com/events/discovery/":                       "not_an_event",
		"https://www.facebook.com/events/search/?q=jazz":                   "not_an_event",
		"https://www.facebook.com/event.php?eid=abc":                       "not_an_event",
		"https://www.facebook.com/groups/123456/":                          "not_an_event",
		"https://www.facebook.com/events/1234567890123456789012345678901/": "not_an_event",
		"https://events.example.com/events/1234567890/":                    "not_an_event",
		"https://facebook.com.evil.example/events/1234567890/":             "not_an_event",
		"https://evilfacebook.com/events/1234567890/":                      "not_an_event",
		"https://fb.me/e/1a2B3c4D":                                         "not_an_event",
		"https://user@www.facebook.com/events/1234567890/":                 "invalid_url",
		"ftp://www.facebook.com/events/1234567890/":                        "invalid_url",
		"1234567890": "invalid_url",
	} {
		_, err := facebook.EventID(raw)
		f, ok := err.(*upstream.Fault)
		if !ok || f.Kind != upstream.InvalidParameter || f.Field != "url" || f.Code != code {
			t.Errorf("%q: %v; want invalid_parameter %s", raw, err, code)
			continue
		}
		if strings.Contains(strings.ToLower(f.Reason), "facebook") {
			t.Errorf("%q: the message names the platform: %q", raw, f.Reason)
		}
	}
}

// An unusable URL is the caller's 422, before any request.
func TestInvalidURLNotFetched(t *testing.T) {
	d := direct(t)
	for _, raw := range []string{"https://www.facebook.com/riversideartscentre/events/", "https://events.example.com/events/1234567890/"} {
		before := len(d.Replay.Requests())
		out := d.Runner.Serve(context.Background(), eventEndpoint, map[string]string{"url": raw})
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "url" {
			t.Fatalf("%s: fault %v", raw, out.Fault)
		}
		if e := out.Error(); e.Status != 422 {
			t.Errorf("%s: status %d", raw, e.Status)
		}
		if len(d.Replay.Requests()) != before {
			t.Errorf("%s: the site was asked", raw)
		}
	}
}
