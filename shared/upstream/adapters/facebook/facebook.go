// Package facebook serves the social_a endpoints (the large general social
// network, Facebook): social_a/event from the event's public page, and
// social_a/search-people and social_a/events-search from a commercial
// search API (search.go), since the network's own search needs a
// signed-in session and its Graph API has no public people or event
// search.
//
// # social_a/event: the public event page
//
// The Graph API reads an event only for the Page that hosts it (or with
// the permissions its admins grant), so the route is the public page
// https://www.facebook.com/events/<id>/, which a logged-out browser can
// read, as a pages.Site (Site() is wired to the direct route and the
// web-unblocking services). No session cookie, app id or key is sent:
// only what a logged-out browser sends.
//
// The page is server-rendered with the Relay data its front end
// prefetched. Pages since 2024 carry it in
// <script type="application/json" data-sjs> blocks
// (require → ScheduledServerJS → __bbox → RelayPrefetchedStreamCache →
// __bbox.result.data); pages of 2023 passed the same payload to
// ServerJS().handleWithCustomApplyEach(ScheduledApplyEach, {…}) in inline
// scripts. Both are read. The event query
// (PublicEventCometAboutRootQuery) answers in parts: data.event first,
// then deferred parts whose data is the event again (path ["event"]), each
// with the event's id. Every object carrying the event's id and an event
// field is a part; their fields are merged, so it does not matter which
// part carries what. The fields read (as open-source scrapers of these
// pages document them): name, day_time_sentence, start_timestamp,
// end_timestamp, is_online, is_canceled, is_past, event_kind,
// event_description.text, cover_media_renderer (cover_photo.photo.image
// or full_image, cover_video.image), event_buy_ticket_url, event_creator
// {__typename, id, name}, event_place {name, contextual_name,
// address.street, city.contextual_name, location.latitude/longitude},
// event_hosts_that_can_view_guestlist (and event_hosts_meet_your_host)
// with {__typename, id, name, url, is_verified}, and
// event_connected_users_public_responded.count (older pages:
// event_connected_users_going and _interested).
//
// A login wall, a checkpoint or the site's temporary block is Rejected,
// so the next route (another network) tries; a 404, the site's "content
// isn't available" page or an event query answered with a null event is
// NotFound. A page whose data holds no part of the event is Malformed.
//
// # URLs
//
// The url parameter may name the event in any of the site's URL forms
// (EventID): /events/<id>/, the vanity /events/<slug>/<slug>/<id>/, a
// date of a multi-date event (/events/<id>/<date id>/ or
// /events/<id>/?event_time_id=<date id>, which name that date), its
// subpages (/events/<id>/permalink/<post>/), the legacy
// /event.php?eid=<id>, on facebook.com and every subdomain (www, m,
// mbasic, web, locale hosts such as de-de) and fb.com. The canonical page
// /events/<id>/ is fetched whatever the form.
package facebook

import (
	"bytes"
	"net/url"
	"strings"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Name is the direct route's provider name (MERIDIAN_UPSTREAM_FACEBOOK_URL,
// testdata/upstream/facebook/).
const Name = "facebook"

// Origin is the site's public origin.
const Origin = "https://www.facebook.com"

// Endpoint keys.
const (
	EventEndpoint        = "social_a/event"
	PeopleSearchEndpoint = "social_a/search-people"
	EventSearchEndpoint  = "social_a/events-search"
)

// Platform is the neutral platform id in the data.
const Platform = "social_a"

// Hosts are the hosts an event URL may name: facebook.com and every
// subdomain, and fb.com, which redirects to the same paths.
var Hosts = []string{"facebook.com", "fb.com"}

// Site is the public event pages as a pages.Site.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.facebook.com", "facebook.com"},
		Header:  pages.BrowserHeader("en-US,en;q=0.9"),
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			EventEndpoint: {Build: eventRequest, Parse: parseEvent},
		},
	}
}

// eventRequest fetches the event's canonical page.
func eventRequest(c *upstream.Call) (pages.Request, error) {
	id, err := requestedID(c)
	if err != nil {
		return pages.Request{}, err
	}
	return pages.Request{Path: "/events/" + id + "/"}, nil
}

// requestedID is the event the call asks for: id, or the one url names.
// Both given must agree, since the answer can only be about one event.
func requestedID(c *upstream.Call) (string, error) {
	id, raw := strings.TrimSpace(c.Param("id")), c.Param("url")
	if raw == "" {
		if !numeric(id) {
			return "", upstream.InvalidParameterFault("id", "invalid_id", "id must be a numeric event id")
		}
		return id, nil
	}
	fromURL, err := EventID(raw)
	if err != nil {
		return "", err
	}
	if id != "" && id != fromURL {
		return "", upstream.InvalidParameterFault("url", "conflicting_id", "url names another event than id; send one of them")
	}
	return fromURL, nil
}

