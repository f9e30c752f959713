package model

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

func bedrockConfig(modelID string) Config {
	return Config{Provider: "bedrock", ModelID: modelID, Region: "us-west-2", AttemptTimeout: attemptTimeout, Replay: true}
}

func TestBedrockOverReplay(t *testing.T) {
	srv, base := startReplay(t)
	cases := []faultCase{
		{modelID: "anthropic.claude-3-5-haiku-20241022-v1:0", attempts: 1, text: `{"labels":[]}`},
		// An ARN's slash travels escaped (%2F) and arrives as a path segment.
		{modelID: "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.amazon.nova-lite-v1:0", attempts: 1, text: `{"labels":[]}`},
		{modelID: "malformed-json", attempts: 1, text: "Sure! Here are the labels you asked for: ref-1 is a question, ref-2 is praise."},
		{modelID: "schema-invalid", attempts: 1, text: `{"labels":[{"ref":"x","category":"nonsense"}]}`},
		{modelID: "fault-500", kind: upstream.ServerError, status: 500, attempts: 3, reason: "InternalServerException: The system encountered"},
		{modelID: "fault-timeout", kind: upstream.Timeout, attempts: 3},
		{modelID: "fault-reset", kind: upstream.Transport, attempts: 3},
		{modelID: "model-timeout", kind: upstream.Timeout, status: 408, attempts: 3, reason: "ModelTimeoutException"},
		{modelID: "rate-limited", kind: upstream.RateLimited, status: 429, attempts: 1, reason: "ThrottlingException"},
		// 403 refuses Meridian itself: it counts toward the route's cooldown.
		{modelID: "access-denied", kind: upstream.Rejected, status: 403, attempts: 1, reason: "AccessDeniedException"},
		{modelID: "invalid-model", kind: upstream.Rejected, status: 400, attempts: 1, reason: "ValidationException"},
		{modelID: "malformed-envelope", kind: upstream.Malformed, attempts: 1, reason: "not Converse JSON"},
	}
	for _, c := range cases {
		checkOutcome(t, c, ask(t, bedrockConfig(c.modelID), upstream.Settings{ReplayURL: base}))
	}

	out := ask(t, bedrockConfig("anthropic.claude-3-5-haiku-20241022-v1:0"), upstream.Settings{ReplayURL: base})
	if reply := out.Data.(Reply); reply.InputTokens != 412 || reply.OutputTokens != 9 || reply.StopReason != "end_turn" {
		t.Errorf("usage and stop reason: %+v", reply)
	}
	if out.Trace.ServedBy != Bedrock {
		t.Errorf("served by %q", out.Trace.ServedBy)
	}

	// A tool's input is the structured answer; the text beside it is not.
	out = ask(t, bedrockConfig("tool-use"), upstream.Settings{ReplayURL: base})
	reply, ok := out.Data.(Reply)
	if !ok || !jsonEqual(t, reply.Text, `{"labels":[{"ref":"ref-1","category":"question"}]}`) || reply.StopReason != "tool_use" {
		t.Errorf("tool use: %+v %v", out.Data, out.Fault)
	}

	// Every request was signed with the replay placeholders, never a real
	// credential, and the model id travelled in the path the fixtures match.
	for _, r := range srv.Requests() {
		if r.Provider != Bedrock || r.Fixture == "" {
			t.Errorf("unanswered request %s %s", r.Method, r.Path)
		}
		if auth := r.Header.Get("authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=replay/") {
			t.Errorf("authorization %q; want SigV4 with the replay placeholder", auth)
		}
	}
}

// bedrockHandler records Converse requests and answers each with answer.
func bedrockHandler(t *testing.T, answer func(w http.ResponseWriter)) (*chatServer, string) {
	t.Helper()
	return startChat(t, answer)
}

const okConverse = `{"metrics":{"latencyMs":640},"output":{"message":{"content":[{"text":"{\"labels\":"},{"text":"[]}"}],"role":"assistant"}},` +
	`"stopReason":"max_tokens","usage":{"inputTokens":51,"outputTokens":256,"totalTokens":307}}`

