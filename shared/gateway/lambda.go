// Package gateway adapts the pipeline to API Gateway HTTP API (payload
// v2) events in Lambda, and serves it locally with the requests and
// answers Lambda would give it, so local behaviour is Lambda behaviour:
// buffered through API Gateway, streamed through a function URL and the
// local server.
package gateway

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/meridian-data/meridian/shared/envelope"
)

// APIGatewayBudget is how long a call reached through API Gateway may run:
// under its 30-second integration timeout, with room to answer.
const APIGatewayBudget = 28 * time.Second

// EventHandler is a Lambda handler for API Gateway v2 events.
type EventHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Lambda wraps h with aws-lambda-go-api-proxy. Bytes that net/url refuses
// (controls, spaces) are percent-encoded first so the pipeline, not the
// adapter, decides what they mean; an event that still cannot become a
// request gets a typed 400 instead of a Lambda error (which API Gateway
// would turn into an untyped 500). When the caller offered a stream slot
// (FunctionURLAware) the same request is answered streamed (stream.go)
// and the returned event is empty.
func Lambda(h http.Handler, logger *slog.Logger, errorsURL string) EventHandler {
	adapter := httpadapter.NewV2(h)
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if ev.RawPath == "" {
			ev.RawPath = ev.RequestContext.HTTP.Path // as the adapter itself falls back
		}
		ev.RawPath = escapeUnsafe(ev.RawPath)
		ev.RequestContext.HTTP.Path = escapeUnsafe(ev.RequestContext.HTTP.Path)
		ev.RawQueryString = escapeUnsafe(ev.RawQueryString)
		if !readable(ev) {
			return unreadable(logger, errorsURL, ev), nil
		}
		var cancel context.CancelFunc
		if fromFunctionURL(ev) {
			ctx, cancel = context.WithCancel(ctx)
		} else {
			// API Gateway answers the caller 503 after 30 s whatever the
			// function does: end the call before that, so a call the
			// caller saw fail is refunded, never settled behind its back.
			ctx, cancel = context.WithTimeout(ctx, APIGatewayBudget)
		}
		if slot := takeStreamSlot(ctx); slot != nil {
			// The same conversion the buffered adapter makes.
			req, err := adapter.EventToRequestWithContext(ctx, ev)
			if err != nil {
				cancel()
				return unreadable(logger, errorsURL, ev), nil
			}
			s := streamedResponse{handler: h, logger: logger, errorsURL: errorsReference(errorsURL, ev)}
			slot.resp = s.start(req, cancel, holdInvocation(ctx))
			return events.APIGatewayV2HTTPResponse{}, nil
		}
		defer cancel()
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil {
			return unreadable(logger, errorsURL, ev), nil
		}
		return resp, nil
	}
}

// methodPattern is an HTTP method token (RFC 9110).
var methodPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}$")

// readable checks what the adapter would otherwise fail on (and log as
// plain text): the method, the URL and a base64 body.
func readable(ev events.APIGatewayV2HTTPRequest) bool {
	if !methodPattern.MatchString(ev.RequestContext.HTTP.Method) {
		return false
	}
	if _, err := url.Parse("https://" + ev.RequestContext.DomainName + ev.RawPath + "?" + ev.RawQueryString); err != nil {
		return false
	}
	if ev.IsBase64Encoded {
		if _, err := base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return false
		}
	}
	return true
}

// escapeUnsafe percent-encodes control bytes, spaces and DEL.
func escapeUnsafe(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == 0x7f {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// errorsReference is the configured errors reference, or the /docs/errors
// page of the deployment the event reached.
func errorsReference(errorsURL string, ev events.APIGatewayV2HTTPRequest) string {
	if errorsURL != "" {
		return errorsURL
	}
	proto := "https"
	if ev.Headers["x-forwarded-proto"] == "http" {
		proto = "http"
	}
	return envelope.ErrorsReference(proto, ev.RequestContext.DomainName)
}

func unreadable(logger *slog.Logger, errorsURL string, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	resp, id := typedResponse(envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
		"The request could not be read.", map[string]any{"reason": "malformed_request"}), errorsReference(errorsURL, ev))
	if logger != nil {
		logger.Info("request", "request_id", id, "status", resp.StatusCode, "error_type", string(envelope.InvalidParameters))
	}
	return resp
}

// typedResponse is an error envelope answered before the pipeline runs.
func typedResponse(e *envelope.Error, errorsURL string) (events.APIGatewayV2HTTPResponse, string) {
	id := envelope.NewRequestID()
	body, _ := envelope.Marshal(envelope.NewFailure(e, id, errorsURL))
	return events.APIGatewayV2HTTPResponse{
		StatusCode: e.Status,
		Headers:    map[string]string{"content-type": "application/json", "x-request-id": id, "x-credits-used": "0"},
		Body:       string(body),
	}, id
}
