package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// MaxEventBody is Lambda's synchronous payload limit; API Gateway refuses
// larger bodies before they reach a function, and so does the local server.
const MaxEventBody = 6 << 20

// Local serves every family in one process: each request is matched
// against the registry's route table as API Gateway would and handed to
// that family's handler as the request Lambda's handler builds from the
// event API Gateway sends (lambdaRequest: the same headers, host, address
// and URL, under API Gateway's 28-second budget). The answer is written
// as it comes with the head a function URL would send (serveDirect), so
// make run streams. When the client goes, net/http cancels the request's
// context, which the handler's derives from. errorsURL is the configured
// errors reference, or "" for this server's own.
func Local(routes []registry.Route, handlers map[registry.Family]http.Handler, logger *slog.Logger, errorsURL string) http.Handler {
	table := registry.NewRouteTable(routes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := table.Match(r.Method, r.URL.EscapedPath())
		h, ok := handlers[route.Family]
		if !ok {
			h = handlers[registry.Service]
		}
		var body []byte // none to read for most requests: no buffer for them
		if r.Body != http.NoBody {
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, MaxEventBody+1))
			if err != nil || len(body) > MaxEventBody {
				refuseBody(w, r, err, logger, errorsURL)
				return
			}
		}
		req, ok := lambdaRequest(r, body)
		if !ok {
			writeEvent(w, unreadable(logger, errorsURL, EventFromRequest(r, route, body)))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), APIGatewayBudget)
		reference := errorsURL
		if reference == "" {
			reference = envelope.ErrorsReference("http", r.Host)
		}
		s := streamedResponse{handler: h, logger: logger, errorsURL: reference}
		s.serveDirect(w, req.WithContext(ctx), cancel, func() {})
	})
}

// singletonHeaders are the headers api-proxy passes on whole; it splits
// every other header's value at its commas (core.splitSingletonHeaders).
var singletonHeaders = map[string]bool{
	"Content-Type": true, "Content-Disposition": true, "Content-Length": true, "User-Agent": true,
	"Referer": true, "Host": true, "Authorization": true, "Proxy-Authorization": true,
	"If-Modified-Since": true, "If-Unmodified-Since": true, "From": true, "Location": true,
	"Max-Forwards": true,
}

// lambdaRequest is the request a family's handler gets in Lambda for r:
// what api-proxy builds from the event EventFromRequest describes, after
// the checks gateway.Lambda makes (false: the event is unreadable, a
// typed 400). It is built directly, without the event in between, which
// was a sixth of the local server's work; TestLocalRequestIsLambdas holds
// it to api-proxy's conversion of that event.
func lambdaRequest(r *http.Request, body []byte) (*http.Request, bool) {
	ev := events.APIGatewayV2HTTPRequest{
		RawPath:        escapeUnsafe(r.URL.EscapedPath()),
		RawQueryString: escapeUnsafe(r.URL.RawQuery),
		RequestContext: events.APIGatewayV2HTTPRequestContext{DomainName: r.Host,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method}},
	}
	if !readable(ev) {
		return nil, false
	}
	server := "https://" + r.Host
	if custom, ok := os.LookupEnv(core.CustomHostVariable); ok {
		server = custom
	}
	target := server + ev.RawPath
	if !strings.HasPrefix(ev.RawPath, "/") {
		target = server + "/" + ev.RawPath
	}
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	req, err := http.NewRequest(strings.ToUpper(r.Method), target, bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	sourceIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	req.RemoteAddr = sourceIP
	for _, c := range r.Header.Values("Cookie") {
		req.Header.Add("Cookie", c)
	}
	add := func(name, value string) { // name in canonical form
		if singletonHeaders[name] {
			req.Header.Add(name, value)
			return
		}
		if !strings.Contains(value, ",") {
			req.Header.Add(name, strings.Trim(value, " ")) // one piece: no slice to split into
			return
		}
		for _, v := range strings.Split(value, ",") {
			req.Header.Add(name, strings.Trim(v, " "))
		}
	}
	for name, values := range r.Header {
		switch name = textproto.CanonicalMIMEHeaderKey(name); name {
		case "Cookie", "Host", "X-Forwarded-For", "X-Forwarded-Proto":
			continue // cookies apart; the others are API Gateway's own
		}
		add(name, strings.Join(values, ","))
	}
	add("Host", r.Host)
	add("X-Forwarded-For", sourceIP)
	add("X-Forwarded-Proto", "http")
	req.RequestURI = req.URL.RequestURI()
	return req, true
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
