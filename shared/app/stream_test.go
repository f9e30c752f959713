package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/envelope/envelopetest"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// Server-sent events of search/all and search/creators (spec 4.4, 6.1) read end to end by a
// third-party SSE parser, eventsource-parser from npm, driven by
// scripts/sse-client.sh, against the local server in replay mode over real
// HTTP, with the ledger checked after each case.

// Queries the stream fixtures answer differently; every other query gets
// the shipped replay fixtures.
const (
	queryOneLegFails = "meridian-stream-one-leg-fails"
	queryLegsFail    = "meridian-stream-legs-fail"
	querySlowLegs    = "meridian-stream-slow-legs"
)

// slowLegDelay is how long the slow legs' upstream takes to answer: under
// the runner's 10 s attempt timeout (so they would answer, late) and far
// over stopAfterDisconnect.
const slowLegDelay = 9 * time.Second

// stopAfterDisconnect bounds how long the server may take, once the
// caller has gone, to stop the remaining legs and settle or refund.
const stopAfterDisconnect = 4 * time.Second

// streamCost is the list price of search/all and search/creators.
const streamCost = 5

const (
	searchAllPath      = "/v1/search/all"
	searchCreatorsPath = "/v1/search/creators"
)

// streamFixtures are replay fixtures (provider, file name, fixture in the
// replay format) added to the shipped ones: a server error from the
// company registry's search for queryOneLegFails, from it and the video
// search for queryLegsFail, and a late answer from the video and
// microblog_a searches for querySlowLegs.
var streamFixtures = []struct{ provider, name, fixture string }{
	{"companies_house", "stream-one-leg-fails.json", `{
	  "match": {"method": "GET", "path": "/search/companies", "query": {"q": "` + queryOneLegFails + `"}},
	  "response": {"status": 500, "headers": {"content-type": "application/json"},
	               "body": {"error": "Internal Server Error", "type": "ch:service"}}
	}`},
	{"companies_house", "stream-legs-fail.json", `{
	  "match": {"method": "GET", "path": "/search/companies", "query": {"q": "` + queryLegsFail + `"}},
	  "response": {"status": 500, "headers": {"content-type": "application/json"},
	               "body": {"error": "Internal Server Error", "type": "ch:service"}}
	}`},
	{"youtube_data", "stream-legs-fail.json", `{
	  "match": {"method": "GET", "path": "/youtube/v3/search", "query": {"q": "` + queryLegsFail + `"}},
	  "response": {"status": 500, "headers": {"content-type": "application/json; charset=UTF-8"},
	               "body": {"error": {"code": 500, "message": "Backend Error",
	                                  "errors": [{"message": "Backend Error", "domain": "global", "reason": "backendError"}]}}}
	}`},
	{"youtube_data", "stream-slow.json", `{
	  "match": {"method": "GET", "path": "/youtube/v3/search", "query": {"q": "` + querySlowLegs + `"}},
	  "response": {"status": 200, "delay_ms": ` + strconv.FormatInt(slowLegDelay.Milliseconds(), 10) + `,
	               "headers": {"content-type": "application/json; charset=UTF-8"},
	               "body": {"kind": "youtube#searchListResponse", "etag": "streamSlowEtag", "regionCode": "US",
	                        "pageInfo": {"totalResults": 0, "resultsPerPage": 5}, "items": []}}
	}`},
	{"atproto_public", "stream-slow.json", `{
	  "match": {"method": "GET", "path": "/xrpc/app.bsky.feed.searchPosts", "query": {"q": "` + querySlowLegs + `"}},
	  "response": {"status": 200, "delay_ms": ` + strconv.FormatInt(slowLegDelay.Milliseconds(), 10) + `, "body": {"posts": []}}
	}`},
}

// streamServer is the local server in replay mode over real HTTP: every
// family, the embedded store, the shipped replay fixtures plus
// streamFixtures, and an account with credits and a key.
type streamServer struct {
	base    string
	key     string
	account store.Account
	store   *embedded.Store
}

const streamCredits = 100

