package instagram

// photo_social/comments (a creator building block, issue 16): a sample of
// one post's comments, from the same public post page post-stats reads
// (Site, on the direct route and the unblocking services).
//
// The Graph API's comments edge answers only for the token's own media,
// so another account's comments come from the page: the post's data there
// may carry a preview of its top-level comments, in the shape the page's
// data has:
//
//   - the web GraphQL shape (xdt_shortcode_media, shortcode_media):
//     edge_media_to_parent_comment {count, page_info, edges[].node {id,
//     text, created_at, owner {id, username, profile_pic_url, is_verified},
//     edge_liked_by.count, edge_threaded_comments.count}}, or
//     edge_media_preview_comment {count, edges} in older pages;
//   - the private API's media item (xig_polaris_media, web_info items):
//     comments[] or preview_comments[] {pk, text, created_at, user {pk,
//     username, full_name, profile_pic_url, is_verified},
//     comment_like_count, child_comment_count}, with comment_count and
//     has_more_comments.
//
// Only that first preview is served: the next page is a signed-in
// request, so cursor is always null and has_more says whether the post has
// more comments than the page showed. A page that carries the post but
// none of its comments (the site shows them to signed-in visitors only)
// is Rejected, so another route tries and the call fails refunded rather
// than answering an empty sample as if the post had none.

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Comments is the data of photo_social/comments.
// has_more is null when the page does not say (unknown).
type Comments struct {
	PostID        string `json:"post_id"`
	URL           string `json:"url"`
	CommentsCount *int64 `json:"comments_count"`
	creator.Page[Comment]
}

// Comment is one top-level comment.
type Comment = creator.Comment[Author]

// Author is who wrote a comment.
type Author struct {
	creator.Author
	Verified *bool `json:"verified"`
}

// The _warnings sentences of comments, fixed so callers can match them.
const (
	WarnCommentsSample   = "A sample of the post's top-level comments as its public page shows them, in the site's order; replies are counted, not listed."
	WarnCommentsFirst    = "The public page shows only the first comments: later ones need a signed-in session, so cursor is null."
	WarnCommentsDisabled = "Comments are turned off on this post: there are no comments to sample."
	WarnCommentsNoCount  = "The public page lists no comments for this post and gives no comment count: has_more is null (unknown)."
)

// commentsRequest fetches the post's canonical page, as post-stats does.
func commentsRequest(c *upstream.Call) (pages.Request, error) {
	code, err := postCode(c.Param("post_id"))
	if err != nil {
		return pages.Request{}, err
	}
	return pages.Request{Path: "/p/" + code + "/"}, nil
}

// postCode reads post_id: a shortcode, or a post or reel URL (the
// registry has held it to the platform's hosts), read as post-stats reads
// its url.
func postCode(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if strings.Contains(raw, "/") {
		code, err := Shortcode(raw)
		if f, ok := err.(*upstream.Fault); ok && f.Kind == upstream.InvalidParameter {
			msg := f.Reason
			if rest, ok := strings.CutPrefix(msg, "url "); ok {
				msg = "post_id " + rest
			} else {
				msg = strings.Replace(msg, " in url ", " in post_id ", 1)
			}
			return "", upstream.InvalidParameterFault("post_id", f.Code, msg)
		}
		return code, err
	}
	if raw != "" && strings.Trim(raw, "0123456789") == "" && len(raw) >= 15 {
		// The posts endpoint's id is the source's media id, not a shortcode.
		return "", upstream.InvalidParameterFault("post_id", "not_a_shortcode",
			"post_id is a numeric media id; send the post's shortcode or link (a photo_social/posts item's shortcode).")
	}
	if !validCode(raw) {
		return "", upstream.InvalidParameterFault("post_id", "invalid_shortcode",
			"post_id must be a post's shortcode or the URL of a post or reel: /p/<code>/, /reel/<code>/ or /tv/<code>/.")
	}
	return raw, nil
}

