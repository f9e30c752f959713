package atproto

// The creator building blocks (issue 16) over the same XRPC routes as
// search and profile, one query each:
//
//	microblog_a/posts     app.bsky.feed.getAuthorFeed (actor, limit, cursor, filter)
//	microblog_a/comments  app.bsky.feed.getPostThread (uri, depth=1, parentHeight=0)

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

const (
	authorFeedPath = "/xrpc/app.bsky.feed.getAuthorFeed"
	postThreadPath = "/xrpc/app.bsky.feed.getPostThread"

	// postCollection is the collection of post records in at:// URIs.
	postCollection = "app.bsky.feed.post"

	// The $type of the views the adapters tell apart.
	reasonRepostType = "app.bsky.feed.defs#reasonRepost"
	notFoundPostType = "app.bsky.feed.defs#notFoundPost"
	blockedPostType  = "app.bsky.feed.defs#blockedPost"

	// The embed views a thumbnail is read from.
	imagesViewType          = "app.bsky.embed.images#view"
	videoViewType           = "app.bsky.embed.video#view"
	externalViewType        = "app.bsky.embed.external#view"
	recordWithMediaViewType = "app.bsky.embed.recordWithMedia#view"

	// creatorDefaultLimit is the page size when a call carries none (the
	// registry's default; the source's own is 50).
	creatorDefaultLimit = 20
)

// actorView is app.bsky.actor.defs#profileViewBasic, the fields mapped.
type actorView struct {
	DID         string `json:"did"`
	Handle      string `json:"handle"`
	DisplayName string `json:"displayName"`
	Avatar      string `json:"avatar"`
}

// creatorPost is app.bsky.feed.defs#postView as the author feed and the
// thread carry it, the fields mapped. Counters are json.Number so that
// any value keeps its digits.
type creatorPost struct {
	URI         string         `json:"uri"`
	CID         string         `json:"cid"`
	Author      actorView      `json:"author"`
	Record      *creatorRecord `json:"record"`
	Embed       *embedView     `json:"embed"`
	ReplyCount  *json.Number   `json:"replyCount"`
	RepostCount *json.Number   `json:"repostCount"`
	LikeCount   *json.Number   `json:"likeCount"`
	QuoteCount  *json.Number   `json:"quoteCount"`
	IndexedAt   string         `json:"indexedAt"`
}

// creatorRecord is the app.bsky.feed.post record of a post view.
type creatorRecord struct {
	Text      *string  `json:"text"`
	CreatedAt string   `json:"createdAt"`
	Langs     []string `json:"langs"`
	Reply     *struct {
		Parent *struct {
			URI string `json:"uri"`
		} `json:"parent"`
	} `json:"reply"`
}

// embedView is the union of embed views, the fields a thumbnail comes
// from: images#view images[].thumb, video#view thumbnail, external#view
// external.thumb, and recordWithMedia#view's media (one of those).
type embedView struct {
	Type   string `json:"$type"`
	Images []struct {
		Thumb string `json:"thumb"`
	} `json:"images"`
	Thumbnail string `json:"thumbnail"`
	External  *struct {
		Thumb string `json:"thumb"`
	} `json:"external"`
	Media *embedView `json:"media"`
}

// thumbnail is the post's first image, video or link-card thumbnail.
func (e *embedView) thumbnail() *string {
	if e == nil {
		return nil
	}
	switch e.Type {
	case imagesViewType:
		if len(e.Images) > 0 {
			return nonEmpty(e.Images[0].Thumb)
		}
	case videoViewType:
		return nonEmpty(e.Thumbnail)
	case externalViewType:
		if e.External != nil {
			return nonEmpty(e.External.Thumb)
		}
	case recordWithMediaViewType:
		if e.Media != nil && e.Media.Type != recordWithMediaViewType {
			return e.Media.thumbnail()
		}
	}
	return nil
}

