package tiktok

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// The video query's bounds, as the source documents them.
const (
	// windowDays: end_date may be at most 30 days after start_date; a
	// window here spans 30 calendar days, both ends included.
	windowDays = 30
	// queryPage is max_count: the most videos one query answers.
	queryPage = 100
	// maxQueries bounds the video queries of one call (the source meters
	// requests per day): a month of posts in one or two, or four empty
	// months looked through.
	maxQueries = 4
	// queryMargin: no further query is started with less time than this
	// left, so that what was read is answered rather than lost to the
	// deadline.
	queryMargin = 3 * time.Second
)

// dayLayout is the source's date format (UTC days).
const dayLayout = "20060102"

// floor is the earliest day a post can be from (the oldest accounts'
// videos, musical.ly's, are from 2014): no window reaches before it.
var floor = time.Date(2014, 1, 1, 0, 0, 0, 0, time.UTC)

// videoQuery is the body of POST /v2/research/video/query/.
type videoQuery struct {
	Query     queryGroup `json:"query"`
	StartDate string     `json:"start_date"`
	EndDate   string     `json:"end_date"`
	MaxCount  int        `json:"max_count"`
	Cursor    *int64     `json:"cursor,omitempty"`
	SearchID  string     `json:"search_id,omitempty"`
}

type queryGroup struct {
	And []condition `json:"and"`
}

type condition struct {
	Operation   string   `json:"operation"`
	FieldName   string   `json:"field_name"`
	FieldValues []string `json:"field_values"`
}

// videoPage is the video query's data.
type videoPage struct {
	Videos   []videoRecord `json:"videos"`
	Cursor   flexInt       `json:"cursor"`
	HasMore  bool          `json:"has_more"`
	SearchID string        `json:"search_id"`
}

// videoRecord is one video. Answers of 2022–2023 named its id video_id.
type videoRecord struct {
	ID               flexID   `json:"id"`
	VideoID          flexID   `json:"video_id"`
	CreateTime       flexInt  `json:"create_time"`
	Username         string   `json:"username"`
	RegionCode       *string  `json:"region_code"`
	VideoDescription *string  `json:"video_description"`
	VideoDuration    flexInt  `json:"video_duration"`
	HashtagNames     []string `json:"hashtag_names"`
	ViewCount        flexInt  `json:"view_count"`
	LikeCount        flexInt  `json:"like_count"`
	CommentCount     flexInt  `json:"comment_count"`
	ShareCount       flexInt  `json:"share_count"`
	FavouritesCount  flexInt  `json:"favourites_count"`
}

func (v videoRecord) id() string {
	if v.ID != "" {
		return string(v.ID)
	}
	return string(v.VideoID)
}

// video is a record with its id as a number, for ordering.
type video struct {
	rec videoRecord
	id  string
	n   uint64
}

// postsCursor is the posts cursor's content; callers see it only as an
// opaque token.
type postsCursor struct {
	// End is the newest day (YYYYMMDD) the next page reads from.
	End string `json:"e"`
	// Before, when set, keeps only videos with a smaller id: those after
	// the last one returned (ids grow with time).
	Before string `json:"b,omitempty"`
	// Served is how many posts the pages so far returned, and Videos the
	// account's video count when the first page read it.
	Served int    `json:"n"`
	Videos *int64 `json:"v,omitempty"`
}

const cursorPrefix = "v1."

func (p postsCursor) encode() string {
	raw, _ := json.Marshal(p)
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// decodePostsCursor reads a cursor this route handed out; anything else
// is the caller's 422.
func decodePostsCursor(s string, today time.Time) (postsCursor, error) {
	bad := upstream.InvalidParameterFault("cursor", "invalid_cursor",
		"cursor is not a token from a previous response; pass it back unchanged.")
	var p postsCursor
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, cursorPrefix))
	if !strings.HasPrefix(s, cursorPrefix) || err != nil || json.Unmarshal(raw, &p) != nil {
		return p, bad
	}
	end, err := time.Parse(dayLayout, p.End)
	if err != nil || end.After(today) || p.Served < 0 || (p.Before != "" && !digits(p.Before)) ||
		(p.Videos != nil && *p.Videos < 0) {
		return p, bad
	}
	return p, nil
}

func byUsername(handle string) queryGroup {
	return queryGroup{And: []condition{{Operation: "EQ", FieldName: "username", FieldValues: []string{handle}}}}
}

