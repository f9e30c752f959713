package tiktok_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/tiktok"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

// The sample account's videos, newest first; their ids hold their
// creation times (id >> 32), as the source's do.
const (
	nov01 = "7703265652473805901"
	oct28 = "7701651432251608414"
	oct20 = "7698861078185074287"
	oct12 = "7695673096046276464"
	oct06 = "7693523379301609601"
	sep20 = "7687640133384831378"
	aug14 = "7673843238159094435"
)

func ids(t *testing.T, data map[string]any) string {
	t.Helper()
	var out []string
	for _, it := range adaptertest.Items(t, data) {
		out = append(out, it["id"].(string))
	}
	return strings.Join(out, " ")
}

// queries are the video queries' windows and paging, in order.
func queries(t *testing.T, u *adaptertest.Upstream) []string {
	t.Helper()
	var out []string
	for _, r := range u.Replay.Requests() {
		if r.Path != "/v2/research/video/query/" {
			continue
		}
		b := body(t, r)
		w := b["start_date"].(string) + "-" + b["end_date"].(string)
		if c, ok := b["cursor"]; ok {
			w += "@" + c.(json.Number).String()
		}
		out = append(out, w)
	}
	return out
}

// The first page: the account is looked up (its video count), then
// today's window is read whole (two pages of the source) and sorted.
func TestPostsFirstPage(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.PostsEndpoint, "handle=samplecreator&limit=3", "posts-page1")
	if got := strings.Join(calls(u), ", "); got != strings.Join([]string{tokenCall, userCall, queryCall, queryCall}, ", ") {
		t.Fatalf("calls %s", got)
	}
	reqs := u.Replay.Requests()
	if b := body(t, reqs[1]); b["username"] != "samplecreator" || url.Values(reqs[1].Query).Get("fields") != "video_count" {
		t.Errorf("user info %v %v", b, reqs[1].Query)
	}
	q := body(t, reqs[2])
	cond := q["query"].(map[string]any)["and"].([]any)[0].(map[string]any)
	if cond["operation"] != "EQ" || cond["field_name"] != "username" || cond["field_values"].([]any)[0] != "samplecreator" ||
		q["max_count"].(json.Number).String() != "100" || q["start_date"] != "20261005" || q["end_date"] != "20261103" {
		t.Errorf("query %v", q)
	}
	if _, ok := q["search_id"]; ok {
		t.Errorf("a first query sends no search_id: %v", q)
	}
	if f := url.Values(reqs[2].Query).Get("fields"); f != "id,create_time,username,region_code,video_description,video_duration,hashtag_names,view_count,like_count,comment_count,share_count,favourites_count" {
		t.Errorf("fields %q", f)
	}
	if q2 := body(t, reqs[3]); q2["cursor"].(json.Number).String() != "100" || q2["search_id"] != "7301388525814961198" || q2["end_date"] != "20261103" {
		t.Errorf("second page %v", q2)
	}
	if got := ids(t, data); got != nov01+" "+oct28+" "+oct20 {
		t.Errorf("ids %s", got)
	}
	if data["count"] != 3.0 || data["has_more"] != true || data["cursor"] == nil || data["handle"] != "samplecreator" {
		t.Errorf("list fields %v", data)
	}
	items := adaptertest.Items(t, data)
	first := items[0]
	c := first["counts"].(map[string]any)
	if first["url"] != "https://www.tiktok.com/@samplecreator/video/"+nov01 || first["created_at"] != "2026-11-01T18:05:00Z" ||
		c["likes"] != 201334.0 || c["comments"] != 1893.0 || c["shares"] != 4410.0 || c["views"] != 1834512.0 ||
		first["saves"] != 12007.0 || first["duration_seconds"] != 38.0 || first["thumbnail_url"] != nil {
		t.Errorf("first item %v", first)
	}
	if v, ok := items[1]["counts"].(map[string]any)["views"]; !ok || v != nil {
		t.Errorf("views the source did not report: %v (present %v)", v, ok)
	}
	w := warningsOf(data)
	for _, must := range []string{tiktok.WarnIndexLag, tiktok.WarnNoThumbnails, "1 post(s) do not report views: counts.views is null"} {
		if !strings.Contains(w, must) {
			t.Errorf("_warnings lack %q: %s", must, w)
		}
	}
}

