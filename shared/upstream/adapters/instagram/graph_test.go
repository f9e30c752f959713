package instagram_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/instagram"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const (
	graphToken   = "EAAGm0PX4ZCpsBO-instagram-test-7f3a"
	graphAccount = "17841405309211844"
	graphPath    = "/v25.0/" + graphAccount

	profileFields = "id,username,name,biography,website,profile_picture_url,followers_count,follows_count,media_count"
	mediaFields   = "id,caption,media_type,media_product_type,permalink,timestamp,like_count,comments_count,thumbnail_url,media_url"
)

func graph(t *testing.T, extra map[string]string) *adaptertest.Upstream {
	t.Helper()
	secrets := map[string]string{instagram.TokenSecret: graphToken, instagram.AccountSecret: graphAccount}
	for k, v := range extra {
		secrets[k] = v
	}
	return adaptertest.StartWith(t, instagram.GraphProvider(), secrets, options())
}

// graphRequest is the i-th request the replay upstream received (negative:
// from the end); every one must carry the token as a bearer header and
// never in the URL.
func graphRequest(t *testing.T, u *adaptertest.Upstream, i int) replay.Request {
	t.Helper()
	reqs := u.Replay.Requests()
	if i < 0 {
		i += len(reqs)
	}
	if i < 0 || i >= len(reqs) {
		t.Fatalf("request %d of %d", i, len(reqs))
	}
	r := reqs[i]
	if got := r.Header.Get("Authorization"); got != "Bearer "+graphToken {
		t.Fatalf("Authorization = %q", got)
	}
	for k, v := range r.Query {
		if k == "access_token" || strings.Contains(strings.Join(v, ","), graphToken) {
			t.Fatalf("the token is in the URL: %s=%v", k, v)
		}
	}
	return r
}

func discovery(handle, fields string) string {
	return "business_discovery.username(" + handle + "){" + fields + "}"
}

func TestProfile(t *testing.T) {
	u := graph(t, nil)
	p := u.Data(t, instagram.ProfileEndpoint, "handle=sample.creator", "profile-creator")
	r := graphRequest(t, u, -1)
	if r.Method != "GET" || r.Path != graphPath || len(r.Query) != 1 ||
		url.Values(r.Query).Get("fields") != discovery("sample.creator", profileFields) {
		t.Fatalf("request %s %s %v", r.Method, r.Path, r.Query)
	}
	if p["id"] != "17841401441775531" || p["handle"] != "sample.creator" || p["name"] != "Sample Creator" ||
		p["url"] != "https://www.instagram.com/sample.creator/" || p["description"] != "Travel photographer.\nBased in Lisbon." ||
		p["website"] != "https://creator.example/links" || p["followers"] != 267793.0 ||
		p["follower_source_field"] != "business_discovery.followers_count" || p["following"] != 1205.0 ||
		p["posts_count"] != 1984.0 || p["verified"] != nil {
		t.Errorf("profile %v", p)
	}
	if w, _ := p["_warnings"].([]any); len(w) != 1 || w[0] != instagram.WarnVerifiedUnknown {
		t.Errorf("warnings %v", p["_warnings"])
	}
}

// Usernames are case-insensitive: the registry folds the handle, so both
// spellings make the same request (and share a cache entry).
func TestProfileHandleFolded(t *testing.T) {
	u := graph(t, nil)
	adaptertest.MatchesGolden(t, instagram.ProfileEndpoint, u.Serve(t, instagram.ProfileEndpoint, "handle=Sample.Creator"),
		instagram.GraphName, "profile-creator")
}

// The app secret, when configured, signs the token (appsecret_proof).
func TestAppSecretProof(t *testing.T) {
	const secret = "0a1b2c3d4e5f-app-secret"
	u := graph(t, map[string]string{instagram.AppSecretSecret: secret})
	adaptertest.MatchesGolden(t, instagram.ProfileEndpoint, u.Serve(t, instagram.ProfileEndpoint, "handle=sample.creator"),
		instagram.GraphName, "profile-creator")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(graphToken))
	q := url.Values(graphRequest(t, u, -1).Query)
	if q.Get("appsecret_proof") != hex.EncodeToString(mac.Sum(nil)) {
		t.Errorf("appsecret_proof %q", q.Get("appsecret_proof"))
	}
	for k, v := range q {
		if strings.Contains(strings.Join(v, ","), secret) {
			t.Errorf("the app secret is in the URL (%s)", k)
		}
	}
}

