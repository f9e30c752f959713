package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

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

func TestEventFromRequestIsAPIGateways(t *testing.T) {
	table := registry.NewRouteTable(registry.Default().Routes())
	req := httptest.NewRequest("POST", "http://127.0.0.1:8080/v1/marketplace_a/search?query=a&query=b", nil)
	req.Header.Set("X-Api-Key", "k")
	req.Header.Add("Cookie", "s=1")
	seen := EventFromRequest(req, table.Match(req.Method, req.URL.EscapedPath()), []byte("\xff\xfe"))
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
	other := httptest.NewRequest("GET", "http://h/elsewhere", nil)
	if ev := EventFromRequest(other, table.Match("GET", "/elsewhere"), nil); ev.RouteKey != registry.DefaultRoute {
		t.Errorf("$default route key, got %q", ev.RouteKey)
	}
}

// The request a family's handler gets from the local server is the one
// it gets in Lambda: what api-proxy builds from the event API Gateway
// sends, after gateway.Lambda's own checks.
func TestLocalRequestIsLambdas(t *testing.T) {
	table := registry.NewRouteTable(registry.Default().Routes())
	type request struct {
		method, target string
		header         http.Header
		body           string
	}
	requests := []request{
		{"GET", "http://127.0.0.1:8080/v1/marketplace_a/search?query=a&query=b", http.Header{
			"X-Api-Key": {"mn_key"}, "Cookie": {"a=1; b=2", "c=3"}, "Accept": {"a, b", "c"}, "Cache-Control": {"no-cache, no-store"},
			"User-Agent": {"agent, with a comma"}, "Authorization": {"Bearer a,b"}, "X-Forwarded-For": {"10.0.0.1"},
			"X-Forwarded-Proto": {"https"}, "X-Empty": {""}, "Idempotency-Key": {"k 1"}, "X_underscore": {"u"},
		}, ""},
		{"POST", "http://localhost/v1/batch", http.Header{"Content-Type": {"application/json"}, "Content-Length": {"9"}}, `{"a": 1}` + "\n"},
		{"PUT", "http://h/v1/x/%2Fa%20b?q=%zz&r", nil, "\xff\xfe"},
		{"get", "http://h/v1", nil, ""},
		{"GET", "http://h/sandbox/marketplace_a/search?query=%E2%9C%93", http.Header{"If-Modified-Since": {"Mon, 02 Jan 2006 15:04:05 GMT"}}, ""},
	}
	check := func(t *testing.T, c request) {
		r := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		for k, v := range c.header {
			r.Header[k] = v
		}
		got, ok := lambdaRequest(r, []byte(c.body))
		ev := EventFromRequest(r, table.Match(r.Method, r.URL.EscapedPath()), []byte(c.body))
		ev.RawPath, ev.RawQueryString = escapeUnsafe(ev.RawPath), escapeUnsafe(ev.RawQueryString)
		if !ok || !readable(ev) {
			t.Fatalf("%s %s: local %v, Lambda %v", c.method, c.target, ok, readable(ev))
		}
		want, err := (&core.RequestAccessorV2{}).EventToRequest(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Host != want.Host || got.RemoteAddr != want.RemoteAddr ||
			got.RequestURI != want.RequestURI || got.Proto != want.Proto || got.ContentLength != want.ContentLength {
			t.Errorf("%s %s:\nlocal  %s %s host %s from %s uri %s %s %d\nLambda %s %s host %s from %s uri %s %s %d", c.method, c.target,
				got.Method, got.URL, got.Host, got.RemoteAddr, got.RequestURI, got.Proto, got.ContentLength,
				want.Method, want.URL, want.Host, want.RemoteAddr, want.RequestURI, want.Proto, want.ContentLength)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Errorf("%s %s: headers\nlocal  %v\nLambda %v", c.method, c.target, got.Header, want.Header)
		}
		gotBody, _ := io.ReadAll(got.Body)
		wantBody, _ := io.ReadAll(want.Body)
		if !bytes.Equal(gotBody, wantBody) {
			t.Errorf("%s %s: body %q, Lambda %q", c.method, c.target, gotBody, wantBody)
		}
	}
	for _, c := range requests {
		check(t, c)
	}
	t.Run("custom host", func(t *testing.T) {
		t.Setenv(core.CustomHostVariable, "http://custom:9")
		for _, c := range requests {
			check(t, c)
		}
	})
}

// The local server hands each request to its route's family, and unknown
// paths to the service family, as API Gateway's $default route does.
func TestLocalRoutesToTheFamily(t *testing.T) {
	var served registry.Family
	family := func(f registry.Family) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served = f
			w.WriteHeader(http.StatusNoContent)
		})
	}
	h := Local(registry.Default().Routes(), map[registry.Family]http.Handler{
		registry.Commerce: family(registry.Commerce), registry.Service: family(registry.Service),
	}, slog.New(slog.DiscardHandler), "")
	for target, want := range map[string]registry.Family{
		"/v1/marketplace_a/search": registry.Commerce,
		"/elsewhere":               registry.Service,
		"/v1/status":               registry.Service,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://h"+target, nil))
		if served != want || rec.Code != http.StatusNoContent {
			t.Errorf("%s: served by %q (%d), want %q", target, served, rec.Code, want)
		}
	}
}