// Following the cursor: each page starts at the last returned post's day,
// reads back to where limit is met, and the last page says there is no
// more once every counted video was returned.
func TestPostsPaging(t *testing.T) {
	u := research(t)
	first := u.Serve(t, tiktok.PostsEndpoint, "handle=samplecreator&limit=3")
	cursor := *first.Data.(tiktok.Posts).Cursor

	u = research(t)
	second := u.Data(t, tiktok.PostsEndpoint, "handle=samplecreator&limit=3&cursor="+url.QueryEscape(cursor), "posts-page2")
	if got := strings.Join(calls(u), ", "); got != strings.Join([]string{tokenCall, queryCall, queryCall}, ", ") {
		t.Errorf("calls %s (no account lookup after the first page)", got)
	}
	if got := strings.Join(queries(t, u), " "); got != "20260921-20261020 20260822-20260920" {
		t.Errorf("windows %s", got)
	}
	if got := ids(t, second); got != oct12+" "+oct06+" "+sep20 {
		t.Errorf("ids %s", got)
	}
	if second["has_more"] != true || second["cursor"] == nil {
		t.Errorf("page 2 %v", second)
	}
	// The older video was written under the old answers' key, video_id.
	if items := adaptertest.Items(t, second); items[2]["text"] != "Sample: September vlog #vlog" {
		t.Errorf("old-shape video %v", items[2])
	}

	u = research(t)
	third := u.Data(t, tiktok.PostsEndpoint, "handle=samplecreator&limit=3&cursor="+url.QueryEscape(second["cursor"].(string)), "posts-page3")
	if got := strings.Join(queries(t, u), " "); got != "20260723-20260821" {
		t.Errorf("windows %s (the account's 7 videos are all returned after one)", got)
	}
	if got := ids(t, third); got != aug14 || third["has_more"] != false || third["cursor"] != nil {
		t.Errorf("last page %v", third)
	}
}

// A page of 20 reads windows back until the account's every video is found.
func TestPostsWholeAccount(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.PostsEndpoint, "handle=samplecreator", "posts-all")
	if got := strings.Join(queries(t, u), " "); got != "20261005-20261103 20261005-20261103@100 20260905-20261004 20260806-20260904" {
		t.Errorf("windows %s", got)
	}
	if got := ids(t, data); got != strings.Join([]string{nov01, oct28, oct20, oct12, oct06, sep20, aug14}, " ") {
		t.Errorf("ids %s", got)
	}
	if data["has_more"] != false || data["cursor"] != nil || data["count"] != 7.0 {
		t.Errorf("list fields %v", data)
	}
}

// An account whose recent months hold nothing: the call stops after its
// query budget with a cursor to look further back.
func TestPostsQuietAccount(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.PostsEndpoint, "handle=samplequiet", "posts-quiet")
	if got := strings.Join(queries(t, u), " "); got != "20261005-20261103 20260905-20261004 20260806-20260904 20260707-20260805" {
		t.Errorf("windows %s", got)
	}
	if data["count"] != 0.0 || len(adaptertest.Items(t, data)) != 0 || data["has_more"] != true || data["cursor"] == nil {
		t.Errorf("data %v", data)
	}
	if !strings.Contains(warningsOf(data), "No posts were found from 2026-07-07 to 2026-11-03; pass cursor to look further back.") {
		t.Errorf("_warnings %s", warningsOf(data))
	}
	u = research(t)
	next := u.Serve(t, tiktok.PostsEndpoint, "handle=samplequiet&cursor="+url.QueryEscape(data["cursor"].(string)))
	if next.Fault != nil {
		t.Fatal(next.Fault)
	}
	if got := queries(t, u); len(got) != 4 || got[0] != "20260607-20260706" {
		t.Errorf("next windows %v", got)
	}
}

func TestPostsEmptyAndUnknownAccounts(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.PostsEndpoint, "handle=sampleempty", "posts-empty")
	if data["has_more"] != false || data["count"] != 0.0 || warningsOf(data) != tiktok.WarnNoPosts {
		t.Errorf("data %v", data)
	}
	if len(queries(t, u)) != 0 {
		t.Error("an account without videos was queried")
	}
	u = research(t)
	u.Fault(t, tiktok.PostsEndpoint, "handle=samplenobody", upstream.NotFound)
	if got := strings.Join(calls(u), ", "); got != tokenCall+", "+userCall {
		t.Errorf("calls %s", got)
	}
}