// EventID reads the event id from an event URL in any form the package
// comment lists. Anything else is the caller's fault, 422 naming url.
func EventID(raw string) (string, error) {
	bad := func(code, msg string) error { return upstream.InvalidParameterFault("url", code, msg) }
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", bad("invalid_url", "url must be an http(s) link to a public event page of this platform")
	}
	if !registry.HostIn(u.Hostname(), Hosts) {
		return "", bad("not_an_event", "url must be a page of this platform")
	}
	const notEvent = "url must be an event link: /events/<id>/"
	parts := strings.FieldsFunc(u.EscapedPath(), func(r rune) bool { return r == '/' })
	if len(parts) == 1 && parts[0] == "event.php" {
		if eid := u.Query().Get("eid"); numeric(eid) {
			return eid, nil
		}
		return "", bad("not_an_event", notEvent)
	}
	if len(parts) < 2 || parts[0] != "events" {
		return "", bad("not_an_event", notEvent)
	}
	rest := parts[1:]
	// One date of a multi-date event: the date's own id names it.
	if t := u.Query().Get("event_time_id"); numeric(t) {
		return t, nil
	}
	if len(rest) == 2 && numeric(rest[0]) && numeric(rest[1]) {
		return rest[1], nil
	}
	for _, p := range rest {
		if numeric(p) {
			return p, nil
		}
	}
	return "", bad("not_an_event", notEvent)
}

// numeric: event ids are decimal, 1 to 30 digits (the id parameter's rule).
func numeric(s string) bool {
	if len(s) == 0 || len(s) > 30 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// blocked recognises block pages (htmldata.Challenge) and the site's own
// walls: a page that ended up under /login or /checkpoint (the services
// report redirects), a login page served at the event's URL, or the
// site's "temporarily blocked" page. The unblocking services may get
// through from another network, so these fail over. A page that carries
// event data, or the site's "not available" page (which also shows a
// login bar), is never a wall.
func blocked(p *pages.Page) (string, bool) {
	if reason, ok := htmldata.Challenge(p.Body); ok {
		return reason, true
	}
	if u, err := url.Parse(p.URL); err == nil {
		switch {
		case strings.HasPrefix(u.Path, "/login"):
			return "a login wall (redirected to the login page)", true
		case strings.HasPrefix(u.Path, "/checkpoint"):
			return "a checkpoint (redirected to a challenge)", true
		}
	}
	if hasEventData(p.Body) || unavailablePage(p.Body) {
		return "", false
	}
	for _, m := range tempBlockMarkers {
		if bytes.Contains(p.Body, m) {
			return "the site's temporary block page", true
		}
	}
	for _, m := range loginMarkers {
		if bytes.Contains(p.Body, m) {
			return "a login wall (a login form and no event)", true
		}
	}
	return "", false
}

// hasEventData: the page carries some event's Relay data, or the event
// query's answer (which may be a null event: Parse tells).
func hasEventData(body []byte) bool {
	return bytes.Contains(body, []byte(`"day_time_sentence"`)) || bytes.Contains(body, []byte(`"event_place"`)) ||
		bytes.Contains(body, []byte(`"__typename":"Event"`)) || bytes.Contains(body, []byte("PublicEventCometAboutRootQuery"))
}

var loginMarkers = [][]byte{
	[]byte(`id="login_form"`),
	[]byte(`action="/login/`),
	[]byte(`<title>Log into Facebook`),
	[]byte(`<title>Log in to Facebook`),
	[]byte(`"LoginFormController"`),
}

var tempBlockMarkers = apostrophes("You", "re Temporarily Blocked", "re temporarily blocked")

// unavailablePage recognises the site's "content isn't available" page,
// which it serves with 200 for deleted, private or mistyped events.
func unavailablePage(body []byte) bool {
	for _, m := range unavailableMarkers {
		if bytes.Contains(body, m) {
			return true
		}
	}
	return false
}

var unavailableMarkers = append(append(
	apostrophes("This content isn", "t available right now", "t available at the moment"),
	apostrophes("This page isn", "t available", "t available right now")...),
	[]byte("The link you followed may be broken, or the page may have been removed"),
	[]byte(`"pageID":"httpErrorPage"`),
)

// apostrophes spells prefix+'+suffix with every apostrophe a page may
// carry: plain, HTML-escaped, typographic and JSON-escaped.
func apostrophes(prefix string, suffixes ...string) [][]byte {
	var out [][]byte
	for _, s := range suffixes {
		for _, a := range []string{"'", "&#039;", "&#x27;", "’", `\u2019`} {
			out = append(out, []byte(prefix+a+s))
		}
	}
	return out
}
