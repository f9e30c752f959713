package composite

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// vettingMethodologyVersion is _meta.methodology_version: it changes
// whenever a formula, the sampling or the comment selection below does.
const vettingMethodologyVersion = "creator-vetting/1"

// vettingSelection is sample.selection: the rule that picks the posts
// whose comments are sampled (see CreatorVetting).
const vettingSelection = "newest_first_excluding_zero_comments"

// The two phases run one after the other, so each has its own bound and
// the whole answer arrives inside API Gateway's 28 s: the profile and
// posts legs first (a posts leg that takes longer fails the call), then
// the comments legs (one that takes longer is reported as not completed).
const (
	vettingReadTimeout     = 15 * time.Second
	vettingCommentsTimeout = 8 * time.Second
)

// vettingPlatform is how one platform's creator building blocks are read.
type vettingPlatform struct {
	// commentsParam names the comments leg's post parameter.
	commentsParam string
	// commentRef is the value of commentsParam for a post; "" when the
	// post carries none.
	commentRef func(vettingPostItem) string
	// stats: the posts leg reports counters under stats (likes, replies,
	// retweets, views) rather than counts (likes, comments, shares, views).
	stats bool
}

var vettingPlatforms = map[string]vettingPlatform{
	"short_video_a":  {commentsParam: "post_id", commentRef: vettingPostID},
	"photo_social":   {commentsParam: "post_id", commentRef: vettingShortcode},
	"video_platform": {commentsParam: "video_id", commentRef: vettingPostID},
	"microblog_b":    {commentsParam: "post_id", commentRef: vettingPostID, stats: true},
	"microblog_c":    {commentsParam: "post_id", commentRef: vettingPostID},
}

func vettingPostID(it vettingPostItem) string { return it.ID }

// vettingShortcode: photo_social/comments takes the post's shortcode (or
// its URL), not the media id the post is known by.
func vettingShortcode(it vettingPostItem) string {
	switch {
	case it.Shortcode != nil && *it.Shortcode != "":
		return *it.Shortcode
	case it.URL != nil:
		return *it.URL
	}
	return ""
}

// vettingPlatformOrder keeps the Legs list in a stable order.
var vettingPlatformOrder = []string{"short_video_a", "photo_social", "video_platform", "microblog_b", "microblog_c"}

// CreatorVetting is bundle/creator-vetting: engagement evidence for one
// creator, computed only from what the platform's public creator building
// blocks report. The methodology (version vettingMethodologyVersion):
//
//   - Legs. {platform}/profile (handle) and {platform}/posts (handle,
//     limit=posts_limit) run concurrently; then {platform}/comments (the
//     post, limit=comments_per_post) for the comment posts, concurrently.
//     Where a leg's own limit has a higher minimum than asked (microblog_b
//     reads at least 5 posts and 10 replies), the leg is asked for its
//     minimum and the answer is cut to what was asked, in the leg's order.
//   - Sample. The first posts_limit posts of the posts leg (newest first).
//     sample.exhaustive is true only when the leg says there are no more
//     posts (has_more false) and fewer than posts_limit came back.
//   - Counters. counts {likes, comments, shares, views} are the posts
//     leg's (microblog_b: stats.likes, stats.replies, stats.retweets,
//     stats.views); a counter the source does not report stays null
//     (unknown), never 0. count_sources cites each reported counter as
//     {endpoint: the posts leg's public path, id: the post id, field: the
//     field of that post it was read from}, null when unreported;
//     counters_reported lists the names of the reported ones.
//   - interactions = likes + comments + shares over the reported ones
//     (views excluded), null when none of the three is reported.
//     view_engagement_rate = interactions / views when both are known and
//     views > 0, else null.
//   - posts_with_engagement counts the posts whose interactions is known;
//     posts_missing_engagement the others. avg_engagement_per_post is the
//     mean interactions over posts_with_engagement only (null when none):
//     a post with unknown counters is left out, not averaged as zero.
//   - engagement_rate = avg_engagement_per_post / follower_denominator,
//     null when either is unknown or the denominator is 0.
//     follower_denominator is the profile leg's followers;
//     follower_source_field says which field of which operation (and the
//     source field the profile names) it came from. A profile leg that
//     fails leaves both null, with a warning.
//   - posting_cadence_days = (newest created_at - oldest created_at) in
//     days / (n - 1) over the n sampled posts with a date; null when n < 2.
//   - Figures are not rounded.
//   - Comments. The comment posts are the sampled posts ordered newest
//     first by created_at (undated ones last, in the leg's order), without
//     those whose comment count is reported as 0, that the source marks as
//     having no replies (has_replies false) or that carry no reference the
//     comments leg takes (photo_social: the shortcode, else the URL); the
//     first comment_posts of them. Each comment keeps its evidence (post
//     id, comment id, text, author as the leg returned it, created_at,
//     likes) and its origin (the comments leg's endpoint and request id),
//     at most comments_per_post a post. A comments leg that fails is
//     attempted but not completed, with a warning.
//   - metrics_hydration is not_needed: the posts leg already carries every
//     counter its source reports. photo_social/post-stats was weighed for
//     photo_social posts and not used: it fetches each post's public page
//     (through paid unblocking services) and adds only plays, and hidden
//     likes stay hidden there too.
//   - Nothing is inferred: no authenticity grade, no score. content_review
//     answers {status: unavailable} at no extra charge: the bundle is
//     AI-free, and its advisory review is not built.
//   - Failure. A posts leg that fails fails the call with that leg's error
//     type and status (refunded); every other leg's failure is reported
//     in the answer (_warnings, legs[]).
func CreatorVetting() pipeline.Composite {
	var keys []string
	for _, p := range vettingPlatformOrder {
		keys = append(keys, p+"/profile", p+"/posts", p+"/comments")
	}
	return pipeline.Composite{Legs: keys, Serve: serveCreatorVetting}
}

