package atproto

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const (
	aliceDID  = "did:plc:sample2alice4aaaaaaaaaaa"
	rootPost  = "at://" + aliceDID + "/app.bsky.feed.post/3lsample2aaa2"
	rootPage  = "https://bsky.app/profile/alice.example.com/post/3lsample2aaa2"
	feedPage2 = "2026-09-18T17:30:01.250Z"
)

func counts(t *testing.T, item map[string]any) map[string]any {
	t.Helper()
	c, ok := item["counts"].(map[string]any)
	if !ok {
		t.Fatalf("counts = %v", item["counts"])
	}
	return c
}

func TestCreatorEndpointsOnBothRoutes(t *testing.T) {
	for _, p := range Providers() {
		for _, e := range []string{postsEndpoint, commentsEndpoint} {
			if p.Endpoints[e] == nil {
				t.Errorf("%s does not serve %s", p.Name, e)
			}
			if _, ok := registry.Default().Endpoint(e); !ok {
				t.Errorf("%s is not registered", e)
			}
		}
	}
}

func TestPostsDefault(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, postsEndpoint, "handle=alice.example.com", "posts_default")
		req := u.LastRequest(t)
		if req.Path != authorFeedPath {
			t.Errorf("path = %s", req.Path)
		}
		// The registry's default page of 20, no replies, no pinned post.
		wantQuery(t, req, map[string]string{"actor": "alice.example.com", "limit": "20", "filter": "posts_no_replies"}, "cursor", "includePins", "handle")
		checkAuth(t, u)

		it := adaptertest.Items(t, d)
		if len(it) != 3 || d["count"] != 3.0 {
			t.Fatalf("count = %v, items = %d; want the repost left out", d["count"], len(it))
		}
		first := it[0]
		want := map[string]any{
			"id":            "at://" + aliceDID + "/app.bsky.feed.post/3lsample3fd1",
			"rkey":          "3lsample3fd1",
			"url":           "https://bsky.app/profile/alice.example.com/post/3lsample3fd1",
			"created_at":    "2026-09-21T10:15:02.118Z",
			"indexed_at":    "2026-09-21T10:15:03.020Z",
			"thumbnail_url": "https://cdn.bsky.app/img/feed_thumbnail/plain/" + aliceDID + "/bafkreiimg0sampleaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@jpeg",
			"is_reply":      false, "is_repost": false, "in_reply_to_id": nil, "reposted_at": nil,
		}
		for k, v := range want {
			if first[k] != v {
				t.Errorf("items[0].%s = %v, want %v", k, first[k], v)
			}
		}
		c := counts(t, first)
		if c["likes"] != 342.0 || c["comments"] != 27.0 || c["shares"] != 41.0 || c["quotes"] != 6.0 {
			t.Errorf("counts = %v", c)
		}
		if v, ok := c["views"]; !ok || v != nil {
			t.Errorf("views = %v (present %v), want null", v, ok)
		}
		if a := first["author"].(map[string]any); a["id"] != aliceDID || a["handle"] != "alice.example.com" || a["name"] != "Alice Example" {
			t.Errorf("author = %v", a)
		}
		// A video's thumbnail, then a link card's.
		if th, _ := it[1]["thumbnail_url"].(string); !strings.HasSuffix(th, "/thumbnail.jpg") {
			t.Errorf("items[1].thumbnail_url = %v", it[1]["thumbnail_url"])
		}
		if th, _ := it[2]["thumbnail_url"].(string); !strings.Contains(th, "bafkreiextsample") {
			t.Errorf("items[2].thumbnail_url = %v", it[2]["thumbnail_url"])
		}
		if langs, _ := it[2]["langs"].([]any); len(langs) != 2 {
			t.Errorf("items[2].langs = %v", it[2]["langs"])
		}
		if d["cursor"] != feedPage2 || d["has_more"] != true {
			t.Errorf("cursor, has_more = %v, %v", d["cursor"], d["has_more"])
		}
		if !hasWarning(d, "does not report views") || !hasWarning(d, "1 of the 4 entries") {
			t.Errorf("_warnings = %v", warnings(d))
		}
	})
}

