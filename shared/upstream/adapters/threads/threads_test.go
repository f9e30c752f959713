package threads_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/threads"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const (
	profileEndpoint  = "microblog_c/profile"
	postsEndpoint    = "microblog_c/posts"
	commentsEndpoint = "microblog_c/comments"

	// testToken must reach the source as access_token and never a fault.
	testToken = "THAAsampleAccessToken0123456789xyz"

	postFields = "id,media_type,media_url,permalink,username,text,timestamp,shortcode,thumbnail_url," +
		"is_quote_post,quoted_post,reposted_post,has_replies,link_attachment_url"
	replyFields = "id,text,username,permalink,timestamp,media_type,has_replies,is_reply,replied_to," +
		"is_verified,profile_picture_url"

	firstPost  = "18050206876707110"
	postsAfter = "QVFIUnBxZA2lrcVBwV2Q4dFNGUXJ6bXZA2SmI3Y0VoSXBWRkxCZAlBhN0ZAYZA0NoZAjhpYmY1"
)

func start(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.Start(t, threads.Provider(), map[string]string{threads.TokenSecret: testToken})
}

// request is the i-th request the replay upstream received (negative:
// from the end): its path and single-valued query, the token checked and
// left out.
func request(t *testing.T, u *adaptertest.Upstream, i int) (string, map[string]string) {
	t.Helper()
	reqs := u.Replay.Requests()
	if i < 0 {
		i += len(reqs)
	}
	if i < 0 || i >= len(reqs) {
		t.Fatalf("request %d of %d", i, len(reqs))
	}
	r := reqs[i]
	q := map[string]string{}
	for k, v := range r.Query {
		if len(v) != 1 {
			t.Fatalf("%s sent %d times: %v", k, len(v), v)
		}
		q[k] = v[0]
	}
	if q["access_token"] != testToken {
		t.Fatalf("access_token = %q", q["access_token"])
	}
	delete(q, "access_token")
	return r.Path, q
}

func wantQuery(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s sent %v; want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q; want %q", what, k, got[k], v)
		}
	}
}

func warnings(data map[string]any) []string {
	raw, _ := data["_warnings"].([]any)
	out := make([]string, len(raw))
	for i, w := range raw {
		out[i], _ = w.(string)
	}
	return out
}

func TestProfile(t *testing.T) {
	u := start(t)
	p := u.Data(t, profileEndpoint, "handle=threads", "profile-threads")
	path, q := request(t, u, -1)
	if path != "/v1.0/profile_lookup" {
		t.Fatalf("path %s", path)
	}
	wantQuery(t, "profile_lookup", q, map[string]string{"username": "threads", "fields": "username,name,profile_picture_url," +
		"biography,is_verified,follower_count,likes_count,quotes_count,replies_count,reposts_count,views_count"})
	eng := p["recent_engagement"].(map[string]any)
	if p["id"] != "63055343223" || p["handle"] != "threads" || p["url"] != "https://www.threads.com/@threads" ||
		p["followers"] != 41238802.0 || p["follower_source_field"] != "follower_count" || p["verified"] != true ||
		p["posts_count"] != nil || p["avatar_url"] == nil || p["description"] == nil ||
		eng["window_days"] != 7.0 || eng["likes"] != 1893420.0 || eng["views"] != 98713412.0 || eng["replies"] != 120577.0 {
		t.Fatalf("profile: %v", p)
	}
	if w := warnings(p); len(w) != 2 || !strings.Contains(w[0], "posts_count") {
		t.Errorf("warnings %v", w)
	}

	// The handle is folded to lower case: the source wants an exact match
	// and stores usernames in lower case.
	u.Serve(t, profileEndpoint, "handle=Threads")
	if _, q := request(t, u, -1); q["username"] != "threads" {
		t.Errorf("handle=Threads sent username %q", q["username"])
	}

	sparse := u.Data(t, profileEndpoint, "handle=sample_quiet", "profile-sparse")
	if sparse["followers"] != nil || sparse["follower_source_field"] != nil || sparse["id"] != nil || sparse["name"] != nil ||
		sparse["verified"] != false || len(warnings(sparse)) != 4 {
		t.Errorf("sparse: %v", sparse)
	}
}

