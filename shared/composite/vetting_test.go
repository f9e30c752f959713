package composite

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/schemas"
)

// vettingFakeLegs is a LegRunner serving canned envelopes per key: a
// function of the leg's parameters, so one key can answer differently per
// post. Keys without an answer are unavailable.
type vettingFakeLegs struct {
	answers map[string]func(p map[string]string) vettingAnswer

	mu    sync.Mutex
	calls []pipeline.LegRequest
}

// vettingAnswer is a leg's canned outcome: data on success, else an error.
type vettingAnswer struct {
	data    string
	errType envelope.Type
	status  int
	message string
}

func vettingData200(data string) func(map[string]string) vettingAnswer {
	return func(map[string]string) vettingAnswer { return vettingAnswer{data: data} }
}

func vettingFailing(t envelope.Type, status int, message string) func(map[string]string) vettingAnswer {
	return func(map[string]string) vettingAnswer {
		return vettingAnswer{errType: t, status: status, message: message}
	}
}

func (f *vettingFakeLegs) Available(key string) bool { _, ok := f.answers[key]; return ok }

func (f *vettingFakeLegs) Emit(string, any, bool) bool { return false }

func (f *vettingFakeLegs) Run(_ context.Context, req pipeline.LegRequest) pipeline.LegResult {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	id := "req_leg" + strconv.Itoa(len(f.calls))
	f.mu.Unlock()
	platform, _, _ := strings.Cut(req.Key, "/")
	r := pipeline.LegResult{Key: req.Key, Platform: platform, Endpoint: "/v1/" + req.Key, RequestID: id, Attempts: 1, ServedBy: "official"}
	a := f.answers[req.Key](req.Params)
	if a.errType == "" {
		r.Status, r.Data = http.StatusOK, json.RawMessage(a.data)
		r.Envelope = json.RawMessage(`{"success":true,"data":` + a.data + `}`)
		return r
	}
	body, _ := json.Marshal(map[string]any{"success": false, "error": map[string]any{
		"type": a.errType, "status": a.status, "message": a.message, "details": map[string]any{"reason": "canned"}}})
	r.Status, r.Envelope, r.ErrorType = a.status, body, string(a.errType)
	return r
}

func (f *vettingFakeLegs) RunAll(ctx context.Context, reqs []pipeline.LegRequest, done func(int, pipeline.LegResult)) []pipeline.LegResult {
	out := make([]pipeline.LegResult, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { out[i] = f.Run(ctx, req) })
	}
	wg.Wait()
	for i := range out {
		if done != nil {
			done(i, out[i])
		}
	}
	return out
}

// requests are the calls made of key, in call order.
func (f *vettingFakeLegs) requests(key string) []map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []map[string]string
	for _, c := range f.calls {
		if c.Key == key {
			out = append(out, c.Params)
		}
	}
	return out
}

// vettingServe runs the composite with canonical parameters (defaults as
// the catalogue declares them, overridden by extra).
func vettingServe(t *testing.T, legs *vettingFakeLegs, platform string, extra map[string]string) (vettingData, *envelope.Error) {
	t.Helper()
	v := map[string]string{"handle": "bakerjane", "platform": platform, "posts_limit": "20", "comment_posts": "3",
		"comments_per_post": "20", "content_review": "false"}
	for k, x := range extra {
		v[k] = x
	}
	c := &pipeline.Call{RequestID: "req_vetting", Params: params.Result{Values: v}}
	got, err := CreatorVetting().Serve(context.Background(), c, legs)
	if err != nil {
		return vettingData{}, err
	}
	data, ok := got.(vettingData)
	if !ok {
		t.Fatalf("Serve answered %T", got)
	}
	if verr := schemas.Validate("bundle/creator-vetting", data); verr != nil {
		t.Errorf("the answer does not validate against its schema: %v", verr)
	}
	return data, nil
}

