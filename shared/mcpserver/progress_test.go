package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
)

// The leg events and final envelope of a search/all stream, as the
// pipeline writes them (stream.go, composite/search.go): one leg that
// succeeded, one served from the cache, one that timed out.
var (
	streamLegs = []string{
		`{"platform":"company_registry","endpoint":"/v1/company_registry/search","status":200,"ok":true,"request_id":"req_leg1","cached":false,"count":1,"items":[{"platform":"company_registry","id":"00445790","name":"Acme Ltd"}],"progress":{"done":1,"total":3}}`,
		`{"platform":"microblog_a","endpoint":"/v1/microblog_a/search","status":200,"ok":true,"request_id":"req_leg2","cached":true,"count":2,"items":[{"platform":"microblog_a","id":"1"},{"platform":"microblog_a","id":"2"}],"progress":{"done":2,"total":3}}`,
		`{"platform":"video_platform","endpoint":"/v1/video_platform/search","status":504,"ok":false,"request_id":"req_leg3","cached":false,"error":{"type":"UPSTREAM_TIMEOUT","message":"The source did not answer in time.","status":504},"progress":{"done":3,"total":3}}`,
	}
	streamResult  = `{"success":true,"platform":"search","endpoint":"/v1/search/all","data":{"query":"acme","platforms":["company_registry","microblog_a","video_platform"],"count":3,"items":[{"platform":"company_registry","id":"00445790","name":"Acme Ltd"},{"platform":"microblog_a","id":"1"},{"platform":"microblog_a","id":"2"}],"dropped":0,"legs":[],"_warnings":["These platforms failed or timed out, and their results are missing: video_platform (UPSTREAM_TIMEOUT)."]},"credits_used":5,"credits_remaining":95,"request_id":"req_stream1","cached":false}`
	streamFailure = `{"success":false,"error":{"type":"UPSTREAM_ERROR","message":"Every platform failed; see details.legs.","status":502,"doc_url":"https://meridian.example/docs/errors#upstream-error","details":{"legs":["video_platform (UPSTREAM_TIMEOUT)"]}},"credits_used":0,"request_id":"req_stream2"}`
)

// streamAPI answers stream=1 with the leg events, each flushed and, when
// acks is set, held until the MCP client has seen its progress
// notification (so progress is shown to travel as the legs finish, not
// at the end), then the result event; without stream=1 it answers the
// result envelope as JSON. It keeps the queries it saw.
type streamAPI struct {
	legs   []string
	result string
	acks   chan struct{}

	mu      sync.Mutex
	queries []string
	late    bool // a notification did not arrive before the next leg
}

func (f *streamAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	if r.URL.Query().Get("stream") != "1" {
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, f.result+"\n")
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("content-type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	_, _ = io.WriteString(w, ": keep-alive\n\n")
	for _, leg := range f.legs {
		frame := "event: leg\ndata: " + leg + "\n\n"
		// An event may arrive over several writes.
		half := len(frame) / 2
		_, _ = io.WriteString(w, frame[:half])
		_, _ = io.WriteString(w, frame[half:])
		if err := rc.Flush(); err != nil {
			panic("the tool's writer cannot flush: " + err.Error())
		}
		if f.acks != nil {
			select {
			case <-f.acks:
			case <-time.After(5 * time.Second):
				f.mu.Lock()
				f.late = true
				f.mu.Unlock()
			}
		}
	}
	_, _ = io.WriteString(w, "event: result\ndata: "+f.result+"\n\n")
	_ = rc.Flush()
}

func (f *streamAPI) wasLate() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.late
}

func (f *streamAPI) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

// answers records the content type of each tools/call answer.
type answers struct {
	mu    sync.Mutex
	types []string
}

func (a *answers) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	r = r.Clone(r.Context())
	r.Header.Set("x-api-key", "mn_test")
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && bytes.Contains(body, []byte(`"tools/call"`)) {
		a.mu.Lock()
		a.types = append(a.types, res.Header.Get("content-type"))
		a.mu.Unlock()
	}
	return res, err
}

