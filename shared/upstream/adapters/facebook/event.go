package facebook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Event is the data of social_a/event (spec 2.7). The spec names the
// ticket link's field nowhere: it is ticket_url. ends_at is added beside
// starts_at (both RFC 3339, UTC) since the page carries both.
type Event struct {
	Warnings        []string  `json:"_warnings,omitempty"`
	AttendanceCount *int64    `json:"attendance_count"`
	CoverURL        *string   `json:"cover_url"`
	Creator         *Actor    `json:"creator"`
	Description     *string   `json:"description"`
	EndsAt          *string   `json:"ends_at"`
	Hosts           []Host    `json:"hosts"`
	ID              string    `json:"id"`
	IsCanceled      *bool     `json:"is_canceled"`
	IsOnline        *bool     `json:"is_online"`
	IsPast          *bool     `json:"is_past"`
	Kind            *string   `json:"kind"`
	Location        *Location `json:"location"`
	Name            *string   `json:"name"`
	Platform        string    `json:"platform"`
	Privacy         *string   `json:"privacy"`
	StartsAt        *string   `json:"starts_at"`
	TicketURL       *string   `json:"ticket_url"`
	URL             string    `json:"url"`
	WhenText        *string   `json:"when_text"`
}

// Actor is the event's creator: a person, a Page or a group.
type Actor struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	Type *string `json:"type"`
}

// Host is one of the event's hosts.
type Host struct {
	ID       *string `json:"id"`
	Name     *string `json:"name"`
	Type     *string `json:"type"`
	URL      *string `json:"url"`
	Verified *bool   `json:"verified"`
}