// Fixtures in the shape the creator building blocks answer.
const (
	vettingShortVideoProfile = `{"id":null,"handle":"bakerjane","name":"Jane Baker","url":"https://www.tiktok.com/@bakerjane",
		"description":"bread","avatar_url":null,"followers":1000,"follower_source_field":"follower_count","following":12,
		"likes_count":9000,"posts_count":40,"verified":false,"private":null,"bio_link":null,"sec_uid":null,"created_at":null,
		"_warnings":["The source reports no account id."]}`
	// Four videos, newest first: every counter; comments reported as 0;
	// no counters at all; views reported as 0.
	vettingShortVideoPosts = `{"handle":"bakerjane","items":[
		{"id":"7300000000000000004","url":"https://www.tiktok.com/@bakerjane/video/7300000000000000004","text":"sourdough",
		 "created_at":"2026-11-10T12:00:00Z","thumbnail_url":null,"counts":{"likes":100,"comments":20,"shares":5,"views":1000},"saves":3},
		{"id":"7300000000000000003","url":"https://www.tiktok.com/@bakerjane/video/7300000000000000003","text":"rye",
		 "created_at":"2026-11-08T12:00:00Z","thumbnail_url":null,"counts":{"likes":50,"comments":0,"shares":null,"views":500},"saves":null},
		{"id":"7300000000000000002","url":"https://www.tiktok.com/@bakerjane/video/7300000000000000002","text":"spelt",
		 "created_at":"2026-11-06T00:00:00Z","thumbnail_url":null,"counts":{"likes":null,"comments":null,"shares":null,"views":null},"saves":null},
		{"id":"7300000000000000001","url":"https://www.tiktok.com/@bakerjane/video/7300000000000000001","text":"brioche",
		 "created_at":"2026-11-04T12:00:00Z","thumbnail_url":null,"counts":{"likes":10,"comments":2,"shares":3,"views":0},"saves":1}
		],"count":4,"cursor":"eyJkIjoiMjAyNi0xMS0wNCJ9","has_more":true,"_warnings":["The source reports no thumbnails."]}`
)

func vettingShortVideoComments(p map[string]string) vettingAnswer {
	id := p["post_id"]
	items := []string{}
	n := map[string]int{"7300000000000000004": 3, "7300000000000000002": 1}[id]
	for i := range n {
		items = append(items, `{"id":"c`+id[len(id)-1:]+strconv.Itoa(i)+`","text":"lovely crumb `+strconv.Itoa(i)+`",
			"author":{"id":null,"handle":null,"name":null,"url":null,"avatar_url":null},
			"created_at":"2026-11-11T08:00:00Z","likes":`+strconv.Itoa(i+1)+`,"replies":0,"in_reply_to_id":null}`)
	}
	return vettingAnswer{data: `{"post_id":"` + id + `","items":[` + strings.Join(items, ",") + `],"count":` + strconv.Itoa(n) +
		`,"cursor":null,"has_more":false,"_warnings":["The source does not identify comment authors."]}`}
}

func vettingShortVideoLegs() *vettingFakeLegs {
	return &vettingFakeLegs{answers: map[string]func(map[string]string) vettingAnswer{
		"short_video_a/profile":  vettingData200(vettingShortVideoProfile),
		"short_video_a/posts":    vettingData200(vettingShortVideoPosts),
		"short_video_a/comments": vettingShortVideoComments,
	}}
}

func vettingPtr[T any](v T) *T { return &v }

func vettingEqualPtr[T comparable](t *testing.T, what string, got, want *T) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", what, vettingShow(got), vettingShow(want))
	case *got != *want:
		t.Errorf("%s = %v, want %v", what, *got, *want)
	}
}

func vettingShow[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}

