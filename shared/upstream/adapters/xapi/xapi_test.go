package xapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/xapi"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const (
	searchEndpoint  = "microblog_b/search-posts"
	profileEndpoint = "microblog_b/profile"
	searchPath      = "/2/tweets/search/recent"
)

// testToken must reach X as a bearer token and never a fault's reason.
const testToken = "AAAAAAAAAAAAAAAAAAAAAsampleBearer%2Ftoken%3Dxyz"

// fixedNow is 2026-03-10T12:00:00Z: the fixtures' x-rate-limit-reset
// 1773144900 is 900 s after it, and the seven-day window starts on 03-03.
var fixedNow = time.Unix(1773144000, 0).UTC()

func start(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	return adaptertest.StartWith(t, xapi.Provider(), map[string]string{xapi.TokenSecret: testToken}, opts)
}

// sent is the last request's single value of each query parameter.
func sent(t *testing.T, u *adaptertest.Upstream) map[string]string {
	t.Helper()
	r := u.LastRequest(t)
	if r.Path != searchPath {
		t.Fatalf("path %s", r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
		t.Fatalf("Authorization = %q", got)
	}
	out := map[string]string{}
	for k, v := range r.Query {
		if len(v) != 1 {
			t.Fatalf("%s sent %d times: %v", k, len(v), v)
		}
		out[k] = v[0]
	}
	return out
}

func TestSearchLatest(t *testing.T) {
	u := start(t)
	data := u.Data(t, searchEndpoint, "query=golang", "search-latest")
	q := sent(t, u)
	want := map[string]string{
		"query": "golang", "sort_order": "recency", "max_results": "20", "expansions": "author_id",
		"tweet.fields": "created_at,public_metrics,author_id,entities,lang,referenced_tweets,note_tweet",
		"user.fields":  "username,name,verified,verified_type",
	}
	for k, v := range want {
		if q[k] != v {
			t.Errorf("%s = %q; want %q", k, q[k], v)
		}
	}
	if len(q) != len(want) {
		t.Errorf("unexpected parameters: %v", q)
	}
	items := adaptertest.Items(t, data)
	if len(items) != 3 || data["count"] != 3.0 || data["has_more"] != true ||
		data["cursor"] != "b26v89c19zqg8o3fpzbkk9n8fcezjk4f1sd4e69fq1mrh" {
		t.Fatalf("page: %v", data)
	}
	first := items[0]
	author := first["author"].(map[string]any)
	stats := first["stats"].(map[string]any)
	if first["id"] != "1899234567890123457" || author["handle"] != "sample_gopher" || author["id"] != "1456789012345678901" ||
		stats["likes"] != 120.0 || stats["retweets"] != 34.0 || stats["replies"] != 8.0 || stats["views"] != 15230.0 ||
		stats["quotes"] != 5.0 || first["url"] != "https://x.com/sample_gopher/status/1899234567890123457" {
		t.Fatalf("first post: %v", first)
	}
	if l := first["links"].([]any); l[0] != "https://go.dev/doc/go1.26" {
		t.Errorf("links %v", l)
	}
	repost := items[1]
	if repost["type"] != "repost" || repost["referenced_id"] != "1899234567890123457" {
		t.Errorf("repost: %v", repost)
	}
	if v, ok := repost["stats"].(map[string]any)["views"]; !ok || v != nil {
		t.Errorf("views without impression_count = %v (present %v); want null", v, ok)
	}
	long := items[2]
	if !strings.HasSuffix(long["text"].(string), "#golang #concurrency") || long["type"] != "reply" ||
		len(long["hashtags"].([]any)) != 2 {
		t.Errorf("long post: %v", long)
	}
}

func TestSearchModesDatesAndReposts(t *testing.T) {
	u := start(t)
	top := u.Data(t, searchEndpoint, "query=golang&mode=top", "search-top")
	if q := sent(t, u); q["sort_order"] != "relevancy" {
		t.Errorf("top sent sort_order %q", q["sort_order"])
	}
	if adaptertest.Items(t, top)[0]["type"] != "quote" {
		t.Errorf("quote post: %v", adaptertest.Items(t, top)[0])
	}
	// The aliases arrive folded into mode by the registry.
	for _, alias := range []string{"sort=top", "sort_by=top", "sort=latest&sort_by=top"} {
		u.Serve(t, searchEndpoint, "query=golang&"+alias)
		want := "relevancy"
		if strings.HasPrefix(alias, "sort=latest") {
			want = "recency" // sort wins over sort_by
		}
		if q := sent(t, u); q["sort_order"] != want {
			t.Errorf("%s sent sort_order %q; want %s", alias, q["sort_order"], want)
		}
	}

	u.Data(t, searchEndpoint, "query=release+notes&from_date=2026-03-05&to_date=2026-03-07", "search-dates")
	if q := sent(t, u); q["start_time"] != "2026-03-05T00:00:00Z" || q["end_time"] != "2026-03-08T00:00:00Z" || q["query"] != "release notes" {
		t.Errorf("dates sent %v", q)
	}
	// Bounds that add nothing to the seven-day window are left out: X
	// refuses a start_time before it and an end_time in the last 10 s.
	clipped := u.Serve(t, searchEndpoint, "query=golang&from_date=2026-03-01&to_date=2026-03-10")
	if q := sent(t, u); q["start_time"] != "" || q["end_time"] != "" {
		t.Errorf("out-of-window bounds sent: %v", q)
	}
	// ...and the answer says the range was cut to the window.
	if w := clipped.Data.(xapi.Posts).Warnings; len(w) != 1 || w[0] != xapi.WarnBeforeWindow {
		t.Errorf("a from_date before the window: warnings %v", w)
	}
	if dated := u.Serve(t, searchEndpoint, "query=golang&from_date=2026-03-05"); len(dated.Data.(xapi.Posts).Warnings) != 0 {
		t.Errorf("a from_date inside the window warns: %v", dated.Data.(xapi.Posts).Warnings)
	}
	u.Serve(t, searchEndpoint, "query=golang&to_date=2026-03-03")
	if q := sent(t, u); q["end_time"] != "2026-03-04T00:00:00Z" || q["start_time"] != "" {
		t.Errorf("oldest day sent %v", q)
	}

	noReposts := u.Data(t, searchEndpoint, "query=golang&include_reposts=false", "search-no-reposts")
	if q := sent(t, u); q["query"] != "golang -is:retweet" {
		t.Errorf("include_reposts=false sent query %q", q["query"])
	}
	if noReposts["has_more"] != false || noReposts["cursor"] != nil {
		t.Errorf("last page: %v", noReposts)
	}
	for _, v := range []string{"include_reposts=true", ""} {
		u.Serve(t, searchEndpoint, "query=golang&"+v)
		if q := sent(t, u); q["query"] != "golang" {
			t.Errorf("%q sent query %q", v, q["query"])
		}
	}
}

func TestSearchCursorRoundTrip(t *testing.T) {
	u := start(t)
	first := u.Data(t, searchEndpoint, "query=golang", "search-latest")
	second := u.Data(t, searchEndpoint, "query=golang&cursor="+url.QueryEscape(first["cursor"].(string)), "search-page2")
	if q := sent(t, u); q["next_token"] != first["cursor"] {
		t.Fatalf("next_token = %q; want %v", q["next_token"], first["cursor"])
	}
	if second["cursor"] != nil || second["has_more"] != false || second["count"] != 1.0 {
		t.Fatalf("page 2: %v", second)
	}
	empty := u.Data(t, searchEndpoint, "query=zzqx-nothing-matches", "search-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false || empty["cursor"] != nil {
		t.Fatalf("empty: %v", empty)
	}
}

func TestProfile(t *testing.T) {
	u := start(t)
	blue := u.Data(t, profileEndpoint, "handle=sample_gopher", "profile-blue")
	r := u.LastRequest(t)
	if r.Path != "/2/users/by/username/sample_gopher" || r.Header.Get("Authorization") != "Bearer "+testToken {
		t.Fatalf("request %s %v", r.Path, r.Header)
	}
	if f := r.Query["user.fields"]; len(f) != 1 || f[0] != "created_at,description,entities,location,pinned_tweet_id,"+
		"profile_banner_url,profile_image_url,protected,public_metrics,url,verified,verified_type" || len(r.Query) != 1 {
		t.Errorf("query %v", r.Query)
	}
	if blue["id"] != "1456789012345678901" || blue["verified"] != true || blue["verified_blue"] != true ||
		blue["bio_link"] != "https://gopher.example.com" || blue["likes_count"] != 66120.0 || blue["followers"] != 48211.0 ||
		blue["url"] != "https://x.com/sample_gopher" || blue["cover_url"] == nil || blue["_warnings"] != nil {
		t.Fatalf("blue: %v", blue)
	}
	plain := u.Data(t, profileEndpoint, "handle=XDevelopers", "profile-plain")
	if plain["verified"] != false || plain["verified_blue"] != false || plain["bio_link"] != nil || plain["cover_url"] != nil {
		t.Fatalf("plain: %v", plain)
	}
	locked := u.Data(t, profileEndpoint, "handle=sample_locked", "profile-protected")
	if w, _ := locked["_warnings"].([]any); locked["protected"] != true || locked["likes_count"] != nil || locked["bio"] != nil || len(w) != 2 {
		t.Fatalf("protected: %v", locked)
	}
}

func TestHandleRefusedBeforeAnyRequest(t *testing.T) {
	for _, h := range []string{"has-dash", "sixteen_chars_xx", "dot.name"} {
		u := start(t)
		out := u.Fault(t, profileEndpoint, "handle="+h, upstream.InvalidParameter)
		if out.Fault.Field != "handle" || len(u.Replay.Requests()) != 0 {
			t.Errorf("%s: field %q, %d requests", h, out.Fault.Field, len(u.Replay.Requests()))
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
		{"not found", profileEndpoint, "handle=sample_missing", upstream.NotFound, 0, 0, "", 1, 1},
		{"suspended", profileEndpoint, "handle=sample_suspend", upstream.NotFound, 0, 0, "", 1, 1},
		{"profile bad token", profileEndpoint, "handle=sample_badtoken", upstream.Rejected, 401, 0, "", 1, 1},
		{"profile rate limited", profileEndpoint, "handle=sample_limited", upstream.RateLimited, 429, 600 * time.Second, "", 1, 1},
		{"profile malformed", profileEndpoint, "handle=sample_garbled", upstream.Malformed, 0, 0, "", 1, 1},
		{"profile without data", profileEndpoint, "handle=sample_empty", upstream.Malformed, 0, 0, "", 1, 1},
		{"numeric id refused", profileEndpoint, "handle=sample_numeric", upstream.Malformed, 0, 0, "", 1, 1},
		{"search bad token", searchEndpoint, "query=sample-unauthorized", upstream.Rejected, 401, 0, "", 1, 1},
		{"client not enrolled", searchEndpoint, "query=sample-not-enrolled", upstream.Rejected, 403, 0, "", 1, 1},
		{"search rate limited", searchEndpoint, "query=sample-ratelimited", upstream.RateLimited, 429, 900 * time.Second, "", 1, 1},
		{"monthly cap", searchEndpoint, "query=sample-usage-capped", upstream.RateLimited, 429, time.Hour, "", 1, 1},
		{"search malformed", searchEndpoint, "query=sample-malformed", upstream.Malformed, 0, 0, "", 1, 1},
		{"search unavailable", searchEndpoint, "query=sample-unavailable", upstream.ServerError, 503, 0, "", 3, 3},
		{"stale cursor", searchEndpoint, "query=golang&cursor=stale0token0from0another0query", upstream.InvalidParameter, 0, 0, "cursor", 1, 1},
		{"bad query", searchEndpoint, "query=(golang", upstream.InvalidParameter, 0, 0, "query", 1, 1},
		{"foreign cursor", searchEndpoint, "query=golang&cursor=" + url.QueryEscape("page=2&x"), upstream.InvalidParameter, 0, 0, "cursor", 1, 0},
		{"to_date before window", searchEndpoint, "query=golang&to_date=2026-03-02", upstream.InvalidParameter, 0, 0, "to_date", 1, 0},
		{"from_date in future", searchEndpoint, "query=golang&from_date=2026-03-11", upstream.InvalidParameter, 0, 0, "from_date", 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t)
			out := u.Fault(t, tc.endpoint, tc.query, tc.kind)
			if out.Fault.Status != tc.status || out.Fault.RetryAfter != tc.retryAfter || out.Fault.Field != tc.field {
				t.Errorf("status %d retry %v field %q; want %d %v %q", out.Fault.Status, out.Fault.RetryAfter, out.Fault.Field,
					tc.status, tc.retryAfter, tc.field)
			}
			if out.Trace.Attempts != tc.attempts || len(u.Replay.Requests()) != tc.requests {
				t.Errorf("attempts %d, requests %d; want %d, %d", out.Trace.Attempts, len(u.Replay.Requests()), tc.attempts, tc.requests)
			}
			if strings.Contains(out.Fault.Error(), testToken) || strings.Contains(out.Fault.Error(), "sampleBearer") {
				t.Errorf("the token leaked into the fault: %v", out.Fault)
			}
		})
	}
}