// window reads every video of the account created from start to end (UTC
// days, both included), following the source's cursor and search_id while
// it has more, within budget queries. complete is false when the budget
// or the deadline stopped it first.
func (r *research) window(ctx context.Context, c *upstream.Call, handle string, start, end time.Time, budget int) (vids []video, used int, complete bool, err error) {
	body := videoQuery{Query: byUsername(handle), StartDate: start.Format(dayLayout), EndDate: end.Format(dayLayout), MaxCount: queryPage}
	for used < budget {
		if used > 0 && deadlineNear(ctx) {
			return vids, used, false, nil
		}
		var page videoPage
		_, err := post(ctx, r, c, videoQueryPath, videoFields, body, &page)
		used++
		if err != nil {
			return nil, used, false, err
		}
		for _, rec := range page.Videos {
			id := rec.id()
			n, perr := strconv.ParseUint(id, 10, 64)
			if perr != nil || n == 0 {
				return nil, used, false, upstream.MalformedFault("a video id is not a whole number")
			}
			if rec.Username != "" && !strings.EqualFold(rec.Username, handle) {
				return nil, used, false, upstream.MalformedFault("the query answered another account's video")
			}
			vids = append(vids, video{rec: rec, id: strconv.FormatUint(n, 10), n: n})
		}
		if !page.HasMore {
			return vids, used, true, nil
		}
		if page.Cursor.v == nil || (body.Cursor != nil && *page.Cursor.v <= *body.Cursor) {
			return nil, used, false, upstream.MalformedFault("the query has more videos but no cursor past this page")
		}
		body.Cursor, body.SearchID = page.Cursor.v, page.SearchID
	}
	return vids, used, false, nil
}

func deadlineNear(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < queryMargin
}

// The posts' _warnings sentences.
const (
	WarnNoPosts      = "The account has no public posts."
	WarnIndexLag     = "The source's index can trail by a day or two: the newest posts may be missing."
	WarnNoThumbnails = "The source reports no thumbnails: thumbnail_url is null."
	WarnPartial      = "The account posted more in this period than one call reads: posts of the period may be missing from these pages."
)

// posts reads an account's latest videos, newest first. The source's video
// query filters by username within windows of at most 30 days and does not
// promise an order, so each window is read whole and sorted here, newest
// window first, until limit videos are found or maxQueries are spent; the
// cursor then says where the next page starts (a day and the last id
// returned). The first page looks the account up too: an unknown account
// is 404, and its video count tells when every post has been returned.
func (r *research) posts(ctx context.Context, c *upstream.Call) (any, error) {
	handle, err := handleOf(c)
	if err != nil {
		return nil, err
	}
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 20
	}
	now := c.Now.UTC()
	today := now.Truncate(24 * time.Hour)
	out := Posts{Handle: handle, Page: creator.Page[Post]{Items: []Post{}}}
	st := postsCursor{End: today.Format(dayLayout)}
	if cur := c.Param("cursor"); cur != "" {
		if st, err = decodePostsCursor(cur, today); err != nil {
			return nil, err
		}
	} else {
		u, err := r.userInfo(ctx, c, handle, "video_count")
		if err != nil {
			return nil, err
		}
		st.Videos = u.VideoCount.v
		if st.Videos != nil && *st.Videos == 0 {
			out.HasMore = ptr(false)
			out.Warnings = []string{WarnNoPosts}
			return out, nil
		}
		out.Warnings = append(out.Warnings, WarnIndexLag)
	}
	var before uint64
	if st.Before != "" {
		if before, err = strconv.ParseUint(st.Before, 10, 64); err != nil {
			return nil, upstream.InvalidParameterFault("cursor", "invalid_cursor", "cursor is not a token from a previous response; pass it back unchanged.")
		}
	}

	end, _ := time.Parse(dayLayout, st.End)
	firstEnd := end
	var got []video
	seen := map[uint64]bool{}
	queries, windows, reachedFloor, partial := 0, 0, false, false
	for ; ; windows++ {
		if end.Before(floor) {
			reachedFloor = true
			break
		}
		if queries >= maxQueries || (queries > 0 && deadlineNear(ctx)) {
			break
		}
		start := end.AddDate(0, 0, -(windowDays - 1))
		if start.Before(floor) {
			start = floor
		}
		vids, used, complete, err := r.window(ctx, c, handle, start, end, maxQueries-queries)
		queries += used
		if err != nil {
			return nil, err
		}
		var fresh []video
		for _, v := range vids {
			// Windows do not overlap, but a source that answers outside
			// the window must not make a post appear twice.
			if (before != 0 && v.n >= before) || seen[v.n] {
				continue
			}
			seen[v.n] = true
			fresh = append(fresh, v)
		}
		if !complete {
			if windows > 0 {
				break // the budget ran out: the next page reads the window whole
			}
			// One window holds more than a call reads (or the deadline came
			// first): its part is sorted and served, and says so.
			got, partial = fresh, true
			break
		}
		got = append(got, fresh...)
		end = start.AddDate(0, 0, -1)
		if len(got) >= limit || (st.Videos != nil && st.Served+len(got) >= int(*st.Videos)) {
			break // enough for the page, or every post the account has
		}
	}

	slices.SortFunc(got, func(a, b video) int {
		switch {
		case a.n > b.n:
			return -1
		case a.n < b.n:
			return 1
		}
		return 0
	})
	page := got[:min(limit, len(got))]
	served := st.Served + len(page)
	missing := map[string]int{}
	for _, v := range page {
		p := mapVideo(v, handle)
		for name, n := range map[string]*int64{"likes": p.Counts.Likes, "comments": p.Counts.Comments, "shares": p.Counts.Shares, "views": p.Counts.Views} {
			if n == nil {
				missing[name]++
			}
		}
		out.Items = append(out.Items, p)
	}
	out.Count = len(out.Items)

	last := st.Before
	if len(page) > 0 {
		last = page[len(page)-1].id
	}
	var next *postsCursor
	switch {
	case len(got) > len(page):
		// Older posts already read wait for the next page, which starts at
		// the last one's day.
		day := resumeDay(page[len(page)-1])
		next = &postsCursor{End: day.Format(dayLayout), Before: last, Served: served, Videos: st.Videos}
		out.HasMore = ptr(true)
	case reachedFloor, st.Videos != nil && served >= int(*st.Videos):
		out.HasMore = ptr(false)
	default:
		// Older windows are not read yet.
		next = &postsCursor{End: end.Format(dayLayout), Before: last, Served: served, Videos: st.Videos}
		if st.Videos != nil {
			out.HasMore = ptr(true)
		}
		if len(page) == 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("No posts were found from %s to %s; pass cursor to look further back.",
				end.AddDate(0, 0, 1).Format(time.DateOnly), firstEnd.Format(time.DateOnly)))
		}
	}
	if next != nil {
		out.Cursor = ptr(next.encode())
	}
	if partial {
		out.Warnings = append(out.Warnings, WarnPartial)
	}
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, WarnNoThumbnails)
	}
	for _, name := range []string{"likes", "comments", "shares", "views"} {
		if n := missing[name]; n > 0 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%d post(s) do not report %s: counts.%s is null (unknown), not zero.", n, name, name))
		}
	}
	return out, nil
}

