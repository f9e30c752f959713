package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// FunctionURLAware answers API Gateway HTTP API events as h does, and a
// Lambda function URL invocation (the search and mcp functions' URLs, in
// RESPONSE_STREAM mode; infra) as a streamed response, which is what such
// a URL expects. Both carry the same payload v2 request.
func FunctionURLAware(h EventHandler) func(context.Context, events.APIGatewayV2HTTPRequest) (any, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (any, error) {
		resp, err := h(ctx, ev)
		if err != nil || !fromFunctionURL(ev) {
			return resp, err
		}
		body := []byte(resp.Body)
		if resp.IsBase64Encoded {
			if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
				return nil, err
			}
		}
		headers := map[string]string{}
		for k, v := range resp.Headers {
			headers[k] = v
		}
		for k, vs := range resp.MultiValueHeaders {
			headers[k] = strings.Join(vs, ",")
		}
		return &events.LambdaFunctionURLStreamingResponse{
			StatusCode: resp.StatusCode, Headers: headers, Body: bytes.NewReader(body), Cookies: resp.Cookies,
		}, nil
	}
}

// fromFunctionURL: function URLs are reached at <id>.lambda-url.<region>.on.aws.
func fromFunctionURL(ev events.APIGatewayV2HTTPRequest) bool {
	return strings.Contains(ev.RequestContext.DomainName, ".lambda-url.")
}
