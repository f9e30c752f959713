package youtube_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/youtube"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const endpoint = "video_platform/search"

// testKey is a configured API key; it must reach the upstream as `key`
// and never a fault's reason.
const testKey = "sample-api-key-0123456789"

// fixedNow makes the uploadDate windows and the quota reset predictable:
// 05:00 Pacific Daylight Time on 10 March 2026.
var fixedNow = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// start runs the provider behind the replay upstream with a fixed clock.
func start(t *testing.T, secrets map[string]string) *adaptertest.Upstream {
	t.Helper()
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	return adaptertest.StartWith(t, youtube.Provider(), secrets, opts)
}

func TestSearchDefault(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, endpoint, "query=go+concurrency", "search-default")
	if data["count"] != 5.0 || data["total"] != 1000000.0 || data["cursor"] != "CAUQAA" || data["has_more"] != true {
		t.Fatalf("list fields: count %v total %v cursor %v has_more %v", data["count"], data["total"], data["cursor"], data["has_more"])
	}
	if data["query"] != "go concurrency" {
		t.Fatalf("query = %v", data["query"])
	}
	got := adaptertest.Items(t, data)
	want := []struct{ id, typ, url string }{
		{"sampleVid01", "video", "https://www.youtube.com/watch?v=sampleVid01"},
		{"UCsampleTalksChannel0002", "channel", "https://www.youtube.com/channel/UCsampleTalksChannel0002"},
		{"PLsampleGoConcurrencyPlaylist00001", "playlist", "https://www.youtube.com/playlist?list=PLsampleGoConcurrencyPlaylist00001"},
		{"sampleVid03", "video", "https://www.youtube.com/watch?v=sampleVid03"},
		{"sample_-V04", "video", "https://www.youtube.com/watch?v=sample_-V04"},
	}
	for i, w := range want {
		if got[i]["id"] != w.id || got[i]["type"] != w.typ || got[i]["url"] != w.url || got[i]["platform"] != "video_platform" {
			t.Errorf("item %d = %v %v %v %v; want %v", i, got[i]["id"], got[i]["type"], got[i]["url"], got[i]["platform"], w)
		}
		for _, absent := range []string{"duration", "duration_seconds", "views", "video_count"} {
			if _, ok := got[i][absent]; ok {
				t.Errorf("item %d carries %s, which search results do not report", i, absent)
			}
		}
	}
	// Entities are decoded, the largest thumbnail wins, channels have no channel.
	if got[0]["title"] != "Sample: Go Concurrency Patterns & Pipelines" || got[2]["title"] != `Sample playlist: "Concurrency in Go"` {
		t.Errorf("titles not unescaped: %q, %q", got[0]["title"], got[2]["title"])
	}
	if got[0]["thumbnail_url"] != "https://i.ytimg.com/vi/sampleVid01/hqdefault.jpg" {
		t.Errorf("thumbnail_url = %v", got[0]["thumbnail_url"])
	}
	if _, ok := got[1]["channel"]; ok {
		t.Errorf("a channel result carries a channel: %v", got[1]["channel"])
	}
	if got[3]["description"] != nil {
		t.Errorf("an empty description should be null, got %q", got[3]["description"])
	}
	warnings := strings.Join(toStrings(data["_warnings"]), " | ")
	for _, must := range []string{"duration", "views", "estimate"} {
		if !strings.Contains(warnings, must) {
			t.Errorf("_warnings lack %q: %s", must, warnings)
		}
	}
}

