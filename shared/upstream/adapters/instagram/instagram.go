// Package instagram reads photo_social/post-stats (the public counters of
// one Instagram post or reel) from the post's public page.
//
// # No official route
//
// The Instagram Graph API has no lookup of an arbitrary public post by URL
// or shortcode that returns its counters. IG Media (like_count,
// comments_count, and insights) answers only for media of the Instagram
// professional account the token belongs to; business_discovery answers
// for other professional accounts by username (not by post URL, and not
// for personal accounts); the oEmbed endpoint (GET /instagram_oembed?url=,
// with an app token and the Meta oEmbed Read feature) takes a post URL but
// returns embed HTML only: no counters, and since November 2025 not even
// the author or the thumbnail. So the only route is the public post page,
// read as a pages.Site (Site() is wired to the direct route and the
// unblocking services).
//
// # The page
//
// A logged-out GET of https://www.instagram.com/p/<shortcode>/ with a
// desktop browser's headers is a server-rendered page whose
// <script type="application/json" data-sjs> blocks hold the Relay cache
// the front end prefetched (require → ScheduledServerJS → __bbox →
// RelayPrefetchedStreamCache → __bbox.result.data). The post is under
// xig_polaris_media: {code, gating_ruling, if_not_gated_logged_out: media},
// where media is the private API's media item (pk, id "<pk>_<owner>",
// code, taken_at, media_type 1 photo / 2 video / 8 carousel, product_type
// "clips" for reels, like_count, comment_count, play_count, view_count,
// like_and_view_counts_disabled, comments_disabled, user.username). Pages
// of 2024–2025 held the same item under
// xdt_api__v1__media__shortcode__web_info.items[], and the web GraphQL
// query (and the older ?__a=1 JSON) under xdt_shortcode_media or
// shortcode_media with edge counters (edge_media_preview_like.count,
// edge_media_to_comment.count, video_play_count, video_view_count,
// taken_at_timestamp, owner.username): all three are read, the media
// whose shortcode is the requested one wins.
//
// A gated post (if_not_gated_logged_out null with a gating_ruling: the
// site wants a login for this visitor) and a login or checkpoint page are
// Rejected, so the next route (another network) tries; a 404, the site's
// "page isn't available" page, or a post withheld without a gate (deleted,
// or its account private) is NotFound. No session cookie, app id or key is
// ever sent: only what a logged-out browser sends.
package instagram

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Name is the direct route's provider name (MERIDIAN_UPSTREAM_INSTAGRAM_URL,
// testdata/upstream/instagram/).
const Name = "instagram"

// Origin is the site's public origin.
const Origin = "https://www.instagram.com"

// Endpoint is the operation's endpoint key.
const Endpoint = "photo_social/post-stats"

// Platform is the neutral platform id in the data.
const Platform = "photo_social"

// Hosts are the hosts a post URL may name: instagram.com and its
// subdomains (www, m), and the instagr.am short domain, whose post links
// carry the same /p/<shortcode>/ path.
var Hosts = []string{"instagram.com", "instagr.am"}

// Site is Instagram's public post pages as a pages.Site.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   []string{"www.instagram.com", "instagram.com"},
		Header:  pages.BrowserHeader(""),
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			Endpoint:         {Build: postRequest, Parse: parsePost},
			CommentsEndpoint: {Build: commentsRequest, Parse: parseComments}, // comments.go
		},
	}
}

// postRequest fetches the post's canonical page, /p/<shortcode>/, whatever
// form the caller's URL had: posts, videos and reels are all served there.
func postRequest(c *upstream.Call) (pages.Request, error) {
	code, err := Shortcode(c.Param("url"))
	if err != nil {
		return pages.Request{}, err
	}
	return pages.Request{Path: "/p/" + code + "/"}, nil
}

