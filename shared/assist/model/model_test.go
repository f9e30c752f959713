package model

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// quick keeps retries fast; the attempt timeout is the provider's (Config).
var quick = upstream.Options{
	Timeout:       5 * time.Second,
	BackoffBase:   time.Millisecond,
	BackoffMax:    5 * time.Millisecond,
	CooldownAfter: 1 << 30, // many fault cases in a row must not rest the route
}

// attemptTimeout is short, and well under the fixtures' 1.5 s delay.
const attemptTimeout = 300 * time.Millisecond

// startReplay serves the shipped fixtures on loopback.
func startReplay(t *testing.T) (*replay.Server, string) {
	t.Helper()
	srv, err := replay.Load("../../../testdata/upstream")
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return srv, base
}

// ask serves one labelling question over a runner built as production
// builds it: NewRunner(Providers(cfg), settings).
func ask(t *testing.T, cfg Config, s upstream.Settings) upstream.Outcome {
	t.Helper()
	s.Options = quick
	r := upstream.NewRunner(Providers(cfg), s)
	if !r.Eligible(Key) {
		t.Fatalf("no route serves %s for %+v", Key, cfg)
	}
	return r.Serve(context.Background(), Key, map[string]string{
		ParamSystem:    "You label customer messages.",
		ParamPrompt:    "ref-1: Where is my parcel?",
		ParamSchema:    labelsSchema,
		ParamMaxTokens: "256",
	})
}

const labelsSchema = `{"type":"object","properties":{"labels":{"type":"array","items":{"type":"object",` +
	`"properties":{"ref":{"type":"string"},"category":{"type":"string","enum":["question","praise","complaint"]}},` +
	`"required":["ref","category"],"additionalProperties":false}}},"required":["labels"],"additionalProperties":false}`

// faultCase is one fixture's expected outcome over the replay upstream.
type faultCase struct {
	modelID    string
	kind       upstream.FaultKind // "" for an answer
	status     int
	attempts   int
	retryAfter time.Duration
	reason     string // a part of the fault's reason
	text       string // the answer's text, when one comes
}

// checkOutcome compares an outcome with its case.
func checkOutcome(t *testing.T, c faultCase, out upstream.Outcome) {
	t.Helper()
	if out.Trace.Attempts != c.attempts {
		t.Errorf("%s: %d attempts; want %d", c.modelID, out.Trace.Attempts, c.attempts)
	}
	if c.kind == "" {
		reply, ok := out.Data.(Reply)
		if out.Fault != nil || !ok {
			t.Fatalf("%s: fault %v, data %#v; want a Reply", c.modelID, out.Fault, out.Data)
		}
		if reply.Text != c.text {
			t.Errorf("%s: text %q; want %q", c.modelID, reply.Text, c.text)
		}
		return
	}
	if out.Fault == nil {
		t.Fatalf("%s: answered %#v; want a %s fault", c.modelID, out.Data, c.kind)
	}
	f := out.Fault
	if f.Kind != c.kind || f.Status != c.status || f.RetryAfter != c.retryAfter {
		t.Errorf("%s: %s status %d retry-after %v; want %s status %d retry-after %v (%s)",
			c.modelID, f.Kind, f.Status, f.RetryAfter, c.kind, c.status, c.retryAfter, f.Reason)
	}
	if !strings.Contains(f.Reason, c.reason) {
		t.Errorf("%s: reason %q; want it to say %q", c.modelID, f.Reason, c.reason)
	}
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("not JSON: %s", got)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %s", want)
	}
	return reflect.DeepEqual(g, w)
}

func lookupOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestConfigFrom(t *testing.T) {
	cases := []struct {
		name string
		vars map[string]string
		want Config
	}{
		{"no provider: no model", map[string]string{EnvModelID: "m", EnvURL: "::"}, Config{}},
		{"openai", map[string]string{EnvProvider: " OpenAI ", EnvModelID: "qwen2.5:7b", EnvURL: "http://localhost:11434/v1", EnvAPIKey: "k-123"},
			Config{Provider: "openai", ModelID: "qwen2.5:7b", URL: "http://localhost:11434/v1", APIKey: "k-123",
				Region: "us-east-1", AttemptTimeout: DefaultAttemptTimeout}},
		{"bedrock in the AWS region", map[string]string{EnvProvider: "bedrock", EnvModelID: "eu.amazon.nova-lite-v1:0", "AWS_REGION": "eu-west-1", EnvTimeout: "45s"},
			Config{Provider: "bedrock", ModelID: "eu.amazon.nova-lite-v1:0", Region: "eu-west-1", AttemptTimeout: 45 * time.Second}},
		{"bedrock region of its own", map[string]string{EnvProvider: "bedrock", EnvModelID: "m", "AWS_REGION": "eu-west-1", EnvRegion: "us-west-2",
			EnvURL: "https://vpce-0a1b.bedrock-runtime.us-west-2.vpce.amazonaws.com"},
			Config{Provider: "bedrock", ModelID: "m", Region: "us-west-2", URL: "https://vpce-0a1b.bedrock-runtime.us-west-2.vpce.amazonaws.com",
				AttemptTimeout: DefaultAttemptTimeout}},
	}
	for _, c := range cases {
		got, err := ConfigFrom(lookupOf(c.vars))
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}

	const secret = "sk-secret-value-0001"
	bad := []struct {
		name, variable string
		vars           map[string]string
	}{
		{"unknown provider", EnvProvider, map[string]string{EnvProvider: "anthropic-" + secret, EnvModelID: "m"}},
		{"no model id", EnvModelID, map[string]string{EnvProvider: "bedrock"}},
		{"openai without a URL", EnvURL, map[string]string{EnvProvider: "openai", EnvModelID: "m"}},
		{"not http", EnvURL, map[string]string{EnvProvider: "openai", EnvModelID: "m", EnvURL: "ftp://models.example/" + secret}},
		{"relative URL", EnvURL, map[string]string{EnvProvider: "openai", EnvModelID: "m", EnvURL: "models.example/v1"}},
		{"a key in the URL", EnvURL, map[string]string{EnvProvider: "openai", EnvModelID: "m", EnvURL: "https://user:" + secret + "@models.example/v1"}},
		{"a key in the query", EnvURL, map[string]string{EnvProvider: "openai", EnvModelID: "m", EnvURL: "https://models.example/v1?key=" + secret}},
		{"bad timeout", EnvTimeout, map[string]string{EnvProvider: "bedrock", EnvModelID: "m", EnvTimeout: secret}},
		{"negative timeout", EnvTimeout, map[string]string{EnvProvider: "bedrock", EnvModelID: "m", EnvTimeout: "-5s"}},
		{"zero timeout", EnvTimeout, map[string]string{EnvProvider: "bedrock", EnvModelID: "m", EnvTimeout: "0s"}},
	}
	for _, c := range bad {
		c.vars[EnvAPIKey] = secret
		_, err := ConfigFrom(lookupOf(c.vars))
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.variable) {
			t.Errorf("%s: %q does not name %s", c.name, err, c.variable)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error quotes a configured value: %q", c.name, err)
		}
	}
}

func TestProviders(t *testing.T) {
	if ps := Providers(Config{}); len(ps) != 0 || (Config{}).Enabled() {
		t.Fatalf("no provider configured: %d providers", len(ps))
	}
	for _, c := range []struct {
		cfg      Config
		name     string
		base     string
		timeout  time.Duration
		withKeys bool
	}{
		{Config{Provider: "openai", ModelID: "m", URL: "http://127.0.0.1:8080"}, OpenAI, "http://127.0.0.1:8080", DefaultAttemptTimeout, true},
		{Config{Provider: "bedrock", ModelID: "m", Region: "ap-southeast-2", AttemptTimeout: time.Minute}, Bedrock,
			"https://bedrock-runtime.ap-southeast-2.amazonaws.com", time.Minute, false},
	} {
		ps := Providers(c.cfg)
		if len(ps) != 1 || !c.cfg.Enabled() || c.cfg.Name() != c.name {
			t.Fatalf("%s: %d providers, name %q", c.name, len(ps), c.cfg.Name())
		}
		p := ps[0]
		if p.Name != c.name || p.BaseURL != c.base || p.AttemptTimeout != c.timeout || len(p.Endpoints) != 1 || p.Endpoints[Key] == nil {
			t.Errorf("%s: %+v", c.name, p)
		}
		if p.PublicLabel() == "direct" || strings.Contains(p.PublicLabel(), "openai") || strings.Contains(p.PublicLabel(), "bedrock") {
			t.Errorf("%s: public label %q names the vendor or none", c.name, p.PublicLabel())
		}
		keyed := len(p.Secrets) == 1 && p.Secrets[0].Name == EnvAPIKey && !p.Secrets[0].Required
		if keyed != c.withKeys {
			t.Errorf("%s: secrets %+v", c.name, p.Secrets)
		}
	}
}

func TestBadQuestionsAreRefusedBeforeSending(t *testing.T) {
	srv, base := startReplay(t)
	for _, cfg := range []Config{
		{Provider: "openai", ModelID: "m", URL: "http://unused.invalid", Replay: true},
		{Provider: "bedrock", ModelID: "m", Region: "us-east-1", Replay: true},
	} {
		r := upstream.NewRunner(Providers(cfg), upstream.Settings{ReplayURL: base, Options: quick})
		for name, params := range map[string]map[string]string{
			"no prompt":       {ParamPrompt: "  "},
			"bad max_tokens":  {ParamPrompt: "p", ParamMaxTokens: "many"},
			"negative tokens": {ParamPrompt: "p", ParamMaxTokens: "-1"},
		} {
			out := r.Serve(context.Background(), Key, params)
			if out.Fault == nil || out.Fault.Kind != upstream.Rejected || out.Trace.Attempts != 1 {
				t.Errorf("%s %s: %+v; want one Rejected attempt", cfg.Name(), name, out)
			}
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests reached the upstream; want none", n)
	}
}
