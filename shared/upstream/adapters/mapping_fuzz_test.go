package adapters

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/atproto"
	"github.com/meridian-data/meridian/shared/upstream/adapters/companieshouse"
	"github.com/meridian-data/meridian/shared/upstream/adapters/github"
	"github.com/meridian-data/meridian/shared/upstream/adapters/itunes"
)

// mappingCase is one endpoint of a JSON provider, asked with a query that
// validates, whose upstream answer the fuzzer makes up.
type mappingCase struct {
	provider func() *upstream.Provider
	endpoint string
	query    string
}

var mappingCases = []mappingCase{
	{companieshouse.Provider, "company_registry/search", "query=sample+widgets&limit=2"},
	{github.Provider, "code_host/profile", "handle=octocat"},
	{github.Provider, "code_host/profile/repos", "handle=octocat&limit=2"},
	{github.Provider, "code_host/repo/issues", "repo=octocat/Hello-World&limit=2"},
	{itunes.Provider, "app_store_a/app-info", "app_id=1234567890"},
	{atproto.Public, "microblog_a/search", "query=golang&limit=2"},
	{atproto.Public, "microblog_a/profile", "handle=alice.example.com"},
	{atproto.Public, "microblog_a/posts", "handle=alice.example.com&limit=2"},
	{atproto.Public, "microblog_a/comments", "post_id=" + "at://did:plc:sample2alice4aaaaaaaaaaa/app.bsky.feed.post/3lsample2aaa2"},
}

// cannedAnswer is the upstream answer every request of the current input
// gets; the fuzzer runs one input at a time per process.
type cannedAnswer struct {
	mu     sync.Mutex
	status int
	header http.Header
	body   []byte
}

func (c *cannedAnswer) set(status int, header http.Header, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status, c.header, c.body = status, header, body
}

