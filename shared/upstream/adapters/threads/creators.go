package threads

import (
	"cmp"
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// Requested fields. profileFields are profile_lookup's; the *_count
// engagement fields are totals over the source's recent window (the past
// 7 days), not lifetime counts.
const (
	profileFields = "username,name,profile_picture_url,biography,is_verified,follower_count," +
		"likes_count,quotes_count,replies_count,reposts_count,views_count"
	postFields = "id,media_type,media_url,permalink,username,text,timestamp,shortcode,thumbnail_url," +
		"is_quote_post,quoted_post,reposted_post,has_replies,link_attachment_url"
	replyFields = "id,text,username,permalink,timestamp,media_type,has_replies,is_reply,replied_to," +
		"is_verified,profile_picture_url"
	// resolveFields are all a post URL's resolution needs.
	resolveFields = "id,shortcode,permalink"

	followerField = "follower_count"
	// engagementWindowDays is the window of profile_lookup's engagement
	// totals as the source documents it.
	engagementWindowDays = 7
)

// ---- microblog_c/profile ----

// publicProfile is profile_lookup's answer.
type publicProfile struct {
	ID                string `json:"id"`
	Username          string `json:"username"`
	Name              string `json:"name"`
	ProfilePictureURL string `json:"profile_picture_url"`
	Biography         string `json:"biography"`
	IsVerified        *bool  `json:"is_verified"`
	FollowerCount     *int64 `json:"follower_count"`
	LikesCount        *int64 `json:"likes_count"`
	QuotesCount       *int64 `json:"quotes_count"`
	RepliesCount      *int64 `json:"replies_count"`
	RepostsCount      *int64 `json:"reposts_count"`
	ViewsCount        *int64 `json:"views_count"`
}

// Profile is the data of microblog_c/profile.
type Profile struct {
	creator.Profile
	Verified         *bool       `json:"verified"`
	RecentEngagement *Engagement `json:"recent_engagement"`
}

// Engagement are the account's totals over the source's recent window.
type Engagement struct {
	WindowDays int    `json:"window_days"`
	Likes      *int64 `json:"likes"`
	Replies    *int64 `json:"replies"`
	Reposts    *int64 `json:"reposts"`
	Quotes     *int64 `json:"quotes"`
	Views      *int64 `json:"views"`
}

func profile(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	var p publicProfile
	r := request{path: "/profile_lookup", query: url.Values{"username": {handle}, "fields": {profileFields}}, about: account}
	if err := get(ctx, c, r, &p); err != nil {
		return nil, err
	}
	if p.Username == "" {
		return nil, upstream.MalformedFault("profile_lookup answer has no username")
	}
	link := profileURL(p.Username)
	out := Profile{
		Profile: creator.Profile{ID: text(p.ID), Handle: text(p.Username), Name: text(p.Name), URL: &link,
			Description: text(p.Biography), AvatarURL: text(p.ProfilePictureURL), Followers: p.FollowerCount},
		Verified: p.IsVerified,
		RecentEngagement: &Engagement{WindowDays: engagementWindowDays, Likes: p.LikesCount, Replies: p.RepliesCount,
			Reposts: p.RepostsCount, Quotes: p.QuotesCount, Views: p.ViewsCount},
	}
	if out.Followers != nil {
		field := followerField
		out.FollowerSourceField = &field
	} else {
		out.Warnings = append(out.Warnings, "The source did not report the follower count: followers is null (unknown), not zero.")
	}
	if out.ID == nil {
		out.Warnings = append(out.Warnings, "The source did not send the account's id: id is null.")
	}
	out.Warnings = append(out.Warnings,
		"The source does not report how many posts an account has: posts_count is null (unknown).",
		"recent_engagement covers the account's posts over the source's recent window (the past 7 days), not their lifetime.")
	return out, nil
}

// ---- microblog_c/posts ----

// mediaObject is a Threads media object as the discovery and replies
// edges return it.
type mediaObject struct {
	ID                string          `json:"id"`
	MediaType         string          `json:"media_type"`
	MediaURL          string          `json:"media_url"`
	Permalink         string          `json:"permalink"`
	Username          string          `json:"username"`
	Text              string          `json:"text"`
	Timestamp         string          `json:"timestamp"`
	Shortcode         string          `json:"shortcode"`
	ThumbnailURL      string          `json:"thumbnail_url"`
	IsQuotePost       *bool           `json:"is_quote_post"`
	QuotedPost        json.RawMessage `json:"quoted_post"`
	RepostedPost      json.RawMessage `json:"reposted_post"`
	HasReplies        *bool           `json:"has_replies"`
	LinkAttachmentURL string          `json:"link_attachment_url"`
	IsReply           *bool           `json:"is_reply"`
	RepliedTo         json.RawMessage `json:"replied_to"`
	IsVerified        *bool           `json:"is_verified"`
	ProfilePictureURL string          `json:"profile_picture_url"`
}

// mediaPage is a page of media objects; Data is a pointer so an answer
// without it (a changed shape) is told from an empty page.
type mediaPage struct {
	Data   *[]mediaObject `json:"data"`
	Paging *paging        `json:"paging"`
}

// getPage fetches a page of media objects and checks its shape.
func getPage(ctx context.Context, c *upstream.Call, r request) (*mediaPage, error) {
	var page mediaPage
	if err := get(ctx, c, r, &page); err != nil {
		return nil, err
	}
	if page.Data == nil {
		return nil, upstream.MalformedFault("%s answer has no data list", r.path)
	}
	for _, m := range *page.Data {
		if m.ID == "" {
			return nil, upstream.MalformedFault("%s: a media object has no id", r.path)
		}
	}
	return &page, nil
}

// Posts is the data of microblog_c/posts.
// has_more is always known.
type Posts struct {
	Handle string `json:"handle"`
	creator.Page[Post]
}

// Post is one post: the common fields, then the platform's extras. The
// source reports no counters for another account's posts, so counts stay
// null (the fields are kept, so the shape is every creator platform's).
type Post struct {
	creator.Post
	Type       string  `json:"type"`
	MediaType  *string `json:"media_type"`
	MediaURL   *string `json:"media_url"`
	Code       *string `json:"code"`
	HasReplies *bool   `json:"has_replies"`
	QuotedID   *string `json:"quoted_id"`
	RepostedID *string `json:"reposted_id"`
	LinkURL    *string `json:"link_url"`
}

// repostFacade is the media type of a repost: another account's post
// shown on this one's profile.
const repostFacade = "REPOST_FACADE"

func post(m mediaObject, handle string) Post {
	p := Post{Post: creator.Post{ID: m.ID, URL: text(m.Permalink), Text: text(m.Text), CreatedAt: timestamp(m.Timestamp)}, Type: "post",
		MediaType: text(m.MediaType), MediaURL: text(m.MediaURL), Code: text(m.Shortcode), HasReplies: m.HasReplies,
		QuotedID: ref(m.QuotedPost), RepostedID: ref(m.RepostedPost), LinkURL: text(m.LinkAttachmentURL)}
	if p.URL == nil && m.Shortcode != "" {
		// The source omits the permalink of media flagged for copyright.
		link := profileURL(cmp.Or(m.Username, handle)) + "/post/" + url.PathEscape(m.Shortcode)
		p.URL = &link
	}
	switch {
	case m.ThumbnailURL != "":
		p.ThumbnailURL = &m.ThumbnailURL
	case m.MediaType == "IMAGE":
		p.ThumbnailURL = text(m.MediaURL)
	}
	switch {
	case m.MediaType == repostFacade || p.RepostedID != nil:
		p.Type = "repost"
	case (m.IsQuotePost != nil && *m.IsQuotePost) || p.QuotedID != nil:
		p.Type = "quote"
	}
	return p
}

// countersWarning says why every post's counts are null.
const countersWarning = "The source reports per-post counters only to a post's own author: counts.likes, counts.comments, " +
	"counts.shares and counts.views are null (unknown), not zero; has_replies says whether a post has replies."

// posts reads a public account's latest posts, newest first, as the
// source's profile discovery lists them.
func posts(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	q := url.Values{"username": {handle}, "fields": {postFields}, "limit": {c.Param("limit")}}
	sent, err := pageCursor(c, q)
	if err != nil {
		return nil, err
	}
	page, err := getPage(ctx, c, request{path: "/profile_posts", query: q, about: account, cursor: sent})
	if err != nil {
		return nil, err
	}
	out := Posts{Handle: handle, Page: creator.Page[Post]{Items: make([]Post, 0, len(*page.Data))}}
	for _, m := range *page.Data {
		out.Items = append(out.Items, post(m, handle))
	}
	out.Count = len(out.Items)
	out.Cursor = page.Paging.nextCursor()
	out.More(out.Cursor != nil)
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, countersWarning)
	}
	return out, nil
}