// Location is where an in-person event takes place; an online event has none (null).
type Location struct {
	Address   *string  `json:"address"`
	City      *string  `json:"city"`
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
	Name      *string  `json:"name"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	WarnAttendanceHidden = "The event's guest list is hidden or not on the page; attendance_count is null."
	WarnHostsMissing     = "The page did not list the event's hosts; hosts is null."
	WarnStartMissing     = "The page did not carry the event's start time; starts_at is null."
)

// parseEvent maps the event page.
func parseEvent(c *upstream.Call, p *pages.Page) (any, error) {
	id, err := requestedID(c)
	if err != nil {
		return nil, err
	}
	size := len(p.Body)
	s := scanPage(p.Body, id)
	switch {
	case s.found():
	case s.nullEvent || unavailablePage(p.Body):
		return nil, upstream.NotFoundFault("the event does not exist or is not public")
	case !s.sawJSON:
		return nil, upstream.MalformedFault("no JSON data in a %d-byte page", size)
	default:
		return nil, upstream.MalformedFault("no part of the requested event in the page's data (%d-byte page)", size)
	}
	return s.event(id), nil
}

// maxNodes bounds the walk over a page's data.
const maxNodes = 2_000_000

// eventKeys are fields only an event carries: an object with the event's
// id and one of them is a part of the event.
var eventKeys = []string{
	"name", "day_time_sentence", "start_timestamp", "end_timestamp", "is_canceled", "is_online", "is_past",
	"event_kind", "event_place", "event_description", "event_creator", "cover_media_renderer",
	"event_buy_ticket_url", "event_hosts_that_can_view_guestlist", "event_hosts_meet_your_host",
	"event_connected_users_public_responded", "event_connected_users_going", "event_connected_users_interested",
}

// scan is what the page's data says about one event.
type scan struct {
	id string
	// ev merges the event's parts field by field (mergeValue).
	ev map[string]any
	// Host lists, every part's (they are merged by host id).
	guestHosts, meetHosts [][]any
	// timings are objects with start and end times and no other id (the
	// end time may come apart from the event).
	timings []map[string]any
	// nullEvent: an event query answered data.event = null.
	nullEvent bool
	sawJSON   bool
	nodes     int
}

func (s *scan) found() bool { return str(s.ev["name"]) != "" }

// scanPage reads every JSON payload of the page: JSON data scripts, and
// the payloads inline scripts hand to ServerJS.
func scanPage(body []byte, id string) *scan {
	s := &scan{id: id, ev: map[string]any{}}
	for script := range htmldata.Scripts(body) {
		if strings.HasSuffix(script.Type, "json") {
			text := bytes.TrimSpace(script.Text)
			if len(text) == 0 || (text[0] != '{' && text[0] != '[') {
				continue
			}
			if v, err := decode(text, true); err == nil {
				s.sawJSON = true
				s.walk(v, "")
			}
			continue
		}
		if script.Src != "" || (script.Type != "" && !strings.Contains(script.Type, "javascript")) {
			continue
		}
		for _, v := range serverJSPayloads(script.Text) {
			s.sawJSON = true
			s.walk(v, "")
		}
	}
	return s
}

// serverJSMarker precedes the JSON payload an inline script of 2023 pages
// hands to ServerJS (…handleWithCustomApplyEach(ScheduledApplyEach,{…})).
var serverJSMarker = []byte("ScheduledApplyEach,")

// serverJSPayloads decodes the JSON value after each marker; the value
// ends where encoding/json says it does, so braces in strings are safe.
func serverJSPayloads(text []byte) []any {
	var out []any
	for {
		i := bytes.Index(text, serverJSMarker)
		if i < 0 {
			return out
		}
		text = text[i+len(serverJSMarker):]
		rest := bytes.TrimLeft(text, " \t\r\n")
		if len(rest) > 0 && rest[0] == '{' {
			if v, err := decode(rest, false); err == nil {
				out = append(out, v)
			}
		}
	}
}

// decode reads one JSON value with exact numbers; whole requires the
// value to be all of b.
func decode(b []byte, whole bool) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if whole {
		if _, err := d.Token(); !errors.Is(err, io.EOF) {
			return nil, errors.New("trailing data")
		}
	}
	return v, nil
}

// walk visits v depth first; key is the member name v was found under.
func (s *scan) walk(v any, key string) {
	if s.nodes > maxNodes {
		return
	}
	s.nodes++
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			s.walk(e, "")
		}
	case map[string]any:
		oid := idOf(t["id"])
		if oid == s.id && hasAny(t, eventKeys) {
			s.merge(t)
		}
		if ev, ok := t["event"]; ok && ev == nil && key == "data" {
			s.nullEvent = true
		}
		if _, ok := t["end_timestamp"]; ok && (oid == "" || oid == s.id) {
			if _, ok := t["start_timestamp"]; ok {
				s.timings = append(s.timings, t)
			}
		}
		// Members in a fixed order, so that where two parts disagree the
		// same one stands on every run.
		for _, k := range slices.Sorted(maps.Keys(t)) {
			s.walk(t[k], k)
		}
	}
}

func hasAny(m map[string]any, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// merge adds a part's fields, folding each into what earlier parts gave
// (see mergeValue); host lists are kept for merging by id.
func (s *scan) merge(part map[string]any) {
	for k, v := range part {
		switch k {
		case "event_hosts_that_can_view_guestlist":
			if l, ok := v.([]any); ok {
				s.guestHosts = append(s.guestHosts, l)
			}
			continue
		case "event_hosts_meet_your_host":
			if l, ok := v.([]any); ok {
				s.meetHosts = append(s.meetHosts, l)
			}
			continue
		}
		s.ev[k] = mergeValue(s.ev[k], v)
	}
}

// mergeValue folds a later copy of a field into the earlier one. Pages
// repeat an object across payloads, a stub first (event_place with only
// name and id) and the full copy later, so objects merge member by member
// at every depth; null, a blank string or an empty list gives way to a
// value; otherwise the earlier value stands. It builds new maps and never
// changes the page's decoded data.
func mergeValue(cur, next any) any {
	switch c := cur.(type) {
	case nil:
		return next
	case map[string]any:
		n, ok := next.(map[string]any)
		if !ok {
			return cur
		}
		out := make(map[string]any, len(c)+len(n))
		for k, v := range c {
			out[k] = v
		}
		for k, v := range n {
			out[k] = mergeValue(out[k], v)
		}
		return out
	case string:
		if strings.TrimSpace(c) == "" && next != nil {
			return next
		}
	case []any:
		if n, ok := next.([]any); ok && len(c) == 0 {
			return n
		}
	}
	return cur
}

// event maps the merged parts to the spec's shape.
func (s *scan) event(id string) Event {
	ev := s.ev
	out := Event{
		ID:          id,
		Platform:    Platform,
		URL:         Origin + "/events/" + id + "/",
		Name:        text(ev["name"]),
		Description: text(ev["event_description"]),
		WhenText:    text(ev["day_time_sentence"]),
		IsCanceled:  boolOf(ev["is_canceled"]),
		IsOnline:    boolOf(ev["is_online"]),
		IsPast:      boolOf(ev["is_past"]),
		Kind:        text(ev["event_kind"]),
		TicketURL:   text(ev["event_buy_ticket_url"]),
		CoverURL:    cover(ev["cover_media_renderer"]),
		Creator:     actor(ev["event_creator"]),
		Location:    location(ev["event_place"]),
	}
	// An online event's event_place is a name-only "Online event"
	// placeholder, not a place: location is for in-person events only.
	if out.IsOnline != nil && *out.IsOnline {
		out.Location = nil
	}
	if out.WhenText == nil {
		out.WhenText = text(ev["capitalized_day_time_sentence"])
	}
	if out.Description == nil {
		out.Description = text(ev["description"])
	}
	out.Privacy = privacy(out.Kind)
	start := unix(ev["start_timestamp"])
	out.StartsAt = rfc3339(start)
	end := unix(ev["end_timestamp"])
	if end == 0 && start != 0 {
		for _, t := range s.timings {
			if unix(t["start_timestamp"]) == start {
				if end = unix(t["end_timestamp"]); end != 0 {
					break
				}
			}
		}
	}
	out.EndsAt = rfc3339(end)
	if out.StartsAt == nil {
		out.Warnings = append(out.Warnings, WarnStartMissing)
	}
	if out.AttendanceCount = attendance(ev); out.AttendanceCount == nil {
		out.Warnings = append(out.Warnings, WarnAttendanceHidden)
	}
	lists := s.guestHosts
	if len(hostsOf(lists)) == 0 {
		lists = s.meetHosts
	}
	if out.Hosts = hostsOf(lists); out.Hosts == nil {
		out.Warnings = append(out.Warnings, WarnHostsMissing)
	}
	return out
}

// attendance is the public count of people who responded (going or
// interested); older pages counted the two apart.
func attendance(ev map[string]any) *int64 {
	if n := count(member(ev["event_connected_users_public_responded"], "count")); n != nil {
		return n
	}
	going := count(member(ev["event_connected_users_going"], "count"))
	interested := count(member(ev["event_connected_users_interested"], "count"))
	if going == nil || interested == nil {
		return nil
	}
	sum := *going + *interested
	return &sum
}

// privacy is the audience the source's event_kind names: PUBLIC_TYPE is
// "public", PRIVATE_TYPE "private", GROUP_TYPE "group", COMMUNITY_TYPE
// "community".
func privacy(kind *string) *string {
	if kind == nil {
		return nil
	}
	p := strings.ToLower(strings.TrimSuffix(*kind, "_TYPE"))
	if p == "" {
		return nil
	}
	return &p
}

func cover(v any) *string {
	if u := text(member(v, "cover_photo", "photo", "image", "uri")); u != nil {
		return u
	}
	if u := text(member(v, "cover_photo", "photo", "full_image", "uri")); u != nil {
		return u
	}
	return text(member(v, "cover_video", "image", "uri"))
}

func actor(v any) *Actor {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	a := &Actor{ID: textID(m["id"]), Name: text(m["name"]), Type: text(m["__typename"])}
	if a.ID == nil && a.Name == nil {
		return nil
	}
	return a
}

func location(v any) *Location {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	l := &Location{
		Name:    text(m["name"]),
		Address: text(member(m, "address", "street")),
		City:    text(member(m, "city", "contextual_name")),
	}
	if l.Name == nil {
		l.Name = text(m["contextual_name"])
	}
	if l.City == nil {
		l.City = text(member(m, "city", "name"))
	}
	l.Latitude = float(member(m, "location", "latitude"))
	l.Longitude = float(member(m, "location", "longitude"))
	return l
}

// hostsOf merges host lists by id, in order of first appearance; a later
// list fills what an earlier one left out.
func hostsOf(lists [][]any) []Host {
	var out []Host
	at := map[string]int{}
	for _, l := range lists {
		for _, e := range l {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			// A person's card holds the person under user_type_renderer.host.
			inner, _ := member(m, "user_type_renderer", "host").(map[string]any)
			get := func(k string) any {
				if v, ok := m[k]; ok && v != nil {
					return v
				}
				if inner != nil {
					return inner[k]
				}
				return nil
			}
			h := Host{ID: textID(get("id")), Name: text(get("name")), Type: text(m["__typename"]), URL: text(get("url")),
				Verified: boolOf(get("is_verified"))}
			if h.ID == nil && h.Name == nil {
				continue
			}
			key := ""
			if h.ID != nil {
				key = *h.ID
			}
			if i, seen := at[key]; seen && key != "" {
				prev := &out[i]
				prev.Name = or(prev.Name, h.Name)
				prev.Type = or(prev.Type, h.Type)
				prev.URL = or(prev.URL, h.URL)
				if prev.Verified == nil {
					prev.Verified = h.Verified
				}
				continue
			}
			at[key] = len(out)
			out = append(out, h)
		}
	}
	return out
}

func or(a, b *string) *string {
	if a != nil {
		return a
	}
	return b
}

// member follows keys through nested objects (nil when any is missing).
func member(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// text is a non-empty string, or the text of a {text: …} object.
func text(v any) *string {
	switch t := v.(type) {
	case string:
		if s := strings.TrimSpace(t); s != "" {
			return &t
		}
	case map[string]any:
		return text(t["text"])
	}
	return nil
}

func textID(v any) *string {
	if s := idOf(v); s != "" {
		return &s
	}
	return nil
}

// idOf is a string id, or a whole number's exact digits: ids never pass
// through a float.
func idOf(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		if s := t.String(); s != "" && strings.Trim(s, "0123456789") == "" {
			return s
		}
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func boolOf(v any) *bool {
	if b, ok := v.(bool); ok {
		return &b
	}
	return nil
}

// count is a non-negative whole number, else nil.
func count(v any) *int64 {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		return nil
	}
	return &i
}

func float(v any) *float64 {
	n, ok := v.(json.Number)
	if !ok {
		return nil
	}
	f, err := n.Float64()
	if err != nil {
		return nil
	}
	return &f
}

// unix is a positive Unix second (the site writes 0 for "none"), else 0.
func unix(v any) int64 {
	if n := count(v); n != nil && *n > 0 {
		return *n
	}
	return 0
}

func rfc3339(sec int64) *string {
	if sec == 0 {
		return nil
	}
	s := time.Unix(sec, 0).UTC().Format(time.RFC3339)
	return &s
}
