package github_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/github"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const (
	profileEndpoint = "code_host/profile"
	reposEndpoint   = "code_host/profile/repos"
	issuesEndpoint  = "code_host/repo/issues"
)

// testToken is a configured token; it must reach the upstream as a bearer
// token and never a fault's reason.
const testToken = "github_pat_sample0123456789"

// fixedNow is the clock the rate-limit resets in the fixtures are relative
// to: x-ratelimit-reset 1773145234 is 1234 s after it.
var fixedNow = time.Unix(1773144000, 0).UTC()

// start runs the provider behind the replay upstream with a fixed clock.
func start(t *testing.T, secrets map[string]string) *adaptertest.Upstream {
	t.Helper()
	opts := adaptertest.Options
	opts.Now = func() time.Time { return fixedNow }
	return adaptertest.StartWith(t, github.Provider(), secrets, opts)
}

func TestProfileData(t *testing.T) {
	u := start(t, nil)
	p := u.Data(t, profileEndpoint, "handle=octocat", "profile-default")
	if p["id"] != "583231" || p["handle"] != "octocat" || p["type"] != "user" || p["url"] != "https://github.com/octocat" ||
		p["followers"] != 18000.0 || p["repos_count"] != 8.0 || p["website_url"] != "https://github.blog" || p["bio"] != nil {
		t.Fatalf("default profile: %v", p)
	}
	if got := u.LastRequest(t).Path; got != "/users/octocat" {
		t.Fatalf("path %s", got)
	}
	org := u.Data(t, profileEndpoint, "handle=sample-org", "profile-organization")
	if org["type"] != "organization" || org["following"] != 0.0 {
		t.Fatalf("organisation: type %v following %v", org["type"], org["following"])
	}
	big := u.Data(t, profileEndpoint, "handle=sample-bigid", "profile-big-id")
	if big["id"] != "98765432109876543210" {
		t.Fatalf("big id = %v", big["id"])
	}
	sparse := u.Data(t, profileEndpoint, "handle=sample-sparse", "profile-sparse")
	for _, k := range []string{"followers", "following", "repos_count", "name", "website_url"} {
		if v, ok := sparse[k]; !ok || v != nil {
			t.Errorf("sparse %s = %v (present %v); want null", k, v, ok)
		}
	}
	if sparse["_warnings"] == nil {
		t.Error("sparse profile has no warning about its missing counters")
	}
}

func TestReposData(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, reposEndpoint, "handle=octocat", "repos-default")
	got := adaptertest.Items(t, data)
	if data["count"] != 4.0 || len(got) != 4 || data["cursor"] != nil || data["has_more"] != false {
		t.Fatalf("default list: count %v cursor %v has_more %v", data["count"], data["cursor"], data["has_more"])
	}
	if r := got[0]; r["id"] != "1296269" || r["full_name"] != "octocat/Hello-World" || r["platform"] != "code_host" ||
		r["type"] != "repository" || r["stars"] != 3100.0 || r["is_fork"] != false || r["language"] != nil {
		t.Fatalf("first repository: %v", r)
	}
	if got[1]["is_fork"] != true || got[3]["is_archived"] != true || len(got[2]["topics"].([]any)) != 2 {
		t.Fatalf("fork/archived/topics: %v %v %v", got[1]["is_fork"], got[3]["is_archived"], got[2]["topics"])
	}
	empty := u.Data(t, reposEndpoint, "handle=sample-empty", "repos-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["cursor"] != nil || empty["has_more"] != false {
		t.Fatalf("empty: %v", empty)
	}
	big := u.Data(t, reposEndpoint, "handle=sample-bigid", "repos-big-id")
	if id := adaptertest.Items(t, big)[0]["id"]; id != "12345678901234567890123" {
		t.Fatalf("big id = %v", id)
	}
	sparseList := u.Data(t, reposEndpoint, "handle=sample-sparse", "repos-sparse")
	if w := sparseList["_warnings"].([]any); len(w) != 2 || !strings.Contains(w[1].(string), "null (unknown)") {
		t.Errorf("sparse warnings: %v", w)
	}
	sparse := adaptertest.Items(t, sparseList)[0]
	for _, k := range []string{"stars", "forks", "open_issues", "topics", "is_archived", "pushed_at"} {
		if v, ok := sparse[k]; !ok || v != nil {
			t.Errorf("sparse %s = %v (present %v); want null", k, v, ok)
		}
	}
}

