package gateway

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// FunctionURLAware answers API Gateway HTTP API events as h does
// (buffered), and a Lambda function URL invocation (the search and mcp
// functions' URLs, in RESPONSE_STREAM mode; infra) with a streamed
// response, which is what such a URL expects. Both carry the same payload
// v2 request. A handler made by Lambda streams for real: the head goes
// out as soon as the status is known and every write follows as it
// happens (stream.go); any other handler's buffered response is sent as
// one stream.
//
// The Lambda Go runtime reads the Body until EOF and then closes it,
// which cancels the handler's context. A caller that disconnects is seen
// only if the Runtime API then stops taking the body: the read ends, the
// close cancels the handler and its later writes fail. While the Runtime
// API keeps taking it, the handler runs to its end (its own timeouts, then
// the function's) with what it writes discarded.
func FunctionURLAware(h EventHandler) func(context.Context, events.APIGatewayV2HTTPRequest) (any, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (any, error) {
		if !fromFunctionURL(ev) {
			return h(ctx, ev)
		}
		ctx, slot := offerStream(ctx)
		resp, err := h(ctx, ev)
		if slot.resp != nil {
			if err != nil { // a wrapper failed after the stream began
				_ = slot.resp.Close()
				return nil, err
			}
			return slot.resp, nil
		}
		if err != nil {
			return resp, err
		}
		stream, err := bufferedStream(resp)
		if err != nil {
			return nil, err
		}
		return stream, nil
	}
}

// fromFunctionURL: function URLs are reached at <id>.lambda-url.<region>.on.aws.
func fromFunctionURL(ev events.APIGatewayV2HTTPRequest) bool {
	return strings.Contains(ev.RequestContext.DomainName, ".lambda-url.")
}
