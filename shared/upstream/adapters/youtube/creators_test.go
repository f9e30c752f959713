package youtube_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/youtube"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const (
	profileEndpoint  = "video_platform/profile"
	postsEndpoint    = "video_platform/posts"
	commentsEndpoint = "video_platform/comments"
)

func warningsOf(data map[string]any) string { return strings.Join(toStrings(data["_warnings"]), " | ") }

// paths lists the upstream paths the replay server was asked, in order.
func paths(u *adaptertest.Upstream) []string {
	var out []string
	for _, r := range u.Replay.Requests() {
		out = append(out, r.Path)
	}
	return out
}

func TestProfileByHandle(t *testing.T) {
	u := start(t, map[string]string{youtube.KeySecret: testKey})
	data := u.Data(t, profileEndpoint, "handle=samplegochannel", "profile-default")
	q := url.Values(u.LastRequest(t).Query)
	if q.Get("forHandle") != "@samplegochannel" || q.Get("part") != "snippet,statistics" || q.Get("key") != testKey || q.Has("id") {
		t.Errorf("channels.list query %v", q)
	}
	want := map[string]any{
		"id": "UCsampleGoChannel0000001", "handle": "samplegochannel", "name": "Sample Go Channel",
		"url": "https://www.youtube.com/@samplegochannel", "followers": 1230000.0,
		"follower_source_field": "statistics.subscriberCount", "posts_count": 412.0, "views_count": 98765432101.0,
		"created_at": "2011-08-16T22:49:29Z", "country": "US", "avatar_url": "https://yt3.ggpht.com/sample-UCsampleGoChannel0000001/high.jpg",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("%s = %#v; want %#v", k, data[k], v)
		}
	}
	if w := warningsOf(data); !strings.Contains(w, "rounds") {
		t.Errorf("_warnings lack the rounding note: %s", w)
	}
}

func TestProfileByChannelID(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, profileEndpoint, "channel_id=UCsampleTalksChannel0002&handle=ignored", "profile-by-id")
	q := url.Values(u.LastRequest(t).Query)
	if q.Get("id") != "UCsampleTalksChannel0002" || q.Has("forHandle") {
		t.Errorf("channel_id must win: %v", q)
	}
	// No customUrl: no handle, the channel URL; an empty description is null.
	if data["id"] != "UCsampleTalksChannel0002" || data["handle"] != nil || data["description"] != nil ||
		data["url"] != "https://www.youtube.com/channel/UCsampleTalksChannel0002" || data["country"] != nil {
		t.Errorf("profile by id: %v", data)
	}
	if !strings.Contains(warningsOf(data), "looked up by channel_id") {
		t.Errorf("_warnings: %s", warningsOf(data))
	}
}

func TestProfileHiddenSubscriberCount(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, profileEndpoint, "handle=samplehidden", "profile-hidden")
	if v, ok := data["followers"]; !ok || v != nil {
		t.Errorf("followers = %v (present %v); want null", v, ok)
	}
	if data["follower_source_field"] != nil || data["posts_count"] != 27.0 {
		t.Errorf("hidden: %v", data)
	}
	if !strings.Contains(warningsOf(data), "hides its subscriber count") {
		t.Errorf("_warnings: %s", warningsOf(data))
	}
}

func TestProfileNotFound(t *testing.T) {
	u := start(t, nil)
	out := u.Fault(t, profileEndpoint, "handle=samplenobody", upstream.NotFound)
	if out.Trace.Attempts != 1 {
		t.Errorf("attempts %d", out.Trace.Attempts)
	}
	u.Fault(t, postsEndpoint, "handle=samplenobody", upstream.NotFound)
}

func TestProfileQuota(t *testing.T) {
	u := start(t, map[string]string{youtube.KeySecret: testKey})
	out := u.Fault(t, profileEndpoint, "handle=samplequota", upstream.RateLimited)
	if out.Fault.RetryAfter <= 0 || strings.Contains(out.Fault.Error(), testKey) {
		t.Errorf("quota fault %v", out.Fault)
	}
}