// RoundTrip answers without any network.
func (c *cannedAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return &http.Response{
		StatusCode: c.status, Status: fmt.Sprintf("%d %s", c.status, http.StatusText(c.status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: c.header.Clone(), Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: req,
	}, nil
}

// adapterResult is what the real adapter returned, before the runner
// turned it into an outcome.
type adapterResult struct {
	calls int
	data  any
	err   error
}

// mappingRun is one case: its validated parameters, and a runner over its
// provider's real adapter, wrapped to record what it returns, behind the
// canned upstream.
type mappingRun struct {
	mappingCase
	params map[string]string
	answer *cannedAnswer
	last   *adapterResult
}

func newMappingRun(tb testing.TB, c mappingCase, answer *cannedAnswer) *mappingRun {
	tb.Helper()
	e, ok := registry.Default().Endpoint(c.endpoint)
	if !ok {
		tb.Fatalf("%s is not in the registry", c.endpoint)
	}
	q, perr := params.Parse(c.query)
	if perr != nil {
		tb.Fatalf("%s?%s: %v", c.endpoint, c.query, perr)
	}
	res, verr := params.Validate(e, q, nil)
	if verr != nil {
		tb.Fatalf("%s?%s does not validate: %v", c.endpoint, c.query, verr)
	}
	run := &mappingRun{mappingCase: c, params: res.Values, answer: answer, last: &adapterResult{}}
	if !run.runner(tb).Eligible(c.endpoint) {
		tb.Fatalf("%s: no eligible route", c.endpoint)
	}
	return run
}

// runner is a new runner for the case, so that no input finds the route
// resting after an earlier one's failures or rate limit.
func (run *mappingRun) runner(tb testing.TB) *upstream.Runner {
	tb.Helper()
	p := run.provider()
	adapter, ok := p.Endpoints[run.endpoint]
	if !ok {
		tb.Fatalf("%s does not serve %s", p.Name, run.endpoint)
	}
	p.Endpoints = map[string]upstream.Adapter{run.endpoint: func(ctx context.Context, call *upstream.Call) (any, error) {
		data, err := adapter(ctx, call)
		*run.last = adapterResult{run.last.calls + 1, data, err}
		return data, err
	}}
	values := map[string]string{p.BaseURLVar(): "http://" + strings.ReplaceAll(p.Name, "_", "-") + ".upstream.test"}
	for _, s := range p.Secrets {
		values[s.Name] = "fuzz-secret-" + s.Name
	}
	fixed := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	return upstream.NewRunner([]*upstream.Provider{p}, upstream.Settings{
		Lookup: func(name string) (string, bool) { v, ok := values[name]; return v, ok },
		Client: &http.Client{Transport: run.answer},
		Options: upstream.Options{
			AttemptTimeout: 5 * time.Second, Timeout: 10 * time.Second, MaxAttempts: 1,
			CooldownAfter: 1 << 30, Now: func() time.Time { return fixed },
		},
	})
}

// faultKinds are the kinds a typed upstream fault may have.
var faultKinds = []upstream.FaultKind{upstream.Timeout, upstream.Transport, upstream.ServerError, upstream.RateLimited,
	upstream.Malformed, upstream.Rejected, upstream.NotFound, upstream.InvalidParameter}

// FuzzUpstreamMapping feeds arbitrary upstream answers (status, headers,
// body) to the real adapters of four JSON providers (company register,
// code host, app store lookup, AT Protocol AppView), behind a transport
// that answers without any network. Whatever the answer: no panic; the
// adapter returns either data or a typed *upstream.Fault, never a bare
// error; data comes only from a 2xx answer that is not null, encodes,
// validates against the
// endpoint's published data schema, and its ids are strings taken as the
// source wrote them; a fault maps to a typed error of the roster.
func FuzzUpstreamMapping(f *testing.F) {
	for _, s := range mappingSeeds() {
		f.Add(s.which, s.status, s.header, []byte(s.body))
	}
	answer := &cannedAnswer{}
	runs := make([]*mappingRun, len(mappingCases))
	for i, c := range mappingCases {
		runs[i] = newMappingRun(f, c, answer)
	}
	f.Fuzz(func(t *testing.T, which uint8, status uint16, header string, body []byte) {
		run := runs[int(which)%len(runs)]
		code := int(status)
		if code < 200 || code > 599 {
			code = 200 + code%400
		}
		answer.set(code, fuzzHeader(header), body)
		*run.last = adapterResult{}
		out := run.runner(t).Serve(context.Background(), run.endpoint, run.params)
		what := fmt.Sprintf("%s, HTTP %d, %.300q", run.endpoint, code, body)
		if run.last.calls != 1 {
			t.Fatalf("%s: the adapter ran %d times (%+v)", what, run.last.calls, out)
		}
		if err := run.last.err; err != nil {
			var fault *upstream.Fault
			if !errors.As(err, &fault) {
				t.Fatalf("%s: the adapter returned a bare error (%T): %v", what, err, err)
			}
		}
		if (out.Data == nil) == (out.Fault == nil) {
			t.Fatalf("%s: data %v and fault %v", what, out.Data, out.Fault)
		}
		if out.Fault != nil {
			if !slices.Contains(faultKinds, out.Fault.Kind) {
				t.Fatalf("%s: fault kind %q", what, out.Fault.Kind)
			}
			e := out.Error()
			if e == nil || !rosterStatus(e.Type, e.Status) || e.Message == "" {
				t.Fatalf("%s: fault %v maps to %+v", what, out.Fault, e)
			}
			return
		}
		if code > 299 {
			t.Fatalf("%s: a non-2xx answer mapped to data: %+v", what, out.Data)
		}
		if string(bytes.TrimSpace(body)) == "null" {
			// Spec 2.4: null is unknown, never an empty or zero answer.
			t.Fatalf("%s: an answer of null mapped to data: %+v", what, out.Data)
		}
		raw, err := json.Marshal(out.Data)
		if err != nil {
			t.Fatalf("%s: the data does not encode: %v", what, err)
		}
		if err := schemas.Validate(run.endpoint, json.RawMessage(raw)); err != nil {
			t.Fatalf("%s: %v\n%.1000s", what, err, raw)
		}
		checkIDs(t, what, raw, body, run.params)
	})
}

// fuzzHeader reads "Name: value" lines; Location is left out, so that no
// answer sends the client after another URL.
func fuzzHeader(s string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.EqualFold(name, "location") {
			continue
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h
}

func rosterStatus(t envelope.Type, status int) bool {
	for _, info := range envelope.Roster {
		if info.Type == t {
			return info.Emitted && slices.Contains(info.Statuses, status)
		}
	}
	return false
}

// checkIDs: every "id" or "*_id" field of the data is a string or null
// (spec 2.4), and every "id" is a value the source wrote (a string as
// sent, a number's exact digits) or one the caller asked for.
func checkIDs(t *testing.T, what string, data, source []byte, query map[string]string) {
	t.Helper()
	written := map[string]bool{}
	for _, v := range query {
		written[v] = true
	}
	dec := json.NewDecoder(bytes.NewReader(source))
	dec.UseNumber()
	var src any
	if dec.Decode(&src) == nil {
		walkJSON(src, func(_ string, v any) {
			switch x := v.(type) {
			case string:
				written[x] = true
			case json.Number:
				written[x.String()] = true
			}
		})
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	walkJSON(out, func(key string, v any) {
		if key != "id" && !strings.HasSuffix(key, "_id") {
			return
		}
		s, isString := v.(string)
		switch {
		case v != nil && !isString:
			t.Fatalf("%s: %s is %T %v, not a string", what, key, v, v)
		case key == "id" && isString && !written[s]:
			t.Fatalf("%s: id %q is not a value the source wrote", what, s)
		}
	})
}

// walkJSON calls visit for every object member, depth first.
func walkJSON(v any, visit func(key string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			visit(k, m)
			walkJSON(m, visit)
		}
	case []any:
		for _, m := range x {
			walkJSON(m, visit)
		}
	}
}

type mappingSeed struct {
	which  uint8
	status uint16
	header string
	body   string
}

// mappingSeeds are answers in the shapes of the providers' replay fixtures
// (testdata/upstream/<provider>/), written small for the fuzzer: a normal
// answer, sparse and empty ones, large ids, wrong types, error bodies and
// rate-limit headers.
func mappingSeeds() []mappingSeed {
	index := map[string]uint8{}
	for i, c := range mappingCases {
		index[c.endpoint] = uint8(i)
	}
	var seeds []mappingSeed
	add := func(endpoint string, status uint16, header, body string) {
		i, ok := index[endpoint]
		if !ok {
			panic(endpoint)
		}
		seeds = append(seeds, mappingSeed{i, status, header, body})
	}

	// company_registry/search: the register's search answer.
	const ch = "company_registry/search"
	add(ch, 200, "", `{"kind":"search#companies","items":[{"kind":"searchresults#company","title":"SAMPLE WIDGETS LIMITED","company_status":"active","company_type":"ltd","date_of_creation":"1976-02-10","address_snippet":"1 Sample Street, Sampletown","company_number":"01234567"},{"title":"NO NUMBER LTD"}],"items_per_page":2,"start_index":0,"total_results":3}`)
	add(ch, 200, "", `{"items":[{"company_number":"SC000123","title":null}],"items_per_page":"2","start_index":"0","total_results":98765432109876543210}`)
	add(ch, 200, "", `{"items":[],"total_results":0}`)
	add(ch, 200, "", `{"items":null,"total_results":null}`)
	add(ch, 200, "", `{"items":[{"company_number":12345678}],"start_index":-1}`)
	add(ch, 200, "", `{"items":[{"company_number":"  "}],"start_index":1.5,"total_results":-3}`)
	add(ch, 200, "", `{"items":[{"company_number":"01234567"}`)
	add(ch, 401, "", `{"error":"Invalid Authorization","type":"ch:service"}`)
	add(ch, 429, "X-Ratelimit-Reset: 1795003200\nX-Ratelimit-Remain: 0", ``)
	add(ch, 500, "Retry-After: 5", `<html>error</html>`)

	// code_host/profile, repos, issues: the REST API's users, repos and issues.
	add("code_host/profile", 200, "", `{"login":"octocat","id":583231,"html_url":"https://github.com/octocat","avatar_url":"https://avatars.githubusercontent.com/u/583231?v=4","type":"User","name":"The Octocat","company":"@github","blog":"https://github.blog","location":"San Francisco","bio":null,"public_repos":8,"followers":9000,"following":9,"created_at":"2011-01-25T18:44:36Z"}`)
	add("code_host/profile", 200, "", `{"login":"sample-bigid","id":98765432109876543210987,"type":"Organization","public_repos":null}`)
	add("code_host/profile", 200, "", `{"id":"583231","followers":1.5}`)
	add("code_host/profile", 200, "", `{}`)
	add("code_host/profile", 404, "", `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
	add("code_host/profile", 403, "X-Ratelimit-Remaining: 0\nX-Ratelimit-Reset: 1795003200\nX-Ratelimit-Resource: core", `{"message":"API rate limit exceeded"}`)
	add("code_host/profile", 403, "", `{"message":"You have exceeded a secondary rate limit"}`)
	add("code_host/profile", 401, "", `{"message":"Bad credentials"}`)
	add("code_host/profile/repos", 200, `Link: <https://api.github.com/user/583231/repos?per_page=2&page=2>; rel="next", <https://api.github.com/user/583231/repos?per_page=2&page=4>; rel="last"`,
		`[{"id":132935648,"name":"boysenberry-repo-1","full_name":"octocat/boysenberry-repo-1","html_url":"https://github.com/octocat/boysenberry-repo-1","description":"Testing","language":null,"stargazers_count":332,"forks_count":20,"open_issues_count":1,"fork":true,"archived":false,"topics":["a","b"],"created_at":"2018-05-10T17:51:29Z","updated_at":"2025-01-01T00:00:00Z","pushed_at":"2024-06-20T00:00:00Z"},{"id":18221276,"name":"git-consortium"}]`)
	add("code_host/profile/repos", 200, `Link: <https://api.github.com/x?page=0>; rel="next"`, `[]`)
	add("code_host/profile/repos", 200, `Link: <%zz>; rel="next"`, `[{"id":"1","topics":null}]`)
	add("code_host/profile/repos", 200, "", `{"message":"not a list"}`)
	add("code_host/profile/repos", 429, "Retry-After: 60", `{"message":"slow down"}`)
	add("code_host/repo/issues", 200, `Link: <https://api.github.com/repositories/1296269/issues?page=2>; rel="next"`,
		`[{"id":1,"number":1347,"title":"Found a bug","body":"I'm having a problem","html_url":"https://github.com/octocat/Hello-World/issues/1347","state":"open","labels":[{"name":"bug"},"good first issue",{"name":""}],"comments":0,"user":{"login":"octocat","id":1,"html_url":"https://github.com/octocat"},"created_at":"2011-04-22T13:33:48Z","updated_at":"2011-04-22T13:33:48Z","closed_at":null},{"id":12345678901234567890,"number":2,"pull_request":{"url":"https://api.github.com/x"},"user":null,"labels":null}]`)
	add("code_host/repo/issues", 200, "", `[{"id":3,"labels":[1,2]}]`)
	add("code_host/repo/issues", 410, "", `{"message":"Issues are disabled for this repo"}`)

	// app_store_a/app-info: the lookup's results.
	const app = "app_store_a/app-info"
	add(app, 200, "", `{"resultCount":1,"results":[{"wrapperType":"software","kind":"software","trackId":1234567890,"trackName":"Sample Notes","bundleId":"com.example.notes","trackViewUrl":"https://apps.apple.com/us/app/sample-notes/id1234567890","artistId":1000000123,"artistName":"Example Software Ltd","sellerUrl":"https://www.example.com","price":0.00,"formattedPrice":"Free","currency":"USD","averageUserRating":4.61234,"userRatingCount":51234,"version":"3.2.1","fileSizeBytes":"52142080","description":"Notes.","genres":["Productivity","Business"],"primaryGenreName":"Productivity","screenshotUrls":["https://is1-ssl.mzstatic.com/a.jpg"],"ipadScreenshotUrls":[],"artworkUrl512":"https://is1-ssl.mzstatic.com/512.jpg","releaseDate":"2015-03-01T08:00:00Z","currentVersionReleaseDate":"2026-10-30T16:05:12Z","minimumOsVersion":"16.0","trackContentRating":"4+","languageCodesISO2A":["EN","FR"]}]}`)
	add(app, 200, "", `{"resultCount":1,"results":[{"wrapperType":"software","trackId":98765432109876543210,"artistId":"12","price":"1.99","fileSizeBytes":52142080}]}`)
	add(app, 200, "", `{"resultCount":1,"results":[{"wrapperType":"software","fileSizeBytes":"-1","price":-0.0}]}`)
	add(app, 200, "", `{"resultCount":0,"results":[]}`)
	add(app, 200, "", `{"resultCount":1,"results":[{"wrapperType":"artist","artistId":1}]}`)
	add(app, 200, "", `{"resultCount":1,"results":[17]}`)
	add(app, 200, "", `{}`)
	add(app, 400, "", `{"errorMessage":"Invalid value(s) for key(s): [country]","queryParameters":{"country":"ISO-2A country code"}}`)
	add(app, 403, "", ``)
	add(app, 503, "", `not json`)

	// microblog_a: the AppView's searchPosts, getProfile, getAuthorFeed and getPostThread.
	const post = `{"uri":"at://did:plc:sample2alice4aaaaaaaaaaa/app.bsky.feed.post/3lsample2aaa2","cid":"bafyrei3lsample2aaa2","author":{"did":"did:plc:sample2alice4aaaaaaaaaaa","handle":"alice.example.com","displayName":"Alice Example"},"record":{"$type":"app.bsky.feed.post","createdAt":"2026-09-20T14:03:11.482Z","langs":["en"],"text":"Sample post"},"replyCount":9,"repostCount":17,"likeCount":128,"quoteCount":3,"indexedAt":"2026-09-20T14:03:12.117Z"}`
	const sparse = `{"uri":"at://did:plc:sample2bob4bbbbbbbbbbbbb/app.bsky.feed.post/3lsample2bbb2","author":{"did":"did:plc:sample2bob4bbbbbbbbbbbbb","handle":"handle.invalid"},"record":{"createdAt":"yesterday","reply":{"parent":{"uri":"at://x"}}},"likeCount":98765432109876543210}`
	add("microblog_a/search", 200, "", `{"cursor":"3","hitsTotal":1200,"posts":[`+post+`,`+sparse+`]}`)
	add("microblog_a/search", 200, "", `{"posts":[]}`)
	add("microblog_a/search", 200, "", `{"cursor":"","posts":[{"uri":"not-a-uri","author":{}}]}`)
	add("microblog_a/search", 200, "", `{"cursor":"x"}`)
	add("microblog_a/search", 400, "", `{"error":"BadQueryString","message":"Error: invalid query"}`)
	add("microblog_a/search", 403, "", `{"error":"Forbidden","message":"search is not available to anonymous callers"}`)
	add("microblog_a/search", 429, "Ratelimit-Reset: 1795003200\nRatelimit-Remaining: 0", `{"error":"RateLimitExceeded","message":"Rate Limit Exceeded"}`)
	add("microblog_a/profile", 200, "", `{"did":"did:plc:sample2alice4aaaaaaaaaaa","handle":"alice.example.com","displayName":"Alice Example","description":"Sample account","avatar":"https://cdn.bsky.app/a.jpg","banner":"https://cdn.bsky.app/b.jpg","followersCount":1532,"followsCount":311,"postsCount":2048,"createdAt":"2024-02-06T18:22:41.903Z","verification":{"verifiedStatus":"valid"}}`)
	add("microblog_a/profile", 200, "", `{"did":"did:plc:sparse","handle":"handle.invalid","followersCount":123456789012345678901234567890,"verification":{"verifiedStatus":"odd"}}`)
	add("microblog_a/profile", 200, "", `{"handle":"no-did.example.com"}`)
	add("microblog_a/profile", 400, "", `{"error":"InvalidRequest","message":"Profile not found"}`)
	add("microblog_a/profile", 400, "", `{"error":"AccountDeactivated","message":"Account is deactivated"}`)
	add("microblog_a/profile", 502, "", `<html><body>Bad Gateway</body></html>`)
	add("microblog_a/posts", 200, "", `{"cursor":"2026-09-20T14:03:11.482Z","feed":[{"post":`+post+`},{"post":`+sparse+`,"reason":{"$type":"app.bsky.feed.defs#reasonRepost","indexedAt":"2026-09-21T00:00:00Z"}},{"reply":{}}]}`)
	add("microblog_a/posts", 200, "", `{"feed":[{"post":{"uri":"at://did:plc:x/app.bsky.feed.post/1","embed":{"$type":"app.bsky.embed.recordWithMedia#view","media":{"$type":"app.bsky.embed.images#view","images":[{"thumb":"https://cdn.bsky.app/t.jpg"}]}}}}]}`)
	add("microblog_a/posts", 200, "", `{"feed":[{}]}`)
	add("microblog_a/posts", 200, "", `{"feed":null}`)
	add("microblog_a/comments", 200, "", `{"thread":{"$type":"app.bsky.feed.defs#threadViewPost","post":`+post+`,"replies":[{"$type":"app.bsky.feed.defs#threadViewPost","post":`+sparse+`,"replies":[]},{"$type":"app.bsky.feed.defs#notFoundPost","uri":"at://x","notFound":true},{"$type":"app.bsky.feed.defs#blockedPost","blocked":true}]}}`)
	add("microblog_a/comments", 200, "", `{"thread":{"$type":"app.bsky.feed.defs#notFoundPost","notFound":true}}`)
	add("microblog_a/comments", 200, "", `{"thread":null}`)
	add("microblog_a/comments", 400, "", `{"error":"NotFound","message":"Post not found: at://did:plc:sample2alice4aaaaaaaaaaa/app.bsky.feed.post/3lsample2nope"}`)

	// Any endpoint: nothing, null, invalid UTF-8, trailing data. (null is
	// also the regression seed of code_host/profile/repos and repo/issues,
	// which mapped it to an empty list until this fuzzer found it.)
	for i := range mappingCases {
		seeds = append(seeds, mappingSeed{uint8(i), 200, "", ``}, mappingSeed{uint8(i), 200, "", `null`},
			mappingSeed{uint8(i), 200, "", "{\"items\":[{\"title\":\"\xff\xfe\"}]}"}, mappingSeed{uint8(i), 200, "", `{} {}`})
	}
	return seeds
}
