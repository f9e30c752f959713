package gateway

import (
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// MaxEventBody is Lambda's synchronous payload limit; API Gateway refuses
// larger bodies before they reach a function, and so does the local server.
const MaxEventBody = 6 << 20

// Local serves every family in one process: each request is matched
// against the registry's route table as API Gateway would, turned into
// the v2 event API Gateway would send, and handed to that family's Lambda
// handler. A handler made by Lambda answers through the streaming
// adaptation a function URL uses (stream.go), copied to the client as it
// comes, so make run streams; any other handler's response event is
// written whole. errorsURL is the configured errors reference, or "" for
// this server's own.
func Local(routes []registry.Route, functions map[registry.Family]EventHandler, logger *slog.Logger, errorsURL string) http.Handler {
	table := registry.NewRouteTable(routes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := table.Match(r.Method, r.URL.EscapedPath())
		fn, ok := functions[route.Family]
		if !ok {
			fn = functions[registry.Service]
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxEventBody+1))
		if err != nil || len(body) > MaxEventBody {
			refuseBody(w, r, err, logger, errorsURL)
			return
		}
		ctx, slot := offerStream(r.Context())
		resp, err := fn(ctx, EventFromRequest(r, route, body))
		if slot.resp != nil {
			if err == nil {
				writeStream(w, slot.resp)
				return
			}
			_ = slot.resp.Close() // a wrapper failed after the stream began
		}
		if err != nil {
			http.Error(w, "function error", http.StatusBadGateway) // as API Gateway answers a failed invoke
			return
		}
		writeEvent(w, resp)
	})
}

// EventFromRequest builds the API Gateway HTTP API payload v2 event for r.
func EventFromRequest(r *http.Request, route registry.Route, body []byte) events.APIGatewayV2HTTPRequest {
	now := time.Now()
	sourceIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	headers := map[string]string{}
	for name, values := range r.Header {
		if strings.EqualFold(name, "cookie") {
			continue
		}
		headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	headers["host"] = r.Host
	headers["x-forwarded-for"] = sourceIP
	headers["x-forwarded-proto"] = "http"
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = map[string]string{}
		for k, v := range q {
			query[k] = strings.Join(v, ",")
		}
	}
	routeKey := route.Path
	if route.Path != registry.DefaultRoute {
		routeKey = route.Method + " " + route.Path
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               r.Header.Values("cookie"),
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    "local",
			Stage:        "$default",
			RequestID:    strconv.FormatInt(now.UnixNano(), 36),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.EscapedPath(),
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	return ev
}

func writeEvent(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	for name, value := range resp.Headers {
		w.Header().Set(name, value)
	}
	for name, values := range resp.MultiValueHeaders {
		w.Header()[http.CanonicalHeaderKey(name)] = values
	}
	for _, c := range resp.Cookies {
		w.Header().Add("set-cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if decoded, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			body = decoded
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// copyBuffers hold writeStream's buffers: allocating 32 KiB for every
// response, most of them a few KiB, was a tenth of the local server's
// allocation work.
var copyBuffers = sync.Pool{New: func() any {
	buf := make([]byte, 32<<10)
	return &buf
}}

// writeStream copies a streamed response to the client as it comes. An
// event stream is flushed after every piece, so each server-sent event
// reaches the client when the handler writes it; other responses are
// written as they come and net/http sends them when its buffer fills or
// they end (a short answer keeps its content-length, as through API
// Gateway). When the client goes, net/http cancels the request's context,
// which the handler's derives from; the rest of the body is drained, not
// written. A body that ends in an error (the handler panicked) aborts the
// response, so the client sees it cut short rather than complete.
func writeStream(w http.ResponseWriter, resp *events.LambdaFunctionURLStreamingResponse) {
	defer resp.Close()
	for name, value := range resp.Headers {
		w.Header().Set(name, value)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("set-cookie", c)
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK // as the Lambda runtime defaults it
	}
	w.WriteHeader(status)
	if resp.Body == nil {
		return
	}
	rc := http.NewResponseController(w)
	eventStream := strings.HasPrefix(strings.ToLower(w.Header().Get("content-type")), "text/event-stream")
	if eventStream {
		_ = rc.Flush() // the client sees the stream open before its first event
	}
	bufp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bufp)
	buf := *bufp
	discard := false
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && !discard {
			if _, werr := w.Write(buf[:n]); werr != nil {
				discard = true
			} else if eventStream && rc.Flush() != nil {
				discard = true
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// refuseBody answers a body that is too large (as API Gateway would) or
// could not be read, before any function runs.
func refuseBody(w http.ResponseWriter, r *http.Request, readErr error, logger *slog.Logger, errorsURL string) {
	e := envelope.New(envelope.InvalidParameters, http.StatusRequestEntityTooLarge,
		"The request body is larger than "+strconv.Itoa(MaxEventBody)+" bytes.",
		map[string]any{"reason": "body_too_large", "max_bytes": MaxEventBody})
	if readErr != nil {
		e = envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"The request body could not be read.", map[string]any{"reason": "malformed_request"})
	}
	if errorsURL == "" {
		errorsURL = envelope.ErrorsReference("http", r.Host)
	}
	resp, id := typedResponse(e, errorsURL)
	logger.Info("request", "request_id", id, "method", auth.ForLog(r.Method, 16), "path", auth.ForLog(r.URL.EscapedPath(), 256), "status", e.Status, "error_type", string(e.Type))
	writeEvent(w, resp)
}