func TestIssuesData(t *testing.T) {
	u := start(t, nil)
	data := u.Data(t, issuesEndpoint, "repo=octocat/Hello-World", "issues-default")
	got := adaptertest.Items(t, data)
	if data["repo"] != "octocat/Hello-World" || data["count"] != 3.0 || data["has_more"] != false || data["cursor"] != nil {
		t.Fatalf("default list: %v", data)
	}
	if i := got[0]; i["id"] != "1000000001" || i["number"] != 1347.0 || i["type"] != "issue" || i["is_pull_request"] != false ||
		i["labels"].([]any)[0] != "bug" || i["comments"] != 3.0 || i["author"].(map[string]any)["handle"] != "octocat" {
		t.Fatalf("first issue: %v", i)
	}
	if pr := got[1]; pr["type"] != "pull_request" || pr["is_pull_request"] != true || pr["url"] != "https://github.com/octocat/Hello-World/pull/1348" {
		t.Fatalf("pull request: %v", pr)
	}
	if w := data["_warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "(1 on this page)") {
		t.Fatalf("warnings: %v", w)
	}
	empty := u.Data(t, issuesEndpoint, "repo=sample-org/sample-empty", "issues-empty")
	if empty["count"] != 0.0 || len(adaptertest.Items(t, empty)) != 0 || empty["has_more"] != false || empty["_warnings"] != nil {
		t.Fatalf("empty: %v", empty)
	}
	big := adaptertest.Items(t, u.Data(t, issuesEndpoint, "repo=sample-org/sample-bigid", "issues-big-id"))[0]
	if big["id"] != "12345678901234567890123" || big["author"].(map[string]any)["id"] != "98765432109876543210" {
		t.Fatalf("big ids: %v", big)
	}
	sparse := adaptertest.Items(t, u.Data(t, issuesEndpoint, "repo=sample-org/sample-sparse", "issues-sparse"))
	if s := sparse[0]; s["comments"] != nil || s["author"] != nil || s["updated_at"] != nil || s["labels"] != nil {
		t.Fatalf("sparse issue: %v", s)
	}
	if c := sparse[1]; c["state"] != "closed" || c["text"] != nil || c["labels"].([]any)[0] != "legacy-string-label" {
		t.Fatalf("closed issue: %v", c)
	}
}

func TestParametersAndHeaders(t *testing.T) {
	u := start(t, map[string]string{github.TokenSecret: testToken})
	u.Serve(t, issuesEndpoint, "repo=octocat/Hello-World&state=all&labels=bug,good+first+issue&sort=comments&limit=50&cursor=4")
	r := u.LastRequest(t)
	if r.Path != "/repos/octocat/Hello-World/issues" {
		t.Errorf("path %s", r.Path)
	}
	want := map[string]string{"state": "all", "labels": "bug,good first issue", "sort": "comments", "per_page": "50", "page": "4"}
	for k, v := range want {
		if got := r.Query[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %v; want %s", k, got, v)
		}
	}
	if len(r.Query) != len(want) {
		t.Errorf("unexpected parameters: %v", r.Query)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testToken {
		t.Errorf("Authorization = %q", got)
	}
	if r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
		t.Errorf("headers: Accept %q, version %q", r.Header.Get("Accept"), r.Header.Get("X-GitHub-Api-Version"))
	}

	// Defaults: state=open and 30 a page; no sort, labels or page unless asked.
	u.Serve(t, issuesEndpoint, "repo=octocat/Hello-World")
	if q := u.LastRequest(t).Query; len(q) != 2 || q["state"][0] != "open" || q["per_page"][0] != "30" {
		t.Errorf("default issue parameters: %v", q)
	}
	u.Serve(t, reposEndpoint, "handle=octocat&limit=100&cursor=2")
	if r := u.LastRequest(t); r.Path != "/users/octocat/repos" || r.Query["per_page"][0] != "100" || r.Query["page"][0] != "2" || len(r.Query) != 2 {
		t.Errorf("repos request: %s %v", r.Path, r.Query)
	}

	// Without a token nothing is sent and the route is still eligible.
	anon := start(t, nil)
	anon.Serve(t, profileEndpoint, "handle=octocat")
	if r := anon.LastRequest(t); r.Header.Get("Authorization") != "" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
		t.Errorf("anonymous request headers: %v", r.Header)
	}
}

