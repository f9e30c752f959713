package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/internal/devscripts"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// repoRoot is the folder holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := devscripts.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// replayServer is the local handler with MERIDIAN_UPSTREAM=replay, an
// embedded store and a key with credits.
func replayServer(t *testing.T) (http.Handler, string, *bytes.Buffer) {
	t.Helper()
	t.Setenv(app.EnvUpstream, app.UpstreamReplay)
	logs := &bytes.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	base, s := replayAndStore(t, logger)
	_, key := newAccount(t, s, 1000, nil)
	none := func(string) (string, bool) { return "", false }
	runner := app.NewUpstream(logger, none, base)
	return app.LocalHandler(logger, app.Deps{Store: s, Upstream: runner}), key, logs
}

func getJSON(t *testing.T, h http.Handler, target, key string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("x-api-key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
	}
	return rec.Code, body
}

// In replay mode every wired route answers the ready-to-run example that
// utility/endpoint publishes (the README's examples), offline, with data
// valid against the endpoint's schema.
func TestReplayModeAnswersEveryWiredExample(t *testing.T) {
	h, key, logs := replayServer(t)
	wired := map[string]bool{}
	for _, p := range adapters.All() {
		for k := range p.Endpoints {
			wired[k] = true
		}
	}
	if len(wired) < 9 {
		t.Fatalf("only %d endpoints are wired", len(wired))
	}
	for k := range wired {
		code, desc := getJSON(t, h, "http://127.0.0.1:8080/v1/utility/endpoint?id="+k, key)
		if code != 200 {
			t.Fatalf("%s: utility/endpoint %d %v", k, code, desc)
		}
		example := desc["data"].(map[string]any)["request"].(map[string]any)["url"].(string)
		code, body := getJSON(t, h, example, key)
		if code != 200 || body["success"] != true {
			t.Errorf("%s: the example %s answered %d %v", k, example, code, body)
			continue
		}
		if err := schemas.Validate(k, body["data"]); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	if !strings.Contains(logs.String(), "UPSTREAM REPLAY MODE") {
		t.Error("replay mode is not announced in the log")
	}
}

// Every provider endpoint is a registered data endpoint.
func TestProvidersServeRegisteredDataEndpoints(t *testing.T) {
	names := map[string]bool{}
	for _, p := range adapters.All() {
		if names[p.Name] {
			t.Errorf("provider name %s is used twice", p.Name)
		}
		names[p.Name] = true
		if p.Protocol == "" || p.Docs == "" || (!p.Static && !strings.HasPrefix(p.BaseURL, "https://")) {
			t.Errorf("%s: protocol, docs and an https base URL are required", p.Name)
		}
		for k := range p.Endpoints {
			e, ok := registry.Default().Endpoint(k)
			if !ok || e.Kind != registry.Data {
				t.Errorf("%s serves %s, which is not a registered data endpoint", p.Name, k)
			}
		}
		for _, s := range p.Secrets {
			if !strings.HasPrefix(s.Name, "MERIDIAN_") || s.Doc == "" {
				t.Errorf("%s: secret %s needs the MERIDIAN_ prefix and a doc", p.Name, s.Name)
			}
		}
	}
}

// fakeSecrets answers GetSecretValue from memory.
type fakeSecrets struct {
	secret string
	err    error
}

func (f fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &secretsmanager.GetSecretValueOutput{Name: in.SecretId, SecretString: aws.String(f.secret)}, nil
}

func TestUpstreamSecretOverlaysTheEnvironment(t *testing.T) {
	t.Setenv("MERIDIAN_GITHUB_TOKEN", "from-env")
	t.Setenv("MERIDIAN_UPSTREAM_GITHUB_REST_URL", "https://proxy.example")
	lookup, err := app.UpstreamLookup(context.Background(), fakeSecrets{secret: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := lookup("MERIDIAN_GITHUB_TOKEN"); v != "from-env" {
		t.Fatalf("without a secret id the environment answers: %q", v)
	}
	t.Setenv(app.EnvUpstreamSecret, "meridian/upstream")
	lookup, err = app.UpstreamLookup(context.Background(), fakeSecrets{secret: `{"MERIDIAN_GITHUB_TOKEN":"from-secret"}`})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := lookup("MERIDIAN_GITHUB_TOKEN"); v != "from-secret" {
		t.Fatalf("the secret wins: %q", v)
	}
	if v, _ := lookup("MERIDIAN_UPSTREAM_GITHUB_REST_URL"); v != "https://proxy.example" {
		t.Fatalf("what the secret lacks comes from the environment: %q", v)
	}
	_, err = app.UpstreamLookup(context.Background(), fakeSecrets{secret: `not json with hunter2`})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a malformed secret is refused without quoting it: %v", err)
	}
	if _, err = app.UpstreamLookup(context.Background(), fakeSecrets{err: errors.New("AccessDenied")}); err == nil {
		t.Fatal("an unreadable secret is an error at start-up")
	}
}

func TestLambdaRefusesReplayMode(t *testing.T) {
	t.Setenv(app.EnvUpstream, app.UpstreamReplay)
	if _, err := app.LambdaDeps(context.Background(), slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("a Lambda function must not run on fixtures")
	}
}

// make run needs nothing beyond its embedded store for usage events: an
// in-process queue and worker feed /v1/status.
func TestLocalEventsFeedStatus(t *testing.T) {
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	acct, _, err := auth.CreateAccount(context.Background(), s, 10, "req_local_events")
	if err != nil {
		t.Fatal(err)
	}
	key, k := auth.NewKey(acct.ID, "local", nil)
	if _, err := s.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	none := func(string) (string, bool) { return "", false }
	h := app.LocalHandler(logger, app.Deps{Store: s, Upstream: app.NewUpstream(logger, none, ""), Events: app.LocalEvents(ctx, s, logger)})
	for i := 0; i < 3; i++ {
		if code, body := getJSON(t, h, "http://127.0.0.1:8080/v1/app_store_b/categories", key); code != 200 {
			t.Fatalf("%d %v", code, body)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := getJSON(t, h, "http://127.0.0.1:8080/v1/status", key)
		for _, p := range body["data"].(map[string]any)["platforms"].([]any) {
			if m := p.(map[string]any); m["platform"] == "app_store_b" && m["requests"] == float64(3) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never counted the 3 calls: %v", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAdminTokenFromItsOwnSecret(t *testing.T) {
	t.Setenv(app.EnvAdminToken, "from-env")
	if tok, err := app.AdminToken(context.Background(), fakeSecrets{secret: "ignored"}); err != nil || tok != "from-env" {
		t.Fatalf("without a secret id the environment answers: %q %v", tok, err)
	}
	t.Setenv(app.EnvAdminSecret, "meridian/admin")
	if tok, err := app.AdminToken(context.Background(), fakeSecrets{secret: " op-token \n"}); err != nil || tok != "op-token" {
		t.Fatalf("the secret's value is the token: %q %v", tok, err)
	}
	if _, err := app.AdminToken(context.Background(), fakeSecrets{secret: ""}); err == nil {
		t.Fatal("an empty operator secret is an error at start-up")
	}
}