// parseComments maps the post page to a comment sample.
func parseComments(c *upstream.Call, p *pages.Page) (any, error) {
	code, err := postCode(c.Param("post_id"))
	if err != nil {
		return nil, err
	}
	size := len(p.Body)
	loc := locate(p.Body, code)
	switch {
	case loc.node != nil:
	case loc.gated:
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: p.Status,
			Reason: "the site withholds the post from a logged-out visitor (a login wall)"}
	case loc.withheld || notFoundPage(p.Body):
		return nil, upstream.NotFoundFault("the post does not exist or is not public")
	case !loc.sawJSON:
		return nil, upstream.MalformedFault("no JSON data script in a %d-byte page", size)
	default:
		return nil, upstream.MalformedFault("no media with the requested shortcode in the page's data (%d-byte page)", size)
	}
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 20
	}
	s := readComments(loc.node, loc.graphQL)
	out := Comments{PostID: code, URL: Origin + "/p/" + code + "/", CommentsCount: s.total, Page: creator.Page[Comment]{Items: []Comment{}}}
	if s.disabled {
		no := false
		out.HasMore = &no
		out.Warnings = []string{WarnCommentsDisabled}
		return out, nil
	}
	if len(s.list) == 0 {
		switch {
		case s.total != nil && *s.total == 0:
			no := false // the post has no comments
			out.HasMore = &no
			return out, nil
		case s.total == nil && s.list != nil:
			// An empty list and no count: nothing says comments exist.
			out.Warnings = []string{WarnCommentsNoCount}
			return out, nil
		}
		// The post is there, and has comments or does not say, but the
		// page shows none: another route may be served a fuller page.
		n := "its"
		if s.total != nil {
			n = "its " + strconv.FormatInt(*s.total, 10)
		}
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: p.Status,
			Reason: "the page carries the post but none of " + n + " comments (shown to signed-in visitors only)"}
	}
	for _, raw := range s.list {
		if len(out.Items) == limit {
			break
		}
		if cm, ok := comment(raw, loc.graphQL); ok {
			out.Items = append(out.Items, cm)
		}
	}
	if len(s.list) > 0 && len(out.Items) == 0 {
		return nil, upstream.MalformedFault("none of the page's %d comments has an id (%d-byte page)", len(s.list), size)
	}
	out.Count = len(out.Items)
	more := s.more || len(s.list) > out.Count || (s.total != nil && *s.total > int64(out.Count))
	out.HasMore = &more
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, WarnCommentsSample)
	}
	if more {
		out.Warnings = append(out.Warnings, WarnCommentsFirst)
	}
	var noLikes, noReplies int
	for _, cm := range out.Items {
		if cm.Likes == nil {
			noLikes++
		}
		if cm.Replies == nil {
			noReplies++
		}
	}
	if noLikes > 0 {
		out.Warnings = append(out.Warnings, strconv.Itoa(noLikes)+
			" comment(s) carry no like count on the page: likes is null (unknown), not zero.")
	}
	if noReplies > 0 {
		out.Warnings = append(out.Warnings, strconv.Itoa(noReplies)+
			" comment(s) carry no reply count on the page: replies is null (unknown), not zero.")
	}
	return out, nil
}

// sample is what the post's data says about its comments.
type sample struct {
	list     []any  // the comments shown; nil when the page carries no list
	total    *int64 // the post's comment count, when given
	more     bool   // the page says more exist
	disabled bool
}

func readComments(node map[string]any, graphQL bool) sample {
	s := sample{disabled: node["comments_disabled"] == true}
	if graphQL {
		for _, key := range []string{"edge_media_to_parent_comment", "edge_media_preview_comment", "edge_media_to_comment"} {
			e, ok := node[key].(map[string]any)
			if !ok {
				continue
			}
			if s.total == nil {
				s.total = count(e["count"])
			}
			edges, ok := e["edges"].([]any)
			if !ok || (len(edges) == 0 && s.list != nil) {
				continue
			}
			if len(s.list) == 0 {
				s.list = make([]any, 0, len(edges))
				for _, edge := range edges {
					if em, ok := edge.(map[string]any); ok {
						s.list = append(s.list, em["node"])
					}
				}
				if pi, ok := e["page_info"].(map[string]any); ok && pi["has_next_page"] == true {
					s.more = true
				}
			}
		}
		return s
	}
	s.total = count(node["comment_count"])
	s.more = node["has_more_comments"] == true
	for _, key := range []string{"comments", "preview_comments"} {
		if list, ok := node[key].([]any); ok && (len(list) > 0 || s.list == nil) {
			s.list = list
			if len(list) > 0 {
				break
			}
		}
	}
	return s
}