func TestSearchEdgeCases(t *testing.T) {
	u := start(t, nil)
	empty := u.Data(t, endpoint, "query=sample-empty", "search-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["cursor"] != nil || empty["has_more"] != false || empty["total"] != 0.0 {
		t.Fatalf("empty page: %v", empty)
	}
	sparse := u.Data(t, endpoint, "query=sample-sparse", "search-sparse")
	if sparse["total"] != nil || sparse["has_more"] != false || sparse["cursor"] != nil {
		t.Fatalf("sparse list fields: total %v has_more %v cursor %v", sparse["total"], sparse["has_more"], sparse["cursor"])
	}
	got := adaptertest.Items(t, sparse)
	if len(got) != 2 || got[0]["thumbnail_url"] != nil || got[0]["description"] != nil || got[0]["channel"].(map[string]any)["name"] != nil {
		t.Fatalf("sparse video: %v", got[0])
	}
	if got[1]["title"] != nil || got[1]["published_at"] != nil || got[1]["channel"] != nil ||
		got[1]["thumbnail_url"] != "https://i.ytimg.com/img/no_thumbnail.jpg" {
		t.Fatalf("sparse playlist: %v", got[1])
	}
}

func TestSearchParameters(t *testing.T) {
	u := start(t, map[string]string{youtube.KeySecret: testKey})
	u.Serve(t, endpoint, "query=go&type=channel,playlist&sortBy=views&uploadDate=week&region=gb&max_results=25")
	q := url.Values(u.LastRequest(t).Query)
	want := map[string]string{
		"part": "snippet", "q": "go", "type": "channel,playlist", "order": "viewCount",
		"publishedAfter": "2026-03-03T12:00:00Z", "regionCode": "GB", "maxResults": "25", "key": testKey,
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q; want %q", k, q.Get(k), v)
		}
	}
	for _, absent := range []string{"videoDuration", "pageToken"} {
		if q.Has(absent) {
			t.Errorf("%s sent: %q", absent, q.Get(absent))
		}
	}
	if len(q) != len(want) {
		t.Errorf("unexpected parameters: %v", q)
	}

	// Without max_results nothing is sent: the upstream's default page of 5.
	u.Serve(t, endpoint, "query=go")
	if q := url.Values(u.LastRequest(t).Query); q.Has("maxResults") || q.Has("order") || q.Has("type") || q.Has("publishedAfter") {
		t.Errorf("optional parameters sent without being asked: %v", q)
	}

	// duration forces video results and says so when it overrode type.
	out := u.Serve(t, endpoint, "query=go&type=channel&duration=short")
	if q := url.Values(u.LastRequest(t).Query); q.Get("type") != "video" || q.Get("videoDuration") != "short" {
		t.Errorf("duration: type %q videoDuration %q", q.Get("type"), q.Get("videoDuration"))
	}
	if res := out.Data.(youtube.Result); !strings.Contains(strings.Join(res.Warnings, " "), "narrowed to video") {
		t.Errorf("no warning about the narrowed type: %v", res.Warnings)
	}
	for _, d := range []string{"medium", "long"} {
		u.Serve(t, endpoint, "query=go&duration="+d)
		if q := url.Values(u.LastRequest(t).Query); q.Get("type") != "video" || q.Get("videoDuration") != d {
			t.Errorf("duration %s: type %q videoDuration %q", d, q.Get("type"), q.Get("videoDuration"))
		}
	}

	for sortBy, order := range map[string]string{"relevance": "relevance", "date": "date", "rating": "rating", "title": "title", "views": "viewCount"} {
		u.Serve(t, endpoint, "query=go&sortBy="+sortBy)
		if got := u.LastRequest(t).Query["order"]; len(got) != 1 || got[0] != order {
			t.Errorf("sortBy %s sent order %v; want %s", sortBy, got, order)
		}
	}
	for window, after := range map[string]string{
		"hour": "2026-03-10T11:00:00Z", "today": "2026-03-09T12:00:00Z", "week": "2026-03-03T12:00:00Z",
		"month": "2026-02-08T12:00:00Z", "year": "2025-03-10T12:00:00Z",
	} {
		u.Serve(t, endpoint, "query=go&uploadDate="+window)
		if got := u.LastRequest(t).Query["publishedAfter"]; len(got) != 1 || got[0] != after {
			t.Errorf("uploadDate %s sent publishedAfter %v; want %s", window, got, after)
		}
	}
}