// vettingData is the data object of bundle/creator-vetting (spec 2.7).
type vettingData struct {
	Output           vettingOutput         `json:"output"`
	PostEvidence     []vettingEvidence     `json:"post_evidence"`
	CommentSample    []vettingComment      `json:"comment_sample"`
	Sample           vettingSample         `json:"sample"`
	Meta             vettingMeta           `json:"_meta"`
	MetricsHydration vettingHydration      `json:"metrics_hydration"`
	Legs             []pipeline.LegSummary `json:"legs"`
	ContentReview    *vettingContentReview `json:"content_review,omitempty"`
	Warnings         []string              `json:"_warnings,omitempty"`
}

type vettingOutput struct {
	PostsSampled           int      `json:"posts_sampled"`
	PostsWithEngagement    int      `json:"posts_with_engagement"`
	PostsMissingEngagement int      `json:"posts_missing_engagement"`
	AvgEngagementPerPost   *float64 `json:"avg_engagement_per_post"`
	EngagementRate         *float64 `json:"engagement_rate"`
	PostingCadenceDays     *float64 `json:"posting_cadence_days"`
	FollowerDenominator    *int64   `json:"follower_denominator"`
	FollowerSourceField    *string  `json:"follower_source_field"`
}

type vettingEvidence struct {
	ID                 string              `json:"id"`
	URL                *string             `json:"url"`
	Counts             creator.Counts      `json:"counts"`
	Interactions       *int64              `json:"interactions"`
	CountersReported   []string            `json:"counters_reported"`
	ViewEngagementRate *float64            `json:"view_engagement_rate"`
	CreatedAt          *string             `json:"created_at"`
	CountSources       vettingCountSources `json:"count_sources"`
}

type vettingCountSources struct {
	Likes    *vettingCountSource `json:"likes"`
	Comments *vettingCountSource `json:"comments"`
	Shares   *vettingCountSource `json:"shares"`
	Views    *vettingCountSource `json:"views"`
}

// vettingCountSource cites where one counter was read.
type vettingCountSource struct {
	Endpoint string `json:"endpoint"`
	ID       string `json:"id"`
	Field    string `json:"field"`
}

// vettingComment is one sampled comment with its evidence and origin.
type vettingComment struct {
	PostID    string          `json:"post_id"`
	CommentID string          `json:"comment_id"`
	Text      *string         `json:"text"`
	Author    json.RawMessage `json:"author"`
	CreatedAt *string         `json:"created_at"`
	Likes     *int64          `json:"likes"`
	Endpoint  string          `json:"endpoint"`
	RequestID string          `json:"request_id"`
}

