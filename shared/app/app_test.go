package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/envelope/envelopetest"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/registry"
)

// eventsDir holds the API Gateway HTTP API (payload 2.0) events, one
// directory per family, and expected.json.
const eventsDir = "../../testdata/events"

// expectation is one entry of expected.json.
type expectation struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

func loadExpectations(t *testing.T) map[string]expectation {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(eventsDir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var want map[string]expectation
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	return want
}

// loadEvent decodes an event file strictly, so a misspelt field fails the
// test instead of silently reaching the handler as a zero value.
func loadEvent(t *testing.T, path string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var ev events.APIGatewayV2HTTPRequest
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ev
}

// eventFiles lists family/case -> file for every event under eventsDir.
func eventFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(eventsDir)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, f := range registry.Families {
		known[string(f)] = true
	}
	for _, dir := range entries {
		if !dir.IsDir() {
			continue
		}
		if !known[dir.Name()] {
			t.Errorf("testdata/events/%s is not a family in registry.Families", dir.Name())
			continue
		}
		paths, err := filepath.Glob(filepath.Join(eventsDir, dir.Name(), "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			files[dir.Name()+"/"+strings.TrimSuffix(filepath.Base(p), ".json")] = p
		}
	}
	return files
}

func TestEventFilesMatchExpectations(t *testing.T) {
	want := loadExpectations(t)
	files := eventFiles(t)
	for _, f := range registry.Families {
		n := 0
		for name := range files {
			if strings.HasPrefix(name, string(f)+"/") {
				n++
			}
		}
		if n < 2 {
			t.Errorf("family %s has %d events; want at least 2", f, n)
		}
	}
	for name := range files {
		if _, ok := want[name]; !ok {
			t.Errorf("event %s has no entry in expected.json", name)
		}
	}
	for name := range want {
		if _, ok := files[name]; !ok {
			t.Errorf("expected.json names %s, which has no event file", name)
		}
	}
}

// TestEventShape keeps the events in the shape API Gateway sends and their
// route keys in step with the one route table.
func TestEventShape(t *testing.T) {
	routes := registry.Default().Routes()
	for name, path := range eventFiles(t) {
		ev := loadEvent(t, path)
		family, kase, _ := strings.Cut(name, "/")
		rc := ev.RequestContext
		if ev.Version != "2.0" || rc.Stage != "$default" || ev.IsBase64Encoded {
			t.Errorf("%s: version %q, stage %q, isBase64Encoded %v", name, ev.Version, rc.Stage, ev.IsBase64Encoded)
		}
		if rc.AccountID == "" || rc.APIID == "" || rc.RequestID == "" || rc.Time == "" || rc.TimeEpoch == 0 ||
			rc.HTTP.Protocol == "" || rc.HTTP.SourceIP == "" || rc.HTTP.UserAgent == "" {
			t.Errorf("%s: requestContext is incomplete: %+v", name, rc)
		}
		if rc.DomainName == "" || !strings.HasPrefix(rc.DomainName, rc.DomainPrefix+".") {
			t.Errorf("%s: domainName %q, domainPrefix %q", name, rc.DomainName, rc.DomainPrefix)
		}
		if ev.RawPath != rc.HTTP.Path {
			t.Errorf("%s: rawPath %q but requestContext.http.path %q", name, ev.RawPath, rc.HTTP.Path)
		}
		for _, h := range []string{"host", "user-agent", "x-forwarded-for", "x-forwarded-port", "x-amzn-trace-id"} {
			if ev.Headers[h] == "" {
				t.Errorf("%s: header %s missing", name, h)
			}
		}
		for h := range ev.Headers {
			if h != strings.ToLower(h) {
				t.Errorf("%s: header name %q is not lowercase", name, h)
			}
		}
		if ev.Headers["host"] != rc.DomainName || ev.Headers["x-forwarded-proto"] != "https" || ev.Headers["user-agent"] != rc.HTTP.UserAgent {
			t.Errorf("%s: host/x-forwarded-proto/user-agent headers disagree with requestContext", name)
		}
		if (ev.RawQueryString == "") != (len(ev.QueryStringParameters) == 0) {
			t.Errorf("%s: rawQueryString %q but queryStringParameters %v", name, ev.RawQueryString, ev.QueryStringParameters)
		}
		route := registry.NewRouteTable(routes).Match(rc.HTTP.Method, ev.RawPath)
		wantKey := route.Path
		if route.Path != registry.DefaultRoute {
			wantKey = route.Method + " " + route.Path
		}
		if ev.RouteKey != wantKey || rc.RouteKey != wantKey {
			t.Errorf("%s: routeKey %q / requestContext.routeKey %q; the route table gives %q", name, ev.RouteKey, rc.RouteKey, wantKey)
		}
		// Only the misrouted-* cases deliberately reach a function that does
		// not own their route.
		misrouted := strings.HasPrefix(kase, "misrouted-")
		if owns := string(route.Family) == family; owns == misrouted {
			t.Errorf("%s: route %s is owned by %s (misrouted case: %v)", name, wantKey, route.Family, misrouted)
		}
	}
}

// sentKeys are the key strings an event carries, wherever it put them.
func sentKeys(ev events.APIGatewayV2HTTPRequest) []string {
	var keys []string
	for name, v := range ev.Headers {
		switch strings.ToLower(name) {
		case "x-api-key":
			keys = append(keys, strings.TrimSpace(v))
		case "authorization":
			if _, token, ok := strings.Cut(v, " "); ok {
				keys = append(keys, strings.TrimSpace(token))
			}
		}
	}
	q, _ := url.ParseQuery(ev.RawQueryString)
	keys = append(keys, q["api_key"]...)
	for _, v := range ev.QueryStringParameters {
		if strings.HasPrefix(v, "mn_") {
			keys = append(keys, v)
		}
	}
	var out []string
	for _, k := range keys {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}

// header reads a response header whatever case the adapter gave its name.
func header(resp events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range resp.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	if vs := http.Header(resp.MultiValueHeaders).Values(name); len(vs) > 0 {
		return strings.Join(vs, ",")
	}
	return ""
}

// failureBody is the error envelope of spec 2.2 as a client reads it.
type failureBody struct {
	Success *bool `json:"success"`
	Error   struct {
		Type    string         `json:"type"`
		Message string         `json:"message"`
		Status  int            `json:"status"`
		DocURL  string         `json:"doc_url"`
		Details map[string]any `json:"details"`
	} `json:"error"`
	CreditsUsed json.RawMessage `json:"credits_used"`
	RequestID   string          `json:"request_id"`
}

// checkEnvelope checks the spec 2.2 envelope rules that hold for every
// failure: request_id shape and header, credits 0, doc_url and status.
// It returns the decoded body.
func checkEnvelope(t *testing.T, name string, status int, contentType, requestIDHeader, creditsHeader string, body []byte, docBase string) failureBody {
	t.Helper()
	var f failureBody
	if !strings.HasPrefix(contentType, "application/json") {
		t.Errorf("%s: content-type %q, want application/json", name, contentType)
	}
	if err := json.Unmarshal(body, &f); err != nil {
		t.Errorf("%s: body is not JSON: %v: %.300q", name, err, body)
		return f
	}
	if !envelopetest.RequestID.MatchString(f.RequestID) {
		t.Errorf("%s: request_id %q does not match %s", name, f.RequestID, envelopetest.RequestID)
	}
	if requestIDHeader != f.RequestID {
		t.Errorf("%s: x-request-id %q != body request_id %q", name, requestIDHeader, f.RequestID)
	}
	if f.CreditsUsed == nil {
		t.Errorf("%s: credits_used is absent", name)
	}
	if status >= 400 {
		if f.Success == nil || *f.Success {
			t.Errorf("%s: success is %v on a failure", name, f.Success)
		}
		if string(f.CreditsUsed) != "0" {
			t.Errorf("%s: credits_used %s on a failure, want 0", name, f.CreditsUsed)
		}
		if creditsHeader != "0" {
			t.Errorf("%s: x-credits-used %q on a failure, want 0", name, creditsHeader)
		}
		if f.Error.Status != status {
			t.Errorf("%s: error.status %d, HTTP status %d", name, f.Error.Status, status)
		}
		if f.Error.Type == "" || f.Error.Message == "" {
			t.Errorf("%s: error type %q, message %q", name, f.Error.Type, f.Error.Message)
		}
		anchor := strings.ReplaceAll(strings.ToLower(f.Error.Type), "_", "-")
		if want := docBase + "#" + anchor; f.Error.DocURL != want {
			t.Errorf("%s: doc_url %q, want %q", name, f.Error.DocURL, want)
		}
		if !inRoster(f.Error.Type, status) {
			t.Errorf("%s: %s with status %d is not in the spec part 7 roster", name, f.Error.Type, status)
		}
	}
	return f
}

func inRoster(typ string, status int) bool {
	for _, r := range envelope.Roster {
		if string(r.Type) == typ {
			for _, s := range r.Statuses {
				if s == status {
					return true
				}
			}
		}
	}
	return false
}

// requestLines returns the log lines with msg "request".
func requestLines(t *testing.T, name string, log []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("%s: log line is not JSON: %v: %q", name, err, sc.Text())
			continue
		}
		if line["msg"] == "request" {
			out = append(out, line)
		}
	}
	return out
}