func (a *answers) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.types) == 0 {
		return ""
	}
	return a.types[len(a.types)-1]
}

// progressClient connects a client that keeps the progress notifications
// it receives and acknowledges each on acks.
type progressClient struct {
	session *mcp.ClientSession
	answers *answers

	mu    sync.Mutex
	notes []*mcp.ProgressNotificationParams
}

func serveProgress(t *testing.T, api http.Handler, acks chan struct{}) *progressClient {
	t.Helper()
	errorsURL := func(r *http.Request) string { return envelope.ErrorsReference("http", r.Host) }
	srv := httptest.NewServer(mcpserver.New(registry.Default(), api, mcpserver.Options{Schemas: schemas.For, ErrorsURL: errorsURL}))
	t.Cleanup(srv.Close)
	pc := &progressClient{answers: &answers{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpserver-progress-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			pc.mu.Lock()
			pc.notes = append(pc.notes, req.Params)
			pc.mu.Unlock()
			if acks != nil {
				acks <- struct{}{}
			}
		},
	})
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL, HTTPClient: &http.Client{Transport: pc.answers}, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	pc.session = session
	return pc
}

func (pc *progressClient) call(t *testing.T, tool string, args map[string]any, token any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if token != nil {
		params.SetProgressToken(token)
	}
	res, err := pc.session.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func (pc *progressClient) notifications() []*mcp.ProgressNotificationParams {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), pc.notes...)
}