func TestPosts(t *testing.T) {
	u := start(t, map[string]string{youtube.KeySecret: testKey})
	data := u.Data(t, postsEndpoint, "handle=samplegochannel", "posts-default")
	reqs := u.Replay.Requests()
	if got := paths(u); strings.Join(got, " ") != "/youtube/v3/channels /youtube/v3/playlistItems /youtube/v3/videos" {
		t.Fatalf("upstream calls %v", got)
	}
	if q := url.Values(reqs[0].Query); q.Get("part") != "contentDetails" || q.Get("forHandle") != "@samplegochannel" {
		t.Errorf("channels.list %v", q)
	}
	if q := url.Values(reqs[1].Query); q.Get("playlistId") != "UUsampleGoChannel0000001" || q.Get("maxResults") != "20" || q.Has("pageToken") || q.Get("part") != "contentDetails" {
		t.Errorf("playlistItems.list %v", q)
	}
	if q := url.Values(reqs[2].Query); q.Get("id") != "sampleVidA1,sampleVidB2,samplePriv5,sampleVidC3" ||
		q.Get("part") != "snippet,statistics,contentDetails" || q.Has("maxResults") || q.Get("key") != testKey {
		t.Errorf("videos.list %v", q)
	}
	if data["channel_id"] != "UCsampleGoChannel0000001" || data["count"] != 3.0 || data["has_more"] != true || data["cursor"] != "EAAaBlBUOkNBUQ" {
		t.Fatalf("list fields: %v", data)
	}
	items := adaptertest.Items(t, data)
	type counts struct{ likes, comments, views any }
	want := []struct {
		id, duration string
		c            counts
	}{
		{"sampleVidA1", "PT14M7S", counts{98765.0, 1234.0, 18234567890123.0}},
		{"sampleVidB2", "PT1H2M3S", counts{nil, 17.0, 5021.0}},
		{"sampleVidC3", "PT31S", counts{45000.0, nil, 910000.0}},
	}
	for i, w := range want {
		it := items[i]
		c := it["counts"].(map[string]any)
		if it["id"] != w.id || it["url"] != "https://www.youtube.com/watch?v="+w.id || it["duration"] != w.duration ||
			c["likes"] != w.c.likes || c["comments"] != w.c.comments || c["views"] != w.c.views {
			t.Errorf("item %d = %v", i, it)
		}
		if v, ok := c["shares"]; !ok || v != nil {
			t.Errorf("item %d shares = %v (present %v); want null", i, v, ok)
		}
	}
	if items[0]["text"] != "Goroutines, errgroup & context — with code.\n\nChapters:\n0:00 Intro" || items[1]["text"] != nil {
		t.Errorf("text: %q, %v", items[0]["text"], items[1]["text"])
	}
	w := warningsOf(data)
	for _, must := range []string{"shares", "1 upload(s)", "counts.likes is null", "counts.comments is null"} {
		if !strings.Contains(w, must) {
			t.Errorf("_warnings lack %q: %s", must, w)
		}
	}
}

func TestPostsPaging(t *testing.T) {
	u := start(t, nil)
	last := u.Data(t, postsEndpoint, "handle=samplegochannel&limit=4&cursor=EAAaBlBUOkNBUQ", "posts-page2")
	reqs := u.Replay.Requests()
	if q := url.Values(reqs[1].Query); q.Get("pageToken") != "EAAaBlBUOkNBUQ" || q.Get("maxResults") != "4" {
		t.Errorf("playlistItems.list %v", q)
	}
	if last["has_more"] != false || last["cursor"] != nil || last["count"] != 1.0 {
		t.Errorf("last page: %v", last)
	}
	u.Fault(t, postsEndpoint, "handle=samplegochannel&cursor=sample-bad-token", upstream.InvalidParameter)
}

func TestPostsWithoutUploads(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, postsEndpoint, "handle=samplenouploads", "posts-no-uploads")
	if data["count"] != 0.0 || len(adaptertest.Items(t, data)) != 0 || data["has_more"] != false || !strings.Contains(warningsOf(data), "no public uploads") {
		t.Errorf("no uploads: %v", data)
	}
	if got := paths(u); len(got) != 2 {
		t.Errorf("videos.list called for no videos: %v", got)
	}
}