type vettingSample struct {
	PostsLimit            int    `json:"posts_limit"`
	CommentPostsRequested int    `json:"comment_posts_requested"`
	CommentPostsAttempted int    `json:"comment_posts_attempted"`
	CommentPostsCompleted int    `json:"comment_posts_completed"`
	CommentsPerPost       int    `json:"comments_per_post"`
	CommentsReturned      int    `json:"comments_returned"`
	Selection             string `json:"selection"`
	Exhaustive            bool   `json:"exhaustive"`
}

type vettingMeta struct {
	MethodologyVersion string `json:"methodology_version"`
}

type vettingHydration struct {
	Status     string   `json:"status"`
	Endpoint   *string  `json:"endpoint"`
	Requested  int      `json:"requested"`
	Returned   int      `json:"returned"`
	Cap        int      `json:"cap"`
	MissingIDs []string `json:"missing_ids"`
}

type vettingContentReview struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

// vettingPostItem is what the composite reads of a posts leg's item: the
// shared creator.Post fields, and the platform extras it needs.
type vettingPostItem struct {
	ID        string          `json:"id"`
	URL       *string         `json:"url"`
	CreatedAt *string         `json:"created_at"`
	Counts    *creator.Counts `json:"counts"`
	Stats     *struct {
		Likes    *int64 `json:"likes"`
		Retweets *int64 `json:"retweets"`
		Replies  *int64 `json:"replies"`
		Views    *int64 `json:"views"`
	} `json:"stats"`
	// Shortcode is what photo_social/comments takes.
	Shortcode *string `json:"shortcode"`
	// HasReplies is microblog_c's stand-in for its unreported comment count.
	HasReplies *bool `json:"has_replies"`
}

type vettingPostsPage struct {
	Items    []vettingPostItem `json:"items"`
	HasMore  *bool             `json:"has_more"`
	Warnings []string          `json:"_warnings"`
}

type vettingCommentsPage struct {
	Items []struct {
		ID        string          `json:"id"`
		Text      *string         `json:"text"`
		Author    json.RawMessage `json:"author"`
		CreatedAt *string         `json:"created_at"`
		Likes     *int64          `json:"likes"`
	} `json:"items"`
	Warnings []string `json:"_warnings"`
}

// vettingCounter is one counter of a post and the field it is read from.
type vettingCounter struct {
	value *int64
	field string
}

// counters are the post's likes, comments, shares and views.
func (it vettingPostItem) counters(stats bool) (likes, comments, shares, views vettingCounter) {
	if stats {
		if s := it.Stats; s != nil {
			return vettingCounter{s.Likes, "stats.likes"}, vettingCounter{s.Replies, "stats.replies"},
				vettingCounter{s.Retweets, "stats.retweets"}, vettingCounter{s.Views, "stats.views"}
		}
		return
	}
	if c := it.Counts; c != nil {
		return vettingCounter{c.Likes, "counts.likes"}, vettingCounter{c.Comments, "counts.comments"},
			vettingCounter{c.Shares, "counts.shares"}, vettingCounter{c.Views, "counts.views"}
	}
	return
}

