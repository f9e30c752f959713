package tiktok_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/tiktok"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

func TestComments(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.CommentsEndpoint, "post_id="+nov01, "comments-page1")
	if got := strings.Join(calls(u), ", "); got != tokenCall+", "+commentsCall {
		t.Fatalf("calls %s", got)
	}
	r := u.LastRequest(t)
	// The id goes as the int64 the source takes, its exact digits.
	if !strings.Contains(string(r.Body), `"video_id":`+nov01+`,`) {
		t.Errorf("body %s", r.Body)
	}
	if b := body(t, r); b["max_count"].(interface{ String() string }).String() != "20" || b["cursor"].(interface{ String() string }).String() != "0" {
		t.Errorf("body %v", b)
	}
	if f := url.Values(r.Query).Get("fields"); f != "id,video_id,text,like_count,reply_count,parent_comment_id,create_time" {
		t.Errorf("fields %q", f)
	}
	if data["post_id"] != nov01 || data["count"] != 3.0 || data["has_more"] != true || data["cursor"] != "3" {
		t.Fatalf("list fields %v", data)
	}
	items := adaptertest.Items(t, data)
	if items[0]["id"] != "7703301234567890123" || items[0]["likes"] != 1532.0 || items[0]["replies"] != 12.0 ||
		items[0]["created_at"] != "2026-11-01T19:06:41Z" || items[0]["in_reply_to_id"] != nil {
		t.Errorf("first comment %v", items[0])
	}
	if items[2]["in_reply_to_id"] != "7703309876543210987" || items[2]["text"] != `@samplecreator a Sample X1 — "<b>not</b> sponsored" & more` {
		t.Errorf("reply %v", items[2])
	}
	for _, it := range items {
		for k, v := range it["author"].(map[string]any) {
			if v != nil {
				t.Errorf("author %s = %v", k, v)
			}
		}
	}
	if warningsOf(data) != tiktok.WarnNoAuthors {
		t.Errorf("_warnings %s", warningsOf(data))
	}

	last := u.Data(t, tiktok.CommentsEndpoint, "post_id="+nov01+"&limit=100&cursor=3", "comments-page2")
	if b := body(t, u.LastRequest(t)); b["cursor"].(interface{ String() string }).String() != "3" || b["max_count"].(interface{ String() string }).String() != "100" {
		t.Errorf("body %v", b)
	}
	if last["has_more"] != false || last["cursor"] != nil || adaptertest.Items(t, last)[0]["text"] != nil {
		t.Errorf("last page %v", last)
	}
}

func TestCommentsFromURLs(t *testing.T) {
	u := research(t)
	for _, v := range []string{
		"https://www.tiktok.com/@samplecreator/video/" + nov01 + "?is_from_webapp=1&sender_device=pc",
		"www.tiktok.com/@samplecreator/video/" + nov01,
		"https://m.tiktok.com/v/" + nov01 + ".html",
		"https://www.tiktok.com/embed/v2/" + nov01,
		"https://www.tiktok.com/@samplecreator/photo/" + nov01,
		"https://tiktok.com/share/video/" + nov01 + "/",
	} {
		out := u.Serve(t, tiktok.CommentsEndpoint, "post_id="+url.QueryEscape(v))
		if out.Fault != nil {
			t.Errorf("%s: %v", v, out.Fault)
			continue
		}
		if !strings.Contains(string(u.LastRequest(t).Body), `"video_id":`+nov01+`,`) {
			t.Errorf("%s sent %s", v, u.LastRequest(t).Body)
		}
	}
	// Another site's URL, a short link, or no video id: 422 before any
	// request or charge.
	e, _ := registry.Default().Endpoint(tiktok.CommentsEndpoint)
	for v, reason := range map[string]string{
		"https://evil.example/@a/video/" + nov01:            "wrong_host",
		"https://tiktok.com.evil.example/@a/video/" + nov01: "wrong_host",
		"https://vm.tiktok.com/ZMsample1/":                  "invalid_format",
		"https://www.tiktok.com/t/ZTsample2/":               "invalid_format",
		"https://www.tiktok.com/@samplecreator":             "invalid_format",
		"12345678901234567890":                              "invalid_format",
		"not an id":                                         "invalid_format",
	} {
		_, verr := params.Validate(e, url.Values{"post_id": {v}}, nil)
		if verr == nil || verr.Details["reason"] != reason || verr.Details["field"] != "post_id" {
			t.Errorf("%s: %v; want %s", v, verr, reason)
		}
	}
}

func TestCommentsEmptyAndUnknown(t *testing.T) {
	// An empty first page looks the video up: it exists, it has none.
	u := research(t)
	data := u.Data(t, tiktok.CommentsEndpoint, "post_id="+oct12, "comments-none")
	if got := strings.Join(calls(u), ", "); got != tokenCall+", "+commentsCall+", "+queryCall {
		t.Fatalf("calls %s", got)
	}
	b := body(t, u.LastRequest(t))
	cond := b["query"].(map[string]any)["and"].([]any)[0].(map[string]any)
	if cond["field_name"] != "video_id" || cond["field_values"].([]any)[0] != oct12 || b["start_date"] != "20261011" || b["end_date"] != "20261013" {
		t.Errorf("lookup %v", b)
	}
	if data["count"] != 0.0 || data["has_more"] != false || warningsOf(data) != tiktok.WarnNoComments {
		t.Errorf("data %v", data)
	}
	// No such video: the lookup finds none (404), whether the list was
	// empty or refused the video.
	for _, id := range []string{"7690000000000000000", "7680000000000000000"} {
		u := research(t)
		out := u.Fault(t, tiktok.CommentsEndpoint, "post_id="+id, upstream.NotFound)
		if e := out.Error(); e.Status != 404 {
			t.Errorf("%s: %d", id, e.Status)
		}
		if got := strings.Join(calls(u), ", "); got != tokenCall+", "+commentsCall+", "+queryCall {
			t.Errorf("%s: calls %s", id, got)
		}
	}
	// An id whose time is in the future names no video: no lookup needed.
	u = research(t)
	u.Runner.Serve(t.Context(), tiktok.CommentsEndpoint, map[string]string{"post_id": "9000000000000000000", "limit": "20"})
	for _, c := range calls(u) {
		if c == queryCall {
			t.Error("a future id was looked up")
		}
	}
}

func TestCommentsFaults(t *testing.T) {
	u := research(t)
	out := u.Fault(t, tiktok.CommentsEndpoint, "post_id=7692000000000000000", upstream.RateLimited)
	if out.Fault.RetryAfter != untilMidnight {
		t.Errorf("retry after %v", out.Fault.RetryAfter)
	}
	// The rate limit rests the route: a fresh one for the rest.
	u = research(t)
	before := len(u.Replay.Requests())
	for _, cur := range []string{"abc", "-1", "99999999", "3.5"} {
		out := u.Fault(t, tiktok.CommentsEndpoint, "post_id="+nov01+"&cursor="+url.QueryEscape(cur), upstream.InvalidParameter)
		if out.Fault.Field != "cursor" {
			t.Errorf("%s: field %q", cur, out.Fault.Field)
		}
	}
	if len(u.Replay.Requests()) != before {
		t.Error("an unusable cursor reached the source")
	}
}

// Replay answers any video from the default fixture.
func TestCommentsDefaults(t *testing.T) {
	out := research(t).Serve(t, tiktok.CommentsEndpoint, "post_id=7571138714401911620")
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	if c := out.Data.(tiktok.Comments); c.Count != 2 || *c.Items[1].InReplyTo != "7571140001122334455" {
		t.Errorf("%+v", c)
	}
}