// A handle the source could not hold is refused by validation: 422
// before any call or charge.
func TestHandleValidation(t *testing.T) {
	for _, key := range []string{profileEndpoint, postsEndpoint} {
		e, ok := registry.Default().Endpoint(key)
		if !ok {
			t.Fatalf("%s is not registered", key)
		}
		for _, h := range []string{"@threads", "has space", "dash-name", strings.Repeat("a", 31), ""} {
			_, verr := params.Validate(e, url.Values{"handle": {h}}, nil)
			if verr == nil || verr.Status != 422 {
				t.Errorf("%s handle=%q: %v", key, h, verr)
				continue
			}
			if h == "@threads" && !strings.Contains(verr.Details["expected"].(string), "without a leading @") {
				t.Errorf("@threads: %v", verr.Details)
			}
		}
		if _, verr := params.Validate(e, url.Values{"handle": {"zuck.official_2"}}, nil); verr != nil {
			t.Errorf("%s: a valid username refused: %v", key, verr)
		}
	}
	p, _ := registry.Default().Endpoint(postsEndpoint)
	for _, limit := range []string{"0", "101"} {
		if _, verr := params.Validate(p, url.Values{"handle": {"threads"}, "limit": {limit}}, nil); verr == nil {
			t.Errorf("limit=%s validated", limit)
		}
	}
}