func TestPostsByChannelID(t *testing.T) {
	u := start(t, nil)
	u.Serve(t, postsEndpoint, "channel_id=UCsampleTalksChannel0002&limit=1")
	reqs := u.Replay.Requests()
	if q := url.Values(reqs[0].Query); q.Get("id") != "UCsampleTalksChannel0002" || q.Has("forHandle") {
		t.Errorf("channels.list %v", q)
	}
	if q := url.Values(reqs[1].Query); q.Get("playlistId") != "UUsampleTalksChannel0002" || q.Get("maxResults") != "1" {
		t.Errorf("playlistItems.list %v", q)
	}
}

func TestComments(t *testing.T) {
	u := start(t, map[string]string{youtube.KeySecret: testKey})
	data := u.Data(t, commentsEndpoint, "video_id=dQw4w9WgXcQ", "comments-default")
	q := url.Values(u.LastRequest(t).Query)
	want := map[string]string{"part": "snippet", "videoId": "dQw4w9WgXcQ", "maxResults": "20", "order": "relevance", "textFormat": "plainText", "key": testKey}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q; want %q", k, q.Get(k), v)
		}
	}
	if len(q) != len(want) {
		t.Errorf("unexpected parameters %v", q)
	}
	if data["video_id"] != "dQw4w9WgXcQ" || data["count"] != 2.0 || data["has_more"] != true || data["cursor"] != "QURTSl9pMWFzYW1wbGVfcGFnZV8y" {
		t.Fatalf("list fields %v", data)
	}
	items := adaptertest.Items(t, data)
	a := items[0]["author"].(map[string]any)
	if items[0]["id"] != "UgzSample0000000000001AaABAg" || items[0]["text"] != "Great explanation of errgroup — thanks! <3 & more" ||
		items[0]["likes"] != 1532.0 || items[0]["replies"] != 12.0 || items[0]["created_at"] != "2026-03-01T18:22:41Z" ||
		a["name"] != "@sampleviewer" || a["channel_id"] != "UCsampleViewerChannel001" || a["url"] != "http://www.youtube.com/@sampleviewer" {
		t.Errorf("first comment %v", items[0])
	}
}

func TestCommentsFromURLs(t *testing.T) {
	u := start(t, nil)
	for _, v := range []string{
		"https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s",
		"https://youtu.be/dQw4w9WgXcQ?si=abc",
		"youtu.be/dQw4w9WgXcQ",
		"https://m.youtube.com/shorts/dQw4w9WgXcQ",
		"https://www.youtube.com/live/dQw4w9WgXcQ?feature=share",
		"https://www.youtube.com/embed/dQw4w9WgXcQ",
	} {
		out := u.Serve(t, commentsEndpoint, "video_id="+url.QueryEscape(v))
		if out.Fault != nil {
			t.Errorf("%s: %v", v, out.Fault)
			continue
		}
		if got := u.LastRequest(t).Query["videoId"]; len(got) != 1 || got[0] != "dQw4w9WgXcQ" {
			t.Errorf("%s sent videoId %v", v, got)
		}
	}
	before := len(u.Replay.Requests())
	for _, v := range []string{"tooshort", "https://www.youtube.com/@samplegochannel", "https://www.youtube.com/watch?v=bad", "dQw4w9WgXcQ!"} {
		out := u.Fault(t, commentsEndpoint, "video_id="+url.QueryEscape(v), upstream.InvalidParameter)
		if out.Fault.Field != "video_id" {
			t.Errorf("%s: field %q", v, out.Fault.Field)
		}
	}
	if len(u.Replay.Requests()) != before {
		t.Error("an unusable video_id reached the source")
	}
	// A URL of another site is refused by validation, before any charge.
	e, _ := registry.Default().Endpoint(commentsEndpoint)
	for _, v := range []string{"https://evil.example/watch?v=dQw4w9WgXcQ", "https://youtube.com.evil.example/watch?v=dQw4w9WgXcQ"} {
		_, verr := params.Validate(e, url.Values{"video_id": {v}}, nil)
		if verr == nil || !strings.Contains(verr.Message+jsonString(verr.Details), "wrong_host") {
			t.Errorf("%s: %v", v, verr)
		}
	}
}

