package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/registry"
)

func TestEscapeUnsafe(t *testing.T) {
	cases := map[string]string{
		"/v1/a":     "/v1/a",
		"/v1/a b":   "/v1/a%20b",
		"q=a\x00b":  "q=a%00b",
		"q=\x7f\n":  "q=%7F%0A",
		"/v1/%00":   "/v1/%00",
		"/v1/é\x01": "/v1/é%01",
		"":          "",
	}
	for in, want := range cases {
		if got := escapeUnsafe(in); got != want {
			t.Errorf("escapeUnsafe(%q) = %q, want %q", in, got, want)
		}
	}
}

func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.EscapedPath(), "query": r.URL.RawQuery, "host": r.Host})
	})
}

func TestLambdaPassesRawBytesThroughEscaped(t *testing.T) {
	fn := Lambda(echoHandler(), nil, "")
	ev := events.APIGatewayV2HTTPRequest{
		RawPath:        "/v1/a b\x00",
		RawQueryString: "q=\x01",
		RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "api.example.com",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v1/a b\x00"}},
	}
	resp, err := fn(context.Background(), ev)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %+v", err, resp)
	}
	var got map[string]string
	_ = json.Unmarshal([]byte(resp.Body), &got)
	if got["path"] != "/v1/a%20b%00" || got["query"] != "q=%01" || got["host"] != "api.example.com" {
		t.Errorf("%v", got)
	}
}

func TestLambdaAnswersUnreadableEventsWithATyped400(t *testing.T) {
	fn := Lambda(echoHandler(), nil, "")
	for name, ev := range map[string]events.APIGatewayV2HTTPRequest{
		"no method":  {RawPath: "/v1", RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "api.example.com"}},
		"bad host":   {RawPath: "/v1", RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "bad host%zz", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}},
		"bad base64": {RawPath: "/v1", Body: "***", IsBase64Encoded: true, RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "api.example.com", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}}},
		"bad method": {RawPath: "/v1", RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: "api.example.com", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "G E T"}}},
	} {
		resp, err := fn(context.Background(), ev)
		if err != nil || resp.StatusCode != 400 || !strings.Contains(resp.Body, `"INVALID_PARAMETERS"`) ||
			resp.Headers["x-request-id"] == "" || !strings.Contains(resp.Body, resp.Headers["x-request-id"]) {
			t.Errorf("%s: %v %+v", name, err, resp)
		}
	}
}

func TestLocalBuildsTheEventAPIGatewayWould(t *testing.T) {
	var seen events.APIGatewayV2HTTPRequest
	routes := registry.Default().Routes()
	fn := func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		seen = ev
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"x-a": "1"},
			MultiValueHeaders: map[string][]string{"x-b": {"2", "3"}}, Cookies: []string{"c=1"}, Body: "aGk=", IsBase64Encoded: true}, nil
	}
	h := Local(routes, map[registry.Family]EventHandler{registry.Commerce: fn, registry.Service: fn}, slog.New(slog.DiscardHandler), "")
	req := httptest.NewRequest("POST", "http://127.0.0.1:8080/v1/marketplace_a/search?query=a&query=b", strings.NewReader("\xff\xfe"))
	req.Header.Set("X-Api-Key", "k")
	req.Header.Add("Cookie", "s=1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if seen.RouteKey != "ANY /v1/marketplace_a/{proxy+}" || seen.RequestContext.RouteKey != seen.RouteKey || seen.Version != "2.0" {
		t.Errorf("route key %q", seen.RouteKey)
	}
	if seen.RawPath != "/v1/marketplace_a/search" || seen.RawQueryString != "query=a&query=b" || seen.QueryStringParameters["query"] != "a,b" {
		t.Errorf("path/query %q %q %v", seen.RawPath, seen.RawQueryString, seen.QueryStringParameters)
	}
	if seen.Headers["x-api-key"] != "k" || seen.Headers["x-forwarded-proto"] != "http" || seen.Headers["host"] != "127.0.0.1:8080" ||
		len(seen.Cookies) != 1 || seen.Headers["cookie"] != "" {
		t.Errorf("headers %v cookies %v", seen.Headers, seen.Cookies)
	}
	if !seen.IsBase64Encoded || seen.Body != "//4=" || seen.RequestContext.HTTP.Method != "POST" {
		t.Errorf("body %q %v", seen.Body, seen.IsBase64Encoded)
	}
	if rec.Code != 201 || rec.Body.String() != "hi" || rec.Header().Get("x-a") != "1" ||
		len(rec.Header().Values("x-b")) != 2 || rec.Header().Get("set-cookie") != "c=1" {
		t.Errorf("response %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	// Unknown paths go where API Gateway's $default route sends them.
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "http://h/elsewhere", nil))
	if seen.RouteKey != registry.DefaultRoute {
		t.Errorf("$default route key, got %q", seen.RouteKey)
	}
}
