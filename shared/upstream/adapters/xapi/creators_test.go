package xapi_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const (
	postsEndpoint    = "microblog_b/posts"
	commentsEndpoint = "microblog_b/comments"
	gopherID         = "1456789012345678901"
	recentPost       = "2030920271262642177" // 2026-03-09, inside the seven-day window
	oldPost          = "2024914447365042177" // 2026-02-20, before it
)

// request is the i-th request the replay upstream received (negative:
// from the end), with its single-valued query.
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
	if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
		t.Fatalf("Authorization = %q", got)
	}
	q := map[string]string{}
	for k, v := range r.Query {
		if len(v) != 1 {
			t.Fatalf("%s sent %d times: %v", k, len(v), v)
		}
		q[k] = v[0]
	}
	return r.Path, q
}

func TestPostsTimelineAndPaging(t *testing.T) {
	u := start(t)
	first := u.Data(t, postsEndpoint, "handle=sample_gopher", "posts-timeline")
	if n := len(u.Replay.Requests()); n != 2 {
		t.Fatalf("%d requests; want the user lookup and the timeline", n)
	}
	path, q := request(t, u, 0)
	if path != "/2/users/by/username/sample_gopher" || q["user.fields"] != "protected" || len(q) != 1 {
		t.Errorf("lookup %s %v", path, q)
	}
	path, q = request(t, u, 1)
	want := map[string]string{
		"max_results": "20", "exclude": "retweets",
		"tweet.fields": "created_at,public_metrics,referenced_tweets,note_tweet,entities,lang",
	}
	if path != "/2/users/"+gopherID+"/tweets" || len(q) != len(want) {
		t.Errorf("timeline %s %v", path, q)
	}
	for k, v := range want {
		if q[k] != v {
			t.Errorf("%s = %q; want %q", k, q[k], v)
		}
	}
	items := adaptertest.Items(t, first)
	if len(items) != 3 || first["count"] != 3.0 || first["has_more"] != true ||
		first["cursor"] != "7140dibdnow9c7btw4b0ohgtdb9kkwjkj3g1bx5ugy3u0" || first["_warnings"] != nil {
		t.Fatalf("page 1: %v", first)
	}
	p := items[0]
	stats := p["stats"].(map[string]any)
	author := p["author"].(map[string]any)
	if p["id"] != "2031265227600823506" || p["url"] != "https://x.com/sample_gopher/status/2031265227600823506" ||
		p["created_at"] != "2026-03-10T07:05:44.000Z" || p["type"] != "post" ||
		stats["likes"] != 1480.0 || stats["retweets"] != 210.0 || stats["replies"] != 31.0 || stats["quotes"] != 12.0 ||
		stats["views"] != 88213.0 || author["id"] != gopherID || author["handle"] != "sample_gopher" {
		t.Errorf("first post: %v", p)
	}
	if items[1]["type"] != "reply" || items[1]["referenced_id"] != "2030932145337271506" {
		t.Errorf("reply: %v", items[1])
	}
	if text := items[2]["text"].(string); !strings.HasSuffix(text, "#golang #concurrency") || len(items[2]["hashtags"].([]any)) != 2 {
		t.Errorf("long post: %v", items[2])
	}

	second := u.Data(t, postsEndpoint, "handle=sample_gopher&cursor="+url.QueryEscape(first["cursor"].(string)), "posts-page2")
	if _, q := request(t, u, -1); q["pagination_token"] != first["cursor"] || q["exclude"] != "retweets" {
		t.Errorf("page 2 sent %v", q)
	}
	if second["count"] != 1.0 || second["has_more"] != false || second["cursor"] != nil {
		t.Errorf("page 2: %v", second)
	}

	u.Serve(t, postsEndpoint, "handle=sample_gopher&limit=5")
	if _, q := request(t, u, -1); q["max_results"] != "5" {
		t.Errorf("limit=5 sent max_results %q", q["max_results"])
	}
}