// TestVettingFormulas checks every figure against hand-computed numbers.
func TestVettingFormulas(t *testing.T) {
	legs := vettingShortVideoLegs()
	d, err := vettingServe(t, legs, "short_video_a", map[string]string{"posts_limit": "4", "comment_posts": "2", "comments_per_post": "2"})
	if err != nil {
		t.Fatal(err)
	}
	// Interactions: 100+20+5 = 125; 50+0 = 50 (shares unknown); unknown;
	// 10+2+3 = 15. Views are never part of it.
	wantInteractions := []*int64{vettingPtr[int64](125), vettingPtr[int64](50), nil, vettingPtr[int64](15)}
	// 125/1000; 50/500; no counters; views 0.
	wantViewRate := []*float64{vettingPtr(0.125), vettingPtr(0.1), nil, nil}
	wantReported := [][]string{{"likes", "comments", "shares", "views"}, {"likes", "comments", "views"}, {}, {"likes", "comments", "shares", "views"}}
	if len(d.PostEvidence) != 4 {
		t.Fatalf("post_evidence has %d rows, want 4", len(d.PostEvidence))
	}
	for i, ev := range d.PostEvidence {
		vettingEqualPtr(t, "post "+ev.ID+" interactions", ev.Interactions, wantInteractions[i])
		vettingEqualPtr(t, "post "+ev.ID+" view_engagement_rate", ev.ViewEngagementRate, wantViewRate[i])
		if !slices.Equal(ev.CountersReported, wantReported[i]) {
			t.Errorf("post %s counters_reported = %v, want %v", ev.ID, ev.CountersReported, wantReported[i])
		}
	}
	o := d.Output
	if o.PostsSampled != 4 || o.PostsWithEngagement != 3 || o.PostsMissingEngagement != 1 {
		t.Errorf("sampled/with/missing = %d/%d/%d, want 4/3/1", o.PostsSampled, o.PostsWithEngagement, o.PostsMissingEngagement)
	}
	// (125+50+15)/3: the post without counters is left out, not counted as 0.
	avg := 190.0 / 3
	vettingEqualPtr(t, "avg_engagement_per_post", o.AvgEngagementPerPost, &avg)
	vettingEqualPtr(t, "engagement_rate", o.EngagementRate, vettingPtr(avg/1000))
	// 2026-11-04T12:00 to 2026-11-10T12:00 is 6 days over 3 gaps.
	vettingEqualPtr(t, "posting_cadence_days", o.PostingCadenceDays, vettingPtr(2.0))
	vettingEqualPtr(t, "follower_denominator", o.FollowerDenominator, vettingPtr[int64](1000))
	vettingEqualPtr(t, "follower_source_field", o.FollowerSourceField, vettingPtr("followers of /v1/short_video_a/profile (source field follower_count)"))

	// count_sources cite the posts leg, the post and the field.
	first := d.PostEvidence[0].CountSources
	if want := (vettingCountSource{Endpoint: "/v1/short_video_a/posts", ID: "7300000000000000004", Field: "counts.shares"}); first.Shares == nil || *first.Shares != want {
		t.Errorf("count_sources.shares = %+v, want %+v", first.Shares, want)
	}
	if s := d.PostEvidence[1].CountSources; s.Shares != nil || s.Comments == nil || s.Comments.Field != "counts.comments" {
		t.Errorf("post 3 count_sources = %+v: shares unreported must be null, comments 0 is reported", s)
	}

	// Legs asked for posts_limit posts; comments for the newest posts whose
	// comment count is not reported as 0: post 4, then post 2 (post 3 has 0).
	if got := legs.requests("short_video_a/posts"); len(got) != 1 || got[0]["handle"] != "bakerjane" || got[0]["limit"] != "4" {
		t.Errorf("posts leg params = %v", got)
	}
	var commented []string
	for _, p := range legs.requests("short_video_a/comments") {
		commented = append(commented, p["post_id"])
		if p["limit"] != "2" {
			t.Errorf("comments leg limit = %s, want 2", p["limit"])
		}
	}
	slices.Sort(commented)
	if want := []string{"7300000000000000002", "7300000000000000004"}; !slices.Equal(commented, want) {
		t.Errorf("comment posts = %v, want %v", commented, want)
	}
	s := d.Sample
	if s.PostsLimit != 4 || s.CommentPostsRequested != 2 || s.CommentPostsAttempted != 2 || s.CommentPostsCompleted != 2 ||
		s.CommentsPerPost != 2 || s.CommentsReturned != 3 || s.Selection != vettingSelection || s.Exhaustive {
		t.Errorf("sample = %+v", s)
	}
	// Post 4's leg answered 3 comments: cut to comments_per_post.
	if len(d.CommentSample) != 3 {
		t.Fatalf("comment_sample has %d, want 3", len(d.CommentSample))
	}
	c := d.CommentSample[0]
	if c.PostID != "7300000000000000004" || c.CommentID != "c40" || c.Text == nil || *c.Text != "lovely crumb 0" ||
		c.Likes == nil || *c.Likes != 1 || c.Endpoint != "/v1/short_video_a/comments" || !strings.HasPrefix(c.RequestID, "req_leg") ||
		c.CreatedAt == nil || !strings.Contains(string(c.Author), `"handle":null`) {
		t.Errorf("comment_sample[0] = %+v", c)
	}
	if d.CommentSample[2].PostID != "7300000000000000002" {
		t.Errorf("comment_sample[2] is of post %s, want the older post after the newer", d.CommentSample[2].PostID)
	}
	if len(d.Legs) != 4 || d.Legs[0].Endpoint != "/v1/short_video_a/profile" || d.Legs[1].Endpoint != "/v1/short_video_a/posts" || !d.Legs[3].OK {
		t.Errorf("legs = %+v", d.Legs)
	}
	if d.Meta.MethodologyVersion != vettingMethodologyVersion {
		t.Errorf("_meta = %+v", d.Meta)
	}
	h := d.MetricsHydration
	if h.Status != "not_needed" || h.Requested != 0 || h.Endpoint != nil || h.MissingIDs == nil {
		t.Errorf("metrics_hydration = %+v", h)
	}
	if !slices.Contains(d.Warnings, "/v1/short_video_a/posts: The source reports no thumbnails.") ||
		!slices.Contains(d.Warnings, "/v1/short_video_a/comments: The source does not identify comment authors.") {
		t.Errorf("_warnings = %q: the legs' own limitations are passed on, once each", d.Warnings)
	}
	body, _ := json.Marshal(d)
	if strings.Contains(string(body), "content_review") {
		t.Errorf("content_review is in the answer without being asked for: %s", body)
	}
}

