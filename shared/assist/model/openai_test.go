package model

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

func TestOpenAIOverReplay(t *testing.T) {
	_, base := startReplay(t)
	cases := []faultCase{
		{modelID: "gpt-4o-mini", attempts: 1, text: `{"labels":[]}`},
		// The content is the caller's to validate: these come back as answers.
		{modelID: "malformed-json", attempts: 1, text: "Sure! Here are the labels you asked for: ref-1 is a question, ref-2 is praise."},
		{modelID: "schema-invalid", attempts: 1, text: `{"labels":[{"ref":"x","category":"nonsense"}]}`},
		{modelID: "fault-500", kind: upstream.ServerError, status: 500, attempts: 3, reason: "The server had an error"},
		{modelID: "fault-timeout", kind: upstream.Timeout, attempts: 3},
		{modelID: "fault-reset", kind: upstream.Transport, attempts: 3},
		{modelID: "rate-limited", kind: upstream.RateLimited, status: 429, attempts: 1, retryAfter: 20 * time.Second, reason: "Rate limit reached"},
		{modelID: "malformed-envelope", kind: upstream.Malformed, attempts: 1, reason: "not the expected JSON"},
		{modelID: "refusal", kind: upstream.Malformed, attempts: 1, reason: "refused"},
	}
	for _, c := range cases {
		cfg := Config{Provider: "openai", ModelID: c.modelID, URL: "https://api.openai.com/v1", AttemptTimeout: attemptTimeout, Replay: true}
		checkOutcome(t, c, ask(t, cfg, upstream.Settings{ReplayURL: base}))
	}

	cfg := Config{Provider: "openai", ModelID: "gpt-4o-mini", URL: "https://api.openai.com/v1", Replay: true}
	reply := ask(t, cfg, upstream.Settings{ReplayURL: base}).Data.(Reply)
	if reply.InputTokens != 412 || reply.OutputTokens != 9 || reply.StopReason != "stop" {
		t.Errorf("usage and finish reason: %+v", reply)
	}
}

// chatServer records the requests an OpenAI-compatible server receives and
// answers each with answer.
type chatServer struct {
	mu       sync.Mutex
	requests []recorded
	answer   func(w http.ResponseWriter)
}

type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

func (s *chatServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, recorded{r.Method, r.URL.Path, r.Header.Clone(), body})
	s.mu.Unlock()
	s.answer(w)
}

func (s *chatServer) last(t *testing.T) recorded {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		t.Fatal("no request reached the server")
	}
	return s.requests[len(s.requests)-1]
}