func TestPostsIncludeRepostsAndReplies(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, postsEndpoint, "handle=alice.example.com&include_reposts=true", "posts_with_reposts")
		// include_reposts is Meridian's: the source is asked the same.
		wantQuery(t, u.LastRequest(t), map[string]string{"filter": "posts_no_replies"}, "include_reposts")
		it := adaptertest.Items(t, d)
		if len(it) != 4 {
			t.Fatalf("items = %d", len(it))
		}
		repost := it[1]
		if repost["is_repost"] != true || repost["reposted_at"] != "2026-09-20T21:05:40.330Z" ||
			repost["author"].(map[string]any)["handle"] != "bob.example.net" {
			t.Errorf("repost = %v; the author stays the original author", repost)
		}
		if hasWarning(d, "left out (include_reposts=false)") {
			t.Errorf("_warnings = %v", warnings(d))
		}

		d = u.Data(t, postsEndpoint, "handle=alice.example.com&include_replies=1", "posts_with_replies")
		wantQuery(t, u.LastRequest(t), map[string]string{"filter": "posts_with_replies"})
		reply := adaptertest.Items(t, d)[1]
		if reply["is_reply"] != true || reply["in_reply_to_id"] != "at://did:plc:sample2bob4bbbbbbbbbbbbb/app.bsky.feed.post/3lsample3fb1" {
			t.Errorf("reply = %v", reply)
		}
	})
}

func TestPostsPaging(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, postsEndpoint, "handle=alice.example.com&limit=5&cursor="+url.QueryEscape(feedPage2), "posts_page2")
		wantQuery(t, u.LastRequest(t), map[string]string{"actor": "alice.example.com", "limit": "5", "cursor": feedPage2})
		checkAuth(t, u)
		if v, ok := d["cursor"]; !ok || v != nil || d["has_more"] != false || d["count"] != 1.0 {
			t.Errorf("last page: cursor %v (present %v), has_more %v, count %v", v, ok, d["has_more"], d["count"])
		}
		// No langs declared: null, not an empty list.
		if v, ok := adaptertest.Items(t, d)[0]["langs"]; !ok || v != nil {
			t.Errorf("langs = %v (present %v)", v, ok)
		}

		empty := u.Data(t, postsEndpoint, "handle=quiet.example.com", "posts_empty")
		if len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false || empty["cursor"] != nil || empty["_warnings"] != nil {
			t.Errorf("empty = %v", empty)
		}
	})
}

// A page of reposts only is empty once they are left out, but the listing
// goes on: the cursor stays.
func TestPostsPageOfReposts(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, postsEndpoint, "handle=reposter.example.com", "posts_only_reposts")
		if d["count"] != 0.0 || d["has_more"] != true || d["cursor"] != "2026-09-13T11:00:00.000Z" {
			t.Errorf("page = %v", d)
		}
		if !hasWarning(d, "2 of the 2 entries") || hasWarning(d, "views") {
			t.Errorf("_warnings = %v", warnings(d))
		}
	})
}

func TestPostsMissingCounters(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, postsEndpoint, "handle=sparse.example.com", "posts_missing_counters")
		it := adaptertest.Items(t, d)
		for _, k := range []string{"likes", "comments", "shares", "quotes", "views"} {
			if v, ok := counts(t, it[0])[k]; !ok || v != nil {
				t.Errorf("items[0].counts.%s = %v (present %v), want null: unknown, not 0", k, v, ok)
			}
		}
		c := counts(t, it[1])
		if c["likes"] != 5.0 || c["shares"] != 2.0 || c["comments"] != nil || c["quotes"] != nil {
			t.Errorf("items[1].counts = %v", c)
		}
		if a := it[0]["author"].(map[string]any); a["handle"] != nil || a["url"] != "https://bsky.app/profile/did:plc:sample2sparse4ssssssssss" {
			t.Errorf("author = %v", a)
		}
		if it[1]["created_at"] != nil || it[0]["thumbnail_url"] != nil {
			t.Errorf("created_at %v, thumbnail_url %v", it[1]["created_at"], it[0]["thumbnail_url"])
		}
		if !hasWarning(d, "counters are null") || !hasWarning(d, "not a valid date-time") {
			t.Errorf("_warnings = %v", warnings(d))
		}
	})
}