func (p *creatorPost) basicAuthor() profileViewBasic {
	return profileViewBasic{DID: p.Author.DID, Handle: p.Author.Handle, DisplayName: p.Author.DisplayName}
}

// webURL is the post's page on the web client; nil when its URI is not a
// post URI.
func (p *creatorPost) webURL() *string {
	rkey, ok := postRkey(p.URI)
	if !ok {
		return nil
	}
	return ptr(profileURL(p.Author.DID, validHandle(p.Author.Handle)) + "/post/" + url.PathEscape(rkey))
}

// --- microblog_a/posts ---

// authorFeedOutput is app.bsky.feed.getAuthorFeed's answer.
type authorFeedOutput struct {
	Cursor *string         `json:"cursor"`
	Feed   *[]feedViewPost `json:"feed"`
}

// feedViewPost is app.bsky.feed.defs#feedViewPost: a post, and why it is
// in the feed (reasonRepost for the account's reposts).
type feedViewPost struct {
	Post   *creatorPost `json:"post"`
	Reason *struct {
		Type      string `json:"$type"`
		IndexedAt string `json:"indexedAt"`
	} `json:"reason"`
}

// postsData is the data of microblog_a/posts
// (shared/schemas/data/microblog_a__posts.json).
// has_more is always known. The items are the platform's own rather than
// creator.Post: their counters are the source's numbers passed through as
// it wrote them, and they carry the source's record ids first.
type postsData = creator.Page[postItem]

type postItem struct {
	ID           *string      `json:"id"`
	Rkey         *string      `json:"rkey"`
	CID          *string      `json:"cid"`
	URL          *string      `json:"url"`
	Text         *string      `json:"text"`
	CreatedAt    *string      `json:"created_at"`
	IndexedAt    *string      `json:"indexed_at"`
	Langs        []string     `json:"langs"`
	ThumbnailURL *string      `json:"thumbnail_url"`
	Author       searchAuthor `json:"author"`
	Counts       postCounts   `json:"counts"`
	IsReply      *bool        `json:"is_reply"`
	InReplyToID  *string      `json:"in_reply_to_id"`
	IsRepost     bool         `json:"is_repost"`
	RepostedAt   *string      `json:"reposted_at"`
}

// postCounts are the creator counters; Views is always null (the source
// does not report views).
type postCounts struct {
	Likes    *json.Number `json:"likes"`
	Comments *json.Number `json:"comments"`
	Shares   *json.Number `json:"shares"`
	Views    *json.Number `json:"views"`
	Quotes   *json.Number `json:"quotes"`
}

// postsAdapter serves microblog_a/posts: handle → actor, limit, cursor,
// include_replies → filter; reposts are dropped here unless asked for,
// since no filter of the source leaves them out.
func postsAdapter(get fetcher) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		q := url.Values{"actor": {c.Param("handle")}, "filter": {"posts_no_replies"}}
		if c.Param("include_replies") == "true" {
			q.Set("filter", "posts_with_replies")
		}
		for _, name := range []string{"limit", "cursor"} {
			if v := c.Param(name); v != "" {
				q.Set(name, v)
			}
		}
		resp, err := get(ctx, c, authorFeedPath, q)
		if err != nil {
			if f := profileNotFound(resp); f != nil {
				f.Reason = strings.Replace(f.Reason, "getProfile", "getAuthorFeed", 1)
				return nil, f
			}
			return nil, classify(resp, err, c.Now)
		}
		var out authorFeedOutput
		if err := upstream.DecodeJSON(resp.Body, &out); err != nil {
			return nil, err
		}
		if out.Feed == nil {
			return nil, upstream.MalformedFault("getAuthorFeed answer has no feed array")
		}
		limit := creatorDefaultLimit
		if n, err := strconv.Atoi(c.Param("limit")); err == nil {
			limit = n
		}
		data, err := mapPosts(out, c.Param("include_reposts") == "true", limit)
		if err != nil {
			return nil, err
		}
		return data, nil
	}
}