func TestPostsRefusals(t *testing.T) {
	u := research(t)
	for _, cur := range []string{"garbage", "v1.!!", "v1." + b64(`{"e":"20991231","n":0}`), "v1." + b64(`{"e":"20261001","b":"12ab","n":0}`),
		"v1." + b64(`{"e":"2026-10-01","n":0}`), "v1." + b64(`{"e":"20261001","n":-1}`)} {
		out := u.Fault(t, tiktok.PostsEndpoint, "handle=samplecreator&cursor="+url.QueryEscape(cur), upstream.InvalidParameter)
		if out.Fault.Field != "cursor" {
			t.Errorf("%s: field %q", cur, out.Fault.Field)
		}
	}
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("%d requests for unusable cursors", n)
	}
	// A video of another account, or an id written as a float (its digits
	// are lost), is an answer that cannot be used.
	research(t).Fault(t, tiktok.PostsEndpoint, "handle=samplestray", upstream.Malformed)
	out := research(t).Fault(t, tiktok.PostsEndpoint, "handle=samplefloat", upstream.Malformed)
	if !strings.Contains(out.Fault.Reason, "not the expected JSON") {
		t.Errorf("reason %q", out.Fault.Reason)
	}
	e, _ := registry.Default().Endpoint(tiktok.PostsEndpoint)
	for _, q := range []string{"handle=samplecreator&limit=0", "handle=samplecreator&limit=101", "handle=@samplecreator", "limit=5"} {
		v, _ := url.ParseQuery(q)
		if _, verr := params.Validate(e, v, nil); verr == nil {
			t.Errorf("%s validated", q)
		}
	}
}

// Replay answers any account from the default fixtures (the canary and
// MERIDIAN_UPSTREAM=replay run on them).
func TestPostsDefaults(t *testing.T) {
	for _, h := range []string{"tiktok", "someone.else"} {
		out := research(t).Serve(t, tiktok.PostsEndpoint, "handle="+h)
		if out.Fault != nil {
			t.Fatalf("%s: %v", h, out.Fault)
		}
		p := out.Data.(tiktok.Posts)
		if p.Count != 3 || p.HasMore == nil || *p.HasMore || !strings.HasPrefix(*p.Items[0].URL, "https://www.tiktok.com/@"+h+"/video/") {
			t.Errorf("%s: %+v", h, p)
		}
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// A month with more posts than one call reads: its part is served sorted,
// says so, and the next page reads the month again below the last id.
func TestPostsHugeWindow(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.PostsEndpoint, "handle=samplehuge", "posts-huge")
	if got := strings.Join(queries(t, u), " "); got != "20261005-20261103 20261005-20261103@100 20261005-20261103@200 20261005-20261103@300" {
		t.Errorf("windows %s", got)
	}
	if data["count"] != 5.0 || data["has_more"] != true || !strings.Contains(warningsOf(data), tiktok.WarnPartial) {
		t.Errorf("data %v", data)
	}
	var times []string
	for _, it := range adaptertest.Items(t, data) {
		times = append(times, it["created_at"].(string)[:10])
	}
	if strings.Join(times, " ") != "2026-10-30 2026-10-28 2026-10-25 2026-10-12 2026-10-07" {
		t.Errorf("order %v", times)
	}
}

// The budget runs out inside an older window: that window is left whole
// for the next page rather than served in part.
func TestPostsBudgetLeavesAWindowWhole(t *testing.T) {
	u := research(t)
	data := u.Data(t, tiktok.PostsEndpoint, "handle=samplebusy&limit=5", "posts-busy")
	if got := strings.Join(queries(t, u), " "); got != "20261005-20261103 20260905-20261004 20260905-20261004@100 20260905-20261004@200" {
		t.Errorf("windows %s", got)
	}
	if data["count"] != 1.0 || data["has_more"] != true || strings.Contains(warningsOf(data), tiktok.WarnPartial) {
		t.Errorf("data %v", data)
	}
	u = research(t)
	u.Serve(t, tiktok.PostsEndpoint, "handle=samplebusy&limit=5&cursor="+url.QueryEscape(data["cursor"].(string)))
	if got := queries(t, u); len(got) == 0 || got[0] != "20260905-20261004" {
		t.Errorf("next page starts at %v", got)
	}
}