func TestCreatorLargeNumbers(t *testing.T) {
	big := "did:web:very-long-self-hosted-identity.subdomain.example.com"
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, postsEndpoint, "handle="+big, "posts_large_ids")
		if d["cursor"] != "9007199254740993" {
			t.Errorf("cursor = %v", d["cursor"])
		}
		u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape("at://"+big+"/app.bsky.feed.post/3zzzzzzzzzzzz"), "comments_large_ids")
		wantQuery(t, u.LastRequest(t), map[string]string{"uri": "at://" + big + "/app.bsky.feed.post/3zzzzzzzzzzzz"})
	})
	// Counters beyond 2^53 keep every digit.
	for _, name := range []string{PublicName, SessionName} {
		for file, digits := range map[string][]string{
			"posts_large_ids":    {`"likes": 9007199254740993`, `"comments": 18446744073709551615`, `"shares": 12345678901234567890`},
			"comments_large_ids": {`"reply_count": 18446744073709551615`, `"likes": 9007199254740993`},
		} {
			raw, err := os.ReadFile(filepath.Join(adaptertest.FixturesDir(t), name, "golden", file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range digits {
				if !strings.Contains(string(raw), want) {
					t.Errorf("%s %s golden lacks %s", name, file, want)
				}
			}
		}
	}
}

func TestPostsFaults(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		out := u.Fault(t, postsEndpoint, "handle=nobody.example.com", upstream.NotFound)
		if out.Trace.Attempts != 1 {
			t.Errorf("attempts = %d; not found is definitive", out.Trace.Attempts)
		}

		out = fresh(t, u).Fault(t, postsEndpoint, "handle=rate-limited.example.com", upstream.RateLimited)
		if out.Fault.RetryAfter <= 0 || !strings.Contains(out.Fault.Reason, "RateLimitExceeded") {
			t.Errorf("fault = %v (retry after %v), want the wait until RateLimit-Reset", out.Fault, out.Fault.RetryAfter)
		}

		out = fresh(t, u).Fault(t, postsEndpoint, "handle=server-error.example.com", upstream.ServerError)
		if out.Trace.Attempts != 3 {
			t.Errorf("attempts = %d, want 3 (5xx is retried)", out.Trace.Attempts)
		}

		// A cut body, a body without the feed, and entries without posts
		// are a changed shape: typed, never an empty success.
		for _, handle := range []string{"malformed.example.com", "changed.example.com", "entries.example.com"} {
			fresh(t, u).Fault(t, postsEndpoint, "handle="+handle, upstream.Malformed)
		}
	})
}

// BlockedActor is an answer only an authenticated viewer gets.
func TestPostsBlockedOnSession(t *testing.T) {
	u := adaptertest.Start(t, Session(), testSecrets)
	out := u.Fault(t, postsEndpoint, "handle=blocked.example.com", upstream.Rejected)
	if out.Fault.Status != http.StatusBadRequest || !strings.Contains(out.Fault.Reason, "BlockedActor") || out.Trace.Attempts != 1 {
		t.Errorf("fault = %v, attempts %d", out.Fault, out.Trace.Attempts)
	}
}