func TestPostsAndPaging(t *testing.T) {
	u := start(t)
	first := u.Data(t, postsEndpoint, "handle=threads", "posts-threads")
	if n := len(u.Replay.Requests()); n != 1 {
		t.Fatalf("%d requests; want one", n)
	}
	path, q := request(t, u, 0)
	if path != "/v1.0/profile_posts" {
		t.Fatalf("path %s", path)
	}
	wantQuery(t, "profile_posts", q, map[string]string{"username": "threads", "fields": postFields, "limit": "20"})
	items := adaptertest.Items(t, first)
	if len(items) != 4 || first["count"] != 4.0 || first["has_more"] != true || first["cursor"] != postsAfter ||
		first["handle"] != "threads" {
		t.Fatalf("page 1: %v", first)
	}
	text := items[0]
	counts := text["counts"].(map[string]any)
	if text["id"] != firstPost || text["url"] != "https://www.threads.com/@threads/post/DHx1AbCdEfG" ||
		text["created_at"] != "2026-03-10T07:05:44Z" || text["type"] != "post" || text["has_replies"] != true ||
		text["link_url"] == nil || len(counts) != 4 {
		t.Errorf("first post: %v", text)
	}
	for k, v := range counts {
		if v != nil {
			t.Errorf("counts.%s = %v; the source reports none", k, v)
		}
	}
	if w := warnings(first); len(w) != 1 || !strings.Contains(w[0], "null (unknown), not zero") {
		t.Errorf("warnings %v", w)
	}
	if items[1]["thumbnail_url"] != items[1]["media_url"] || items[1]["media_type"] != "IMAGE" {
		t.Errorf("image post: %v", items[1])
	}
	// A video without a permalink (flagged media): its page is built from
	// the username and code; its thumbnail is the video's.
	if items[2]["url"] != "https://www.threads.com/@threads/post/DHsT0aBcDeF" ||
		items[2]["thumbnail_url"] != "https://scontent-iad3-1.cdninstagram.com/v/t51.2885-15/example_thumb.jpg" {
		t.Errorf("video post: %v", items[2])
	}
	if items[3]["type"] != "quote" || items[3]["quoted_id"] != "18061234567890123" {
		t.Errorf("quote: %v", items[3])
	}

	second := u.Data(t, postsEndpoint, "handle=threads&cursor="+url.QueryEscape(postsAfter), "posts-page2")
	if _, q := request(t, u, -1); q["after"] != postsAfter || q["username"] != "threads" {
		t.Errorf("page 2 sent %v", q)
	}
	// cursors without next: the last page.
	repost := adaptertest.Items(t, second)[0]
	if second["has_more"] != false || second["cursor"] != nil || second["count"] != 1.0 ||
		repost["type"] != "repost" || repost["reposted_id"] != "18098765432109876" || repost["text"] != nil {
		t.Errorf("page 2: %v", second)
	}

	u.Serve(t, postsEndpoint, "handle=threads&limit=5")
	if _, q := request(t, u, -1); q["limit"] != "5" {
		t.Errorf("limit=5 sent %q", q["limit"])
	}

	empty := u.Data(t, postsEndpoint, "handle=sample_quiet", "posts-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false ||
		empty["cursor"] != nil || empty["_warnings"] != nil {
		t.Errorf("empty: %v", empty)
	}
}

func TestComments(t *testing.T) {
	u := start(t)
	first := u.Data(t, commentsEndpoint, "post_id="+firstPost, "comments-post")
	if n := len(u.Replay.Requests()); n != 1 {
		t.Fatalf("%d requests; an id needs no resolution", n)
	}
	path, q := request(t, u, 0)
	if path != "/v1.0/"+firstPost+"/replies" {
		t.Fatalf("path %s", path)
	}
	wantQuery(t, "replies", q, map[string]string{"fields": replyFields, "reverse": "true", "limit": "20"})
	items := adaptertest.Items(t, first)
	if len(items) != 3 || first["post_id"] != firstPost || first["has_more"] != true || first["cursor"] == nil {
		t.Fatalf("page 1: %v", first)
	}
	c := items[0]
	author := c["author"].(map[string]any)
	if c["id"] != "18060000000000011" || c["created_at"] != "2026-03-10T09:12:40Z" || c["likes"] != nil || c["replies"] != nil ||
		c["has_replies"] != true || c["in_reply_to_id"] != firstPost || author["handle"] != "ana.reviews" ||
		author["url"] != "https://www.threads.com/@ana.reviews" || author["id"] != nil || author["name"] != nil ||
		author["verified"] != false || author["avatar_url"] == nil {
		t.Errorf("first reply: %v", c)
	}
	if private := items[1]["author"].(map[string]any); private["handle"] != nil || private["url"] != nil {
		t.Errorf("a private author is named: %v", private)
	}
	if w := warnings(first); len(w) != 3 || !strings.Contains(w[2], "private") {
		t.Errorf("warnings %v", w)
	}

	second := u.Data(t, commentsEndpoint, "post_id="+firstPost+"&cursor="+url.QueryEscape(first["cursor"].(string)), "comments-page2")
	if _, q := request(t, u, -1); q["after"] != first["cursor"] {
		t.Errorf("page 2 sent %v", q)
	}
	if second["has_more"] != false || second["cursor"] != nil || second["count"] != 1.0 {
		t.Errorf("page 2: %v", second)
	}

	u.Serve(t, commentsEndpoint, "post_id="+firstPost+"&limit=50")
	if _, q := request(t, u, -1); q["limit"] != "50" {
		t.Errorf("limit=50 sent %q", q["limit"])
	}

	empty := u.Data(t, commentsEndpoint, "post_id=18000000000000001", "comments-empty")
	if empty["count"] != 0.0 || empty["has_more"] != false || empty["_warnings"] != nil {
		t.Errorf("empty: %v", empty)
	}
}

// A post URL is resolved to its media id among the author's latest posts,
// then read as the id is.
func TestCommentsFromPostURLs(t *testing.T) {
	for _, link := range []string{
		"https://www.threads.net/@threads/post/DHx1AbCdEfG",
		"https://www.threads.com/@Threads/post/DHx1AbCdEfG/?xmt=AQGzExample",
		"threads.com/@threads/post/DHx1AbCdEfG",
	} {
		u := start(t)
		data := u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape(link), "comments-post")
		if n := len(u.Replay.Requests()); n != 2 {
			t.Errorf("%s: %d requests; want the resolution and the replies", link, n)
			continue
		}
		path, q := request(t, u, 0)
		if path != "/v1.0/profile_posts" {
			t.Errorf("%s: resolution path %s", link, path)
		}
		wantQuery(t, link, q, map[string]string{"username": "threads", "fields": "id,shortcode,permalink", "limit": "100"})
		if path, _ := request(t, u, 1); path != "/v1.0/"+firstPost+"/replies" || data["post_id"] != firstPost {
			t.Errorf("%s: replies path %s, post_id %v", link, path, data["post_id"])
		}
	}

	// Found on the second page of the author's posts.
	u := start(t)
	data := u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape("https://www.threads.com/@threads/post/DGoLdQuIeT1"), "comments-empty")
	if n := len(u.Replay.Requests()); n != 3 || data["post_id"] != "18000000000000001" {
		t.Errorf("second page: %v after %d requests", data, n)
	}
	if _, q := request(t, u, 1); q["after"] != "QVFIUnJlc29sdmUxYWZ0ZXI" {
		t.Errorf("resolution page 2 sent %v", q)
	}
}