// ---- microblog_c/comments ----

// Comments is the data of microblog_c/comments.
// has_more is always known.
type Comments struct {
	PostID string `json:"post_id"`
	creator.Page[Comment]
}

// Comment is one top-level reply: the common fields, then the platform's
// extras.
type Comment struct {
	creator.Comment[Author]
	URL         *string `json:"url"`
	HasReplies  *bool   `json:"has_replies"`
	InReplyToID *string `json:"in_reply_to_id"`
	MediaType   *string `json:"media_type"`
}

// Author is who wrote a reply; the source gives neither the id nor the
// display name of a reply's author, so both stay null.
type Author struct {
	creator.Author
	Verified *bool `json:"verified"`
}

var (
	mediaID = regexp.MustCompile(`^[0-9]{1,25}$`)
	// postPath is a post page's path: /@<username>/post/<code>[/].
	postPath = regexp.MustCompile(`^/@([A-Za-z0-9._]{1,30})/post/([A-Za-z0-9_-]{1,64})/?$`)
)

// resolvePages bounds the search for a post URL's media id: the author's
// latest 200 posts (two pages of the source's largest size).
const (
	resolvePages    = 2
	resolvePageSize = "100"
)

// comments samples a post's top-level replies, newest first.
func comments(ctx context.Context, c *upstream.Call) (any, error) {
	q := url.Values{"fields": {replyFields}, "reverse": {"true"}, "limit": {c.Param("limit")}}
	sent, err := pageCursor(c, q)
	if err != nil {
		return nil, err
	}
	id, err := postID(ctx, c, c.Param("post_id"))
	if err != nil {
		return nil, err
	}
	page, err := getPage(ctx, c, request{path: "/" + id + "/replies", query: q, about: media, cursor: sent})
	if err != nil {
		return nil, err
	}
	out := Comments{PostID: id, Page: creator.Page[Comment]{Items: make([]Comment, 0, len(*page.Data))}}
	unnamed := 0
	for _, m := range *page.Data {
		cm := Comment{
			Comment: creator.Comment[Author]{ID: m.ID, Text: text(m.Text), CreatedAt: timestamp(m.Timestamp),
				Author: Author{Author: creator.Author{Handle: text(m.Username), AvatarURL: text(m.ProfilePictureURL)}, Verified: m.IsVerified}},
			URL: text(m.Permalink), HasReplies: m.HasReplies, InReplyToID: ref(m.RepliedTo), MediaType: text(m.MediaType)}
		if m.Username != "" {
			link := profileURL(m.Username)
			cm.Author.URL = &link
		} else {
			unnamed++
		}
		out.Items = append(out.Items, cm)
	}
	out.Count = len(out.Items)
	out.Cursor = page.Paging.nextCursor()
	out.More(out.Cursor != nil)
	if out.Count > 0 {
		out.Warnings = append(out.Warnings,
			"Top-level replies only, newest first; replies to replies are not listed (has_replies says which have some).",
			"The source reports no like or reply counts of replies: likes and replies are null (unknown), not zero.")
	}
	switch {
	case unnamed == 1:
		out.Warnings = append(out.Warnings, "1 reply is from a private account, which the source does not name: its author is null.")
	case unnamed > 1:
		out.Warnings = append(out.Warnings, strconv.Itoa(unnamed)+
			" replies are from private accounts, which the source does not name: their authors are null.")
	}
	return out, nil
}