// A sparse answer: counts the source left out are null with a warning, and
// an id written as a bare number beyond 2^53 keeps its exact digits.
func TestProfileSparse(t *testing.T) {
	p := graph(t, nil).Data(t, instagram.ProfileEndpoint, "handle=sparse_shop", "profile-sparse")
	if p["id"] != "17841400455970029" || p["followers"] != nil || p["follower_source_field"] != nil ||
		p["following"] != 0.0 || p["posts_count"] != 0.0 || p["name"] != nil || p["description"] != nil {
		t.Errorf("profile %v", p)
	}
	w, _ := p["_warnings"].([]any)
	if len(w) != 2 || w[0] != instagram.WarnFollowersMissing || w[1] != instagram.WarnVerifiedUnknown {
		t.Errorf("warnings %v", w)
	}
}

// A username business discovery cannot see (personal, age-gated or none)
// is 404, on both endpoints.
func TestNotAProfessionalAccount(t *testing.T) {
	u := graph(t, nil)
	for _, ep := range []string{instagram.ProfileEndpoint, instagram.PostsEndpoint} {
		out := u.Fault(t, ep, "handle=personal_friend", upstream.NotFound)
		if e := out.Error(); e.Status != 404 {
			t.Errorf("%s: status %d", ep, e.Status)
		}
		if !strings.Contains(out.Fault.Reason, "2207013") {
			t.Errorf("%s: reason %q", ep, out.Fault.Reason)
		}
	}
	if n := len(u.Replay.Requests()); n != 2 {
		t.Errorf("%d requests: a definitive answer is not retried", n)
	}
}

func TestGraphFaults(t *testing.T) {
	u := graph(t, nil)
	// An expired token: a refusal counted against the route's health (401),
	// its reason never holding the token.
	out := u.Fault(t, instagram.ProfileEndpoint, "handle=expired_token", upstream.Rejected)
	if out.Fault.Status != 401 || !strings.Contains(out.Fault.Reason, "code 190/463") || strings.Contains(out.Fault.Reason, graphToken) {
		t.Errorf("token: %+v", out.Fault)
	}
	if e := out.Error(); e.Status != 502 {
		t.Errorf("token: status %d", e.Status)
	}
	out = u.Fault(t, instagram.ProfileEndpoint, "handle=no_permission", upstream.Rejected)
	if out.Fault.Status != 403 || !strings.Contains(out.Fault.Reason, "permission") {
		t.Errorf("permission: %+v", out.Fault)
	}
	// The source's own failure is retried, then 502.
	before := len(u.Replay.Requests())
	out = u.Fault(t, instagram.ProfileEndpoint, "handle=flaky_shop", upstream.ServerError)
	if n := len(u.Replay.Requests()) - before; n != 3 || out.Trace.Attempts != 3 {
		t.Errorf("server error: %d requests, %d attempts", n, out.Trace.Attempts)
	}
	// Changed or broken answers are malformed, never an empty success.
	u.Fault(t, instagram.ProfileEndpoint, "handle=broken_shop", upstream.Malformed)
	out = u.Fault(t, instagram.ProfileEndpoint, "handle=odd_shop", upstream.Malformed)
	if !strings.Contains(out.Fault.Reason, "business_discovery") {
		t.Errorf("no discovery: %q", out.Fault.Reason)
	}
}

// A rate limit rests the route for the wait X-Business-Use-Case-Usage gives
// (estimated_time_to_regain_access, minutes); the caller sees 429 with it,
// then 503 while the route rests, without the source being asked.
func TestRateLimitRestsTheRoute(t *testing.T) {
	u := graph(t, nil)
	out := u.Fault(t, instagram.ProfileEndpoint, "handle=busy_brand", upstream.RateLimited)
	if out.Fault.RetryAfter != 12*time.Minute {
		t.Errorf("retry after %v", out.Fault.RetryAfter)
	}
	if e := out.Error(); e.Status != 429 || e.Header.Get("retry-after") != "720" {
		t.Errorf("error %d %v", e.Status, e.Header)
	}
	before := len(u.Replay.Requests())
	next := u.Serve(t, instagram.ProfileEndpoint, "handle=sample.creator")
	if next.Skipped <= 11*time.Minute || len(u.Replay.Requests()) != before {
		t.Errorf("skipped %v after %d requests", next.Skipped, len(u.Replay.Requests())-before)
	}
	if e := next.Error(); e.Status != 503 {
		t.Errorf("while resting: %d", e.Status)
	}

	// An app-level limit (code 4) whose headers carry percentages only:
	// 429 without a wait of its own.
	out = graph(t, nil).Fault(t, instagram.ProfileEndpoint, "handle=app_limited", upstream.RateLimited)
	if out.Fault.RetryAfter != 0 || !strings.Contains(out.Fault.Reason, "code 4") {
		t.Errorf("app limit %+v", out.Fault)
	}
}