func TestCommentsDefault(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape(rootPage), "comments_default")
		req := u.LastRequest(t)
		if req.Path != postThreadPath {
			t.Errorf("path = %s", req.Path)
		}
		// The handle in the URL goes into the URI; the source resolves it.
		wantQuery(t, req, map[string]string{
			"uri": "at://alice.example.com/app.bsky.feed.post/3lsample2aaa2", "depth": "1", "parentHeight": "0",
		}, "post_id", "limit", "cursor")
		checkAuth(t, u)

		if d["post_id"] != rootPost || d["post_url"] != rootPage || d["reply_count"] != 9.0 {
			t.Errorf("post_id %v, post_url %v, reply_count %v", d["post_id"], d["post_url"], d["reply_count"])
		}
		it := adaptertest.Items(t, d)
		var order []string
		for _, c := range it {
			order = append(order, c["id"].(string)[strings.LastIndex(c["id"].(string), "/")+1:])
		}
		// Newest first, whatever order the source sent.
		if strings.Join(order, " ") != "3lsample2rd1 3lsample2rc1 3lsample2bbb2 3lsample2re1" || d["count"] != 4.0 {
			t.Errorf("order = %v", order)
		}
		c := it[1]
		a := c["author"].(map[string]any)
		if c["text"] != "Do you have a sample of the pull-style version too?" || c["likes"] != 4.0 || c["replies"] != 2.0 ||
			c["in_reply_to_id"] != rootPost || c["created_at"] != "2026-09-20T16:20:44.210Z" ||
			c["url"] != "https://bsky.app/profile/cara.example.org/post/3lsample2rc1" ||
			a["id"] != "did:plc:sample2cara4cccccccccccc" || a["handle"] != "cara.example.org" || a["name"] != "Cara Sample" ||
			!strings.HasPrefix(a["avatar_url"].(string), "https://cdn.bsky.app/img/avatar_thumbnail/") {
			t.Errorf("items[1] = %v", c)
		}
		if it[0]["author"].(map[string]any)["name"] != nil {
			t.Errorf("an empty display name maps to %v", it[0]["author"].(map[string]any)["name"])
		}
		if d["has_more"] != false || d["cursor"] != nil {
			t.Errorf("has_more %v, cursor %v", d["has_more"], d["cursor"])
		}
		for _, w := range []string{"Direct replies only", "2 replies were left out", "counts 9 replies but returned 6"} {
			if !hasWarning(d, w) {
				t.Errorf("_warnings = %v, want %q", warnings(d), w)
			}
		}
	})
}

func TestCommentsPostIDForms(t *testing.T) {
	u := adaptertest.Start(t, Public(), nil)
	for value, uri := range map[string]string{
		rootPost: rootPost,
		"at://alice.example.com/app.bsky.feed.post/3lsample2aaa2":                     "at://alice.example.com/app.bsky.feed.post/3lsample2aaa2",
		"https://bsky.app/profile/Alice.Example.COM/post/3lsample2aaa2?ref_src=embed": "at://alice.example.com/app.bsky.feed.post/3lsample2aaa2",
		"https://bsky.app/profile/" + aliceDID + "/post/3lsample2aaa2/":               rootPost,
		"bsky.app/profile/alice.example.com/post/3lsample2aaa2":                       "at://alice.example.com/app.bsky.feed.post/3lsample2aaa2",
		"https://staging.bsky.app/profile/alice.example.com/post/3lsample2aaa2#top":   "at://alice.example.com/app.bsky.feed.post/3lsample2aaa2",
	} {
		if out := u.Serve(t, commentsEndpoint, "post_id="+url.QueryEscape(value)); out.Fault != nil {
			t.Errorf("%s: %v", value, out.Fault)
			continue
		}
		if got, _ := query(t, u.LastRequest(t), "uri"); got != uri {
			t.Errorf("%s sent uri %q, want %q", value, got, uri)
		}
	}
}