// A URL of another host, or a value that is neither an id nor a post URL,
// is refused by validation: 422 before any call or charge.
func TestCommentsPostIDValidation(t *testing.T) {
	e, ok := registry.Default().Endpoint(commentsEndpoint)
	if !ok {
		t.Fatal("microblog_c/comments is not registered")
	}
	for value, reason := range map[string]string{
		"https://evil.example/@threads/post/DHx1AbCdEfG":         "wrong_host",
		"https://threads.net.evil.example/@threads/post/DHx1AbC": "wrong_host",
		"https://www.threads.net/t/CuXFPIeLLod":                  "invalid_format",
		"https://www.threads.com/@threads":                       "invalid_format",
		"abc":                                                    "invalid_format",
		"12ab":                                                   "invalid_format",
		"ftp://www.threads.net/@threads/post/DHx1AbCdEfG":        "invalid_format",
		"threads/@threads/post/DHx1AbCdEfG":                      "invalid_format",
	} {
		_, verr := params.Validate(e, url.Values{"post_id": {value}}, nil)
		if verr == nil {
			t.Errorf("%s validated", value)
			continue
		}
		if verr.Status != 422 || verr.Details["field"] != "post_id" || verr.Details["reason"] != reason {
			t.Errorf("%s: %d %v; want %s", value, verr.Status, verr.Details, reason)
		}
	}
	for _, limit := range []string{"0", "101"} {
		if _, verr := params.Validate(e, url.Values{"post_id": {firstPost}, "limit": {limit}}, nil); verr == nil {
			t.Errorf("limit=%s validated", limit)
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name, endpoint, query string
		kind                  upstream.FaultKind
		status                int
		retryAfter            time.Duration
		field                 string
		attempts, requests    int
	}{
		{"unknown account", profileEndpoint, "handle=sample_missing", upstream.NotFound, 0, 0, "", 1, 1},
		{"expired token", profileEndpoint, "handle=sample_badtoken", upstream.Rejected, 401, 0, "", 1, 1},
		{"permission missing", profileEndpoint, "handle=sample_noaccess", upstream.Rejected, 403, 0, "", 1, 1},
		{"app rate limit, no wait given", profileEndpoint, "handle=sample_busy", upstream.RateLimited, 400, 15 * time.Minute, "", 1, 1},
		{"user rate limit, wait in the usage header", profileEndpoint, "handle=sample_throttled", upstream.RateLimited, 400, 7 * time.Minute, "", 1, 1},
		{"429 with retry-after", profileEndpoint, "handle=sample_limited", upstream.RateLimited, 429, 120 * time.Second, "", 1, 1},
		{"429 without a Graph error", profileEndpoint, "handle=sample_bare429", upstream.RateLimited, 429, 15 * time.Minute, "", 1, 1},
		{"404 without a Graph error (a wrong base URL)", profileEndpoint, "handle=sample_bare404", upstream.Rejected, 404, 0, "", 1, 1},
		{"transient 500", profileEndpoint, "handle=sample_unavailable", upstream.ServerError, 500, 0, "", 3, 3},
		{"error inside a 200", profileEndpoint, "handle=sample_error200", upstream.ServerError, 200, 0, "", 3, 3},
		{"html instead of JSON", profileEndpoint, "handle=sample_garbled", upstream.Malformed, 0, 0, "", 1, 1},
		{"profile without username", profileEndpoint, "handle=sample_changed", upstream.Malformed, 0, 0, "", 1, 1},
		{"a field refused", profileEndpoint, "handle=sample_fields", upstream.Rejected, 400, 0, "", 1, 1},

		{"posts of unknown account", postsEndpoint, "handle=sample_missing", upstream.NotFound, 0, 0, "", 1, 1},
		{"stale posts cursor", postsEndpoint, "handle=threads&cursor=stale0cursor0from0another0list", upstream.InvalidParameter, 0, 0, "cursor", 1, 1},
		{"foreign posts cursor", postsEndpoint, "handle=threads&cursor=" + url.QueryEscape("page=2&x"), upstream.InvalidParameter, 0, 0, "cursor", 1, 0},
		{"posts without data", postsEndpoint, "handle=sample_changed", upstream.Malformed, 0, 0, "", 1, 1},
		{"post without id", postsEndpoint, "handle=sample_noid", upstream.Malformed, 0, 0, "", 1, 1},
		{"posts rate limited", postsEndpoint, "handle=sample_busy", upstream.RateLimited, 400, 15 * time.Minute, "", 1, 1},
		{"posts permission missing", postsEndpoint, "handle=sample_noaccess", upstream.Rejected, 403, 0, "", 1, 1},

		{"unknown post", commentsEndpoint, "post_id=18999999999999999", upstream.NotFound, 0, 0, "", 1, 1},
		{"replies refused", commentsEndpoint, "post_id=18000000000000002", upstream.Rejected, 403, 0, "", 1, 1},
		{"replies unavailable", commentsEndpoint, "post_id=18000000000000003", upstream.ServerError, 503, 0, "", 3, 3},
		{"stale replies cursor", commentsEndpoint, "post_id=" + firstPost + "&cursor=stale0cursor0from0another0list", upstream.InvalidParameter, 0, 0, "cursor", 1, 1},
		{"foreign replies cursor", commentsEndpoint, "post_id=" + firstPost + "&cursor=" + url.QueryEscape("a b"), upstream.InvalidParameter, 0, 0, "cursor", 1, 0},
		{"URL not among the latest posts", commentsEndpoint, "post_id=" + url.QueryEscape("https://www.threads.com/@threads/post/DZzZzZzZzZz"), upstream.InvalidParameter, 0, 0, "post_id", 1, 2},
		{"URL of an unknown account", commentsEndpoint, "post_id=" + url.QueryEscape("https://www.threads.com/@sample_missing/post/DAbCdEfGhIj"), upstream.NotFound, 0, 0, "", 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t)
			out := u.Fault(t, tc.endpoint, tc.query, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter || out.Fault.Field != tc.field {
				t.Errorf("status %d retry %v field %q; want %d %v %q (%v)", out.Fault.Status, out.Fault.RetryAfter, out.Fault.Field,
					tc.status, tc.retryAfter, tc.field, out.Fault)
			}
			if out.Trace.Attempts != tc.attempts || len(u.Replay.Requests()) != tc.requests {
				t.Errorf("attempts %d, requests %d; want %d, %d", out.Trace.Attempts, len(u.Replay.Requests()), tc.attempts, tc.requests)
			}
			if strings.Contains(out.Fault.Error(), testToken) {
				t.Errorf("the token leaked into the fault: %v", out.Fault)
			}
		})
	}
}