func mapPosts(out authorFeedOutput, withReposts bool, limit int) (postsData, error) {
	feed := *out.Feed
	data := postsData{Items: make([]postItem, 0, len(feed))}
	data.More(false)
	reposts, unreadable, missingCounters, badDates := 0, 0, false, false
	for _, fv := range feed {
		if fv.Post == nil || fv.Post.URI == "" {
			unreadable++
			continue
		}
		isRepost := fv.Reason != nil && fv.Reason.Type == reasonRepostType
		if isRepost && !withReposts {
			reposts++
			continue
		}
		item := mapFeedPost(*fv.Post)
		if isRepost {
			item.IsRepost = true
			item.RepostedAt = dateTime(fv.Reason.IndexedAt)
		}
		c := item.Counts
		if c.Likes == nil || c.Comments == nil || c.Shares == nil || c.Quotes == nil {
			missingCounters = true
		}
		if r := fv.Post.Record; r != nil && r.CreatedAt != "" && item.CreatedAt == nil {
			badDates = true
		}
		data.Items = append(data.Items, item)
	}
	if len(feed) > 0 && unreadable == len(feed) {
		// Every entry lacks its post: the shape changed, not the account.
		return postsData{}, upstream.MalformedFault("getAuthorFeed entries carry no post (%d entries)", len(feed))
	}
	data.Count = len(data.Items)

	// The cursor is the source's, passed through unchanged. A page the
	// source sent empty ends the listing (no loop on empty pages); a page
	// emptied here by leaving reposts out does not.
	if out.Cursor != nil && *out.Cursor != "" && len(feed) > 0 {
		data.Cursor = out.Cursor
		data.More(true)
	}

	if data.Count > 0 {
		data.Warnings = append(data.Warnings, "The source does not report views: counts.views is null (unknown), not zero.")
	}
	if reposts > 0 {
		were := "were reposts of other accounts' posts"
		if reposts == 1 {
			were = "was a repost of another account's post"
		}
		data.Warnings = append(data.Warnings, fmt.Sprintf(
			"%d of the %d entries the source returned for a page size of %d %s, left out (include_reposts=false), so this page is shorter.", reposts, len(feed), limit, were))
	}
	if unreadable > 0 {
		data.Warnings = append(data.Warnings, fmt.Sprintf("%d entries of the source's page carried no post and were left out.", unreadable))
	}
	if out.Cursor != nil && *out.Cursor != "" && len(feed) == 0 {
		data.Warnings = append(data.Warnings, "The source returned an empty page with a next-page token; the listing ends here.")
	}
	if missingCounters {
		data.Warnings = append(data.Warnings, "Some posts came without like, reply, repost or quote counters; those counters are null (unknown).")
	}
	if badDates {
		data.Warnings = append(data.Warnings, "Some posts carry an author-supplied creation time that is not a valid date-time; their created_at is null.")
	}
	return data, nil
}

func mapFeedPost(p creatorPost) postItem {
	item := postItem{
		ID:           nonEmpty(p.URI),
		CID:          nonEmpty(p.CID),
		URL:          p.webURL(),
		IndexedAt:    dateTime(p.IndexedAt),
		ThumbnailURL: p.Embed.thumbnail(),
		Author:       mapAuthor(p.basicAuthor()),
		Counts: postCounts{
			Likes:    p.LikeCount,
			Comments: p.ReplyCount,
			Shares:   p.RepostCount,
			Quotes:   p.QuoteCount,
		},
	}
	if rkey, ok := postRkey(p.URI); ok {
		item.Rkey = &rkey
	}
	if r := p.Record; r != nil {
		item.Text = r.Text
		item.CreatedAt = dateTime(r.CreatedAt)
		if len(r.Langs) > 0 {
			item.Langs = r.Langs
		}
		item.IsReply = ptr(r.Reply != nil)
		if r.Reply != nil && r.Reply.Parent != nil {
			item.InReplyToID = nonEmpty(r.Reply.Parent.URI)
		}
	}
	return item
}