// TestVettingCountersOnStats reads microblog_b's stats layout, asks the
// legs for their minimum page sizes and cuts the answers back.
func TestVettingCountersOnStats(t *testing.T) {
	post := func(id, at, stats string) string {
		return `{"id":"` + id + `","url":"https://x.com/bakerjane/status/` + id + `","text":"bake","created_at":"` + at +
			`","lang":"en","author":{"id":"42","handle":"bakerjane","name":"Jane"},"stats":` + stats +
			`,"type":"post","referenced_id":null,"hashtags":[],"mentions":[],"links":[]}`
	}
	page := func(hasMore bool, items ...string) string {
		return `{"items":[` + strings.Join(items, ",") + `],"count":` + strconv.Itoa(len(items)) + `,"cursor":null,"has_more":` + strconv.FormatBool(hasMore) + `}`
	}
	four := page(false,
		post("1899000000000000004", "2026-11-10T00:00:00.000Z", `{"likes":30,"retweets":4,"replies":6,"quotes":1,"bookmarks":2,"views":400}`),
		post("1899000000000000003", "2026-11-09T00:00:00.000Z", `{"likes":10,"retweets":null,"replies":0,"quotes":null,"bookmarks":null,"views":null}`),
		post("1899000000000000002", "2026-11-07T00:00:00.000Z", `null`),
		post("1899000000000000001", "2026-11-01T00:00:00.000Z", `{"likes":1,"retweets":1,"replies":1,"quotes":0,"bookmarks":0,"views":10}`))
	legs := &vettingFakeLegs{answers: map[string]func(map[string]string) vettingAnswer{
		"microblog_b/profile": vettingData200(`{"id":"42","handle":"bakerjane","followers":200,"following":3,"verified":false}`),
		"microblog_b/posts":   vettingData200(four),
		"microblog_b/comments": func(p map[string]string) vettingAnswer {
			return vettingAnswer{data: `{"post_id":"` + p["post_id"] + `","items":[{"id":"1899000000000000100","url":null,"text":"yum","created_at":"2026-11-10T01:00:00.000Z","lang":"en","author":{"id":"7","handle":"fan","name":"Fan"},"likes":2,"replies":0,"in_reply_to_id":"` + p["post_id"] + `"}],"count":1,"cursor":null,"has_more":false}`}
		},
	}}
	d, err := vettingServe(t, legs, "microblog_b", map[string]string{"posts_limit": "3", "comment_posts": "3", "comments_per_post": "2"})
	if err != nil {
		t.Fatal(err)
	}
	// microblog_b/posts reads 5 to 100, microblog_b/comments 10 to 100.
	if got := legs.requests("microblog_b/posts"); len(got) != 1 || got[0]["limit"] != "5" {
		t.Errorf("posts leg params = %v, want limit 5 (its minimum)", got)
	}
	for _, p := range legs.requests("microblog_b/comments") {
		if p["limit"] != "10" {
			t.Errorf("comments leg limit = %s, want 10 (its minimum)", p["limit"])
		}
	}
	if len(d.PostEvidence) != 3 || d.Output.PostsSampled != 3 {
		t.Fatalf("sampled %d posts, want the first 3", len(d.PostEvidence))
	}
	// 4 posts came back for posts_limit 3: the account has more.
	if d.Sample.Exhaustive {
		t.Error("exhaustive with a post left out")
	}
	ev := d.PostEvidence[0]
	// likes 30 + replies 6 + retweets 4 = 40 (quotes, bookmarks, views out).
	vettingEqualPtr(t, "interactions", ev.Interactions, vettingPtr[int64](40))
	vettingEqualPtr(t, "view_engagement_rate", ev.ViewEngagementRate, vettingPtr(0.1))
	vettingEqualPtr(t, "counts.shares", ev.Counts.Shares, vettingPtr[int64](4))
	if ev.CountSources.Shares == nil || ev.CountSources.Shares.Field != "stats.retweets" || ev.CountSources.Comments.Field != "stats.replies" {
		t.Errorf("count_sources = %+v", ev.CountSources)
	}
	// Post 2 has no stats at all: unknown, not zero.
	if e := d.PostEvidence[2]; e.Interactions != nil || e.Counts.Likes != nil || e.CountSources.Likes != nil {
		t.Errorf("a post without stats = %+v", e)
	}
	// (40 + 10) / 2 = 25 over 200 followers; the source names no field.
	vettingEqualPtr(t, "avg", d.Output.AvgEngagementPerPost, vettingPtr(25.0))
	vettingEqualPtr(t, "engagement_rate", d.Output.EngagementRate, vettingPtr(0.125))
	vettingEqualPtr(t, "follower_source_field", d.Output.FollowerSourceField, vettingPtr("followers of /v1/microblog_b/profile"))
	// Nov 7 to Nov 10 over the 3 sampled posts: 3 days / 2.
	vettingEqualPtr(t, "posting_cadence_days", d.Output.PostingCadenceDays, vettingPtr(1.5))
	// Post 3 reports 0 replies: the comment posts are posts 4 and 2.
	if d.Sample.CommentPostsAttempted != 2 || d.Sample.CommentPostsCompleted != 2 || d.Sample.CommentsReturned != 2 {
		t.Errorf("sample = %+v", d.Sample)
	}
	if !vettingWarned(d, "Only 2 of the sampled posts could have their comments sampled") {
		t.Errorf("_warnings = %q", d.Warnings)
	}

	// Two posts and no more: every post was read.
	legs.answers["microblog_b/posts"] = vettingData200(page(false,
		post("1899000000000000002", "2026-11-07T00:00:00.000Z", `null`),
		post("1899000000000000001", "2026-11-01T00:00:00.000Z", `null`)))
	d, err = vettingServe(t, legs, "microblog_b", map[string]string{"posts_limit": "3", "comment_posts": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Sample.Exhaustive {
		t.Error("not exhaustive though the leg has no more posts and returned fewer than posts_limit")
	}
	// No counters anywhere: every figure is unknown.
	o := d.Output
	if o.PostsWithEngagement != 0 || o.PostsMissingEngagement != 2 || o.AvgEngagementPerPost != nil || o.EngagementRate != nil {
		t.Errorf("output without counters = %+v", o)
	}
}

func TestVettingFollowersUnknown(t *testing.T) {
	for name, profile := range map[string]string{
		"null":   `{"handle":"bakerjane","followers":null,"follower_source_field":null}`,
		"absent": `{"handle":"bakerjane"}`,
	} {
		t.Run(name, func(t *testing.T) {
			legs := vettingShortVideoLegs()
			legs.answers["short_video_a/profile"] = vettingData200(profile)
			d, err := vettingServe(t, legs, "short_video_a", map[string]string{"posts_limit": "4"})
			if err != nil {
				t.Fatal(err)
			}
			if d.Output.FollowerDenominator != nil || d.Output.FollowerSourceField != nil || d.Output.EngagementRate != nil {
				t.Errorf("output = %+v", d.Output)
			}
			if d.Output.AvgEngagementPerPost == nil {
				t.Error("the average does not need followers")
			}
			if !vettingWarned(d, "does not report the follower count") {
				t.Errorf("_warnings = %q", d.Warnings)
			}
		})
	}
	legs := vettingShortVideoLegs()
	legs.answers["short_video_a/profile"] = vettingData200(`{"followers":0,"follower_source_field":"follower_count"}`)
	d, err := vettingServe(t, legs, "short_video_a", nil)
	if err != nil {
		t.Fatal(err)
	}
	vettingEqualPtr(t, "follower_denominator", d.Output.FollowerDenominator, vettingPtr[int64](0))
	if d.Output.EngagementRate != nil {
		t.Errorf("engagement_rate = %v over 0 followers", *d.Output.EngagementRate)
	}
}

func vettingWarned(d vettingData, part string) bool {
	return slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.Contains(w, part) })
}

