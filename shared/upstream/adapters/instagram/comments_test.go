package instagram_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/instagram"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const commentsEndpoint = instagram.CommentsEndpoint

func post(id string) string { return "post_id=" + url.QueryEscape(id) }

func warnings(t *testing.T, data map[string]any) []string {
	t.Helper()
	raw, _ := data["_warnings"].([]any)
	out := make([]string, len(raw))
	for i, w := range raw {
		out[i] = w.(string)
	}
	return out
}

// The web GraphQL shape: edge_media_to_parent_comment's preview.
func TestCommentsGraphQL(t *testing.T) {
	u := direct(t)
	c := u.Data(t, commentsEndpoint, post("https://www.instagram.com/reel/DCmNtGql123/?igsh=abc"), "comments-graphql")
	if r := u.LastRequest(t); r.Path != "/p/DCmNtGql123/" || len(r.Query) != 0 {
		t.Fatalf("request %s %v", r.Path, r.Query)
	}
	items := adaptertest.Items(t, c)
	if c["post_id"] != "DCmNtGql123" || c["url"] != "https://www.instagram.com/p/DCmNtGql123/" || c["comments_count"] != 31.0 ||
		len(items) != 4 || c["count"] != 4.0 || c["has_more"] != true || c["cursor"] != nil {
		t.Fatalf("comments %v", c)
	}
	first := items[0]
	author := first["author"].(map[string]any)
	if first["id"] != "18116197942430879" || first["text"] != "The light in this one is unreal 😍" ||
		first["created_at"] != "2026-10-18T17:46:40Z" || first["likes"] != 12.0 || first["replies"] != 0.0 ||
		author["id"] != "72116078708" || author["handle"] != "travels.with.jo" || author["name"] != nil ||
		author["url"] != "https://www.instagram.com/travels.with.jo/" || author["verified"] != false ||
		!strings.HasPrefix(author["avatar_url"].(string), "https://scontent-lis1-1.cdninstagram.com/") {
		t.Errorf("first %v", first)
	}
	// Replies are counted, not listed; a comment without its like count is null.
	if items[1]["replies"] != 2.0 || items[2]["author"].(map[string]any)["verified"] != true {
		t.Errorf("items %v", items[1:3])
	}
	if v, ok := items[3]["likes"]; !ok || v != nil {
		t.Errorf("likes %v", items[3])
	}
	w := warnings(t, c)
	if len(w) != 3 || w[0] != instagram.WarnCommentsSample || w[1] != instagram.WarnCommentsFirst ||
		!strings.HasPrefix(w[2], "1 comment(s) carry no like count") {
		t.Errorf("warnings %v", w)
	}

	// limit trims the preview; the rest is said to exist.
	short := u.Serve(t, commentsEndpoint, post("DCmNtGql123")+"&limit=2")
	if got := short.Data.(instagram.Comments); short.Fault != nil || got.Count != 2 || !*got.HasMore {
		t.Errorf("limit=2: %+v %v", got, short.Fault)
	}
}

// The private API's media item: comments[] with ids as bare numbers
// beyond 2^53, which keep their digits.
func TestCommentsMediaItem(t *testing.T) {
	c := direct(t).Data(t, commentsEndpoint, post("DCmNtV1abcd"), "comments-v1")
	items := adaptertest.Items(t, c)
	if len(items) != 3 || c["has_more"] != false || c["comments_count"] != 3.0 {
		t.Fatalf("comments %v", c)
	}
	a := items[0]["author"].(map[string]any)
	if items[0]["id"] != "18298765432109877" || items[1]["id"] != "17999999999999999" || items[2]["id"] != "18000000000000001" ||
		a["id"] != "48151699001" || a["name"] != "Colour Fan" || items[0]["likes"] != 5.0 || items[0]["replies"] != 1.0 ||
		items[0]["created_at"] != "2026-10-14T18:46:40Z" {
		t.Errorf("items %v", items)
	}
	// An empty full_name is no name; missing counters are null with warnings.
	if items[1]["author"].(map[string]any)["name"] != nil || items[1]["likes"] != nil || items[2]["replies"] != nil {
		t.Errorf("sparse %v %v", items[1], items[2])
	}
	w := warnings(t, c)
	if len(w) != 3 || w[0] != instagram.WarnCommentsSample || !strings.HasPrefix(w[1], "1 comment(s) carry no like count") ||
		!strings.HasPrefix(w[2], "1 comment(s) carry no reply count") {
		t.Errorf("warnings %v", w)
	}
}