// A rate limit rests the route for the wait the source asked: the next
// call is not sent and answers 503 with retry-after.
func TestRateLimitRestsTheRoute(t *testing.T) {
	u := start(t)
	u.Fault(t, profileEndpoint, "handle=sample_throttled", upstream.RateLimited)
	out := u.Serve(t, profileEndpoint, "handle=threads")
	if out.Skipped <= 0 || len(u.Replay.Requests()) != 1 {
		t.Fatalf("after a rate limit: skipped %v, %d requests", out.Skipped, len(u.Replay.Requests()))
	}
	if e := out.Error(); e.Status != 503 {
		t.Errorf("resting route answered %d", e.Status)
	}
}

// Ids far above 2^53 keep every digit, in the data and in what is sent.
func TestIDsStayStrings(t *testing.T) {
	u := start(t)
	for _, call := range []struct {
		endpoint, query string
		want            []string
	}{
		{postsEndpoint, "handle=threads", []string{`"id":"18050206876707110"`, `"quoted_id":"18061234567890123"`}},
		{commentsEndpoint, "post_id=" + firstPost, []string{`"post_id":"18050206876707110"`, `"id":"18060000000000011"`,
			`"in_reply_to_id":"18050206876707110"`}},
		{profileEndpoint, "handle=threads", []string{`"id":"63055343223"`}},
	} {
		out := u.Serve(t, call.endpoint, call.query)
		raw, err := json.Marshal(out.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range call.want {
			if !strings.Contains(string(raw), want) {
				t.Errorf("%s: %s missing from %s", call.endpoint, want, raw)
			}
		}
		if strings.Contains(string(raw), "e+1") {
			t.Errorf("%s: an id went through a float: %s", call.endpoint, raw)
		}
	}
	if path, _ := request(t, u, 1); path != "/v1.0/"+firstPost+"/replies" {
		t.Errorf("replies path %s", path)
	}
}

// Replay answers any valid request from the default fixtures, as the
// canary and MERIDIAN_UPSTREAM=replay need.
func TestDefaultsAnswerAnyRequest(t *testing.T) {
	u := start(t)
	for endpoint, queries := range map[string][]string{
		profileEndpoint:  {"handle=example", "handle=someone.else"},
		postsEndpoint:    {"handle=example", "handle=someone_else&limit=3"},
		commentsEndpoint: {"post_id=17900000000000000", "post_id=18050206876707111"},
	} {
		for _, q := range queries {
			if out := u.Serve(t, endpoint, q); out.Fault != nil {
				t.Errorf("%s %s: %v", endpoint, q, out.Fault)
			}
		}
	}
}