func TestVettingProfileLegFails(t *testing.T) {
	legs := vettingShortVideoLegs()
	legs.answers["short_video_a/profile"] = vettingFailing(envelope.UpstreamTimeout, http.StatusGatewayTimeout, "No attempt finished in time.")
	d, err := vettingServe(t, legs, "short_video_a", nil)
	if err != nil {
		t.Fatalf("a failed profile failed the call: %v", err)
	}
	if d.Output.FollowerDenominator != nil || d.Output.EngagementRate != nil || d.Output.FollowerSourceField != nil {
		t.Errorf("output = %+v", d.Output)
	}
	if d.Output.PostsSampled != 4 || d.Output.AvgEngagementPerPost == nil {
		t.Errorf("the posts are answered all the same: %+v", d.Output)
	}
	if !vettingWarned(d, "Partial: the profile could not be read (/v1/short_video_a/profile, UPSTREAM_TIMEOUT)") {
		t.Errorf("_warnings = %q", d.Warnings)
	}
	if l := d.Legs[0]; l.OK || l.Status == nil || *l.Status != http.StatusGatewayTimeout || l.ErrorType != "UPSTREAM_TIMEOUT" {
		t.Errorf("legs[0] = %+v", l)
	}

	// A deployment without the profile operation answers the same way.
	delete(legs.answers, "short_video_a/profile")
	d, err = vettingServe(t, legs, "short_video_a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.Output.FollowerDenominator != nil || !vettingWarned(d, "no source configured") || d.Legs[0].Endpoint != "/v1/short_video_a/posts" {
		t.Errorf("without a profile source: %+v, %q", d.Output, d.Warnings)
	}
}