// invokeResult is one Lambda invocation and what it logged.
type invokeResult struct {
	resp events.APIGatewayV2HTTPResponse
	body []byte
	log  []byte
}

func invoke(t *testing.T, name string, family registry.Family, ev events.APIGatewayV2HTTPRequest) invokeResult {
	t.Helper()
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	deps := app.Deps{}
	if family == registry.MCP {
		deps.MCP = mcpserver.NewSurface // as functions/mcp/main.go gives it
	}
	resp, err := app.Function(family, logger, deps)(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s: the handler returned an error (API Gateway would answer an untyped 500): %v", name, err)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			t.Fatalf("%s: base64 body: %v", name, err)
		}
	}
	return invokeResult{resp: resp, body: body, log: logBuf.Bytes()}
}

// checkLog: exactly one "request" line carrying the response's request id,
// and none of the keys the caller sent anywhere in the log.
func checkLog(t *testing.T, name string, r invokeResult, keys []string) {
	t.Helper()
	id := header(r.resp, "x-request-id")
	lines := requestLines(t, name, r.log)
	if len(lines) != 1 {
		t.Errorf("%s: %d log lines with msg \"request\", want 1:\n%s", name, len(lines), r.log)
	} else {
		if lines[0]["request_id"] != id {
			t.Errorf("%s: request log line has request_id %v, response has %q", name, lines[0]["request_id"], id)
		}
		if status, _ := lines[0]["status"].(float64); int(status) != r.resp.StatusCode {
			t.Errorf("%s: request log line has status %v, response %d", name, lines[0]["status"], r.resp.StatusCode)
		}
	}
	for _, k := range keys {
		if bytes.Contains(r.log, []byte(k)) {
			t.Errorf("%s: the log contains the API key that was sent:\n%s", name, r.log)
		}
	}
}