func TestPagination(t *testing.T) {
	u := start(t, nil)
	first := u.Data(t, reposEndpoint, "handle=sample-paging&limit=2", "repos-page1")
	if first["cursor"] != "2" || first["has_more"] != true || first["count"] != 2.0 {
		t.Fatalf("page 1: cursor %v has_more %v count %v", first["cursor"], first["has_more"], first["count"])
	}
	if q := u.LastRequest(t).Query; q["page"] != nil {
		t.Fatalf("page 1 sent page %v", q["page"])
	}
	second := u.Data(t, reposEndpoint, "handle=sample-paging&limit=2&cursor="+first["cursor"].(string), "repos-page2")
	if got := u.LastRequest(t).Query["page"]; len(got) != 1 || got[0] != "2" {
		t.Fatalf("page 2 sent page %v", got)
	}
	if second["cursor"] != "3" || second["has_more"] != true {
		t.Fatalf("page 2: cursor %v has_more %v", second["cursor"], second["has_more"])
	}
	last := u.Data(t, reposEndpoint, "handle=sample-paging&limit=2&cursor="+second["cursor"].(string), "repos-page3")
	if got := u.LastRequest(t).Query["page"]; len(got) != 1 || got[0] != "3" {
		t.Fatalf("page 3 sent page %v", got)
	}
	if last["cursor"] != nil || last["has_more"] != false || last["count"] != 1.0 {
		t.Fatalf("last page: cursor %v has_more %v count %v", last["cursor"], last["has_more"], last["count"])
	}

	issuesFirst := u.Data(t, issuesEndpoint, "repo=sample-org/sample-paging&labels=bug,ui&limit=2", "issues-page1")
	if issuesFirst["cursor"] != "2" || issuesFirst["has_more"] != true {
		t.Fatalf("issues page 1: cursor %v has_more %v", issuesFirst["cursor"], issuesFirst["has_more"])
	}
	issuesLast := u.Data(t, issuesEndpoint, "repo=sample-org/sample-paging&labels=bug,ui&limit=2&cursor=2", "issues-page2")
	if q := u.LastRequest(t).Query; q["page"][0] != "2" || q["labels"][0] != "bug,ui" {
		t.Fatalf("issues page 2 sent %v", q)
	}
	if issuesLast["cursor"] != nil || issuesLast["has_more"] != false {
		t.Fatalf("issues last page: cursor %v has_more %v", issuesLast["cursor"], issuesLast["has_more"])
	}
}