func jsonString(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

func TestCommentsPagingAndFaults(t *testing.T) {
	u := start(t, nil)
	last := u.Data(t, commentsEndpoint, "video_id=dQw4w9WgXcQ&limit=100&cursor=QURTSl9pMWFzYW1wbGVfcGFnZV8y", "comments-page2")
	if q := u.LastRequest(t).Query; q["pageToken"][0] != "QURTSl9pMWFzYW1wbGVfcGFnZV8y" || q["maxResults"][0] != "100" {
		t.Errorf("query %v", q)
	}
	it := adaptertest.Items(t, last)[0]
	if last["has_more"] != false || last["cursor"] != nil || it["text"] != nil || it["author"].(map[string]any)["channel_id"] != nil {
		t.Errorf("last page %v", last)
	}

	disabled := u.Data(t, commentsEndpoint, "video_id=sampleNoCmt", "comments-disabled")
	if disabled["count"] != 0.0 || len(adaptertest.Items(t, disabled)) != 0 || disabled["has_more"] != false ||
		!strings.Contains(warningsOf(disabled), "comments are turned off") {
		t.Errorf("comments disabled: %v", disabled)
	}

	out := u.Fault(t, commentsEndpoint, "video_id=sampleGone1", upstream.NotFound)
	if out.Trace.Attempts != 1 {
		t.Errorf("attempts %d", out.Trace.Attempts)
	}
	u.Fault(t, commentsEndpoint, "video_id=dQw4w9WgXcQ&cursor=sample-bad-token", upstream.InvalidParameter)
}

// Ids stay strings, counts numbers, in what the adapters hand over.
func TestIDsAreStrings(t *testing.T) {
	u := start(t, nil)
	for _, c := range []struct{ endpoint, query string }{
		{profileEndpoint, "handle=samplegochannel"},
		{postsEndpoint, "handle=samplegochannel"},
		{commentsEndpoint, "video_id=dQw4w9WgXcQ"},
	} {
		out := u.Serve(t, c.endpoint, c.query)
		raw, err := json.Marshal(out.Data)
		if err != nil || out.Fault != nil {
			t.Fatalf("%s: %v %v", c.endpoint, err, out.Fault)
		}
		var doc map[string]any
		_ = json.Unmarshal(raw, &doc)
		check := func(where string, m map[string]any) {
			for _, k := range []string{"id", "channel_id", "video_id"} {
				if v, ok := m[k]; ok && v != nil {
					if _, isString := v.(string); !isString {
						t.Errorf("%s %s %s is %T", c.endpoint, where, k, v)
					}
				}
			}
		}
		check("data", doc)
		if items, ok := doc["items"].([]any); ok {
			for _, it := range items {
				m := it.(map[string]any)
				check("item", m)
				if a, ok := m["author"].(map[string]any); ok {
					check("author", a)
				}
			}
		}
	}
}

// TestCommentsHTMLText reads a commentThreads page in the format the
// source sends (textDisplay rendered as HTML, textOriginal sometimes
// absent): the text is what the author wrote, decoded exactly once.
func TestCommentsHTMLText(t *testing.T) {
	u := start(t, map[string]string{youtube.KeySecret: testKey})
	data := u.Data(t, commentsEndpoint, "video_id=Hq7sAmPle0k", "comments-html")
	if data["count"] != 2.0 || data["has_more"] != true || data["cursor"] != "Z2V0X3JhbmtlZF9zdHJlYW1zLS1TYW1wbGVIdG1sUGFnZTI=" {
		t.Fatalf("list fields %v", data)
	}
	items := adaptertest.Items(t, data)
	if want := "\"Lanterns\"\n\n[Verse 1]\nI'll keep the porch light on\nYou're the only road home"; items[0]["text"] != want {
		t.Errorf("HTML-only comment text %q; want %q", items[0]["text"], want)
	}
	if want := "Tom & Jerry's theme at 1:35 \u2764\ufe0f"; items[1]["text"] != want {
		t.Errorf("comment text %q; want textOriginal %q", items[1]["text"], want)
	}
	if items[1]["likes"] != 0.0 || items[1]["replies"] != 0.0 {
		t.Errorf("zero counters %v, %v; want 0, 0", items[1]["likes"], items[1]["replies"])
	}
}