// Shortcode reads the post's shortcode from a post, reel or video URL:
// /p/<code>/, /reel/<code>/, /reels/<code>/, /tv/<code>/, the same behind
// a username (/<user>/p/<code>/, /<user>/reel/<code>/), on instagram.com
// (any subdomain) or instagr.am. Anything else is the caller's fault, 422
// naming url.
func Shortcode(raw string) (string, error) {
	bad := func(code, msg string) error { return upstream.InvalidParameterFault("url", code, msg) }
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", bad("invalid_url", "url must be an http(s) link to a public post or reel of this platform")
	}
	if !registry.HostIn(u.Hostname(), Hosts) {
		return "", bad("not_a_post", "url must be a page of this platform")
	}
	parts := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	if len(parts) == 3 && (parts[1] == "p" || parts[1] == "reel") {
		parts = parts[1:] // /<username>/p/<code>/
	}
	if len(parts) != 2 {
		return "", bad("not_a_post", "url must be a post or reel link: /p/<code>/, /reel/<code>/ or /tv/<code>/")
	}
	switch parts[0] {
	case "p", "reel", "reels", "tv":
	default:
		return "", bad("not_a_post", "url must be a post or reel link: /p/<code>/, /reel/<code>/ or /tv/<code>/")
	}
	if !validCode(parts[1]) {
		return "", bad("invalid_shortcode", "the post code in url is not a shortcode of this platform")
	}
	return parts[1], nil
}

// validCode: shortcodes are the URL-safe base64 alphabet, 11 characters
// for public posts today (longer for some), shorter for the oldest.
func validCode(s string) bool {
	if len(s) < 5 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}

// blocked recognises block pages (htmldata.Challenge) and the site's own
// login wall and checkpoint: a page that ended up under /accounts/login/
// or /challenge/ (the services report redirects), or a login page served
// at the post's URL. The unblocking services may get through from another
// network, so these fail over.
func blocked(p *pages.Page) (string, bool) {
	if reason, ok := htmldata.Challenge(p.Body); ok {
		return reason, true
	}
	if u, err := url.Parse(p.URL); err == nil {
		switch {
		case strings.HasPrefix(u.Path, "/accounts/login"):
			return "a login wall (redirected to the login page)", true
		case strings.HasPrefix(u.Path, "/challenge"), strings.HasPrefix(u.Path, "/accounts/suspended"):
			return "a checkpoint (redirected to a challenge)", true
		}
	}
	// A page that carries a post is never a wall, whatever else it holds.
	if bytes.Contains(p.Body, []byte("xig_polaris_media")) || bytes.Contains(p.Body, []byte("shortcode_media")) ||
		bytes.Contains(p.Body, []byte("shortcode__web_info")) {
		return "", false
	}
	if bytes.Contains(p.Body, []byte(`id="loginForm"`)) {
		return "a login wall (a login form and no post)", true
	}
	if bytes.Contains(p.Body, []byte(`"checkpoint_url"`)) {
		return "a checkpoint", true
	}
	return "", false
}

// ---- the data ----

// PostStats is the data of photo_social/post-stats (spec 2.7). Legs is
// the runner's trace, which the pipeline adds (ReportLegs); the adapter
// cannot see it.
type PostStats struct {
	Warnings    []string             `json:"_warnings,omitempty"`
	ID          *string              `json:"id"`
	Legs        []upstream.PublicLeg `json:"legs"`
	Platform    string               `json:"platform"`
	RetrievedAt string               `json:"retrieved_at"`
	Stats       Stats                `json:"stats"`
	URL         string               `json:"url"`
}