func TestCursorMustBeAPageNumber(t *testing.T) {
	for _, endpoint := range []string{reposEndpoint + "?handle=octocat", issuesEndpoint + "?repo=octocat/Hello-World"} {
		for _, cursor := range []string{"0", "-1", "abc", "2.5", "+3", "007", "99999999999999999999"} {
			u := start(t, nil)
			path, query, _ := strings.Cut(endpoint, "?")
			out := u.Fault(t, path, query+"&cursor="+url.QueryEscape(cursor), upstream.InvalidParameter)
			if !strings.Contains(out.Fault.Reason, "not a page number") {
				t.Errorf("%s cursor %q: reason %q", path, cursor, out.Fault.Reason)
			}
			if n := len(u.Replay.Requests()); n != 0 {
				t.Errorf("%s cursor %q reached the upstream (%d requests)", path, cursor, n)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name, endpoint, query string
		kind                  upstream.FaultKind
		retryAfter            time.Duration
		attempts              int
	}{
		{"profile not found", profileEndpoint, "handle=sample-missing", upstream.NotFound, 0, 1},
		{"profile primary limit at 403", profileEndpoint, "handle=sample-ratelimited", upstream.RateLimited, 1234 * time.Second, 1},
		{"profile secondary limit with retry-after", profileEndpoint, "handle=sample-secondary", upstream.RateLimited, 60 * time.Second, 1},
		{"profile secondary limit without a wait", profileEndpoint, "handle=sample-secondary-bare", upstream.RateLimited, time.Minute, 1},
		{"profile 429 with retry-after", profileEndpoint, "handle=sample-429", upstream.RateLimited, 45 * time.Second, 1},
		{"profile plain 403", profileEndpoint, "handle=sample-forbidden", upstream.Rejected, 0, 1},
		{"profile bad credentials", profileEndpoint, "handle=sample-badtoken", upstream.Rejected, 0, 1},
		{"profile server error", profileEndpoint, "handle=sample-500", upstream.ServerError, 0, 3},
		{"profile malformed", profileEndpoint, "handle=sample-malformed", upstream.Malformed, 0, 1},
		{"repos not found", reposEndpoint, "handle=sample-missing", upstream.NotFound, 0, 1},
		{"repos 429 with retry-after", reposEndpoint, "handle=sample-429", upstream.RateLimited, 45 * time.Second, 1},
		{"repos server error", reposEndpoint, "handle=sample-500", upstream.ServerError, 0, 3},
		{"repos malformed", reposEndpoint, "handle=sample-malformed", upstream.Malformed, 0, 1},
		{"issues not found", issuesEndpoint, "repo=sample-org/sample-missing", upstream.NotFound, 0, 1},
		{"issues disabled (410)", issuesEndpoint, "repo=sample-org/sample-no-issues", upstream.NotFound, 0, 1},
		{"issues primary limit at 429", issuesEndpoint, "repo=sample-org/sample-ratelimited", upstream.RateLimited, 1800 * time.Second, 1},
		{"issues 429 with retry-after", issuesEndpoint, "repo=sample-org/sample-429", upstream.RateLimited, 45 * time.Second, 1},
		{"issues plain 403", issuesEndpoint, "repo=sample-org/sample-forbidden", upstream.Rejected, 0, 1},
		{"issues server error", issuesEndpoint, "repo=sample-org/sample-500", upstream.ServerError, 0, 3},
		{"issues malformed", issuesEndpoint, "repo=sample-org/sample-malformed", upstream.Malformed, 0, 1},
		{"issues of a dot-dot repository", issuesEndpoint, "repo=sample-org/..", upstream.NotFound, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := start(t, map[string]string{github.TokenSecret: testToken})
			out := u.Fault(t, tc.endpoint, tc.query, tc.kind)
			if out.Fault.RetryAfter != tc.retryAfter {
				t.Errorf("RetryAfter = %v; want %v", out.Fault.RetryAfter, tc.retryAfter)
			}
			if out.Trace.Attempts != tc.attempts {
				t.Errorf("attempts = %d; want %d", out.Trace.Attempts, tc.attempts)
			}
			if strings.Contains(out.Fault.Error(), testToken) {
				t.Errorf("the token leaked into the fault: %v", out.Fault)
			}
		})
	}
}