func TestPostsIncludeReposts(t *testing.T) {
	u := start(t)
	data := u.Data(t, postsEndpoint, "handle=XDevelopers&include_reposts=true", "posts-with-reposts")
	path, q := request(t, u, -1)
	if path != "/2/users/2244994945/tweets" {
		t.Fatalf("path %s", path)
	}
	if _, ok := q["exclude"]; ok {
		t.Errorf("include_reposts=true sent exclude=%q", q["exclude"])
	}
	items := adaptertest.Items(t, data)
	repost := items[0]
	if repost["type"] != "repost" || repost["referenced_id"] != "2031265227600823506" ||
		repost["author"].(map[string]any)["handle"] != "XDevelopers" {
		t.Errorf("repost: %v", repost)
	}
	if items[1]["type"] != "quote" || data["has_more"] != false || data["cursor"] != nil {
		t.Errorf("quote / last page: %v", data)
	}
	// Every falsy spelling, and none, excludes reposts.
	for _, v := range []string{"include_reposts=false", "include_reposts=0", "include_reposts=no", ""} {
		u.Serve(t, postsEndpoint, "handle=XDevelopers&"+v)
		if _, q := request(t, u, -1); q["exclude"] != "retweets" {
			t.Errorf("%q sent exclude %q", v, q["exclude"])
		}
	}
}

func TestPostsEmptyAndProtected(t *testing.T) {
	u := start(t)
	empty := u.Data(t, postsEndpoint, "handle=sample_quiet", "posts-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false || empty["cursor"] != nil {
		t.Errorf("empty: %v", empty)
	}
	u = start(t)
	locked := u.Data(t, postsEndpoint, "handle=sample_locked", "posts-protected")
	if w, _ := locked["_warnings"].([]any); len(w) != 1 || locked["count"] != 0.0 || len(u.Replay.Requests()) != 1 {
		t.Errorf("protected: %v after %d requests; want a warning and no timeline call", locked, len(u.Replay.Requests()))
	}
}

func TestCommentsAndPaging(t *testing.T) {
	u := start(t)
	first := u.Data(t, commentsEndpoint, "post_id="+recentPost, "comments-replies")
	if n := len(u.Replay.Requests()); n != 1 {
		t.Fatalf("%d requests; a page with replies needs no post lookup", n)
	}
	path, q := request(t, u, 0)
	want := map[string]string{
		"query": "conversation_id:" + recentPost + " is:reply", "sort_order": "recency", "max_results": "20",
		"tweet.fields": "created_at,public_metrics,author_id,conversation_id,referenced_tweets,note_tweet,lang",
		"expansions":   "author_id", "user.fields": "username,name",
	}
	if path != searchPath || len(q) != len(want) {
		t.Errorf("search %s %v", path, q)
	}
	for k, v := range want {
		if q[k] != v {
			t.Errorf("%s = %q; want %q", k, q[k], v)
		}
	}
	items := adaptertest.Items(t, first)
	c := items[0]
	author := c["author"].(map[string]any)
	if first["post_id"] != recentPost || first["count"] != 2.0 || first["has_more"] != true || first["_warnings"] != nil ||
		c["id"] != "2031097690321840129" || c["likes"] != 42.0 || c["replies"] != 3.0 || c["in_reply_to_id"] != recentPost ||
		author["id"] != "1500000000000000011" || author["handle"] != "ana_reviews" || author["name"] != "Ana Reviews" ||
		c["url"] != "https://x.com/ana_reviews/status/2031097690321840129" || c["created_at"] != "2026-03-09T20:00:00.000Z" {
		t.Errorf("page 1: %v", first)
	}
	second := u.Data(t, commentsEndpoint, "post_id="+recentPost+"&cursor="+url.QueryEscape(first["cursor"].(string)), "comments-page2")
	if _, q := request(t, u, -1); q["next_token"] != first["cursor"] {
		t.Errorf("page 2 sent %v", q)
	}
	if second["has_more"] != false || second["cursor"] != nil || second["count"] != 1.0 ||
		adaptertest.Items(t, second)[0]["in_reply_to_id"] != "2031008066433970689" {
		t.Errorf("page 2: %v", second)
	}
	if n := len(u.Replay.Requests()); n != 2 {
		t.Errorf("%d requests after two pages", n)
	}
	u.Serve(t, commentsEndpoint, "post_id="+recentPost+"&limit=100")
	if _, q := request(t, u, -1); q["max_results"] != "100" {
		t.Errorf("limit=100 sent max_results %q", q["max_results"])
	}
}