func (s *chatServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func answerJSON(status int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const okCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"qwen2.5:7b",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"{\"labels\":[]}"},"finish_reason":"length"}],` +
	`"usage":{"prompt_tokens":30,"completion_tokens":256,"total_tokens":286}}`

func startChat(t *testing.T, answer func(w http.ResponseWriter)) (*chatServer, string) {
	t.Helper()
	s := &chatServer{answer: answer}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func TestOpenAIRequestShape(t *testing.T) {
	s, url := startChat(t, answerJSON(200, okCompletion))
	const key = "sk-test-0000000000000000000000000001"
	for _, c := range []struct {
		base, path string
		key        string
	}{
		{url, "/v1/chat/completions", key},
		{url + "/v1", "/v1/chat/completions", ""},
		{url + "/v1/", "/v1/chat/completions", key},
		{url + "/proxy/openai", "/proxy/openai/v1/chat/completions", ""},
	} {
		cfg := Config{Provider: "openai", ModelID: "qwen2.5:7b", URL: c.base, AttemptTimeout: attemptTimeout}
		out := ask(t, cfg, upstream.Settings{Lookup: lookupOf(map[string]string{EnvAPIKey: c.key})})
		reply, ok := out.Data.(Reply)
		if !ok || reply.Text != `{"labels":[]}` || reply.StopReason != "length" || reply.InputTokens != 30 || reply.OutputTokens != 256 {
			t.Fatalf("%s: %+v %v", c.base, out.Data, out.Fault)
		}
		req := s.last(t)
		if req.method != http.MethodPost || req.path != c.path {
			t.Errorf("%s: %s %s; want POST %s", c.base, req.method, req.path, c.path)
		}
		if ct := req.header.Get("content-type"); ct != "application/json" {
			t.Errorf("%s: content-type %q", c.base, ct)
		}
		auth, sent := req.header["Authorization"]
		switch {
		case c.key == "" && sent:
			t.Errorf("%s: authorization %q sent without a key", c.base, auth)
		case c.key != "" && req.header.Get("authorization") != "Bearer "+c.key:
			t.Errorf("%s: authorization %q; want the bearer key", c.base, req.header.Get("authorization"))
		}
		want := `{"model":"qwen2.5:7b","temperature":0,"max_tokens":256,` +
			`"messages":[{"role":"system","content":"You label customer messages."},{"role":"user","content":"ref-1: Where is my parcel?"}],` +
			`"response_format":{"type":"json_schema","json_schema":{"name":"labels","strict":true,"schema":` + labelsSchema + `}}}`
		if !jsonEqual(t, string(req.body), want) {
			t.Errorf("%s: body\n%s\nwant\n%s", c.base, req.body, want)
		}
	}

	// No system prompt, no schema, no cap: a user message alone, the default cap.
	r := upstream.NewRunner(Providers(Config{Provider: "openai", ModelID: "m", URL: url}), upstream.Settings{Options: quick})
	if out := r.Serve(context.Background(), Key, map[string]string{ParamPrompt: "hello", ParamMaxTokens: "0"}); out.Fault != nil {
		t.Fatal(out.Fault)
	}
	want := `{"model":"m","temperature":0,"max_tokens":1024,"messages":[{"role":"user","content":"hello"}]}`
	if body := s.last(t).body; !jsonEqual(t, string(body), want) {
		t.Errorf("minimal body\n%s\nwant\n%s", body, want)
	}
	before := s.count()
	out := r.Serve(context.Background(), Key, map[string]string{ParamPrompt: "hello", ParamSchema: `["not", "an object"]`})
	if out.Fault == nil || out.Fault.Kind != upstream.Rejected || s.count() != before {
		t.Errorf("a schema that is no JSON object: %+v; want Rejected before sending", out.Fault)
	}
}

func TestOpenAIFaults(t *testing.T) {
	const key = "sk-proj-secret-0000000000000000000000000002"
	invalidKey := `{"error":{"message":"Incorrect API key provided: ` + key + `. You can find your API key at ` +
		`https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter)
		kind   upstream.FaultKind
		status int
		reason string
	}{
		// 401 refuses Meridian itself: Rejected with its status, so the route rests.
		{"bad key", answerJSON(401, invalidKey), upstream.Rejected, 401, "Incorrect API key provided"},
		// An unknown model is no "no such record" for the caller.
		{"unknown model", answerJSON(404, `{"error":{"message":"model \"m\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`),
			upstream.Rejected, 404, "try pulling it first"},
		{"older vLLM error", answerJSON(400, `{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`),
			upstream.Rejected, 400, "max_tokens is too large"},
		{"llama.cpp 503", answerJSON(503, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`),
			upstream.ServerError, 503, "Loading model"},
		{"no choices", answerJSON(200, `{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}`),
			upstream.Malformed, 0, "no choices"},
		{"content parts", answerJSON(200, `{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"{}"}]},"finish_reason":"stop"}]}`),
			upstream.Malformed, 0, "not a string"},
		{"null content", answerJSON(200, `{"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`),
			upstream.Malformed, 0, "no message.content"},
	}
	for _, c := range cases {
		s, url := startChat(t, c.answer)
		cfg := Config{Provider: "openai", ModelID: "m", URL: url, AttemptTimeout: attemptTimeout}
		out := ask(t, cfg, upstream.Settings{Lookup: lookupOf(map[string]string{EnvAPIKey: key})})
		f := out.Fault
		if f == nil || f.Kind != c.kind || f.Status != c.status {
			t.Errorf("%s: %+v; want %s status %d", c.name, f, c.kind, c.status)
			continue
		}
		if !strings.Contains(f.Reason, c.reason) {
			t.Errorf("%s: reason %q; want it to say %q", c.name, f.Reason, c.reason)
		}
		if strings.Contains(f.Reason, key) || strings.Contains(f.Error(), key) {
			t.Errorf("%s: the fault's reason shows the key: %q", c.name, f.Reason)
		}
		if got := s.last(t).header.Get("authorization"); got != "Bearer "+key {
			t.Errorf("%s: authorization %q", c.name, got)
		}
	}
}

// In replay mode the configured key never reaches the replay upstream.
func TestOpenAIReplayGetsNoKey(t *testing.T) {
	srv, base := startReplay(t)
	cfg := Config{Provider: "openai", ModelID: "gpt-4o-mini", URL: "https://api.openai.com/v1", APIKey: "sk-real-0003", Replay: true}
	out := ask(t, cfg, upstream.Settings{ReplayURL: base, Lookup: lookupOf(map[string]string{EnvAPIKey: "sk-real-0003"})})
	if out.Fault != nil {
		t.Fatal(out.Fault)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Provider != OpenAI || reqs[0].Fixture != "default.json" {
		t.Fatalf("replay requests: %+v", reqs)
	}
	if auth := reqs[0].Header.Get("authorization"); auth != "" {
		t.Errorf("authorization %q sent to the replay upstream", auth)
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || body["model"] != "gpt-4o-mini" {
		t.Errorf("replayed body: %s", reqs[0].Body)
	}
}