// TestSearchTextEntitiesDecodedOnce serves a search answer in the form X
// sent before edit history and view counts (2021): the text carries &amp;
// &lt; &gt; as X escapes them, counters of zero, no bookmark or impression
// counts, a quote, includes.tweets and includes.places, and no next_token.
func TestSearchTextEntitiesDecodedOnce(t *testing.T) {
	u := start(t)
	data := u.Data(t, searchEndpoint, "query=sample+market", "search-escaped-2021-form")
	items := adaptertest.Items(t, data)
	if len(items) != 2 || data["count"] != 2.0 || data["has_more"] != false || data["cursor"] != nil {
		t.Fatalf("page: %v", data)
	}
	first, second := items[0], items[1]
	want := "Fish & chips at the #SampleMarket: queue > 20 min, worth it <3. Menu said \u201cR&D's pick\u201d, literally &amp; on the board"
	if first["text"] != want {
		t.Errorf("text = %q\nwant   %q", first["text"], want)
	}
	stats := first["stats"].(map[string]any)
	if stats["likes"] != 0.0 || stats["retweets"] != 0.0 || stats["replies"] != 0.0 || stats["quotes"] != 0.0 ||
		stats["bookmarks"] != nil || stats["views"] != nil {
		t.Errorf("stats: zeros are counts, absent counters null: %v", stats)
	}
	if second["type"] != "quote" || second["referenced_id"] != "1899200000000000007" ||
		second["author"].(map[string]any)["handle"] != "market_notes" {
		t.Errorf("quote: %v", second)
	}
	if links := second["links"].([]any); len(links) != 2 || links[0] != "https://market.example.org/notes" {
		t.Errorf("links: %v", links)
	}
}

// TestProfileBeforeVerifiedType reads a user as X sent it before
// verified_type and like_count existed (2021): verified_blue and
// likes_count are unknown, not false or zero, and zero counts stay zero.
func TestProfileBeforeVerifiedType(t *testing.T) {
	u := start(t)
	p := u.Data(t, profileEndpoint, "handle=sample_lecturer", "profile-2021-form")
	if p["verified"] != false || p["verified_blue"] != nil || p["verified_type"] != nil || p["likes_count"] != nil ||
		p["followers"] != 0.0 || p["listed_count"] != 0.0 || p["tweets_count"] != 10233.0 ||
		p["bio_link"] != "http://www.sample-lecturer.example" || p["pinned_post_id"] != "1360000000000000001" ||
		p["name"] != "Dr. Sample Lecturer \U0001F308" || p["location"] != "Dundee" {
		t.Fatalf("profile: %v", p)
	}
	if w, _ := p["_warnings"].([]any); len(w) != 1 {
		t.Errorf("warnings: %v", p["_warnings"])
	}
}