func serveCreatorVetting(ctx context.Context, c *pipeline.Call, legs pipeline.LegRunner) (any, *envelope.Error) {
	v := c.Params.Values
	platform, handle := v["platform"], v["handle"]
	plat, known := vettingPlatforms[platform]
	if !known {
		return nil, envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"platform is not one creator-vetting reads.", map[string]any{"parameter": "platform"})
	}
	postsLimit := vettingInt(v["posts_limit"], 20)
	commentPosts := vettingInt(v["comment_posts"], 3)
	commentsPerPost := vettingInt(v["comments_per_post"], 20)
	profileKey, postsKey, commentsKey := platform+"/profile", platform+"/posts", platform+"/comments"
	if !legs.Available(postsKey) {
		return nil, envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"The creator's posts cannot be read in this deployment ("+postsKey+" has no source configured).",
			map[string]any{"leg": postsKey})
	}

	out := vettingData{
		PostEvidence:  []vettingEvidence{},
		CommentSample: []vettingComment{},
		Legs:          []pipeline.LegSummary{},
		Sample: vettingSample{PostsLimit: postsLimit, CommentPostsRequested: commentPosts,
			CommentsPerPost: commentsPerPost, Selection: vettingSelection},
		Meta:             vettingMeta{MethodologyVersion: vettingMethodologyVersion},
		MetricsHydration: vettingHydration{Status: "not_needed", MissingIDs: []string{}},
	}
	if v["content_review"] == "true" {
		out.ContentReview = &vettingContentReview{Status: "unavailable",
			Reason: "Advisory content review is not offered on this bundle yet (it is AI-free; AI labels are on the endpoints marked AI): no post was reviewed and nothing extra was charged."}
	}

	// Phase 1: the profile (when served here) and the posts, concurrently.
	reqs := []pipeline.LegRequest{{Key: postsKey, Params: map[string]string{
		"handle": handle, "limit": strconv.Itoa(vettingLegLimit(postsKey, postsLimit))}}}
	profileServed := legs.Available(profileKey)
	if profileServed {
		reqs = append([]pipeline.LegRequest{{Key: profileKey, Params: map[string]string{"handle": handle}}}, reqs...)
	}
	readCtx, cancelRead := context.WithTimeout(ctx, vettingReadTimeout)
	first := legs.RunAll(readCtx, reqs, nil)
	cancelRead()
	posts := first[len(first)-1]
	for _, r := range first {
		out.Legs = append(out.Legs, r.Summary())
	}
	if !posts.OK() {
		return nil, vettingPostsFailed(posts)
	}
	var page vettingPostsPage
	if err := json.Unmarshal(posts.Data, &page); err != nil {
		return nil, envelope.Internal()
	}
	postsPath := posts.Endpoint
	out.Warnings = vettingLegWarnings(out.Warnings, postsPath, page.Warnings)
	out.Sample.Exhaustive = page.HasMore != nil && !*page.HasMore && len(page.Items) < postsLimit
	sampled := page.Items[:min(len(page.Items), postsLimit)]

	// Evidence and the engagement figures.
	var engagementSum int64
	var dates []time.Time
	for _, it := range sampled {
		ev := vettingPostEvidence(it, plat.stats, postsPath)
		if ev.Interactions != nil {
			out.Output.PostsWithEngagement++
			engagementSum += *ev.Interactions
		}
		if t, ok := vettingTime(it.CreatedAt); ok {
			dates = append(dates, t)
		}
		out.PostEvidence = append(out.PostEvidence, ev)
	}
	out.Output.PostsSampled = len(sampled)
	out.Output.PostsMissingEngagement = len(sampled) - out.Output.PostsWithEngagement
	if n := out.Output.PostsWithEngagement; n > 0 {
		avg := float64(engagementSum) / float64(n)
		out.Output.AvgEngagementPerPost = &avg
	}
	out.Output.PostingCadenceDays = vettingCadence(dates)

	// The follower denominator.
	switch {
	case !profileServed:
		out.Warnings = append(out.Warnings, "Partial: "+profileKey+" has no source configured in this deployment, so follower_denominator and engagement_rate are null.")
	case !first[0].OK():
		e := first[0].Error()
		out.Warnings = append(out.Warnings, "Partial: the profile could not be read ("+first[0].Endpoint+", "+e.Type+"), so follower_denominator and engagement_rate are null.")
	default:
		vettingFollowers(&out, first[0])
	}

	// Phase 2: the comments of the chosen posts, concurrently.
	chosen := vettingCommentPosts(sampled, commentPosts, plat.commentRef)
	if len(chosen) < commentPosts && len(sampled) > 0 {
		out.Warnings = append(out.Warnings, "Only "+strconv.Itoa(len(chosen))+" of the sampled posts could have their comments sampled: the others report 0 comments or carry no post reference.")
	}
	switch {
	case commentPosts == 0 || len(chosen) == 0:
	case !legs.Available(commentsKey):
		out.Warnings = append(out.Warnings, "No comments were sampled: "+commentsKey+" has no source configured in this deployment.")
	default:
		ask := strconv.Itoa(vettingLegLimit(commentsKey, commentsPerPost))
		creqs := make([]pipeline.LegRequest, len(chosen))
		for i, it := range chosen {
			creqs[i] = pipeline.LegRequest{Key: commentsKey, Params: map[string]string{plat.commentsParam: plat.commentRef(it), "limit": ask}}
		}
		commentsCtx, cancelComments := context.WithTimeout(ctx, vettingCommentsTimeout)
		results := legs.RunAll(commentsCtx, creqs, nil)
		cancelComments()
		out.Sample.CommentPostsAttempted = len(results)
		for i, r := range results {
			out.Legs = append(out.Legs, r.Summary())
			var cp vettingCommentsPage
			if !r.OK() || json.Unmarshal(r.Data, &cp) != nil {
				e := r.Error()
				if e == nil {
					e = &pipeline.LegError{Type: string(envelope.UpstreamError)}
				}
				out.Warnings = append(out.Warnings, "The comments of post "+chosen[i].ID+" could not be read ("+r.Endpoint+", "+e.Type+"); the comment sample is smaller for it.")
				continue
			}
			out.Sample.CommentPostsCompleted++
			path := r.Endpoint
			out.Warnings = vettingLegWarnings(out.Warnings, path, cp.Warnings)
			for _, cm := range cp.Items[:min(len(cp.Items), commentsPerPost)] {
				out.CommentSample = append(out.CommentSample, vettingComment{PostID: chosen[i].ID, CommentID: cm.ID,
					Text: cm.Text, Author: cm.Author, CreatedAt: cm.CreatedAt, Likes: cm.Likes, Endpoint: path, RequestID: r.RequestID})
			}
		}
	}
	out.Sample.CommentsReturned = len(out.CommentSample)
	return out, nil
}