func TestCommentsOffAndNone(t *testing.T) {
	d := direct(t)
	off := d.Data(t, commentsEndpoint, post("https://instagram.com/p/DCmNtOff123"), "comments-disabled")
	if off["count"] != 0.0 || len(adaptertest.Items(t, off)) != 0 || off["has_more"] != false {
		t.Errorf("off %v", off)
	}
	if w := warnings(t, off); len(w) != 1 || w[0] != instagram.WarnCommentsDisabled {
		t.Errorf("off warnings %v", w)
	}
	none := d.Data(t, commentsEndpoint, post("DCmNtZero12"), "comments-none")
	if none["count"] != 0.0 || none["has_more"] != false || none["comments_count"] != 0.0 || none["_warnings"] != nil {
		t.Errorf("none %v", none)
	}
}

// A page that carries the post but none of its comments is a refusal, on
// every route, never an empty sample.
func TestCommentsNotOnThePage(t *testing.T) {
	d := direct(t)
	for code, n := range map[string]string{"C9pHoTo1abc": "1294", "CxGraphQL12": "152"} {
		out := d.Fault(t, commentsEndpoint, post(code), upstream.Rejected)
		if !strings.Contains(out.Fault.Reason, "none of its "+n+" comments") {
			t.Errorf("%s: reason %q", code, out.Fault.Reason)
		}
	}
	res := all(t).Serve(t, commentsEndpoint, post("C9pHoTo1abc"))
	if res.Fault == nil || res.Fault.Kind != upstream.Rejected || len(res.Trace.Legs) != 3 {
		t.Fatalf("fault %v, legs %+v", res.Fault, res.Trace.Legs)
	}
	if e := res.Error(); e.Status != 502 {
		t.Errorf("status %d", e.Status)
	}
}

// Deleted and private posts are 404; a login wall or gate fails over; a
// changed page is malformed: the post-stats rules.
func TestCommentsFaults(t *testing.T) {
	d := direct(t)
	for _, code := range []string{"CdEleted123", "CgOne12345a", "CpRivate123"} {
		d.Fault(t, commentsEndpoint, post(code), upstream.NotFound)
	}
	for _, code := range []string{"CLoginWall1", "CgAted12345"} {
		d.Fault(t, commentsEndpoint, post(code), upstream.Rejected)
	}
	for code, want := range map[string]string{"CChanged123": "no media with the requested shortcode", "CnOjson1234": "no JSON data script"} {
		out := d.Fault(t, commentsEndpoint, post(code), upstream.Malformed)
		if !strings.Contains(out.Fault.Reason, want) || !strings.Contains(out.Fault.Reason, "-byte page") {
			t.Errorf("%s: %q", code, out.Fault.Reason)
		}
	}
}

// The unblocking services fetch the same page and map it to the same data.
func TestCommentsServices(t *testing.T) {
	page := fixturePage(t, "comments-graphql")
	z := zyte(t)
	addFixture(t, z.Replay, "zyte_api", map[string]any{
		"match": map[string]any{"method": "POST", "path": "/v1/extract", "body": map[string]any{"url": "https://www.instagram.com/p/DCmNtGql123/"}},
		"response": map[string]any{"status": 200, "headers": map[string]string{"content-type": "application/json"}, "body": map[string]any{
			"url": "https://www.instagram.com/p/DCmNtGql123/", "statusCode": 200,
			"httpResponseBody":    base64.StdEncoding.EncodeToString([]byte(page)),
			"httpResponseHeaders": []map[string]string{{"name": "content-type", "value": "text/html; charset=utf-8"}},
		}},
	})
	adaptertest.MatchesGolden(t, commentsEndpoint, z.Serve(t, commentsEndpoint, post("DCmNtGql123")), instagram.Name, "comments-graphql")
	s := scraperAPI(t)
	addFixture(t, s.Replay, "scraperapi", map[string]any{
		"match":    map[string]any{"method": "GET", "path": "/", "query": map[string]string{"api_key": "*", "url": "https://www.instagram.com/p/DCmNtGql123/"}},
		"response": map[string]any{"status": 200, "headers": map[string]string{"content-type": "text/html; charset=utf-8"}, "body_text": page},
	})
	adaptertest.MatchesGolden(t, commentsEndpoint, s.Serve(t, commentsEndpoint, post("https://instagr.am/p/DCmNtGql123/")), instagram.Name, "comments-graphql")
}