// --- microblog_a/comments ---

// postThreadOutput is app.bsky.feed.getPostThread's answer.
type postThreadOutput struct {
	Thread *threadNode `json:"thread"`
}

// threadNode is the union threadViewPost | notFoundPost | blockedPost.
type threadNode struct {
	Type     string       `json:"$type"`
	URI      string       `json:"uri"`
	NotFound bool         `json:"notFound"`
	Blocked  bool         `json:"blocked"`
	Post     *creatorPost `json:"post"`
	Replies  []threadNode `json:"replies"`
}

type nodeKind int

const (
	nodeUnknown nodeKind = iota
	nodePost
	nodeNotFound
	nodeBlocked
)

func (n *threadNode) kind() nodeKind {
	switch {
	case n.Type == notFoundPostType || n.NotFound:
		return nodeNotFound
	case n.Type == blockedPostType || n.Blocked:
		return nodeBlocked
	case n.Post != nil && n.Post.URI != "":
		return nodePost
	}
	return nodeUnknown
}

// commentsData is the data of microblog_a/comments
// (shared/schemas/data/microblog_a__comments.json).
// has_more is always known. The items are the platform's own rather than
// creator.Comment, for the reason postsData's are.
type commentsData struct {
	PostID     *string      `json:"post_id"`
	PostURL    *string      `json:"post_url"`
	ReplyCount *json.Number `json:"reply_count"`
	creator.Page[commentItem]
}

type commentItem struct {
	ID          *string        `json:"id"`
	URL         *string        `json:"url"`
	Text        *string        `json:"text"`
	CreatedAt   *string        `json:"created_at"`
	IndexedAt   *string        `json:"indexed_at"`
	Author      creator.Author `json:"author"`
	Likes       *json.Number   `json:"likes"`
	Replies     *json.Number   `json:"replies"`
	Reposts     *json.Number   `json:"reposts"`
	Quotes      *json.Number   `json:"quotes"`
	InReplyToID *string        `json:"in_reply_to_id"`
}

// commentsAdapter serves microblog_a/comments: post_id → the thread's uri,
// with depth 1 (direct replies) and no parents. The source does not page a
// thread, so the replies are sorted newest first here and paged with a
// cursor of Meridian's own (the position after the last reply returned).
func commentsAdapter(get fetcher) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		uri, ok := postURI(c.Param("post_id"))
		if !ok {
			return nil, upstream.InvalidParameterFault("post_id", "invalid_post_id",
				"post_id must be an at:// URI of a post or the post's page URL (…/profile/<handle or DID>/post/<record key>).")
		}
		after, err := decodeReplyCursor(c.Param("cursor"))
		if err != nil {
			return nil, err
		}
		limit := creatorDefaultLimit
		if n, err := strconv.Atoi(c.Param("limit")); err == nil && n > 0 {
			limit = n
		}
		q := url.Values{"uri": {uri}, "depth": {"1"}, "parentHeight": {"0"}}
		resp, err := get(ctx, c, postThreadPath, q)
		if err != nil {
			if f := threadNotFound(resp); f != nil {
				return nil, f
			}
			return nil, classify(resp, err, c.Now)
		}
		var out postThreadOutput
		if err := upstream.DecodeJSON(resp.Body, &out); err != nil {
			return nil, err
		}
		if out.Thread == nil {
			return nil, upstream.MalformedFault("getPostThread answer has no thread")
		}
		switch out.Thread.kind() {
		case nodeNotFound:
			return nil, upstream.NotFoundFault("getPostThread: the thread's post is not found")
		case nodeBlocked:
			// Only an authenticated viewer meets a block; the account in
			// use cannot see the post, which another route might.
			return nil, &upstream.Fault{Kind: upstream.Rejected, Reason: "getPostThread: the post's author and the session's account block each other"}
		case nodeUnknown:
			return nil, upstream.MalformedFault("getPostThread thread is neither a post, a missing post nor a blocked post (type %q)", safeType(out.Thread.Type))
		}
		return mapComments(out.Thread, after, limit), nil
	}
}