func TestFunctionEvents(t *testing.T) {
	t.Setenv(app.EnvErrorsURL, "") // doc_url then derives from the event's domain
	want := loadExpectations(t)
	files := eventFiles(t)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			exp, ok := want[name]
			if !ok {
				t.Fatalf("%s has no entry in expected.json", name)
			}
			ev := loadEvent(t, files[name])
			family, _, _ := strings.Cut(name, "/")
			r := invoke(t, name, registry.Family(family), ev)
			if r.resp.StatusCode != exp.Status {
				t.Errorf("status %d, want %d; body %s", r.resp.StatusCode, exp.Status, r.body)
			}
			checkLog(t, name, r, sentKeys(ev))
			ct := header(r.resp, "content-type")
			if exp.Type == "" && exp.Status == http.StatusOK && !strings.HasPrefix(ev.RawPath, "/v1") {
				// Documents outside /v1: the errors reference and the OpenAPI description.
				if strings.HasPrefix(ct, "text/html") && !bytes.Contains(r.body, []byte(`id="endpoint-not-found"`)) {
					t.Errorf("errors reference lacks the endpoint-not-found anchor")
				}
				if strings.HasPrefix(ev.RawPath, "/openapi") && !bytes.Contains(r.body, []byte("3.1.0")) {
					t.Errorf("not an OpenAPI 3.1 document: %.100s", r.body)
				}
				if !envelopetest.RequestID.MatchString(header(r.resp, "x-request-id")) {
					t.Errorf("x-request-id %q", header(r.resp, "x-request-id"))
				}
				return
			}
			docBase := "https://" + ev.RequestContext.DomainName + "/docs/errors"
			f := checkEnvelope(t, name, r.resp.StatusCode, ct, header(r.resp, "x-request-id"), header(r.resp, "x-credits-used"), r.body, docBase)
			if f.Error.Type != exp.Type {
				t.Errorf("error.type %q, want %q", f.Error.Type, exp.Type)
			}
			reason, _ := f.Error.Details["reason"].(string)
			if reason != exp.Reason {
				t.Errorf("details.reason %q, want %q (details %v)", reason, exp.Reason, f.Error.Details)
			}
			for _, k := range sentKeys(ev) {
				if bytes.Contains(r.body, []byte(k)) {
					t.Errorf("the response echoes the API key that was sent: %s", r.body)
				}
			}
			switch reason {
			case "method_not_allowed":
				if header(r.resp, "allow") == "" {
					t.Errorf("method_not_allowed without an allow header")
				}
			case "endpoint_removed":
				if s, _ := f.Error.Details["successor"].(string); !strings.HasPrefix(s, "/v1/") {
					t.Errorf("410 without a successor path: %v", f.Error.Details)
				}
			}
		})
	}
}