func startStreamServer(t *testing.T) *streamServer {
	t.Helper()
	t.Setenv(app.EnvErrorsURL, "")
	fixtures, err := replay.Load(filepath.Join(repoRoot(t), "testdata", "upstream"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range streamFixtures {
		var fx replay.Fixture
		if err := json.Unmarshal([]byte(f.fixture), &fx); err != nil {
			t.Fatalf("%s/%s: %v", f.provider, f.name, err)
		}
		if err := fixtures.Add(f.provider, f.name, fx); err != nil {
			t.Fatal(err)
		}
	}
	replayURL, stop, err := fixtures.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := &streamServer{store: s}
	srv.account, srv.key = newAccount(t, s, streamCredits, nil)
	runner := upstream.NewRunner(adapters.All(), upstream.Settings{ReplayURL: replayURL})
	h := httptest.NewServer(app.LocalHandler(quietLogger(), app.Deps{Store: s, Upstream: runner}))
	t.Cleanup(h.Close)
	srv.base = h.URL
	return srv
}

// searchAll is search/all?q, searchCreators search/creators?q.
func (s *streamServer) searchAll(q url.Values) string {
	return s.base + searchAllPath + "?" + q.Encode()
}

func (s *streamServer) searchCreators(q url.Values) string {
	return s.base + searchCreatorsPath + "?" + q.Encode()
}

// ledgerItem is an item of GET /v1/credits/transactions.
type ledgerItem struct {
	Type      string  `json:"type"`
	Amount    int64   `json:"amount"`
	RequestID string  `json:"request_id"`
	Endpoint  *string `json:"endpoint"`
}

// ledger is the account's ledger for one request id, read as a caller
// reads it: GET /v1/credits/transactions?request_id=… with the key.
func (s *streamServer) ledger(t *testing.T, requestID string) []ledgerItem {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+"/v1/credits/transactions?"+url.Values{"request_id": {requestID}, "limit": {"100"}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", s.key)
	r := httpDo(t, req)
	var env struct {
		Success bool `json:"success"`
		Data    struct {
			Items []ledgerItem `json:"items"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || r.status != http.StatusOK || !env.Success {
		t.Fatalf("ledger for %s: %d %v %.300s", requestID, r.status, err, r.body)
	}
	return env.Data.Items
}

// pending reports whether the request's reservation is neither settled
// nor refunded yet (the ledger shows a settle only as the absence of a
// refund, so this tells a settled call from one still running).
func (s *streamServer) pending(t *testing.T, requestID string) bool {
	t.Helper()
	refs, err := s.store.ExpiredReservations(context.Background(), time.Now().Add(store.ReservationLease+time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(refs, func(r store.ReservationRef) bool { return r.RequestID == requestID })
}

// waitFinished polls until the request's charge is settled or refunded,
// for at most within, and returns how long that took.
func (s *streamServer) waitFinished(t *testing.T, requestID string, within time.Duration) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	for s.pending(t, requestID) {
		if time.Since(start) > within {
			return time.Since(start), false
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Since(start), true
}

// checkCharged checks the request's ledger: its debit of the list price
// for the endpoint and, refunded or not, its refund; and that the call is
// no longer pending (settled when not refunded).
func (s *streamServer) checkCharged(t *testing.T, name, endpoint, requestID string, refunded bool) {
	t.Helper()
	if s.pending(t, requestID) {
		t.Errorf("%s: the charge of %s is still reserved: neither settled nor refunded", name, requestID)
	}
	want := []string{"debit -" + strconv.Itoa(streamCost) + " " + endpoint}
	if refunded {
		want = append(want, "refund "+strconv.Itoa(streamCost)+" "+endpoint)
	}
	var got []string
	for _, e := range s.ledger(t, requestID) {
		got = append(got, e.Type+" "+strconv.FormatInt(e.Amount, 10)+" "+orEmpty(e.Endpoint))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: ledger for %s is %q, want %q", name, requestID, got, want)
	}
}

// checkNothingCharged checks legs leave nothing in the ledger.
func (s *streamServer) checkNothingCharged(t *testing.T, name string, requestIDs []string) {
	t.Helper()
	for _, id := range requestIDs {
		if entries := s.ledger(t, id); len(entries) != 0 {
			t.Errorf("%s: leg %s is in the ledger: %+v", name, id, entries)
		}
	}
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sseLine is one line of scripts/sse-client.sh's output.
type sseLine struct {
	// The response line.
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	RequestID   string `json:"request_id"`
	// An event: its name, id and data (JSON), ms after the headers.
	Event *string         `json:"event"`
	ID    *string         `json:"id"`
	Data  json.RawMessage `json:"data"`
	MS    int             `json:"ms"`
	// A comment.
	Comment *string `json:"comment"`
	// The end line: complete, aborted or error.
	End    string `json:"end"`
	Events int    `json:"events"`
	Legs   int    `json:"legs"`
	// What the parser or the client refused.
	Error json.RawMessage `json:"error"`
	// A body that is not an event stream.
	Body json.RawMessage `json:"body"`
}

// sseRead is what the SSE client read from one stream.
type sseRead struct {
	response sseLine
	events   []sseLine // events, comments and errors, in order
	end      sseLine
	exit     int
	took     time.Duration // the client's whole run
	stdout   string
	stderr   string
}

// sseClient installs the SSE client (eventsource-parser from npm) and
// returns scripts/sse-client.sh; without Node.js or the npm registry the
// test is skipped, or fails under CI.
func sseClient(t *testing.T) string {
	t.Helper()
	script := filepath.Join(repoRoot(t), "scripts", "sse-client.sh")
	if out, err := exec.Command(script, "install").CombinedOutput(); err != nil {
		if ciRun() {
			t.Fatalf("cannot install eventsource-parser: %v\n%s", err, out)
		}
		t.Skipf("cannot install eventsource-parser (set CI=true to fail instead): %v", err)
	}
	return script
}

// readStream reads target with the SSE client and its options. The
// client's exit status is kept for the caller to judge.
func readStream(t *testing.T, script, target, key string, options ...string) sseRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, append([]string{"run", target, key}, options...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := sseRead{took: time.Since(start), stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("sse client: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 0; sc.Scan(); n++ {
		var l sseLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("sse client line %d: %v: %s", n, err, sc.Text())
		}
		switch {
		case n == 0:
			r.response = l
		case l.End != "":
			r.end = l
		default:
			r.events = append(r.events, l)
		}
	}
	return r
}

// legEvent is the data of a leg event.
type legEvent struct {
	Platform  string           `json:"platform"`
	Endpoint  string           `json:"endpoint"`
	Status    *int             `json:"status"`
	OK        *bool            `json:"ok"`
	RequestID string           `json:"request_id"`
	Count     *int             `json:"count"`
	Items     []map[string]any `json:"items"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	} `json:"error"`
}

// resultEnvelope is the data of the result event: the response envelope.
type resultEnvelope struct {
	Success   bool   `json:"success"`
	Endpoint  string `json:"endpoint"`
	RequestID string `json:"request_id"`
	Cached    bool   `json:"cached"`
	Data      *struct {
		Platforms []string         `json:"platforms"`
		Count     int              `json:"count"`
		Items     []map[string]any `json:"items"`
		Legs      []struct {
			Platform  string `json:"platform"`
			Status    *int   `json:"status"`
			OK        bool   `json:"ok"`
			RequestID string `json:"request_id"`
			ErrorType string `json:"error_type"`
		} `json:"legs"`
		Warnings []string `json:"_warnings"`
	} `json:"data"`
	Error *struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	} `json:"error"`
	CreditsUsed *int64 `json:"credits_used"`
}

// searchStream is a fan-out stream as read: its legs by platform, in the
// order they arrived, and the result.
type searchStream struct {
	requestID string
	legs      []legEvent
	result    resultEnvelope
	raw       json.RawMessage // the result event's data
}

// checkStream checks the framing of a complete stream: a 200 event
// stream, a leg event per platform searched each with platform, status,
// ok and items or an error, then exactly one result event carrying the
// envelope of the call (request_id as x-request-id), and nothing after it.
func checkStream(t *testing.T, name string, r sseRead) searchStream {
	t.Helper()
	if r.exit != 0 || r.end.End != "complete" {
		t.Fatalf("%s: the SSE client exited %d (%s):\n%s\n%s", name, r.exit, r.end.End, r.stdout, r.stderr)
	}
	if r.response.Status != http.StatusOK || !strings.HasPrefix(r.response.ContentType, "text/event-stream") {
		t.Fatalf("%s: %d %q, want 200 text/event-stream", name, r.response.Status, r.response.ContentType)
	}
	if !envelopetest.RequestID.MatchString(r.response.RequestID) {
		t.Errorf("%s: x-request-id %q", name, r.response.RequestID)
	}
	s := searchStream{requestID: r.response.RequestID}
	resultAt := -1
	for i, e := range r.events {
		switch {
		case e.Comment != nil:
			// keep-alive comments may come any time before the result
		case e.Event == nil:
			t.Errorf("%s: event %d has no name: %s", name, i, e.Data)
		case *e.Event == "leg":
			if resultAt >= 0 {
				t.Errorf("%s: a leg event after the result", name)
			}
			s.legs = append(s.legs, checkLegEvent(t, name, e.Data))
		case *e.Event == "result":
			if resultAt >= 0 {
				t.Errorf("%s: a second result event", name)
			}
			resultAt = i
			s.raw = e.Data
			if err := json.Unmarshal(e.Data, &s.result); err != nil {
				t.Fatalf("%s: result data: %v", name, err)
			}
		default:
			t.Errorf("%s: unexpected event %q", name, *e.Event)
		}
	}
	if resultAt < 0 {
		t.Fatalf("%s: no result event:\n%s", name, r.stdout)
	}
	if resultAt != len(r.events)-1 {
		t.Errorf("%s: %d lines after the result event", name, len(r.events)-1-resultAt)
	}
	if s.result.RequestID != s.requestID {
		t.Errorf("%s: the result's request_id %q, x-request-id %q", name, s.result.RequestID, s.requestID)
	}
	if s.result.CreditsUsed == nil {
		t.Errorf("%s: the result has no credits_used", name)
	}
	seen := map[string]bool{}
	for _, l := range s.legs {
		if seen[l.Platform] {
			t.Errorf("%s: two leg events for %s", name, l.Platform)
		}
		seen[l.Platform] = true
	}
	return s
}

// checkLegEvent checks a leg event's data: platform, status, ok, and
// items (as many as count) on success or the leg's error object.
func checkLegEvent(t *testing.T, name string, data json.RawMessage) legEvent {
	t.Helper()
	var l legEvent
	if err := json.Unmarshal(data, &l); err != nil {
		t.Errorf("%s: leg data: %v", name, err)
		return l
	}
	if l.Platform == "" || l.Status == nil || l.OK == nil || !envelopetest.RequestID.MatchString(l.RequestID) {
		t.Errorf("%s: leg event without platform, status, ok or request_id: %s", name, data)
		return l
	}
	if *l.OK {
		if *l.Status != http.StatusOK || l.Error != nil || l.Count == nil || len(l.Items) != *l.Count {
			t.Errorf("%s: successful leg %s: %.400s", name, l.Platform, data)
		}
		for _, it := range l.Items {
			if it["platform"] != l.Platform {
				t.Errorf("%s: %s item from platform %v", name, l.Platform, it["platform"])
			}
		}
	} else if l.Error == nil || l.Error.Type == "" || l.Error.Message == "" || l.Error.Status != *l.Status || l.Items != nil {
		t.Errorf("%s: failed leg %s without its error: %.400s", name, l.Platform, data)
	}
	return l
}

// platforms lists the legs' platforms, sorted.
func (s searchStream) platforms() []string {
	var out []string
	for _, l := range s.legs {
		out = append(out, l.Platform)
	}
	slices.Sort(out)
	return out
}

func (s searchStream) legRequestIDs() []string {
	var out []string
	for _, l := range s.legs {
		out = append(out, l.RequestID)
	}
	return out
}

func (s searchStream) leg(platform string) legEvent {
	for _, l := range s.legs {
		if l.Platform == platform {
			return l
		}
	}
	return legEvent{}
}

// checkSucceeded checks a successful result: the endpoint's success
// envelope at the list price whose data lists the same legs as the events.
func checkSucceeded(t *testing.T, name, endpoint string, s searchStream) {
	t.Helper()
	r := s.result
	if !r.Success || r.Data == nil || r.Endpoint != endpoint || r.CreditsUsed == nil || *r.CreditsUsed != streamCost || r.Cached {
		t.Fatalf("%s: result is not a fresh success at %d credits: %.600s", name, streamCost, s.raw)
	}
	platforms := slices.Clone(r.Data.Platforms)
	slices.Sort(platforms)
	if got := s.platforms(); !slices.Equal(got, platforms) {
		t.Errorf("%s: leg events for %v, platforms searched %v", name, got, platforms)
	}
	if len(r.Data.Legs) != len(s.legs) {
		t.Fatalf("%s: %d legs in the result, %d leg events", name, len(r.Data.Legs), len(s.legs))
	}
	items := 0
	for _, leg := range r.Data.Legs {
		ev := s.leg(leg.Platform)
		if ev.OK == nil || *ev.OK != leg.OK || ev.Status == nil || leg.Status == nil || *ev.Status != *leg.Status || ev.RequestID != leg.RequestID {
			t.Errorf("%s: %s is %+v in the result, %+v in its event", name, leg.Platform, leg, ev)
		}
		items += len(ev.Items)
	}
	if r.Data.Count != items || len(r.Data.Items) != items {
		t.Errorf("%s: the result counts %d items (%d listed), the leg events carried %d", name, r.Data.Count, len(r.Data.Items), items)
	}
}

func TestStreamSearchAllReadByAnSSEClient(t *testing.T) {
	script := sseClient(t)
	srv := startStreamServer(t)
	q := url.Values{"query": {"golang"}, "stream": {"1"}}
	s := checkStream(t, "stream", readStream(t, script, srv.searchAll(q), srv.key))
	checkSucceeded(t, "stream", searchAllPath, s)
	if len(s.legs) < 2 {
		t.Fatalf("%d legs: the fan-out searched %v", len(s.legs), s.platforms())
	}
	for _, l := range s.legs {
		if !*l.OK {
			t.Errorf("stream: %s failed on the shipped fixtures: %+v", l.Platform, l.Error)
		}
	}
	srv.checkCharged(t, "stream", searchAllPath, s.requestID, false)
	srv.checkNothingCharged(t, "stream", s.legRequestIDs())

	// The same call without stream: one JSON envelope with the same legs
	// (no-cache, so it runs and is charged again; its legs may come from
	// the cache).
	req, err := http.NewRequest(http.MethodGet, srv.searchAll(url.Values{"query": {"golang"}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", srv.key)
	req.Header.Set("cache-control", "no-cache")
	plain := httpDo(t, req)
	if plain.status != http.StatusOK || !strings.HasPrefix(plain.header.Get("content-type"), "application/json") {
		t.Fatalf("plain: %d %q", plain.status, plain.header.Get("content-type"))
	}
	var env resultEnvelope
	if err := json.Unmarshal(plain.body, &env); err != nil {
		t.Fatal(err)
	}
	if env.RequestID != plain.header.Get("x-request-id") || !env.Success || env.CreditsUsed == nil || *env.CreditsUsed != streamCost {
		t.Fatalf("plain: %.600s", plain.body)
	}
	var platforms []string
	for _, leg := range env.Data.Legs {
		platforms = append(platforms, leg.Platform)
		if ev := s.leg(leg.Platform); !leg.OK || ev.Status == nil || leg.Status == nil || *ev.Status != *leg.Status {
			t.Errorf("plain: %s is %+v, streamed %+v", leg.Platform, leg, ev)
		}
	}
	slices.Sort(platforms)
	if !slices.Equal(platforms, s.platforms()) {
		t.Errorf("plain: legs %v, streamed %v", platforms, s.platforms())
	}
	srv.checkCharged(t, "plain", searchAllPath, env.RequestID, false)

	// A repeat of the stream is answered from the cache: one result
	// event, cached, nothing charged.
	cached := checkStream(t, "cached", readStream(t, script, srv.searchAll(q), srv.key))
	if len(cached.legs) != 0 || !cached.result.Success || !cached.result.Cached || *cached.result.CreditsUsed != 0 {
		t.Errorf("cached: %d legs, %.300s", len(cached.legs), cached.raw)
	}
	if entries := srv.ledger(t, cached.requestID); len(entries) != 0 {
		t.Errorf("cached: charged %+v", entries)
	}
}

// search/creators streams the same way: a leg event per creator
// platform, then its envelope, charged once.
func TestStreamSearchCreators(t *testing.T) {
	script := sseClient(t)
	srv := startStreamServer(t)
	s := checkStream(t, "creators", readStream(t, script, srv.searchCreators(url.Values{"query": {"home baking"}, "stream": {"1"}}), srv.key))
	checkSucceeded(t, "creators", searchCreatorsPath, s)
	if len(s.legs) < 2 {
		t.Fatalf("%d legs: the fan-out searched %v", len(s.legs), s.platforms())
	}
	srv.checkCharged(t, "creators", searchCreatorsPath, s.requestID, false)
	srv.checkNothingCharged(t, "creators", s.legRequestIDs())
}

// A platform whose search fails is a failed leg event with its error; the
// call succeeds without it, says so in _warnings, and is charged once.
func TestStreamOneLegFails(t *testing.T) {
	script := sseClient(t)
	srv := startStreamServer(t)
	s := checkStream(t, "one leg fails", readStream(t, script, srv.searchAll(url.Values{"query": {queryOneLegFails}, "stream": {"1"}}), srv.key))
	checkSucceeded(t, "one leg fails", searchAllPath, s)
	failed := s.leg("company_registry")
	if failed.OK == nil || *failed.OK || failed.Error == nil || failed.Error.Type != "UPSTREAM_ERROR" || *failed.Status != http.StatusBadGateway {
		t.Errorf("company_registry leg: %+v", failed)
	}
	for _, l := range s.legs {
		if l.Platform != "company_registry" && !*l.OK {
			t.Errorf("%s failed too: %+v", l.Platform, l.Error)
		}
	}
	if w := strings.Join(s.result.Data.Warnings, " "); !strings.Contains(w, "company_registry") {
		t.Errorf("_warnings %q do not name company_registry", s.result.Data.Warnings)
	}
	srv.checkCharged(t, "one leg fails", searchAllPath, s.requestID, false)
	srv.checkNothingCharged(t, "one leg fails", s.legRequestIDs())
}

// When every platform fails, the result event is the error envelope at 0
// credits and the reservation is refunded: the ledger nets 0.
func TestStreamEveryLegFails(t *testing.T) {
	script := sseClient(t)
	srv := startStreamServer(t)
	q := url.Values{"query": {queryLegsFail}, "platforms": {"company_registry,video_platform"}, "stream": {"1"}}
	s := checkStream(t, "every leg fails", readStream(t, script, srv.searchAll(q), srv.key))
	if got := s.platforms(); !slices.Equal(got, []string{"company_registry", "video_platform"}) {
		t.Errorf("leg events for %v", got)
	}
	for _, l := range s.legs {
		if *l.OK {
			t.Errorf("%s succeeded", l.Platform)
		}
	}
	if s.result.Success || s.result.Error == nil {
		t.Fatalf("result: %.600s", s.raw)
	}
	// The envelope the plain call answers, by the same rules.
	checkEnvelope(t, "every leg fails", s.result.Error.Status, "application/json", s.requestID, "0", s.raw, srv.base+"/docs/errors")
	if s.result.Error.Type != "UPSTREAM_ERROR" {
		t.Errorf("error type %s", s.result.Error.Type)
	}
	srv.checkCharged(t, "every leg fails", searchAllPath, s.requestID, true)
	srv.checkNothingCharged(t, "every leg fails", s.legRequestIDs())
	a, err := srv.store.Account(context.Background(), srv.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.CreditsRemaining != streamCredits {
		t.Errorf("balance %d after a refunded call, want %d", a.CreditsRemaining, streamCredits)
	}
}

// A caller that disconnects stops the remaining legs; it is charged when
// a successful leg's event had reached it, and refunded otherwise. Both
// need the local server to stream event by event: a buffered body brings
// the first event only when every leg is done.
func TestStreamDisconnect(t *testing.T) {
	script := sseClient(t)

	t.Run("after a delivered leg", func(t *testing.T) {
		srv := startStreamServer(t)
		// company_registry answers at once; the other two take slowLegDelay.
		q := url.Values{"query": {querySlowLegs}, "platforms": {"company_registry,video_platform,microblog_a"}, "stream": {"1"}}
		r := readStream(t, script, srv.searchAll(q), srv.key, "--abort-after-legs", "1")
		if r.exit != 0 || r.end.End != "aborted" || r.response.Status != http.StatusOK {
			t.Fatalf("the SSE client exited %d (%s):\n%s\n%s", r.exit, r.end.End, r.stdout, r.stderr)
		}
		if r.took >= slowLegDelay {
			t.Fatalf("the first leg event arrived after %v, when every leg was done: the server buffered the stream", r.took.Round(time.Millisecond))
		}
		if len(r.events) != 1 || r.events[0].Event == nil || *r.events[0].Event != "leg" {
			t.Fatalf("read before the disconnect:\n%s", r.stdout)
		}
		if l := checkLegEvent(t, "first leg", r.events[0].Data); l.Platform != "company_registry" || !*l.OK {
			t.Fatalf("first leg: %+v", l)
		}
		took, ok := srv.waitFinished(t, r.response.RequestID, stopAfterDisconnect)
		if !ok {
			t.Fatalf("the call was still running %v after the disconnect: the slow legs were not stopped", took.Round(time.Millisecond))
		}
		t.Logf("disconnected after %v; the call ended %v later", r.took.Round(time.Millisecond), took.Round(time.Millisecond))
		srv.checkCharged(t, "after a delivered leg", searchAllPath, r.response.RequestID, false)
	})

	t.Run("before any leg", func(t *testing.T) {
		srv := startStreamServer(t)
		// Both legs are slow: nothing can be delivered before the disconnect.
		q := url.Values{"query": {querySlowLegs}, "platforms": {"video_platform,microblog_a"}, "stream": {"1"}}
		r := readStream(t, script, srv.searchAll(q), srv.key, "--abort-after-legs", "0")
		if r.exit != 0 || r.end.End != "aborted" || r.response.Status != http.StatusOK || len(r.events) != 0 {
			t.Fatalf("the SSE client exited %d (%s):\n%s\n%s", r.exit, r.end.End, r.stdout, r.stderr)
		}
		if r.took >= slowLegDelay {
			t.Fatalf("the response headers arrived after %v, when every leg was done: the server buffered the stream", r.took.Round(time.Millisecond))
		}
		took, ok := srv.waitFinished(t, r.response.RequestID, stopAfterDisconnect)
		if !ok {
			t.Fatalf("the call was still running %v after the disconnect: the legs were not stopped", took.Round(time.Millisecond))
		}
		t.Logf("disconnected after %v; the call ended %v later", r.took.Round(time.Millisecond), took.Round(time.Millisecond))
		srv.checkCharged(t, "before any leg", searchAllPath, r.response.RequestID, true)
	})
}

// The SSE client is strict enough for the framing checks above to mean
// something: it reports comments, and refuses a stream the parser
// rejects, data that is not JSON, an event the body ends inside, and an
// answer that is not an event stream.
func TestSSEClientRefusesBadFraming(t *testing.T) {
	script := sseClient(t)
	bodies := map[string]struct {
		contentType, body string
	}{
		"good":          {"text/event-stream; charset=utf-8", ": keep-alive\n\nevent: leg\ndata: {\"ok\":true}\n\nevent: result\ndata: {\"success\":true}\n\n"},
		"unknown field": {"text/event-stream", "event: leg\nfoo: bar\ndata: {}\n\n"},
		"not json":      {"text/event-stream", "event: leg\ndata: {\"ok\":\n\n"},
		"unterminated":  {"text/event-stream", "event: result\ndata: {\"success\":true}\n"},
		"plain json":    {"application/json", `{"success":false}`},
	}
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bodies[strings.TrimPrefix(r.URL.Path, "/")]
		w.Header().Set("content-type", b.contentType)
		_, _ = w.Write([]byte(b.body))
	}))
	defer h.Close()
	read := func(name string) sseRead {
		return readStream(t, script, h.URL+"/"+url.PathEscape(name), "mn_test")
	}

	good := read("good")
	if good.exit != 0 || len(good.events) != 3 || orEmpty(good.events[0].Comment) != "keep-alive" ||
		orEmpty(good.events[2].Event) != "result" || good.end.Events != 2 || good.end.Legs != 1 {
		t.Errorf("good stream: exit %d\n%s", good.exit, good.stdout)
	}
	for _, name := range []string{"unknown field", "not json", "unterminated"} {
		r := read(name)
		flagged := slices.ContainsFunc(r.events, func(l sseLine) bool { return l.Error != nil })
		if r.exit != 1 || !flagged {
			t.Errorf("%s: exit %d, want 1 with the error reported\n%s", name, r.exit, r.stdout)
		}
	}
	if r := read("plain json"); r.exit != 3 || string(r.end.Body) != "" || len(r.events) != 1 || string(r.events[0].Body) != `{"success":false}` {
		t.Errorf("plain json: exit %d\n%s", r.exit, r.stdout)
	}
}