// comment maps one comment in either shape; one without an id is skipped.
func comment(raw any, graphQL bool) (Comment, bool) {
	m, ok := raw.(map[string]any)
	if !ok {
		return Comment{}, false
	}
	var cm Comment
	var user map[string]any
	if graphQL {
		cm.ID = str(m["id"])
		user, _ = m["owner"].(map[string]any)
		cm.Likes = edgeCount(m, "edge_liked_by")
		if cm.Likes == nil {
			cm.Likes = firstCount(m, "comment_like_count", "like_count")
		}
		cm.Replies = edgeCount(m, "edge_threaded_comments")
	} else {
		cm.ID = str(m["pk"])
		if cm.ID == "" {
			cm.ID = str(m["id"])
		}
		user, _ = m["user"].(map[string]any)
		cm.Likes = firstCount(m, "comment_like_count", "like_count")
		cm.Replies = firstCount(m, "child_comment_count")
	}
	if cm.ID == "" {
		return Comment{}, false
	}
	if t, ok := m["text"].(string); ok && t != "" {
		cm.Text = &t
	}
	cm.CreatedAt = unixTime(m["created_at"])
	if cm.CreatedAt == nil {
		cm.CreatedAt = unixTime(m["created_at_utc"])
	}
	if user != nil {
		cm.Author.ID = nonEmpty(str(user["pk"]))
		if cm.Author.ID == nil {
			cm.Author.ID = nonEmpty(str(user["id"]))
		}
		if h, ok := user["username"].(string); ok && h != "" {
			cm.Author.Handle = &h
			link := profileURL(h)
			cm.Author.URL = &link
		}
		if n, ok := user["full_name"].(string); ok && n != "" {
			cm.Author.Name = &n
		}
		if a, ok := user["profile_pic_url"].(string); ok && a != "" {
			cm.Author.AvatarURL = &a
		}
		if v, ok := user["is_verified"].(bool); ok {
			cm.Author.Verified = &v
		}
	}
	return cm, true
}

// unixTime reads a Unix time in seconds (a number or its digits) as RFC 3339.
func unixTime(v any) *string {
	secs, err := strconv.ParseInt(str(v), 10, 64)
	if err != nil || secs <= 0 {
		return nil
	}
	t := time.Unix(secs, 0).UTC().Format(time.RFC3339)
	return &t
}

var nonEmpty = upstream.Text

// located is the post's node in a page, or why there is none.
type located struct {
	node    map[string]any
	graphQL bool // node is the web GraphQL shape, else the private API's media item
	// gated: withheld behind a login; withheld: named but withheld without
	// a gate (deleted or private).
	gated, withheld, sawJSON bool
}

// locate finds the post with code in the page's JSON data scripts, in the
// shapes find reads for post-stats.
func locate(body []byte, code string) located {
	var loc located
	nodes := 0
	for s := range htmldata.Scripts(body) {
		if !strings.HasSuffix(s.Type, "json") {
			continue
		}
		t := bytes.TrimSpace(s.Text)
		if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
			continue
		}
		v, err := decode(t)
		if err != nil {
			continue
		}
		loc.sawJSON = true
		locateIn(v, code, &loc, &nodes)
		if loc.node != nil {
			return loc
		}
	}
	return loc
}

func locateIn(v any, code string, loc *located, nodes *int) {
	if loc.node != nil || *nodes > maxNodes {
		return
	}
	*nodes++
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			locateIn(e, code, loc, nodes)
		}
	case map[string]any:
		if w, ok := t["xig_polaris_media"].(map[string]any); ok && str(w["code"]) == code {
			switch inner := w["if_not_gated_logged_out"].(type) {
			case map[string]any:
				if str(inner["code"]) == code {
					loc.node = inner
					return
				}
			case nil:
				if g, ok := w["gating_ruling"]; ok && g != nil {
					loc.gated = true
				} else {
					loc.withheld = true
				}
			}
		}
		if w, ok := t["xdt_api__v1__media__shortcode__web_info"].(map[string]any); ok {
			items, _ := w["items"].([]any)
			for _, it := range items {
				if im, ok := it.(map[string]any); ok && str(im["code"]) == code {
					loc.node = im
					return
				}
			}
		}
		for _, key := range []string{"xdt_shortcode_media", "shortcode_media"} {
			if sm, ok := t[key].(map[string]any); ok && str(sm["shortcode"]) == code {
				loc.node, loc.graphQL = sm, true
				return
			}
		}
		for _, e := range t {
			locateIn(e, code, loc, nodes)
			if loc.node != nil {
				return
			}
		}
	}
}