// A moved base URL or a version that does not exist answers a bare 404:
// not an answer about the account.
func TestWrongVersionIsNotNotFound(t *testing.T) {
	u := graph(t, map[string]string{instagram.VersionSecret: "v99.0"})
	out := u.Fault(t, instagram.ProfileEndpoint, "handle=sample.creator", upstream.Rejected)
	if r := graphRequest(t, u, -1); r.Path != "/v99.0/"+graphAccount || !strings.Contains(out.Fault.Reason, "base URL") {
		t.Errorf("path %s, reason %q", r.Path, out.Fault.Reason)
	}
}

// A handle the source could not take is the caller's 422, before any
// request (the registry refuses it first; the adapter holds the line too,
// since the handle is written into a field expression).
func TestInvalidHandleNotSent(t *testing.T) {
	u := graph(t, nil)
	for _, h := range []string{"bad-handle", "a){id}", "x.y(z)", strings.Repeat("a", 31)} {
		for _, ep := range []string{instagram.ProfileEndpoint, instagram.PostsEndpoint} {
			out := u.Runner.Serve(context.Background(), ep, map[string]string{"handle": h, "limit": "20"})
			if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "handle" {
				t.Errorf("%s %q: %v", ep, h, out.Fault)
			}
		}
	}
	if n := len(u.Replay.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

func TestPostsAndPaging(t *testing.T) {
	u := graph(t, nil)
	first := u.Data(t, instagram.PostsEndpoint, "handle=sample.creator&limit=3", "posts-page1")
	r := graphRequest(t, u, -1)
	if r.Path != graphPath || url.Values(r.Query).Get("fields") !=
		discovery("sample.creator", "id,username,media_count,media.limit(3){"+mediaFields+"}") {
		t.Fatalf("request %s %v", r.Path, r.Query)
	}
	items := adaptertest.Items(t, first)
	if len(items) != 3 || first["count"] != 3.0 || first["has_more"] != true || first["cursor"] != "QVFIUmlKdXBzYWtyUml3" ||
		first["handle"] != "sample.creator" || first["account_id"] != "17841401441775531" {
		t.Fatalf("page 1 %v", first)
	}
	reel := items[0]
	counts := reel["counts"].(map[string]any)
	if reel["id"] != "18034874084210833" || reel["url"] != "https://www.instagram.com/reel/DFp17y5MymE/" ||
		reel["shortcode"] != "DFp17y5MymE" || reel["created_at"] != "2026-11-02T18:40:05Z" || reel["media_type"] != "VIDEO" ||
		reel["product_type"] != "REELS" || !strings.Contains(reel["thumbnail_url"].(string), "18034874084210833_n.jpg") ||
		counts["likes"] != 5120.0 || counts["comments"] != 214.0 || counts["shares"] != nil || counts["views"] != nil {
		t.Errorf("reel %v", reel)
	}
	// Hidden likes are null, never 0; an album has no caption here.
	if c := items[1]["counts"].(map[string]any); c["likes"] != nil || c["comments"] != 57.0 {
		t.Errorf("hidden likes %v", items[1])
	}
	if items[2]["text"] != nil || items[2]["media_type"] != "CAROUSEL_ALBUM" || items[2]["thumbnail_url"] == nil {
		t.Errorf("album %v", items[2])
	}
	w, _ := first["_warnings"].([]any)
	if len(w) != 2 || !strings.HasPrefix(w[0].(string), "1 post(s) do not report likes") || w[1] != instagram.WarnSharesViews {
		t.Errorf("warnings %v", w)
	}

	second := u.Data(t, instagram.PostsEndpoint, "handle=sample.creator&limit=3&cursor="+url.QueryEscape(first["cursor"].(string)), "posts-page2")
	if f := url.Values(graphRequest(t, u, -1).Query).Get("fields"); !strings.Contains(f, "media.limit(3).after(QVFIUmlKdXBzYWtyUml3){") {
		t.Errorf("page 2 fields %s", f)
	}
	// A short page is the last, whatever cursor it carries.
	if second["count"] != 1.0 || second["has_more"] != false || second["cursor"] != nil {
		t.Errorf("page 2 %v", second)
	}
}

func TestPostsEmptyAndDefaults(t *testing.T) {
	u := graph(t, nil)
	empty := u.Data(t, instagram.PostsEndpoint, "handle=new_shop", "posts-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false || empty["cursor"] != nil ||
		empty["_warnings"] != nil {
		t.Errorf("empty %v", empty)
	}
	if f := url.Values(graphRequest(t, u, -1).Query).Get("fields"); !strings.Contains(f, "media.limit(20){") {
		t.Errorf("default limit: %s", f)
	}
	// Replay mode answers any handle from the default fixture, on both endpoints.
	p := u.Serve(t, instagram.ProfileEndpoint, "handle=anyone")
	ps := u.Serve(t, instagram.PostsEndpoint, "handle=anyone&limit=2")
	if p.Fault != nil || ps.Fault != nil {
		t.Fatalf("default: %v, %v", p.Fault, ps.Fault)
	}
	if got := ps.Data.(instagram.Posts); got.Count != 2 || got.HasMore == nil || !*got.HasMore || got.Cursor == nil {
		t.Errorf("default posts %+v", got)
	}
}

func TestPostsCursor(t *testing.T) {
	u := graph(t, nil)
	// The source refuses a stale cursor: the caller's 422 naming cursor.
	out := u.Fault(t, instagram.PostsEndpoint, "handle=sample.creator&cursor=QVFIZXhwaXJlZA", upstream.InvalidParameter)
	if out.Fault.Field != "cursor" {
		t.Errorf("fault %+v", out.Fault)
	}
	// A cursor that could change the field expression is never sent.
	before := len(u.Replay.Requests())
	for _, cur := range []string{"abc){id}", "a,b", "x.y", "a b"} {
		out := u.Runner.Serve(context.Background(), instagram.PostsEndpoint,
			map[string]string{"handle": "sample.creator", "limit": "20", "cursor": cur})
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "cursor" {
			t.Errorf("%q: %v", cur, out.Fault)
		}
	}
	if len(u.Replay.Requests()) != before {
		t.Error("an unusable cursor was sent")
	}
}

// Without its credentials the route is not eligible (501 upstream of it).
func TestGraphNeedsBothSecrets(t *testing.T) {
	p := instagram.GraphProvider()
	required := map[string]bool{}
	for _, s := range p.Secrets {
		if s.Required {
			required[s.Name] = true
		}
	}
	if len(required) != 2 || !required[instagram.TokenSecret] || !required[instagram.AccountSecret] {
		t.Errorf("required secrets %v", required)
	}
	r := upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{Lookup: func(name string) (string, bool) {
		if name == instagram.TokenSecret {
			return graphToken, true
		}
		return "", false
	}})
	if r.Eligible(instagram.ProfileEndpoint) || r.Eligible(instagram.PostsEndpoint) {
		t.Error("eligible without the account id")
	}
}

// The registry's handle: a leading @ and anything outside the source's
// username alphabet are 422 before any call; case is folded.
func TestHandleParameter(t *testing.T) {
	for _, ep := range []string{instagram.ProfileEndpoint, instagram.PostsEndpoint} {
		e, ok := registry.Default().Endpoint(ep)
		if !ok {
			t.Fatalf("%s is not registered", ep)
		}
		for raw, reason := range map[string]string{
			"@bluebottle": "invalid_format", "blue bottle": "invalid_format", "blue-bottle": "invalid_handle",
			"bluebottle)": "invalid_handle", strings.Repeat("a", 31): "too_long",
		} {
			_, err := params.Validate(e, url.Values{"handle": {raw}}, nil)
			if err == nil || err.Status != 422 || err.Details["field"] != "handle" {
				t.Errorf("%s %q: %v", ep, raw, err)
				continue
			}
			if got := err.Details["reason"]; got != reason && reason != "too_long" {
				t.Errorf("%s %q: reason %v", ep, raw, got)
			}
		}
		res, err := params.Validate(e, url.Values{"handle": {"Blue.Bottle_1"}}, nil)
		if err != nil || res.Values["handle"] != "blue.bottle_1" {
			t.Errorf("%s: %v %v", ep, res.Values, err)
		}
	}
}

// Every endpoint of this package answers its registry example in replay
// mode over its routes, as the canary's -replay run asks.
func TestExamplesAnswerInReplay(t *testing.T) {
	site := instagram.Site()
	providers := []*upstream.Provider{instagram.GraphProvider(), pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	u := adaptertest.StartRoutes(t, providers, nil, options())
	for _, ep := range []string{instagram.ProfileEndpoint, instagram.PostsEndpoint, instagram.CommentsEndpoint, instagram.Endpoint} {
		e, _ := registry.Default().Endpoint(ep)
		q, _ := e.Example()
		out := u.Serve(t, ep, q.Encode())
		if out.Fault != nil {
			t.Errorf("%s?%s: %v", ep, q.Encode(), out.Fault)
			continue
		}
		if err := schemas.Validate(ep, out.Data); err != nil {
			t.Errorf("%s: %v", ep, err)
		}
	}
}