// post_id is checked before any fetch: the registry holds URLs to the
// platform's hosts and the forms it reads; the adapter reads the code.
func TestCommentsPostID(t *testing.T) {
	e, ok := registry.Default().Endpoint(commentsEndpoint)
	if !ok {
		t.Fatal("not registered")
	}
	for raw, reason := range map[string]string{
		"https://photos.example.com/p/DCmNtGql123/":         "wrong_host",
		"https://instagram.com.evil.example/p/DCmNtGql123/": "wrong_host",
		"https://www.instagram.com/sample_filmmaker/":       "invalid_format",
		"abc":          "invalid_format",
		"@DCmNtGql123": "invalid_format",
		"https://user@www.instagram.com/p/DCmNtGql123/":      "invalid_url",
		"https://www.instagram.com/stories/someone/12345678": "invalid_format",
	} {
		_, err := params.Validate(e, url.Values{"post_id": {raw}}, nil)
		if err == nil {
			t.Errorf("%q validated", raw)
			continue
		}
		b, _ := json.Marshal(err.Details)
		if !strings.Contains(string(b), `"reason":"`+reason+`"`) || !strings.Contains(string(b), `"field":"post_id"`) {
			t.Errorf("%q: %s", raw, b)
		}
	}
	d := direct(t)
	for raw, code := range map[string]string{
		"17859633232647524": "not_a_shortcode",
		"https://www.instagram.com/p/DCmNtGql123/comments": "not_a_post",
		"https://www.instagram.com/explore/tags/cats/":     "not_a_post",
		"DC.mNt":                               "invalid_shortcode",
		"https://www.instagram.com/p/DC.mNt1/": "invalid_shortcode",
	} {
		out := d.Runner.Serve(context.Background(), commentsEndpoint, map[string]string{"post_id": raw, "limit": "20"})
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "post_id" || out.Fault.Code != code ||
			!strings.Contains(out.Fault.Reason, "post_id ") || strings.Contains(out.Fault.Reason, "url ") ||
			strings.Contains(strings.ToLower(out.Fault.Reason), "instagram") {
			t.Errorf("%q: %+v", raw, out.Fault)
		}
	}
	if n := len(d.Replay.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
	// Every accepted form fetches the canonical page.
	for _, raw := range []string{"DCmNtGql123", "https://www.instagram.com/p/DCmNtGql123/", "www.instagram.com/reel/DCmNtGql123",
		"https://m.instagram.com/sample_filmmaker/p/DCmNtGql123/?img_index=1", "https://www.instagram.com/tv/DCmNtGql123/"} {
		adaptertest.MatchesGolden(t, commentsEndpoint, d.Serve(t, commentsEndpoint, post(raw)), instagram.Name, "comments-graphql")
		if r := d.LastRequest(t); r.Path != "/p/DCmNtGql123/" {
			t.Errorf("%q fetched %s", raw, r.Path)
		}
	}
}

func fixturePage(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(adaptertest.FixturesDir(t), instagram.Name, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx replay.Fixture
	if err := json.Unmarshal(raw, &fx); err != nil || fx.Response.BodyText == nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return *fx.Response.BodyText
}

func addFixture(t *testing.T, srv *replay.Server, provider string, doc map[string]any) {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var fx replay.Fixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Add(provider, "test-"+provider+".json", fx); err != nil {
		t.Fatal(err)
	}
}