func TestVettingPostsLegFails(t *testing.T) {
	legs := vettingShortVideoLegs()
	legs.answers["short_video_a/posts"] = vettingFailing(envelope.ResourceNotFound, http.StatusNotFound, "No such account.")
	_, err := vettingServe(t, legs, "short_video_a", nil)
	if err == nil {
		t.Fatal("the call succeeded without posts")
	}
	if err.Type != envelope.ResourceNotFound || err.Status != http.StatusNotFound {
		t.Errorf("error = %s %d, want the leg's RESOURCE_NOT_FOUND 404", err.Type, err.Status)
	}
	if !strings.Contains(err.Message, "posts could not be read") || !strings.Contains(err.Message, "No such account.") {
		t.Errorf("message = %q", err.Message)
	}
	if err.Details["leg"] != "/v1/short_video_a/posts" || err.Details["reason"] != "canned" || err.Details["leg_request_id"] == nil {
		t.Errorf("details = %v", err.Details)
	}
	if got := legs.requests("short_video_a/comments"); len(got) != 0 {
		t.Errorf("comments were read without posts: %v", got)
	}

	delete(legs.answers, "short_video_a/posts")
	if _, err := vettingServe(t, legs, "short_video_a", nil); err == nil || err.Type != envelope.EndpointNotAvailable {
		t.Errorf("without a posts source: %v", err)
	}
}

func TestVettingCommentsLegFails(t *testing.T) {
	legs := vettingShortVideoLegs()
	legs.answers["short_video_a/comments"] = func(p map[string]string) vettingAnswer {
		if p["post_id"] == "7300000000000000002" {
			return vettingAnswer{errType: envelope.UpstreamError, status: http.StatusBadGateway, message: "The source answered unusably."}
		}
		return vettingShortVideoComments(p)
	}
	d, err := vettingServe(t, legs, "short_video_a", map[string]string{"comment_posts": "3"})
	if err != nil {
		t.Fatal(err)
	}
	// Eligible: posts 4, 2 and 1 (post 3 reports 0 comments).
	s := d.Sample
	if s.CommentPostsRequested != 3 || s.CommentPostsAttempted != 3 || s.CommentPostsCompleted != 2 || s.CommentsReturned != 3 {
		t.Errorf("sample = %+v", s)
	}
	if !vettingWarned(d, "The comments of post 7300000000000000002 could not be read (/v1/short_video_a/comments, UPSTREAM_ERROR)") {
		t.Errorf("_warnings = %q", d.Warnings)
	}
	if len(d.Legs) != 5 {
		t.Errorf("legs = %d, want profile, posts and 3 comments legs", len(d.Legs))
	}
}