// awaitNotifications waits for n notifications: the client runs its
// notification handler apart from the call, so the result may come first.
func (pc *progressClient) awaitNotifications(n int) []*mcp.ProgressNotificationParams {
	deadline := time.Now().Add(5 * time.Second)
	for len(pc.notifications()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return pc.notifications()
}

// sameEnvelope fails unless the result's text and structured content
// both are want.
func sameEnvelope(t *testing.T, res *mcp.CallToolResult, want string) {
	t.Helper()
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%d content items", len(res.Content))
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != want {
		t.Errorf("text content:\n got %s\nwant %s", text, want)
	}
	if got := mustJSON(t, res.StructuredContent); got != mustJSON(t, w) {
		t.Errorf("structured content:\n got %s\nwant %s", got, mustJSON(t, w))
	}
}

// A streaming tool called with a progress token is answered as events: a
// progress notification per leg, in order and as each leg finishes, then
// the result event's envelope as the result.
func TestMCPProgressPerLeg(t *testing.T) {
	acks := make(chan struct{}, 1)
	api := &streamAPI{legs: streamLegs, result: streamResult, acks: acks}
	pc := serveProgress(t, api, acks)
	res := pc.call(t, "search__all", map[string]any{"query": "acme", "platforms": []any{"company_registry", "microblog_a", "video_platform"}}, "tok-1")
	if res.IsError {
		t.Error("a success is not an error")
	}
	sameEnvelope(t, res, streamResult)
	if got := pc.answers.last(); !strings.HasPrefix(got, "text/event-stream") {
		t.Errorf("answered as %q, want an event stream", got)
	}
	if q := api.seen(); len(q) != 1 || q[0] != "platforms=company_registry%2Cmicroblog_a%2Cvideo_platform&query=acme&stream=1" {
		t.Errorf("the API saw %v", q)
	}
	if api.wasLate() {
		t.Error("a progress notification arrived only after a later leg was written")
	}
	notes := pc.notifications()
	want := []string{
		"company_registry: ok (200), 1 item",
		"microblog_a: ok (200), 2 items, cached",
		"video_platform: failed (504 UPSTREAM_TIMEOUT)",
	}
	if len(notes) != len(want) {
		t.Fatalf("%d notifications, want %d", len(notes), len(want))
	}
	for i, n := range notes {
		if n.ProgressToken != "tok-1" || n.Progress != float64(i+1) || n.Total != 3 || n.Message != want[i] {
			t.Errorf("notification %d: %+v", i, n)
		}
		// The leg event itself, items included, rides in _meta.
		var event any
		if err := json.Unmarshal([]byte(streamLegs[i]), &event); err != nil {
			t.Fatal(err)
		}
		if got, want := mustJSON(t, n.Meta["meridian/leg"]), mustJSON(t, event); got != want {
			t.Errorf("notification %d: meridian/leg\n got %s\nwant %s", i, got, want)
		}
	}
}

// A failure in the result event is a tool error carrying that envelope;
// search/creators streams too, and numeric tokens are echoed.
func TestMCPProgressFailureResult(t *testing.T) {
	api := &streamAPI{legs: streamLegs[2:], result: streamFailure}
	pc := serveProgress(t, api, nil)
	res := pc.call(t, "search__creators", map[string]any{"query": "acme"}, 7)
	if !res.IsError {
		t.Error("a failure is a tool error")
	}
	sameEnvelope(t, res, streamFailure)
	notes := pc.awaitNotifications(1)
	if len(notes) != 1 || notes[0].ProgressToken != float64(7) || notes[0].Progress != 3 || notes[0].Total != 3 {
		t.Errorf("notifications %+v", notes)
	}
	if q := api.seen(); len(q) != 1 || q[0] != "query=acme&stream=1" {
		t.Errorf("the API saw %v", q)
	}
}

// Without a progress token, or for a tool that does not stream, the call
// is answered as JSON exactly as before: no stream=1, no notifications.
func TestMCPProgressOnlyWhenAskedAndStreaming(t *testing.T) {
	api := &streamAPI{legs: streamLegs, result: streamResult}
	pc := serveProgress(t, api, nil)

	res := pc.call(t, "search__all", map[string]any{"query": "acme"}, nil)
	sameEnvelope(t, res, streamResult)
	if got := pc.answers.last(); !strings.HasPrefix(got, "application/json") {
		t.Errorf("without a token: answered as %q", got)
	}

	res = pc.call(t, "company_registry__search", map[string]any{"query": "acme"}, "tok-2")
	sameEnvelope(t, res, streamResult)
	if got := pc.answers.last(); !strings.HasPrefix(got, "application/json") {
		t.Errorf("a tool that does not stream: answered as %q", got)
	}

	if q := api.seen(); len(q) != 2 || q[0] != "query=acme" || q[1] != "query=acme" {
		t.Errorf("the API saw %v", q)
	}
	if n := pc.notifications(); len(n) != 0 {
		t.Errorf("%d notifications", len(n))
	}
}

// An agent that sets stream itself without a token gets the result
// event's envelope, not the raw event stream, and no notifications.
func TestMCPStreamArgumentWithoutToken(t *testing.T) {
	api := &streamAPI{legs: streamLegs, result: streamResult}
	pc := serveProgress(t, api, nil)
	res := pc.call(t, "search__all", map[string]any{"query": "acme", "stream": "1"}, nil)
	sameEnvelope(t, res, streamResult)
	if got := pc.answers.last(); !strings.HasPrefix(got, "application/json") {
		t.Errorf("answered as %q", got)
	}
	if n := pc.notifications(); len(n) != 0 {
		t.Errorf("%d notifications", len(n))
	}
}

// A refusal before the stream opens (plain JSON, its own status) is the
// tool's error as it is without progress.
func TestMCPProgressRefusedBeforeStreaming(t *testing.T) {
	refusal := `{"success":false,"error":{"type":"INSUFFICIENT_CREDITS","message":"Not enough credits.","status":402,"doc_url":"https://meridian.example/docs/errors#insufficient-credits"},"credits_used":0,"request_id":"req_refused"}`
	api := &fakeAPI{status: http.StatusPaymentRequired, body: refusal + "\n"}
	pc := serveProgress(t, api, nil)
	res := pc.call(t, "search__all", map[string]any{"query": "acme"}, "tok-3")
	if !res.IsError {
		t.Error("a refusal is a tool error")
	}
	sameEnvelope(t, res, refusal)
	if r := api.request(); r.URL.Query().Get("stream") != "1" {
		t.Errorf("the API saw %s", r.URL)
	}
	if n := pc.notifications(); len(n) != 0 {
		t.Errorf("%d notifications", len(n))
	}
}