func TestCommentsFromPostURLs(t *testing.T) {
	for _, link := range []string{
		"https://x.com/sample_gopher/status/" + recentPost,
		"https://twitter.com/sample_gopher/status/" + recentPost + "?s=20&t=abc",
		"https://mobile.twitter.com/sample_gopher/status/" + recentPost + "/photo/1",
		"x.com/i/web/status/" + recentPost,
		"https://www.x.com/sample_gopher/statuses/" + recentPost,
	} {
		u := start(t)
		data := u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape(link), "comments-replies")
		if _, q := request(t, u, -1); q["query"] != "conversation_id:"+recentPost+" is:reply" || data["post_id"] != recentPost {
			t.Errorf("%s sent %v", link, q)
		}
	}
}

// A URL of another host, or a value that is neither an id nor a post URL,
// is refused by validation: 422 before any call or charge.
func TestCommentsPostIDValidation(t *testing.T) {
	e, ok := registry.Default().Endpoint(commentsEndpoint)
	if !ok {
		t.Fatal("microblog_b/comments is not registered")
	}
	for value, reason := range map[string]string{
		"https://evil.example/sample_gopher/status/" + recentPost: "wrong_host",
		"https://x.com.evil.example/a/status/" + recentPost:       "wrong_host",
		"abc":                               "invalid_pattern",
		"https://x.com/sample_gopher":       "invalid_pattern",
		"12345678901234567890":              "invalid_pattern",
		"https://x.com/a/status/12ab":       "invalid_pattern",
		"https://x.com/sample_gopher/likes": "invalid_pattern",
	} {
		_, verr := params.Validate(e, url.Values{"post_id": {value}}, nil)
		if verr == nil {
			t.Errorf("%s validated", value)
			continue
		}
		raw, _ := json.Marshal(verr.Details)
		if verr.Status != 422 || !strings.Contains(string(raw), "post_id") {
			t.Errorf("%s: %d %s", value, verr.Status, raw)
		}
		if reason == "wrong_host" && !strings.Contains(string(raw), reason) {
			t.Errorf("%s: %s; want %s", value, raw, reason)
		}
	}
	for _, limit := range []string{"9", "101"} {
		if _, verr := params.Validate(e, url.Values{"post_id": {recentPost}, "limit": {limit}}, nil); verr == nil {
			t.Errorf("limit=%s validated", limit)
		}
	}
	p, _ := registry.Default().Endpoint(postsEndpoint)
	for _, q := range []string{"handle=@sample_gopher", "handle=sample_gopher&limit=4", "handle=sample_gopher&limit=101"} {
		v, _ := url.ParseQuery(q)
		if _, verr := params.Validate(p, v, nil); verr == nil {
			t.Errorf("posts %s validated", q)
		}
	}
}

func TestCommentsOldPostWarns(t *testing.T) {
	u := start(t)
	data := u.Data(t, commentsEndpoint, "post_id="+oldPost, "comments-old")
	w, _ := data["_warnings"].([]any)
	if len(w) != 1 || !strings.Contains(w[0].(string), "7 days") || data["count"] != 1.0 || len(u.Replay.Requests()) != 1 {
		t.Errorf("old post: %v", data)
	}
}

func TestCommentsEmptyLooksThePostUp(t *testing.T) {
	u := start(t)
	quiet := "2029674353259443201"
	data := u.Data(t, commentsEndpoint, "post_id="+quiet, "comments-empty")
	if data["count"] != 0.0 || data["has_more"] != false || data["_warnings"] != nil || len(u.Replay.Requests()) != 2 {
		t.Errorf("empty: %v after %d requests", data, len(u.Replay.Requests()))
	}
	path, q := request(t, u, 1)
	if path != "/2/tweets/"+quiet || q["tweet.fields"] != "conversation_id" || len(q) != 1 {
		t.Errorf("lookup %s %v", path, q)
	}

	// A reply has no conversation of its own: its root is named.
	u = start(t)
	reply := u.Data(t, commentsEndpoint, "post_id=2030932145337266177", "comments-of-reply")
	if w, _ := reply["_warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "post_id="+recentPost) {
		t.Errorf("reply: %v", reply)
	}
	u = start(t)
	locked := u.Data(t, commentsEndpoint, "post_id=2031111111111111111", "comments-protected")
	if w, _ := locked["_warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "protected") {
		t.Errorf("protected: %v", locked)
	}
	// A later page that is empty is the end of the replies, not a question.
	u = start(t)
	u.Serve(t, commentsEndpoint, "post_id=2029674353259443201&cursor=sometoken123")
	if n := len(u.Replay.Requests()); n != 1 {
		t.Errorf("%d requests for a later page", n)
	}
}