func TestVettingNoCommentPosts(t *testing.T) {
	legs := vettingShortVideoLegs()
	d, err := vettingServe(t, legs, "short_video_a", map[string]string{"comment_posts": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := legs.requests("short_video_a/comments"); len(got) != 0 {
		t.Errorf("comments legs ran: %v", got)
	}
	if s := d.Sample; s.CommentPostsRequested != 0 || s.CommentPostsAttempted != 0 || s.CommentsReturned != 0 || d.CommentSample == nil {
		t.Errorf("sample = %+v, comment_sample = %v", s, d.CommentSample)
	}
	if len(d.Legs) != 2 {
		t.Errorf("legs = %+v", d.Legs)
	}
}

func TestVettingContentReview(t *testing.T) {
	d, err := vettingServe(t, vettingShortVideoLegs(), "short_video_a", map[string]string{"content_review": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if d.ContentReview == nil || d.ContentReview.Status != "unavailable" || d.ContentReview.Reason == "" {
		t.Errorf("content_review = %+v", d.ContentReview)
	}
}

// TestVettingCommentPostSelection: photo_social's comments take the
// shortcode; microblog_c's posts marked without replies are skipped.
func TestVettingCommentPostSelection(t *testing.T) {
	legs := &vettingFakeLegs{answers: map[string]func(map[string]string) vettingAnswer{
		"photo_social/profile": vettingData200(`{"followers":50,"follower_source_field":"followers_count"}`),
		"photo_social/posts": vettingData200(`{"handle":"bakerjane","account_id":"17841400000000001","items":[
			{"id":"17900000000000002","url":"https://www.instagram.com/p/DCmNtGql002/","shortcode":"DCmNtGql002","created_at":"2026-11-02T00:00:00+0000",
			 "counts":{"likes":null,"comments":4,"shares":null,"views":null}},
			{"id":"17900000000000001","url":"https://www.instagram.com/p/DCmNtGql001/","shortcode":"DCmNtGql001","created_at":"2026-11-01T00:00:00Z",
			 "counts":{"likes":7,"comments":1,"shares":null,"views":null}}],"count":2,"cursor":null,"has_more":false}`),
		"photo_social/comments": vettingData200(`{"post_id":"DCmNtGql001","items":[],"count":0,"cursor":null,"has_more":false}`),
	}}
	if _, err := vettingServe(t, legs, "photo_social", map[string]string{"comment_posts": "1"}); err != nil {
		t.Fatal(err)
	}
	// The first post's date is not RFC 3339, so the dated post comes first.
	if got := legs.requests("photo_social/comments"); len(got) != 1 || got[0]["post_id"] != "DCmNtGql001" {
		t.Errorf("comments legs = %v", got)
	}

	legs = &vettingFakeLegs{answers: map[string]func(map[string]string) vettingAnswer{
		"microblog_c/posts": vettingData200(`{"handle":"bakerjane","items":[
			{"id":"18000000000000002","created_at":"2026-11-02T00:00:00Z","counts":{"likes":null,"comments":null,"shares":null,"views":null},"has_replies":false},
			{"id":"18000000000000001","created_at":"2026-11-01T00:00:00Z","counts":{"likes":null,"comments":null,"shares":null,"views":null},"has_replies":true}],
			"count":2,"cursor":null,"has_more":null}`),
		"microblog_c/comments": vettingData200(`{"post_id":"18000000000000001","items":[],"count":0,"cursor":null,"has_more":false}`),
	}}
	d, err := vettingServe(t, legs, "microblog_c", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := legs.requests("microblog_c/comments"); len(got) != 1 || got[0]["post_id"] != "18000000000000001" {
		t.Errorf("comments legs = %v", got)
	}
	// has_more unknown: not exhaustive.
	if d.Sample.Exhaustive || d.Output.PostsWithEngagement != 0 || d.Output.AvgEngagementPerPost != nil {
		t.Errorf("sample = %+v, output = %+v", d.Sample, d.Output)
	}
	vettingEqualPtr(t, "posting_cadence_days", d.Output.PostingCadenceDays, vettingPtr(1.0))
}