// postID is the media id of post_id: the id itself, or the id of the post
// a post URL names, found among its author's latest posts (the source has
// no lookup by URL or code). The registry has held a URL to the platform's
// hosts and made it absolute.
func postID(ctx context.Context, c *upstream.Call, raw string) (string, error) {
	if mediaID.MatchString(raw) {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", upstream.InvalidParameterFault("post_id", "invalid_post_id",
			"post_id must be a numeric media id or a post URL (…/@<username>/post/<code>).")
	}
	m := postPath.FindStringSubmatch(u.Path)
	if m == nil {
		return "", upstream.InvalidParameterFault("post_id", "not_a_post",
			"post_id must be a numeric media id or a post URL (…/@<username>/post/<code>).")
	}
	username, code := strings.ToLower(m[1]), m[2]
	q := url.Values{"username": {username}, "fields": {resolveFields}, "limit": {resolvePageSize}}
	for range resolvePages {
		page, err := getPage(ctx, c, request{path: "/profile_posts", query: q, about: account})
		if err != nil {
			return "", err
		}
		for _, p := range *page.Data {
			if p.Shortcode == code || strings.HasSuffix(strings.TrimSuffix(p.Permalink, "/"), "/post/"+code) {
				return p.ID, nil
			}
		}
		next := page.Paging.nextCursor()
		if next == nil {
			break
		}
		q.Set("after", *next)
	}
	return "", upstream.InvalidParameterFault("post_id", "post_not_resolved",
		"The post URL is not among its author's latest 200 posts (or is a reply), and the source has no lookup by URL: "+
			"send the post's numeric media id (the id microblog_c/posts returns).")
}