// Stats are the public counters; null means unknown (hidden or not
// carried), never zero.
type Stats struct {
	Comments *int64 `json:"comments"`
	Likes    *int64 `json:"likes"`
	Plays    *int64 `json:"plays"`
	// Public reshares, saves and reposts: a logged-out page carries none
	// of them, so they are null (spec 2.7: null when absent).
	Shares  *int64 `json:"shares"`
	Saves   *int64 `json:"saves"`
	Reposts *int64 `json:"reposts"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	WarnLikesHidden    = "The owner hides this post's like count; likes is null."
	WarnLikesMissing   = "The page did not carry the like count; likes is null."
	WarnCommentsOff    = "Comments are turned off on this post; comments is null."
	WarnCommentsAbsent = "The page did not carry the comment count; comments is null."
	WarnPlaysMissing   = "The page did not carry the play count of this video; plays is null."
	WarnPlaysAreViews  = "The page carried this video's view count but no play count; plays is the view count."
)

// media is one post as the page describes it, in whichever shape.
type media struct {
	id                            string
	likes, comments, plays, views *int64
	video, hidden, commentsOff    bool
	// found: the post was read; gated: withheld behind a login; withheld:
	// named but withheld without a gate (deleted or private).
	found, gated, withheld bool
}

// parsePost maps the post page.
func parsePost(c *upstream.Call, p *pages.Page) (any, error) {
	code, err := Shortcode(c.Param("url"))
	if err != nil {
		return nil, err
	}
	size := len(p.Body)
	m, sawJSON := find(p.Body, code)
	switch {
	case m.found:
	case m.gated:
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: p.Status,
			Reason: "the site withholds the post from a logged-out visitor (a login wall)"}
	case m.withheld || notFoundPage(p.Body):
		return nil, upstream.NotFoundFault("the post does not exist or is not public")
	case !sawJSON:
		return nil, upstream.MalformedFault("no JSON data script in a %d-byte page", size)
	default:
		return nil, upstream.MalformedFault("no media with the requested shortcode in the page's data (%d-byte page)", size)
	}
	out := &PostStats{
		Platform:    Platform,
		RetrievedAt: c.Now.UTC().Format(time.RFC3339),
		URL:         Origin + "/p/" + code + "/",
	}
	if m.id != "" {
		id := m.id
		out.ID = &id
	}
	switch {
	case m.hidden:
		out.Warnings = append(out.Warnings, WarnLikesHidden)
	case m.likes == nil:
		out.Warnings = append(out.Warnings, WarnLikesMissing)
	default:
		out.Stats.Likes = m.likes
	}
	switch {
	case m.commentsOff:
		out.Warnings = append(out.Warnings, WarnCommentsOff)
	case m.comments == nil:
		out.Warnings = append(out.Warnings, WarnCommentsAbsent)
	default:
		out.Stats.Comments = m.comments
	}
	if m.video {
		switch {
		case m.plays != nil:
			out.Stats.Plays = m.plays
		case m.views != nil:
			out.Stats.Plays = m.views
			out.Warnings = append(out.Warnings, WarnPlaysAreViews)
		default:
			out.Warnings = append(out.Warnings, WarnPlaysMissing)
		}
	}
	return out, nil
}

// notFoundPage recognises the site's "page isn't available" page, which it
// may serve with 200.
func notFoundPage(body []byte) bool {
	for _, marker := range [][]byte{
		[]byte("Sorry, this page isn&#039;t available"),
		[]byte("Sorry, this page isn't available"),
		[]byte("Sorry, this page isn\\u2019t available"),
		[]byte("Sorry, this page isn’t available"),
		[]byte(`"pageID":"httpErrorPage"`),
		[]byte("<title>Page not found"),
	} {
		if bytes.Contains(body, marker) {
			return true
		}
	}
	return false
}

// maxNodes bounds the walk over a page's data.
const maxNodes = 2_000_000

// find looks through every JSON data script for the post with code.
func find(body []byte, code string) (m media, sawJSON bool) {
	nodes := 0
	for s := range htmldata.Scripts(body) {
		if !strings.HasSuffix(s.Type, "json") {
			continue
		}
		text := bytes.TrimSpace(s.Text)
		if len(text) == 0 || (text[0] != '{' && text[0] != '[') {
			continue
		}
		v, err := decode(text)
		if err != nil {
			continue
		}
		sawJSON = true
		walk(v, code, &m, &nodes)
		if m.found {
			return m, true
		}
	}
	return m, sawJSON
}

func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// walk visits v depth first, reading the shapes the package comment names.
func walk(v any, code string, m *media, nodes *int) {
	if m.found || *nodes > maxNodes {
		return
	}
	*nodes++
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			walk(e, code, m, nodes)
		}
	case map[string]any:
		if w, ok := t["xig_polaris_media"].(map[string]any); ok && str(w["code"]) == code {
			switch inner := w["if_not_gated_logged_out"].(type) {
			case map[string]any:
				if readV1(inner, code, m) {
					return
				}
			case nil:
				if g, ok := w["gating_ruling"]; ok && g != nil {
					m.gated = true
				} else {
					m.withheld = true
				}
			}
		}
		if w, ok := t["xdt_api__v1__media__shortcode__web_info"].(map[string]any); ok {
			items, _ := w["items"].([]any)
			for _, it := range items {
				if im, ok := it.(map[string]any); ok && readV1(im, code, m) {
					return
				}
			}
		}
		for _, key := range []string{"xdt_shortcode_media", "shortcode_media"} {
			if sm, ok := t[key].(map[string]any); ok && readGraphQL(sm, code, m) {
				return
			}
		}
		for _, e := range t {
			walk(e, code, m, nodes)
			if m.found {
				return
			}
		}
	}
}

// readV1 reads the private API's media item when it is the post.
func readV1(it map[string]any, code string, m *media) bool {
	if str(it["code"]) != code {
		return false
	}
	m.found = true
	m.id = str(it["pk"])
	if m.id == "" {
		m.id, _, _ = strings.Cut(str(it["id"]), "_")
	}
	m.likes = count(it["like_count"])
	m.comments = count(it["comment_count"])
	m.hidden = it["like_and_view_counts_disabled"] == true
	m.commentsOff = it["comments_disabled"] == true
	mt := str(it["media_type"])
	pt := str(it["product_type"])
	m.video = mt == "2" || pt == "clips" || pt == "igtv"
	m.plays = firstCount(it, "play_count", "ig_play_count", "clips_play_count")
	m.views = firstCount(it, "view_count", "video_view_count")
	return true
}

// readGraphQL reads the web GraphQL shape when it is the post.
func readGraphQL(sm map[string]any, code string, m *media) bool {
	if str(sm["shortcode"]) != code {
		return false
	}
	m.found = true
	m.id = str(sm["id"])
	m.likes = edgeCount(sm, "edge_media_preview_like", "edge_liked_by")
	m.comments = edgeCount(sm, "edge_media_to_comment", "edge_media_to_parent_comment", "edge_media_preview_comment")
	m.hidden = sm["like_and_view_counts_disabled"] == true
	m.commentsOff = sm["comments_disabled"] == true
	pt := str(sm["product_type"])
	m.video = sm["is_video"] == true || pt == "clips" || pt == "igtv"
	m.plays = firstCount(sm, "video_play_count", "play_count")
	m.views = firstCount(sm, "video_view_count", "view_count")
	return true
}

func edgeCount(o map[string]any, keys ...string) *int64 {
	for _, k := range keys {
		if e, ok := o[k].(map[string]any); ok {
			if n := count(e["count"]); n != nil {
				return n
			}
		}
	}
	return nil
}

func firstCount(o map[string]any, keys ...string) *int64 {
	for _, k := range keys {
		if n := count(o[k]); n != nil {
			return n
		}
	}
	return nil
}

// count is a non-negative whole number (the site writes -1 for a hidden
// count), else nil.
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

// str is a string or a whole number's exact digits ("" otherwise): ids
// come as either and never pass through a float.
func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return t.String()
		}
		if strings.Trim(t.String(), "0123456789") == "" {
			return t.String()
		}
	}
	return ""
}

// ReportLegs implements upstream.LegsReporter.
func (p *PostStats) ReportLegs(legs []upstream.PublicLeg) { p.Legs = legs }