// post_id and handle are refused by validation, with 422 before any call
// or charge: another host, or a value that names no post or account.
func TestCreatorParameterValidation(t *testing.T) {
	comments, _ := registry.Default().Endpoint(commentsEndpoint)
	for value, reason := range map[string]string{
		"https://evil.example/profile/alice.example.com/post/3lsample2aaa2":    "wrong_host",
		"https://bsky.app.evil.example/profile/a.example.com/post/3lsample2aa": "wrong_host",
		"http://notbsky.app/profile/alice.example.com/post/3lsample2aaa2":      "wrong_host",
		"https://bsky.app/profile/alice.example.com":                           "invalid_format",
		"https://bsky.app/profile/alice.example.com/post/":                     "invalid_format",
		"https://bsky.app/profile/alice/post/3lsample2aaa2":                    "invalid_post_id",
		"at://" + aliceDID + "/app.bsky.feed.like/3lsample2aaa2":               "invalid_post_id",
		"at://" + aliceDID + "/app.bsky.feed.post":                             "invalid_post_id",
		"at://" + aliceDID + "/app.bsky.feed.post/a/b":                         "invalid_post_id",
		"3lsample2aaa2":       "invalid_format",
		"javascript:alert(1)": "invalid_format",
		"https://user:pw@bsky.app/profile/a.b/post/3lsample": "invalid_url", // the host rule every URL parameter follows
	} {
		_, verr := params.Validate(comments, url.Values{"post_id": {value}}, nil)
		if verr == nil {
			t.Errorf("post_id %s validated", value)
			continue
		}
		raw, _ := json.Marshal(verr.Details)
		if verr.Status != http.StatusUnprocessableEntity || !strings.Contains(string(raw), `"field":"post_id"`) || !strings.Contains(string(raw), reason) {
			t.Errorf("post_id %s: %d %s; want %s", value, verr.Status, raw, reason)
		}
		if strings.Contains(verr.Message, "bsky") {
			t.Errorf("post_id %s: the message names the real host: %s", value, verr.Message)
		}
	}
	for _, limit := range []string{"0", "101"} {
		if _, verr := params.Validate(comments, url.Values{"post_id": {rootPost}, "limit": {limit}}, nil); verr == nil {
			t.Errorf("comments limit=%s validated", limit)
		}
	}

	posts, _ := registry.Default().Endpoint(postsEndpoint)
	for _, ok := range []string{"alice.example.com", "did:plc:sample2alice4aaaaaaaaaaa", "did:web:example.com", "xn--bcher-kva.example"} {
		if _, verr := params.Validate(posts, url.Values{"handle": {ok}}, nil); verr != nil {
			t.Errorf("handle %s refused: %v", ok, verr)
		}
	}
	for q, reason := range map[string]string{
		"handle=@alice.example.com":          "invalid_format",
		"handle=alice":                       "invalid_handle",
		"handle=bad_name.example.com":        "invalid_handle",
		"handle=alice.example.com-":          "invalid_handle",
		"handle=did:plc:":                    "invalid_handle",
		"handle=alice.example.com&limit=0":   "out_of_range",
		"handle=alice.example.com&limit=101": "out_of_range",
	} {
		v, _ := url.ParseQuery(q)
		_, verr := params.Validate(posts, v, nil)
		if verr == nil {
			t.Errorf("posts %s validated", q)
			continue
		}
		if raw, _ := json.Marshal(verr.Details); verr.Status != http.StatusUnprocessableEntity || !strings.Contains(string(raw), reason) {
			t.Errorf("posts %s: %d %s; want %s", q, verr.Status, raw, reason)
		}
	}
}