// TestFunctionUnsafeEventBytes sends events API Gateway could deliver but
// net/url refuses (raw controls, spaces, DEL, bad escapes, invalid UTF-8):
// each must be a typed 4xx envelope, never a Lambda error or a 5xx.
func TestFunctionUnsafeEventBytes(t *testing.T) {
	t.Setenv(app.EnvErrorsURL, "")
	key := "mn_" + strings.Repeat("u", 43)
	cases := []struct {
		name, method, path, query string
		family                    registry.Family
		key                       bool
	}{
		{"space in path", "GET", "/v1/marketplace_a/sea rch", "", registry.Commerce, false},
		{"NUL in path", "GET", "/v1/marketplace_a/se\x00arch", "query=x", registry.Commerce, true},
		{"controls in path", "GET", "/v1/marketplace_a/\x01\x1f\x7f", "", registry.Commerce, false},
		{"newline in path", "GET", "/v1/marketplace_a/search\r\nx-injected: 1", "", registry.Commerce, false},
		{"space in query", "GET", "/v1/marketplace_a/search", "query=wireless headphones", registry.Commerce, false},
		{"controls in query", "GET", "/v1/marketplace_a/search", "query=a\x00b\x1b[31m&page=\t2", registry.Commerce, true},
		{"CRLF in query", "GET", "/v1/marketplace_a/search", "query=x\r\nx-injected: 1", registry.Commerce, false},
		{"bad escape in path", "GET", "/v1/marketplace_a/%zz", "", registry.Commerce, false},
		{"bad escape in query", "GET", "/v1/marketplace_a/search", "query=%zz", registry.Commerce, true},
		{"invalid UTF-8 in path", "GET", "/v1/marketplace_a/\xff\xfe", "", registry.Commerce, false},
		{"invalid UTF-8 in query", "GET", "/v1/marketplace_a/search", "query=\xff\xfe", registry.Commerce, true},
		{"space in platform", "GET", "/v1/micro blog_b/profile", "handle=x", registry.Service, false},
		{"fragment in path", "GET", "/v1/marketplace_a/search#frag", "", registry.Commerce, false},
		{"control in sandbox path", "GET", "/sandbox/marketplace_a/\x00", "", registry.Sandbox, false},
		{"space in docs path", "GET", "/docs/errors ", "", registry.Service, false},
		{"empty path", "GET", "", "", registry.Service, false},
		{"empty method", "", "/v1", "", registry.Service, false},
		{"lowercase method with space", "get x", "/v1", "", registry.Service, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := events.APIGatewayV2HTTPRequest{
				Version:        "2.0",
				RouteKey:       "$default",
				RawPath:        tc.path,
				RawQueryString: tc.query,
				Headers: map[string]string{
					"host": "a1b2c3d4e5.execute-api.eu-west-2.amazonaws.com", "x-forwarded-proto": "https",
					"x-forwarded-port": "443", "x-forwarded-for": "203.0.113.9", "user-agent": "fuzz/1.0",
				},
				RequestContext: events.APIGatewayV2HTTPRequestContext{
					AccountID: "123456789012", APIID: "a1b2c3d4e5", Stage: "$default", RouteKey: "$default",
					RequestID:  "Qx1AbCdEfGhIjA=",
					DomainName: "a1b2c3d4e5.execute-api.eu-west-2.amazonaws.com", DomainPrefix: "a1b2c3d4e5",
					HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
						Method: tc.method, Path: tc.path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9", UserAgent: "fuzz/1.0",
					},
				},
			}
			if tc.key {
				ev.Headers["x-api-key"] = key
			}
			r := invoke(t, tc.name, tc.family, ev)
			if r.resp.StatusCode < 400 || r.resp.StatusCode > 499 {
				t.Errorf("status %d, want a 4xx; body %s", r.resp.StatusCode, r.body)
			}
			f := checkEnvelope(t, tc.name, r.resp.StatusCode, header(r.resp, "content-type"), header(r.resp, "x-request-id"),
				header(r.resp, "x-credits-used"), r.body, "https://a1b2c3d4e5.execute-api.eu-west-2.amazonaws.com/docs/errors")
			if f.Error.Type == "" {
				t.Errorf("untyped failure: %s", r.body)
			}
			checkLog(t, tc.name, r, []string{key})
			if bytes.Contains(r.body, []byte(key)) {
				t.Errorf("the response echoes a key: %s", r.body)
			}
		})
	}
}
