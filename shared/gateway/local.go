package gateway

import (
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
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
// handler. A handler made by Lambda writes to the client as it goes, with
// the head a function URL would send (stream.go), so make run streams;
// any other handler's response event is written whole. When the client
// goes, net/http cancels the request's context, which the handler's
// derives from. errorsURL is the configured errors reference, or "" for
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
		ctx, slot := offerStream(r.Context(), w)
		resp, err := fn(ctx, EventFromRequest(r, route, body))
		if slot.served {
			return // answered on w; a wrapper's later error cannot change it
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
	headers := make(map[string]string, len(r.Header)+3)
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
		query = make(map[string]string, len(q))
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
			DomainPrefix: domainPrefix(r.Host),
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

// domainPrefix is the first label of host, as API Gateway reports it.
func domainPrefix(host string) string {
	prefix, _, _ := strings.Cut(host, ".")
	return prefix
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