func TestCommentsPaging(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		post := url.QueryEscape("at://alice.example.com/app.bsky.feed.post/3lsample2mny")
		var got []string
		cursor := ""
		for page := 1; ; page++ {
			q := "post_id=" + post + "&limit=2"
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			d := u.Data(t, commentsEndpoint, q, "comments_page"+string(rune('0'+page)))
			// Meridian's cursor never reaches the source.
			wantQuery(t, u.LastRequest(t), map[string]string{"depth": "1"}, "cursor", "limit")
			for _, it := range adaptertest.Items(t, d) {
				id := it["id"].(string)
				got = append(got, id[strings.LastIndex(id, "/")+1:])
			}
			next, _ := d["cursor"].(string)
			if (next != "") != (d["has_more"] == true) {
				t.Fatalf("page %d: cursor %q, has_more %v", page, next, d["has_more"])
			}
			if page == 1 && !hasWarning(d, "Direct replies only") {
				t.Errorf("_warnings = %v", warnings(d))
			}
			if next == "" || page > 5 {
				break
			}
			cursor = next
		}
		// Two replies indexed in the same millisecond stay in one order
		// across the page boundary between them.
		if strings.Join(got, " ") != "3lsample2m5 3lsample2m4 3lsample2m3 3lsample2m2 3lsample2m1" {
			t.Errorf("replies over the pages = %v", got)
		}
	})
}

func TestCommentsEmptyAndSparse(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape("at://"+aliceDID+"/app.bsky.feed.post/3lsample2qt1"), "comments_empty")
		if d["count"] != 0.0 || len(adaptertest.Items(t, d)) != 0 || d["has_more"] != false || d["_warnings"] != nil || d["reply_count"] != 0.0 {
			t.Errorf("empty = %v", d)
		}

		d = u.Data(t, commentsEndpoint, "post_id="+url.QueryEscape("at://"+aliceDID+"/app.bsky.feed.post/3lsample2spr"), "comments_sparse")
		it := adaptertest.Items(t, d)
		if v, ok := d["reply_count"]; !ok || v != nil {
			t.Errorf("reply_count = %v (present %v), want null", v, ok)
		}
		for _, k := range []string{"likes", "replies", "reposts", "quotes"} {
			var sparse map[string]any
			for _, c := range it {
				if strings.HasSuffix(c["id"].(string), "/3lsample2sr1") {
					sparse = c
				}
			}
			if v, ok := sparse[k]; !ok || v != nil {
				t.Errorf("%s = %v (present %v), want null", k, v, ok)
			}
		}
		if !hasWarning(d, "without like or reply counters") || !hasWarning(d, "not a valid date-time") {
			t.Errorf("_warnings = %v", warnings(d))
		}
	})
}

func TestCommentsFaults(t *testing.T) {
	at := func(rkey string) string {
		return "post_id=" + url.QueryEscape("at://"+aliceDID+"/app.bsky.feed.post/"+rkey)
	}
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		for _, rkey := range []string{"3lsample2nope", "3lsample2nfv"} {
			out := u.Fault(t, commentsEndpoint, at(rkey), upstream.NotFound)
			if out.Trace.Attempts != 1 {
				t.Errorf("%s: attempts = %d", rkey, out.Trace.Attempts)
			}
		}

		out := fresh(t, u).Fault(t, commentsEndpoint, at("3lsample2rl1"), upstream.RateLimited)
		if out.Fault.RetryAfter != 7*time.Second {
			t.Errorf("RetryAfter = %v, want the Retry-After of 7s", out.Fault.RetryAfter)
		}

		out = fresh(t, u).Fault(t, commentsEndpoint, at("3lsample2se1"), upstream.ServerError)
		if out.Trace.Attempts != 3 {
			t.Errorf("attempts = %d, want 3", out.Trace.Attempts)
		}

		fresh(t, u).Fault(t, commentsEndpoint, at("3lsample2mf1"), upstream.Malformed)
		fresh(t, u).Fault(t, commentsEndpoint, at("3lsample2cs1"), upstream.Malformed)

		// A cursor this endpoint did not write is the caller's 422, before
		// any source call.
		v := fresh(t, u)
		for _, cursor := range []string{"2", "not base64!", "MjAyNi0wOS0yMFQxNjoyMDo0NC4yMTBaIGh0dHBzOi8vZXhhbXBsZQ"} {
			out = v.Fault(t, commentsEndpoint, at("3lsample2aaa2")+"&cursor="+url.QueryEscape(cursor), upstream.InvalidParameter)
			if out.Fault.Field != "cursor" {
				t.Errorf("cursor %q: field %q", cursor, out.Fault.Field)
			}
		}
		if n := len(v.Replay.Requests()); n != 0 {
			t.Errorf("%d source calls for unusable cursors", n)
		}
	})
}

