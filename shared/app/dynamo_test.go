package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamolocal"
)

// A Lambda function configured the way AWS runs it (MERIDIAN_TABLE and the
// SDK's environment) authenticates and answers from DynamoDB.
func TestLambdaOnDynamoDB(t *testing.T) {
	endpoint, err := dynamolocal.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("meridian-app-test-%d", time.Now().UnixNano())
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
		"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
		app.EnvTable: table,
	} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	client, err := dynamostore.NewClientFromEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	deps, err := app.LambdaDeps(ctx, slog.New(slog.DiscardHandler))
	if err != nil || deps.Store == nil {
		t.Fatalf("deps: %+v %v", deps, err)
	}
	acct, _, err := auth.CreateAccount(ctx, deps.Store, 42, "req_test_open")
	if err != nil {
		t.Fatal(err)
	}
	key, k := auth.NewKey(acct.ID, "lambda", nil)
	created, err := deps.Store.CreateKey(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	fn := app.Function(registry.Service, slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil)), deps)
	call := func() events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "ANY /v1/credits/{proxy+}", RawPath: "/v1/credits/balance",
			Headers: map[string]string{"x-api-key": key, "x-forwarded-proto": "https"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "api.example.com",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v1/credits/balance", SourceIP: "198.51.100.1"}},
		}
		resp, err := fn(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := call()
	var body struct {
		Data struct {
			CreditsRemaining int64 `json:"credits_remaining"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || resp.StatusCode != 200 || body.Data.CreditsRemaining != 42 {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	if _, err := deps.Store.SetKeyStatus(ctx, acct.ID, created.ID, "revoked"); err != nil {
		t.Fatal(err)
	}
	if resp := call(); resp.StatusCode != 401 {
		t.Errorf("revocation applies on the next request: %d %s", resp.StatusCode, resp.Body)
	}
}