func TestBedrockRequestShape(t *testing.T) {
	// The SDK would switch to this bearer key if the client let it.
	const bearer = "bedrock-api-key-sample-0004"
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", bearer)
	s, url := bedrockHandler(t, answerJSON(200, okConverse))
	const modelID = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
	cfg := Config{Provider: "bedrock", ModelID: modelID, Region: "us-west-2", URL: url, AttemptTimeout: attemptTimeout, Replay: true}
	out := ask(t, cfg, upstream.Settings{})
	reply, ok := out.Data.(Reply)
	if !ok || reply.Text != `{"labels":[]}` || reply.StopReason != "max_tokens" || reply.InputTokens != 51 || reply.OutputTokens != 256 {
		t.Fatalf("%+v %v", out.Data, out.Fault)
	}
	req := s.last(t)
	if req.method != http.MethodPost || req.path != "/model/"+modelID+"/converse" {
		t.Errorf("%s %s", req.method, req.path)
	}
	auth := req.header.Get("authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=replay/") || !strings.Contains(auth, "/us-west-2/bedrock/aws4_request") ||
		!strings.Contains(auth, "SignedHeaders=") || !strings.Contains(auth, "Signature=") {
		t.Errorf("authorization %q; want SigV4 for bedrock in us-west-2", auth)
	}
	if req.header.Get("x-amz-date") == "" || req.header.Get("x-amz-content-sha256") == "" && req.header.Get("content-length") == "" {
		t.Errorf("signing headers missing: %v", req.header)
	}
	for k, v := range req.header {
		if strings.Contains(strings.Join(v, " "), bearer) {
			t.Errorf("header %s carries the bearer key", k)
		}
	}
	want := `{"messages":[{"role":"user","content":[{"text":"ref-1: Where is my parcel?"}]}],` +
		`"system":[{"text":"You label customer messages."}],"inferenceConfig":{"maxTokens":256,"temperature":0}}`
	if !jsonEqual(t, string(req.body), want) {
		t.Errorf("body\n%s\nwant\n%s", req.body, want)
	}
}

// isolateAWS points the default credential chain at nothing on this
// machine: no shared files, no profile, no instance metadata.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":                        filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":            filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_PROFILE":                            "",
		"AWS_ACCESS_KEY_ID":                      "",
		"AWS_SECRET_ACCESS_KEY":                  "",
		"AWS_SESSION_TOKEN":                      "",
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_ROLE_ARN":                           "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_BEARER_TOKEN_BEDROCK":               "",
	} {
		t.Setenv(k, v)
	}
}

func TestBedrockDefaultCredentialChain(t *testing.T) {
	isolateAWS(t)
	// The AWS documentation's example key pair, not a real one.
	const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	denied := `{"message":"User: arn:aws:iam::123456789012:user/meridian is not authorized to perform: bedrock:InvokeModel"}`
	s, url := bedrockHandler(t, func(w http.ResponseWriter) {
		w.Header().Set("x-amzn-errortype", "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/")
		answerJSON(403, denied)(w)
	})
	cfg := Config{Provider: "bedrock", ModelID: "amazon.nova-micro-v1:0", Region: "eu-central-1", URL: url, AttemptTimeout: attemptTimeout}
	out := ask(t, cfg, upstream.Settings{})
	if auth := s.last(t).header.Get("authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/") {
		t.Errorf("authorization %q; want the chain's access key", auth)
	}
	f := out.Fault
	if f == nil || f.Kind != upstream.Rejected || f.Status != 403 || !strings.Contains(f.Reason, "not authorized") {
		t.Fatalf("%+v; want Rejected 403 with Bedrock's message", f)
	}
	if strings.Contains(f.Reason, secret) || strings.Contains(f.Reason, "AKIAIOSFODNN7EXAMPLE") {
		t.Errorf("the reason shows a credential: %q", f.Reason)
	}
}

func TestBedrockWithoutCredentials(t *testing.T) {
	isolateAWS(t)
	s, url := bedrockHandler(t, answerJSON(200, okConverse))
	cfg := Config{Provider: "bedrock", ModelID: "m", Region: "us-east-1", URL: url, AttemptTimeout: attemptTimeout}
	out := ask(t, cfg, upstream.Settings{})
	// Like a 401: Rejected, not retried, and counted toward the cooldown.
	if f := out.Fault; f == nil || f.Kind != upstream.Rejected || f.Status != http.StatusUnauthorized || out.Trace.Attempts != 1 {
		t.Fatalf("%+v (%d attempts); want one Rejected 401", f, out.Trace.Attempts)
	}
	if n := s.count(); n != 0 {
		t.Errorf("%d unsigned requests were sent", n)
	}
}