// threadNotFound recognises getPostThread's 400 NotFound ("Post not
// found: <uri>"), also the answer for a handle that resolves to no one.
func threadNotFound(resp *upstream.Response) *upstream.Fault {
	if resp == nil || resp.Status != http.StatusBadRequest {
		return nil
	}
	if e, ok := readXRPCError(resp); ok && e.Name == "NotFound" {
		return upstream.NotFoundFault("getPostThread: post not found")
	}
	return nil
}

// replyKey orders replies newest first: by the source's indexing time
// (the author's own creation time when that is missing), then by URI so
// the order is total and a cursor can name a position in it.
type replyKey struct {
	at  time.Time
	uri string
}

// before reports whether k sorts before o (k is newer).
func (k replyKey) before(o replyKey) bool {
	if !k.at.Equal(o.at) {
		return k.at.After(o.at)
	}
	return k.uri > o.uri
}

func keyOf(p *creatorPost) replyKey {
	k := replyKey{uri: p.URI}
	for _, s := range []string{p.IndexedAt, recordCreatedAt(p)} {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			k.at = t.UTC()
			break
		}
	}
	return k
}

func recordCreatedAt(p *creatorPost) string {
	if p.Record == nil {
		return ""
	}
	return p.Record.CreatedAt
}

// The cursor is base64url("<RFC 3339 time> <URI>") of the last reply
// returned: the next page starts after it, so replies added meanwhile
// (newer, so earlier in the order) shift nothing.
func encodeReplyCursor(k replyKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(k.at.Format(time.RFC3339Nano) + " " + k.uri))
}

func decodeReplyCursor(s string) (*replyKey, error) {
	if s == "" {
		return nil, nil
	}
	bad := upstream.InvalidParameterFault("cursor", "invalid_cursor",
		"cursor is not one this endpoint returned; pass back the cursor of the previous page unchanged, or omit it for the first page.")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	at, uri, ok := strings.Cut(string(raw), " ")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil || !strings.HasPrefix(uri, "at://") {
		return nil, bad
	}
	return &replyKey{at: t.UTC(), uri: uri}, nil
}

func mapComments(thread *threadNode, after *replyKey, limit int) commentsData {
	anchor := thread.Post
	data := commentsData{
		PostID:     nonEmpty(anchor.URI),
		PostURL:    anchor.webURL(),
		ReplyCount: anchor.ReplyCount,
		Page:       creator.Page[commentItem]{Items: []commentItem{}},
	}
	data.More(false)
	var replies []*creatorPost
	withheld, unreadable := 0, 0
	for i := range thread.Replies {
		switch n := &thread.Replies[i]; n.kind() {
		case nodePost:
			replies = append(replies, n.Post)
		case nodeNotFound, nodeBlocked:
			withheld++
		default:
			unreadable++
		}
	}
	sort.SliceStable(replies, func(i, j int) bool { return keyOf(replies[i]).before(keyOf(replies[j])) })

	start := 0
	if after != nil {
		start = sort.Search(len(replies), func(i int) bool { return after.before(keyOf(replies[i])) })
	}
	end := min(start+limit, len(replies))
	missingCounters, badDates := false, false
	for _, p := range replies[start:end] {
		item := mapComment(p)
		if item.Likes == nil || item.Replies == nil {
			missingCounters = true
		}
		if p.Record != nil && p.Record.CreatedAt != "" && item.CreatedAt == nil {
			badDates = true
		}
		data.Items = append(data.Items, item)
	}
	data.Count = len(data.Items)
	if end < len(replies) {
		data.More(true)
		data.Cursor = ptr(encodeReplyCursor(keyOf(replies[end-1])))
	}

	if data.Count > 0 {
		data.Warnings = append(data.Warnings, "Direct replies only, newest first: the source returns a thread's replies in one answer, and replies to replies are counted in replies, not listed.")
	}
	if withheld > 0 {
		data.Warnings = append(data.Warnings, fmt.Sprintf(
			"%d replies were left out: the source shows them only as deleted or as from accounts blocked in either direction.", withheld))
	}
	if unreadable > 0 {
		data.Warnings = append(data.Warnings, fmt.Sprintf("%d replies in the source's answer could not be read and were left out.", unreadable))
	}
	if n, err := strconv.ParseInt(anchor.replyCount(), 10, 64); err == nil && n > int64(len(thread.Replies)) && after == nil {
		data.Warnings = append(data.Warnings, fmt.Sprintf(
			"The source counts %d replies but returned %d: replies it withholds (deleted, hidden by the post's author, moderated or from blocked accounts) are not listed.", n, len(thread.Replies)))
	}
	if missingCounters {
		data.Warnings = append(data.Warnings, "Some replies came without like or reply counters; those are null (unknown).")
	}
	if badDates {
		data.Warnings = append(data.Warnings, "Some replies carry an author-supplied creation time that is not a valid date-time; their created_at is null.")
	}
	return data
}