// vettingPostEvidence is one sampled post's evidence row.
func vettingPostEvidence(it vettingPostItem, stats bool, postsPath string) vettingEvidence {
	likes, comments, shares, views := it.counters(stats)
	ev := vettingEvidence{ID: it.ID, URL: it.URL, CreatedAt: it.CreatedAt, CountersReported: []string{},
		Counts: creator.Counts{Likes: likes.value, Comments: comments.value, Shares: shares.value, Views: views.value}}
	cite := func(name string, c vettingCounter) *vettingCountSource {
		if c.value == nil {
			return nil
		}
		ev.CountersReported = append(ev.CountersReported, name)
		return &vettingCountSource{Endpoint: postsPath, ID: it.ID, Field: c.field}
	}
	ev.CountSources = vettingCountSources{Likes: cite("likes", likes), Comments: cite("comments", comments),
		Shares: cite("shares", shares), Views: cite("views", views)}
	for _, c := range []vettingCounter{likes, comments, shares} {
		if c.value != nil {
			sum := *c.value
			if ev.Interactions != nil {
				sum += *ev.Interactions
			}
			ev.Interactions = &sum
		}
	}
	if ev.Interactions != nil && views.value != nil && *views.value > 0 {
		rate := float64(*ev.Interactions) / float64(*views.value)
		ev.ViewEngagementRate = &rate
	}
	return ev
}

// vettingFollowers sets the follower denominator, its source and the
// engagement rate from a successful profile leg.
func vettingFollowers(out *vettingData, profile pipeline.LegResult) {
	var p struct {
		Followers           *int64  `json:"followers"`
		FollowerSourceField *string `json:"follower_source_field"`
	}
	path := profile.Endpoint
	if json.Unmarshal(profile.Data, &p) != nil || p.Followers == nil {
		out.Warnings = append(out.Warnings, "Partial: "+path+" does not report the follower count, so follower_denominator and engagement_rate are null.")
		return
	}
	source := "followers of " + path
	if p.FollowerSourceField != nil && *p.FollowerSourceField != "" {
		source += " (source field " + *p.FollowerSourceField + ")"
	}
	out.Output.FollowerDenominator, out.Output.FollowerSourceField = p.Followers, &source
	switch {
	case *p.Followers == 0:
		out.Warnings = append(out.Warnings, "The profile reports 0 followers, so engagement_rate is null.")
	case out.Output.AvgEngagementPerPost != nil:
		rate := *out.Output.AvgEngagementPerPost / float64(*p.Followers)
		out.Output.EngagementRate = &rate
	}
}