func TestSearchKeyIsRequired(t *testing.T) {
	r := upstream.NewRunner([]*upstream.Provider{youtube.Provider()}, upstream.Settings{})
	if r.Eligible(endpoint) {
		t.Fatal("the route is eligible without an API key")
	}
	r = upstream.NewRunner([]*upstream.Provider{youtube.Provider()}, upstream.Settings{
		Lookup: func(name string) (string, bool) { return testKey, name == youtube.KeySecret },
	})
	if !r.Eligible(endpoint) {
		t.Fatal("the route is not eligible with an API key")
	}
}

func TestSearchPagination(t *testing.T) {
	u := start(t, nil)
	first := u.Data(t, endpoint, "query=sample-paging&max_results=2", "search-page1")
	if first["cursor"] != "CAIQAA" || first["has_more"] != true || first["count"] != 2.0 {
		t.Fatalf("first page: cursor %v has_more %v count %v", first["cursor"], first["has_more"], first["count"])
	}
	if q := u.LastRequest(t).Query; q["pageToken"] != nil {
		t.Fatalf("first page sent a pageToken: %v", q["pageToken"])
	}
	last := u.Data(t, endpoint, "query=sample-paging&max_results=2&cursor="+url.QueryEscape(first["cursor"].(string)), "search-page2")
	if got := u.LastRequest(t).Query["pageToken"]; len(got) != 1 || got[0] != "CAIQAA" {
		t.Fatalf("second page sent pageToken %v; want CAIQAA", got)
	}
	if last["cursor"] != nil || last["has_more"] != false || last["count"] != 2.0 {
		t.Fatalf("last page: cursor %v has_more %v count %v", last["cursor"], last["has_more"], last["count"])
	}
}

func TestSearchErrors(t *testing.T) {
	quotaWait := 19 * time.Hour // to midnight PDT, 07:00 UTC on 11 March
	if _, err := time.LoadLocation("America/Los_Angeles"); err != nil {
		quotaWait = 20 * time.Hour // the fallback's Pacific Standard Time
	}
	cases := []struct {
		name, query string
		kind        upstream.FaultKind
		retryAfter  time.Duration
		attempts    int
	}{
		{"daily quota", "query=sample-quota", upstream.RateLimited, quotaWait, 1},
		{"short-term rate limit at 403", "query=sample-ratelimit", upstream.RateLimited, 0, 1},
		{"429 with retry-after", "query=sample-429", upstream.RateLimited, 30 * time.Second, 1},
		{"invalid key", "query=sample-keyinvalid", upstream.Rejected, 0, 1},
		{"invalid page token", "query=sample-paging&cursor=sample-bad-token", upstream.InvalidParameter, 0, 1},
		{"404 is not an answer about a search", "query=sample-notfound", upstream.Rejected, 0, 1},
		{"server error", "query=sample-500", upstream.ServerError, 0, 3},
		{"malformed body", "query=sample-malformed", upstream.Malformed, 0, 1},
		{"connection reset", "query=sample-reset", upstream.Transport, 0, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t, map[string]string{youtube.KeySecret: testKey})
			out := u.Fault(t, endpoint, tc.query, tc.kind)
			if out.Fault.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter = %v; want %v", out.Fault.RetryAfter, tc.retryAfter)
			}
			if out.Trace.Attempts != tc.attempts {
				t.Errorf("attempts = %d; want %d", out.Trace.Attempts, tc.attempts)
			}
			if strings.Contains(out.Fault.Reason, testKey) || strings.Contains(out.Fault.Error(), testKey) {
				t.Errorf("the API key leaked into the fault: %v", out.Fault)
			}
			if got := u.LastRequest(t).Query["key"]; len(got) != 1 || got[0] != testKey {
				t.Errorf("key sent as %v", got)
			}
		})
	}
}

func toStrings(v any) []string {
	raw, _ := v.([]any)
	out := make([]string, 0, len(raw))
	for _, s := range raw {
		out = append(out, s.(string))
	}
	return out
}