func (p *creatorPost) replyCount() string {
	if p.ReplyCount == nil {
		return ""
	}
	return p.ReplyCount.String()
}

func mapComment(p *creatorPost) commentItem {
	a := mapAuthor(p.basicAuthor())
	item := commentItem{
		ID:        nonEmpty(p.URI),
		URL:       p.webURL(),
		IndexedAt: dateTime(p.IndexedAt),
		Author:    creator.Author{ID: a.ID, Handle: a.Handle, Name: a.Name, URL: a.URL, AvatarURL: nonEmpty(p.Author.Avatar)},
		Likes:     p.LikeCount,
		Replies:   p.ReplyCount,
		Reposts:   p.RepostCount,
		Quotes:    p.QuoteCount,
	}
	if r := p.Record; r != nil {
		item.Text = r.Text
		item.CreatedAt = dateTime(r.CreatedAt)
		if r.Reply != nil && r.Reply.Parent != nil {
			item.InReplyToID = nonEmpty(r.Reply.Parent.URI)
		}
	}
	return item
}

// postURI turns a post reference into the at:// URI getPostThread takes:
// an at:// URI of a post record, or a post page URL
// (/profile/<handle or DID>/post/<rkey>; the registry has checked its host).
// A handle stays in the URI, which the source resolves; handles are
// case-insensitive, so it is lowercased, while a DID is kept as written.
func postURI(v string) (string, bool) {
	var authority, rkey string
	if rest, ok := strings.CutPrefix(v, "at://"); ok {
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[1] != postCollection {
			return "", false
		}
		authority, rkey = parts[0], parts[2]
	} else {
		abs := v
		switch {
		case strings.HasPrefix(v, "//"):
			abs = "https:" + v
		case !strings.Contains(v, "://"):
			abs = "https://" + v
		}
		u, err := url.Parse(abs)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return "", false
		}
		parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"), "/"), "/")
		if len(parts) != 4 || parts[0] != "profile" || parts[2] != "post" {
			return "", false
		}
		authority, rkey = parts[1], parts[3]
	}
	if authority == "" || rkey == "" || rkey == "." || rkey == ".." ||
		strings.ContainsAny(authority, "/?#@ ") || strings.ContainsAny(rkey, "/?#@ ") {
		return "", false
	}
	if !strings.HasPrefix(authority, "did:") {
		authority = strings.ToLower(authority)
	}
	return "at://" + authority + "/" + postCollection + "/" + rkey, true
}

// safeType keeps a $type readable in a reason.
func safeType(t string) string {
	if len(t) > 64 {
		return t[:64] + "..."
	}
	return t
}