// vettingCommentPosts picks the comment posts: newest first by created_at
// (undated last, in the leg's order), skipping posts whose comment count
// is reported as 0, that are marked as having no replies or that carry no
// reference the comments leg takes, at most n.
func vettingCommentPosts(sampled []vettingPostItem, n int, ref func(vettingPostItem) string) []vettingPostItem {
	if n <= 0 {
		return nil
	}
	type dated struct {
		item vettingPostItem
		at   time.Time
		ok   bool
	}
	order := make([]dated, 0, len(sampled))
	for _, it := range sampled {
		t, ok := vettingTime(it.CreatedAt)
		order = append(order, dated{it, t, ok})
	}
	slices.SortStableFunc(order, func(a, b dated) int {
		switch {
		case a.ok && b.ok:
			return b.at.Compare(a.at)
		case a.ok != b.ok:
			if a.ok {
				return -1
			}
			return 1
		}
		return 0
	})
	var chosen []vettingPostItem
	for _, d := range order {
		if len(chosen) == n {
			break
		}
		it := d.item
		if ref(it) == "" || it.HasReplies != nil && !*it.HasReplies {
			continue
		}
		if c := vettingCommentCount(it); c != nil && *c == 0 {
			continue
		}
		chosen = append(chosen, it)
	}
	return chosen
}

// vettingCommentCount is the post's reported comment count, on either
// counter layout.
func vettingCommentCount(it vettingPostItem) *int64 {
	if it.Counts != nil && it.Counts.Comments != nil {
		return it.Counts.Comments
	}
	if it.Stats != nil {
		return it.Stats.Replies
	}
	return nil
}

// vettingCadence is the mean gap between the dated posts, in days: the
// span from the oldest to the newest over (n-1); null under two dates.
func vettingCadence(dates []time.Time) *float64 {
	if len(dates) < 2 {
		return nil
	}
	oldest, newest := slices.MinFunc(dates, time.Time.Compare), slices.MaxFunc(dates, time.Time.Compare)
	days := newest.Sub(oldest).Hours() / 24 / float64(len(dates)-1)
	return &days
}

// vettingPostsFailed is the call's error when the posts leg failed: the
// leg's own type and status, so a caller sees why (an unknown account is
// 404, a refused handle 422, a source outage 502).
func vettingPostsFailed(r pipeline.LegResult) *envelope.Error {
	e := r.Error()
	details := map[string]any{}
	for k, v := range e.Details {
		details[k] = v
	}
	details["leg"] = r.Endpoint
	if r.RequestID != "" {
		details["leg_request_id"] = r.RequestID
	}
	status := cmp.Or(e.Status, http.StatusBadGateway)
	return envelope.New(envelope.Type(cmp.Or(e.Type, string(envelope.UpstreamError))), status,
		"The creator's posts could not be read: "+e.Message, details)
}

// vettingLegWarnings adds a leg's own warnings, once each, naming the leg.
func vettingLegWarnings(warnings []string, path string, leg []string) []string {
	for _, w := range leg {
		if w = path + ": " + w; !slices.Contains(warnings, w) {
			warnings = append(warnings, w)
		}
	}
	return warnings
}

// vettingLegLimit is want raised to the leg's own minimum page size and
// capped at its maximum, as the registry declares them; the answer is cut
// back to want.
func vettingLegLimit(key string, want int) int {
	e, ok := registry.Default().Endpoint(key)
	if !ok {
		return want
	}
	p, ok := e.Lookup("limit")
	if !ok {
		return want
	}
	if p.Min != nil && float64(want) < *p.Min {
		want = int(*p.Min)
	}
	if p.Max != nil && float64(want) > *p.Max {
		want = int(*p.Max)
	}
	return want
}

// vettingTime parses an RFC 3339 created_at.
func vettingTime(s *string) (time.Time, bool) {
	if s == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(*s))
	return t, err == nil
}

// vettingInt reads a validated integer parameter.
func vettingInt(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