func TestBedrockFaultsFromStatus(t *testing.T) {
	cases := []struct {
		name       string
		answer     func(w http.ResponseWriter)
		kind       upstream.FaultKind
		status     int
		retryAfter time.Duration
		attempts   int
	}{
		{"throttled with a wait", func(w http.ResponseWriter) {
			w.Header().Set("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/")
			w.Header().Set("retry-after", "7")
			answerJSON(429, `{"message":"Too many requests, please wait before trying again."}`)(w)
		}, upstream.RateLimited, 429, 7 * time.Second, 1},
		{"quota", func(w http.ResponseWriter) {
			w.Header().Set("x-amzn-errortype", "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/")
			answerJSON(400, `{"message":"Too many tokens per day, please wait before trying again."}`)(w)
		}, upstream.RateLimited, 400, 0, 1},
		{"model not ready", func(w http.ResponseWriter) {
			w.Header().Set("x-amzn-errortype", "ModelNotReadyException")
			answerJSON(429, `{"message":"Model is not ready for inference."}`)(w)
		}, upstream.ServerError, 429, 0, 3},
		{"unknown model", func(w http.ResponseWriter) {
			w.Header().Set("x-amzn-errortype", "ResourceNotFoundException")
			answerJSON(404, `{"message":"Model not found."}`)(w)
		}, upstream.Rejected, 404, 0, 1},
		{"expired token", func(w http.ResponseWriter) {
			w.Header().Set("x-amzn-errortype", "ExpiredTokenException")
			answerJSON(403, `{"message":"The security token included in the request is expired"}`)(w)
		}, upstream.Rejected, 403, 0, 1},
		{"a proxy's 502 page", func(w http.ResponseWriter) {
			w.Header().Set("content-type", "text/html")
			w.WriteHeader(502)
			_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>"))
		}, upstream.ServerError, 502, 0, 3},
		{"no output message", answerJSON(200, `{"output":{},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":0,"totalTokens":1}}`),
			upstream.Malformed, 0, 0, 1},
	}
	for _, c := range cases {
		s, url := bedrockHandler(t, c.answer)
		cfg := Config{Provider: "bedrock", ModelID: "m", Region: "us-east-1", URL: url, AttemptTimeout: attemptTimeout, Replay: true}
		out := ask(t, cfg, upstream.Settings{})
		f := out.Fault
		if f == nil || f.Kind != c.kind || f.Status != c.status || f.RetryAfter != c.retryAfter {
			t.Errorf("%s: %+v; want %s status %d retry-after %v", c.name, f, c.kind, c.status, c.retryAfter)
		}
		if out.Trace.Attempts != c.attempts || s.count() != c.attempts {
			t.Errorf("%s: %d attempts, %d requests; want %d", c.name, out.Trace.Attempts, s.count(), c.attempts)
		}
	}
}

// The attempt's deadline ends a slow Converse call as a Timeout, and the
// runner's retries, not the SDK's, make the attempts.
func TestBedrockTimeoutIsTheAttempts(t *testing.T) {
	s, url := bedrockHandler(t, func(w http.ResponseWriter) {
		time.Sleep(2 * attemptTimeout)
		answerJSON(200, okConverse)(w)
	})
	cfg := Config{Provider: "bedrock", ModelID: "m", Region: "us-east-1", URL: url, AttemptTimeout: attemptTimeout, Replay: true}
	r := upstream.NewRunner(Providers(cfg), upstream.Settings{Options: quick})
	out := r.Serve(context.Background(), Key, map[string]string{ParamPrompt: "p"})
	if out.Fault == nil || out.Fault.Kind != upstream.Timeout || out.Trace.Attempts != 3 {
		t.Fatalf("%+v after %d attempts; want Timeout after 3", out.Fault, out.Trace.Attempts)
	}
	if n := s.count(); n != 3 {
		t.Errorf("%d requests; want one per attempt (the SDK must not retry)", n)
	}
}
