package atproto

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// upstreamDefaultLimit is searchPosts' page size when no limit is sent.
const upstreamDefaultLimit = 25

// searchPostsOutput is app.bsky.feed.searchPosts' answer.
type searchPostsOutput struct {
	Cursor *string `json:"cursor"`
	// HitsTotal is optional and may be rounded or truncated.
	HitsTotal *json.Number `json:"hitsTotal"`
	Posts     *[]postView  `json:"posts"`
}

// postView is app.bsky.feed.defs#postView, the fields mapped.
type postView struct {
	URI         string           `json:"uri"`
	CID         string           `json:"cid"`
	Author      profileViewBasic `json:"author"`
	Record      *postRecord      `json:"record"`
	ReplyCount  *json.Number     `json:"replyCount"`
	RepostCount *json.Number     `json:"repostCount"`
	LikeCount   *json.Number     `json:"likeCount"`
	QuoteCount  *json.Number     `json:"quoteCount"`
	IndexedAt   string           `json:"indexedAt"`
}

// profileViewBasic is app.bsky.actor.defs#profileViewBasic, the fields
// mapped.
type profileViewBasic struct {
	DID         string `json:"did"`
	Handle      string `json:"handle"`
	DisplayName string `json:"displayName"`
}

// postRecord is the app.bsky.feed.post record inside a post view.
type postRecord struct {
	Text      *string          `json:"text"`
	CreatedAt string           `json:"createdAt"`
	Reply     *json.RawMessage `json:"reply"`
}

// searchData is the data of microblog_a/search (spec 2.7).
type searchData = creator.Page[searchItem]

type searchItem struct {
	ID        *string      `json:"id"`
	Rkey      *string      `json:"rkey"`
	CID       *string      `json:"cid"`
	URL       *string      `json:"url"`
	Text      *string      `json:"text"`
	CreatedAt *string      `json:"created_at"`
	IndexedAt *string      `json:"indexed_at"`
	Author    searchAuthor `json:"author"`
	// Counters stay null when the view omits them: unknown, not zero.
	Likes    *json.Number `json:"likes"`
	Reposts  *json.Number `json:"reposts"`
	Replies  *json.Number `json:"replies"`
	Quotes   *json.Number `json:"quotes"`
	IsReply  *bool        `json:"is_reply"`
	IsRepost *bool        `json:"is_repost"`
}

type searchAuthor struct {
	ID     *string `json:"id"`
	Handle *string `json:"handle"`
	Name   *string `json:"name"`
	URL    *string `json:"url"`
}

// searchAdapter serves microblog_a/search: query → q, and limit, sort and
// cursor under their own names. limit is sent only when the caller gave
// one, so the upstream's default page (25) applies otherwise.
func searchAdapter(get fetcher) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		q := url.Values{"q": {c.Param("query")}}
		for _, name := range []string{"limit", "sort", "cursor"} {
			if v := c.Param(name); v != "" {
				q.Set(name, v)
			}
		}
		resp, err := get(ctx, c, searchPath, q)
		if err != nil {
			return nil, classify(resp, err, c.Now)
		}
		var out searchPostsOutput
		if err := upstream.DecodeJSON(resp.Body, &out); err != nil {
			return nil, err
		}
		if out.Posts == nil {
			return nil, upstream.MalformedFault("searchPosts answer has no posts array")
		}
		pageSize := upstreamDefaultLimit
		if n, err := strconv.Atoi(c.Param("limit")); err == nil {
			pageSize = n
		}
		return mapSearch(out, pageSize), nil
	}
}