// A blocked anchor is shown only to an authenticated viewer: refused, not
// "not found".
func TestCommentsBlockedOnSession(t *testing.T) {
	u := adaptertest.Start(t, Session(), testSecrets)
	out := u.Fault(t, commentsEndpoint, "post_id="+url.QueryEscape("at://did:plc:sample2blocked4kkkkkkkkkk/app.bsky.feed.post/3lsample2bk2"), upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "block") {
		t.Errorf("fault = %v", out.Fault)
	}
}

func TestProfileCreatorFields(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		d := u.Data(t, profileEndpoint, "handle=alice.example.com", "profile_default")
		if d["follower_source_field"] != "followersCount" || d["followers"] != 1532.0 {
			t.Errorf("followers %v from %v", d["followers"], d["follower_source_field"])
		}
		if v, ok := d["verified"]; !ok || v != nil {
			t.Errorf("verified = %v (present %v); the view says nothing, so null", v, ok)
		}
		d = u.Data(t, profileEndpoint, "handle=verified.example.com", "profile_verified")
		if d["verified"] != true || d["follower_source_field"] != "followersCount" || d["followers"] != 48213.0 {
			t.Errorf("verified profile = %v", d)
		}
		d = u.Data(t, profileEndpoint, "handle=sparse.example.com", "profile_sparse")
		if v, ok := d["follower_source_field"]; !ok || v != nil {
			t.Errorf("follower_source_field = %v (present %v) without followers", v, ok)
		}
	})
}

// Replay answers the registry's example of each new endpoint (the canary's
// offline run) and any other valid request from the default fixtures.
func TestCreatorDefaultsAnswerAnyRequest(t *testing.T) {
	routes(t, func(t *testing.T, u *adaptertest.Upstream) {
		for _, key := range []string{postsEndpoint, commentsEndpoint} {
			e, _ := registry.Default().Endpoint(key)
			q, _ := e.Example()
			if out := u.Serve(t, key, q.Encode()); out.Fault != nil {
				t.Errorf("%s example %s: %v", key, q.Encode(), out.Fault)
			}
		}
		for key, q := range map[string]string{
			postsEndpoint:    "handle=someone.example.org&include_replies=true&include_reposts=true&limit=100",
			commentsEndpoint: "post_id=" + url.QueryEscape("https://bsky.app/profile/someone.example.org/post/3labcdefghij2"),
		} {
			if out := u.Serve(t, key, q); out.Fault != nil {
				t.Errorf("%s %s: %v", key, q, out.Fault)
			}
		}
	})
}

// Both routes in order: a definitive "not found" on the public route ends
// the call; a refusal there moves to the session route.
func TestCreatorRoutesInOrder(t *testing.T) {
	srv, err := replay.Load(adaptertest.FixturesDir(t))
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	runner := upstream.NewRunner(Providers(), upstream.Settings{
		ReplayURL: base,
		Lookup:    func(name string) (string, bool) { v, ok := testSecrets[name]; return v, ok },
		Options:   adaptertest.Options,
	})
	out := runner.Serve(context.Background(), postsEndpoint, map[string]string{"handle": "nobody.example.com", "limit": "20"})
	if out.Fault == nil || out.Fault.Kind != upstream.NotFound || len(out.Trace.Legs) != 1 || out.Trace.Legs[0].ServedBy != PublicName {
		t.Errorf("not found: fault %v, legs %+v", out.Fault, out.Trace.Legs)
	}
	out = runner.Serve(context.Background(), commentsEndpoint, map[string]string{"post_id": rootPost, "limit": "20"})
	if out.Fault != nil || out.Trace.ServedBy != PublicName {
		t.Errorf("comments: fault %v, served by %s", out.Fault, out.Trace.ServedBy)
	}
}
