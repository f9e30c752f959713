package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/gateway"
)

func TestFunctionURLAnswersStream(t *testing.T) {
	h := gateway.FunctionURLAware(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 401, Headers: map[string]string{"content-type": "application/json"},
			MultiValueHeaders: map[string][]string{"vary": {"a", "b"}}, Body: `{"success":false}`}, nil
	})
	viaAPI := events.APIGatewayV2HTTPRequest{}
	viaAPI.RequestContext.DomainName = "a1b2c3d4e5.execute-api.eu-west-2.amazonaws.com"
	if out, _ := h(context.Background(), viaAPI); out.(events.APIGatewayV2HTTPResponse).StatusCode != 401 {
		t.Fatalf("API Gateway gets its buffered response: %#v", out)
	}
	viaURL := events.APIGatewayV2HTTPRequest{}
	viaURL.RequestContext.DomainName = "abcdefghij.lambda-url.eu-west-2.on.aws"
	out, err := h(context.Background(), viaURL)
	stream, ok := out.(*events.LambdaFunctionURLStreamingResponse)
	if err != nil || !ok || stream.StatusCode != 401 || stream.Headers["vary"] != "a,b" {
		t.Fatalf("%#v %v", out, err)
	}
	raw, _ := io.ReadAll(stream)
	if !strings.HasSuffix(string(raw), `{"success":false}`) || !strings.Contains(string(raw), `"statusCode":401`) {
		t.Fatalf("stream: %q", raw)
	}
}

// A call through API Gateway must end before its 30-second integration
// timeout; a function URL call has no such limit.
func TestAPIGatewayCallsEndBeforeItsTimeout(t *testing.T) {
	var deadline time.Time
	var has bool
	h := gateway.Lambda(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deadline, has = r.Context().Deadline()
	}), slog.New(slog.DiscardHandler), "")
	ev := events.APIGatewayV2HTTPRequest{RawPath: "/v1", RouteKey: "$default"}
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = "GET", "/v1"
	ev.RequestContext.DomainName = "a1b2c3d4e5.execute-api.eu-west-2.amazonaws.com"
	if _, err := h(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if !has || time.Until(deadline) > gateway.APIGatewayBudget || time.Until(deadline) < gateway.APIGatewayBudget-5*time.Second {
		t.Fatalf("deadline in %v; want about %v", time.Until(deadline), gateway.APIGatewayBudget)
	}
	ev.RequestContext.DomainName = "abcdefghij.lambda-url.eu-west-2.on.aws"
	if _, err := h(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if has {
		t.Fatalf("a function URL call got a deadline in %v", time.Until(deadline))
	}
}