func mapSearch(out searchPostsOutput, pageSize int) searchData {
	posts := *out.Posts
	data := searchData{Items: make([]searchItem, 0, len(posts)), Count: len(posts)}
	missingCounters, badDates := false, false
	for _, p := range posts {
		item := mapPost(p)
		if item.Likes == nil || item.Reposts == nil || item.Replies == nil || item.Quotes == nil {
			missingCounters = true
		}
		if p.Record != nil && p.Record.CreatedAt != "" && item.CreatedAt == nil {
			badDates = true
		}
		data.Items = append(data.Items, item)
	}

	// The cursor is the upstream's, opaque and passed through unchanged.
	// An empty page ends the listing even when a cursor comes with it, so
	// a caller following cursors cannot loop on empty pages.
	if out.Cursor != nil && *out.Cursor != "" && len(posts) > 0 {
		data.Cursor = out.Cursor
	}
	hasMore := data.Cursor != nil
	data.HasMore = &hasMore

	if out.HitsTotal != nil {
		data.Warnings = append(data.Warnings, fmt.Sprintf(
			"The source estimates %s matching posts; the estimate may be rounded, and not every match can be reached by paging.", out.HitsTotal.String()))
	}
	if short := len(posts) > 0 && len(posts) < pageSize; short && data.Cursor != nil {
		data.Warnings = append(data.Warnings, fmt.Sprintf(
			"%s for a page size of %d although more follow: the source leaves out posts it will not show (deleted, moderated, or from blocked accounts) after matching, so pages can be short.", postsReturned(len(posts)), pageSize))
	} else if short {
		data.Warnings = append(data.Warnings, fmt.Sprintf(
			"%s for a page size of %d and no next page: the source's search may stop before every match, so the end of the listing does not prove all matches were returned.", postsReturned(len(posts)), pageSize))
	}
	if out.Cursor != nil && *out.Cursor != "" && len(posts) == 0 {
		data.Warnings = append(data.Warnings, "The source returned an empty page with a next-page token; the listing ends here.")
	}
	if missingCounters {
		data.Warnings = append(data.Warnings, "Some posts came without like, repost, reply or quote counters; those counters are null (unknown).")
	}
	if badDates {
		data.Warnings = append(data.Warnings, "Some posts carry an author-supplied creation time that is not a valid date-time; their created_at is null.")
	}
	return data
}

// postsReturned counts returned posts in words.
func postsReturned(n int) string {
	if n == 1 {
		return "1 post returned"
	}
	return strconv.Itoa(n) + " posts returned"
}

func mapPost(p postView) searchItem {
	author := mapAuthor(p.Author)
	item := searchItem{
		ID:        nonEmpty(p.URI),
		CID:       nonEmpty(p.CID),
		IndexedAt: dateTime(p.IndexedAt),
		Author:    author,
		Likes:     p.LikeCount,
		Reposts:   p.RepostCount,
		Replies:   p.ReplyCount,
		Quotes:    p.QuoteCount,
		// searchPosts returns post views, never feed items with a repost
		// reason: a repost is a separate record that search does not
		// match, so no result is a repost.
		IsRepost: ptr(false),
	}
	if rkey, ok := postRkey(p.URI); ok {
		item.Rkey = &rkey
		item.URL = ptr(profileURL(p.Author.DID, author.Handle) + "/post/" + url.PathEscape(rkey))
	}
	if p.Record != nil {
		item.Text = p.Record.Text
		item.CreatedAt = dateTime(p.Record.CreatedAt)
		isReply := p.Record.Reply != nil && string(*p.Record.Reply) != "null"
		item.IsReply = &isReply
	}
	return item
}

func mapAuthor(a profileViewBasic) searchAuthor {
	handle := validHandle(a.Handle)
	out := searchAuthor{ID: nonEmpty(a.DID), Handle: handle, Name: nonEmpty(a.DisplayName)}
	if a.DID != "" || handle != nil {
		out.URL = ptr(profileURL(a.DID, handle))
	}
	return out
}

// postRkey is the record key of a post URI,
// at://<did>/app.bsky.feed.post/<rkey>.
func postRkey(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, "at://")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] != "app.bsky.feed.post" || parts[2] == "" {
		return "", false
	}
	return parts[2], true
}

// profileURL is the web page of an account: by handle when it has a
// verified one, else by DID (which the web client also accepts).
func profileURL(did string, handle *string) string {
	id := did
	if handle != nil {
		id = *handle
	}
	return webBase + "/profile/" + url.PathEscape(id)
}

// validHandle drops the "handle.invalid" placeholder the AppView shows
// when an account's handle no longer resolves to its DID.
func validHandle(h string) *string {
	if h == "" || h == "handle.invalid" {
		return nil
	}
	return &h
}

// dateTime keeps an upstream time string when it is an RFC 3339 date-time
// (record times are written by the author's client and may be anything).
func dateTime(s string) *string {
	if s == "" {
		return nil
	}
	if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
		return nil
	}
	return &s
}

// nonEmpty is nil for "", which the views use for "not set".
var nonEmpty = upstream.Text

func ptr[T any](v T) *T { return &v }