// Ids far above 2^53 keep every digit, in the data and in what is sent.
func TestIDsStayStrings(t *testing.T) {
	u := start(t)
	out := u.Serve(t, commentsEndpoint, "post_id="+recentPost)
	raw, err := json.Marshal(out.Data)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{`"post_id":"` + recentPost + `"`, `"id":"2031097690321840129"`, `"in_reply_to_id":"` + recentPost + `"`,
		`"id":"1500000000000000011"`} {
		if !strings.Contains(string(raw), id) {
			t.Errorf("%s missing from %s", id, raw)
		}
	}
	if strings.Contains(string(raw), "e+18") {
		t.Errorf("an id went through a float: %s", raw)
	}
	out = u.Serve(t, postsEndpoint, "handle=sample_gopher")
	raw, _ = json.Marshal(out.Data)
	if !strings.Contains(string(raw), `"id":"2031265227600823506"`) || !strings.Contains(string(raw), `"id":"`+gopherID+`"`) {
		t.Errorf("posts ids: %s", raw)
	}
	if path, _ := request(t, u, -1); path != "/2/users/"+gopherID+"/tweets" {
		t.Errorf("timeline path %s", path)
	}
}

func TestCreatorErrors(t *testing.T) {
	cases := []struct {
		name, endpoint, query string
		kind                  upstream.FaultKind
		status                int
		retryAfter            time.Duration
		field                 string
		requests              int
	}{
		{"unknown account", postsEndpoint, "handle=sample_missing", upstream.NotFound, 0, 0, "", 1},
		{"suspended account", postsEndpoint, "handle=sample_suspend", upstream.NotFound, 0, 0, "", 1},
		{"lookup bad token", postsEndpoint, "handle=sample_badtoken", upstream.Rejected, 401, 0, "", 1},
		{"timeline rate limited", postsEndpoint, "handle=sample_busy", upstream.RateLimited, 429, 900 * time.Second, "", 2},
		{"stale timeline cursor", postsEndpoint, "handle=sample_gopher&cursor=stale0token0from0another0query", upstream.InvalidParameter, 0, 0, "cursor", 2},
		{"foreign posts cursor", postsEndpoint, "handle=sample_gopher&cursor=" + url.QueryEscape("page=2&x"), upstream.InvalidParameter, 0, 0, "cursor", 0},
		{"handle X refuses", postsEndpoint, "handle=dot.name", upstream.InvalidParameter, 0, 0, "handle", 0},
		{"unknown post", commentsEndpoint, "post_id=2031200000000000001", upstream.NotFound, 0, 0, "", 2},
		{"foreign comments cursor", commentsEndpoint, "post_id=2031200000000000001&cursor=" + url.QueryEscape("a b"), upstream.InvalidParameter, 0, 0, "cursor", 0},
		{"id beyond 64 bits", commentsEndpoint, "post_id=9999999999999999999", upstream.InvalidParameter, 0, 0, "post_id", 0},
		{"id zero", commentsEndpoint, "post_id=0", upstream.InvalidParameter, 0, 0, "post_id", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t)
			out := u.Fault(t, tc.endpoint, tc.query, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter || out.Fault.Field != tc.field {
				t.Errorf("status %d retry %v field %q; want %d %v %q", out.Fault.Status, out.Fault.RetryAfter, out.Fault.Field,
					tc.status, tc.retryAfter, tc.field)
			}
			if n := len(u.Replay.Requests()); n != tc.requests {
				t.Errorf("%d requests; want %d", n, tc.requests)
			}
			if strings.Contains(out.Fault.Error(), testToken) {
				t.Errorf("the token leaked: %v", out.Fault)
			}
		})
	}
}

// Replay answers any valid request of the new endpoints from the default
// fixtures, as the canary and MERIDIAN_UPSTREAM=replay need.
func TestCreatorDefaultsAnswerAnyRequest(t *testing.T) {
	u := start(t)
	for _, q := range []string{"handle=example", "handle=someone_else&include_reposts=true"} {
		if out := u.Serve(t, postsEndpoint, q); out.Fault != nil {
			t.Errorf("posts %s: %v", q, out.Fault)
		}
	}
	for _, id := range []string{"1899234567890123457", "1234567890123456789"} {
		if out := u.Serve(t, commentsEndpoint, "post_id="+id); out.Fault != nil {
			t.Errorf("comments %s: %v", id, out.Fault)
		}
	}
}