// resumeDay is the day the next page starts reading at for a page that
// ended with v: the later of its id's day and its create_time's, so that
// nothing older is skipped whichever the source got right.
func resumeDay(v video) time.Time {
	day, _ := idTime(v.id)
	if v.rec.CreateTime.v != nil {
		if t := time.Unix(*v.rec.CreateTime.v, 0).UTC(); t.After(day) {
			day = t
		}
	}
	return day.Truncate(24 * time.Hour)
}

func mapVideo(v video, handle string) Post {
	r := v.rec
	user := handle
	if r.Username != "" {
		user = strings.ToLower(r.Username)
	}
	p := Post{
		Post: creator.Post{ID: v.id, URL: ptr(videoURL(user, v.id)), Text: text(r.VideoDescription), CreatedAt: unixTime(r.CreateTime),
			Counts: creator.Counts{Likes: r.LikeCount.v, Comments: r.CommentCount.v, Shares: r.ShareCount.v, Views: r.ViewCount.v}},
		Saves:    r.FavouritesCount.v,
		Duration: r.VideoDuration.v, RegionCode: text(r.RegionCode), Hashtags: []string{},
	}
	for _, h := range r.HashtagNames {
		if h = strings.TrimSpace(h); h != "" {
			p.Hashtags = append(p.Hashtags, h)
		}
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// ---- short_video_a/comments ----

// commentQuery is the body of POST /v2/research/video/comment/list/; the
// video id is an int64 in the body, written from its exact digits.
type commentQuery struct {
	VideoID  json.Number `json:"video_id"`
	MaxCount int         `json:"max_count"`
	Cursor   int64       `json:"cursor"`
}

type commentPage struct {
	Comments []commentRecord `json:"comments"`
	Cursor   flexInt         `json:"cursor"`
	HasMore  bool            `json:"has_more"`
}

type commentRecord struct {
	ID              flexID  `json:"id"`
	VideoID         flexID  `json:"video_id"`
	Text            *string `json:"text"`
	LikeCount       flexInt `json:"like_count"`
	ReplyCount      flexInt `json:"reply_count"`
	ParentCommentID flexID  `json:"parent_comment_id"`
	CreateTime      flexInt `json:"create_time"`
}

// The comments' _warnings sentences.
const (
	WarnNoAuthors  = "The source does not identify comment authors: every author field is null."
	WarnNoComments = "The post has no public comments."
)

// comments reads a page of a video's comments (and replies, whose
// in_reply_to_id names their parent) in the source's order. The cursor is
// the source's own index, passed through. An empty first page is
// ambiguous, so only then is the video itself looked up (a query by
// video_id on its creation day, which its id gives): none is 404.
func (r *research) comments(ctx context.Context, c *upstream.Call) (any, error) {
	id, err := VideoID(c.Param("post_id"))
	if err != nil {
		return nil, err
	}
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 20
	}
	q := commentQuery{VideoID: json.Number(id), MaxCount: limit}
	if cur := c.Param("cursor"); cur != "" {
		n, err := strconv.ParseInt(cur, 10, 64)
		if err != nil || n < 0 || n > 1_000_000 || !digits(cur) {
			return nil, upstream.InvalidParameterFault("cursor", "invalid_cursor",
				"cursor is not a token from a previous response; pass it back unchanged.")
		}
		q.Cursor = n
	}
	var page commentPage
	apiErr, err := post(ctx, r, c, commentListPath, commentFields, q, &page)
	if err != nil {
		var f *upstream.Fault
		if errors.As(err, &f) && f.Kind == upstream.NotFound {
			return nil, upstream.NotFoundFault("no such video: " + f.Reason)
		}
		if invalidParams(apiErr, "video") && q.Cursor == 0 {
			// A refusal naming the video: an unknown one, or one the
			// source does not serve. Which, the lookup tells.
			if found, lerr := r.videoExists(ctx, c, id); lerr == nil && !found {
				return nil, upstream.NotFoundFault("no public video has this id")
			}
		}
		return nil, err
	}
	out := Comments{PostID: id, Page: creator.Page[Comment]{Items: []Comment{}}}
	out.More(false)
	for _, cm := range page.Comments {
		if cm.ID == "" {
			return nil, upstream.MalformedFault("a comment has no id")
		}
		item := Comment{Comment: creator.Comment[creator.Author]{ID: string(cm.ID), Text: text(cm.Text),
			CreatedAt: unixTime(cm.CreateTime), Likes: cm.LikeCount.v, Replies: cm.ReplyCount.v}}
		// A top-level comment's parent is the video itself.
		if p := string(cm.ParentCommentID); p != "" && p != "0" && p != id && p != string(cm.VideoID) {
			item.InReplyTo = &p
		}
		out.Items = append(out.Items, item)
	}
	out.Count = len(out.Items)
	out.More(page.HasMore)
	if page.HasMore {
		if page.Cursor.v == nil {
			return nil, upstream.MalformedFault("the comment list has more but no cursor")
		}
		out.Cursor = ptr(strconv.FormatInt(*page.Cursor.v, 10))
	}
	switch {
	case out.Count > 0:
		out.Warnings = append(out.Warnings, WarnNoAuthors)
	case q.Cursor == 0:
		found, err := r.videoExists(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, upstream.NotFoundFault("no public video has this id")
		}
		out.Warnings = append(out.Warnings, WarnNoComments)
	}
	return out, nil
}

// videoExists looks a video up by id: a video query for video_id on the
// days around the creation time its id holds. An id whose time is before
// the platform or in the future names no video, and costs no request.
func (r *research) videoExists(ctx context.Context, c *upstream.Call, id string) (bool, error) {
	created, ok := idTime(id)
	today := c.Now.UTC().Truncate(24 * time.Hour)
	if !ok || created.Before(floor) || created.After(c.Now.UTC().Add(24*time.Hour)) {
		return false, nil
	}
	day := created.Truncate(24 * time.Hour)
	last := day.AddDate(0, 0, 1)
	if last.After(today) {
		last = today
	}
	body := videoQuery{
		Query:     queryGroup{And: []condition{{Operation: "EQ", FieldName: "video_id", FieldValues: []string{id}}}},
		StartDate: day.AddDate(0, 0, -1).Format(dayLayout),
		EndDate:   last.Format(dayLayout),
		MaxCount:  10,
	}
	var page videoPage
	if _, err := post(ctx, r, c, videoQueryPath, "id", body, &page); err != nil {
		return false, err
	}
	for _, v := range page.Videos {
		if v.id() == id {
			return true, nil
		}
	}
	return false, nil
}
