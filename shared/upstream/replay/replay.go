// Package replay is the replay upstream: an HTTP server that answers
// provider requests from recorded or documented payloads under
// testdata/upstream/<provider>/, with fault injection. Tests run every
// adapter against it, and MERIDIAN_UPSTREAM=replay points the local server
// at it so that every wired route answers offline.
//
// A fixture is one JSON file:
//
//	{
//	  "match":    {"method": "GET", "path": "/users/*", "query": {"q": "golang", "cursor": "*"},
//	               "body": {"url": "https://shop.example/p/*", "geolocation": "GB"},
//	               "body_contains": ["needle"]},
//	  "default":  false,
//	  "response": {"status": 200, "headers": {"retry-after": "3"}, "body": {...}, "delay_ms": 0},
//	  "fault":    ""
//	}
//
// match.path is a path.Match pattern relative to the provider's base URL;
// match.query values must equal the request's ("*": present with any
// value). match.body constrains top-level fields of a JSON object request
// body (services such as Zyte API take their parameters there): a string
// is a path.Match pattern the field's string value must match ("*":
// present with any value), any other JSON value must equal the field's.
// match.body_contains lists strings that must each occur in the raw request
// body as sent, whatever its format (a prompt nested deep in a model
// request, say; inside JSON, write the text as the JSON encoding has it).
// The most specific matching fixture answers (the most query, body and
// body_contains constraints, each string counting as one, then a literal
// path, then file order); a request no fixture matches gets the provider's
// default fixture for that path ("default": true), so any valid request is
// answered. response.body is JSON;
// response.body_text is sent verbatim instead (malformed bodies). fault injects a transport failure:
// "reset" closes the connection without an answer, "truncate" sends half
// of the body after announcing all of it. InjectChaos adds such faults
// (and 5xx, 429 and timeouts) at random to a share of all answers.
//
// Recorder writes fixtures from real traffic (scripts/canary.sh -record
// DIR): an http.RoundTripper in front of the routes' transport, it learns
// each request's provider and base URL from upstream.RouteOf and writes the
// answer to DIR/<provider>/rec-<method>-<path>-<hash of match>.json, so
// recording the same request again overwrites the same file and git diff
// shows what the source changed. Nothing is written before Sanitizer has
// removed every configured secret (raw, URL-encoded, JSON-escaped, HTML-
// escaped, base64), request headers, cookies, credential-named parameters
// and fields, and the signing parameters of URLs inside bodies; a file
// that would still hold a secret is not written at all.
package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultDir is where the fixtures live, relative to the repository root.
const DefaultDir = "testdata/upstream"

// maxRecorded bounds the requests kept for inspection.
const maxRecorded = 10_000

// maxRequestBody bounds the request body read for matching and recording.
const maxRequestBody = 1 << 20

// Fixture is one recorded or documented upstream exchange.
type Fixture struct {
	Match struct {
		Method string            `json:"method"`
		Path   string            `json:"path"`
		Query  map[string]string `json:"query"`
		// Body constrains top-level fields of a JSON request body.
		Body map[string]json.RawMessage `json:"body"`
		// BodyContains are strings the raw request body must contain.
		BodyContains []string `json:"body_contains"`
	} `json:"match"`
	Default  bool `json:"default"`
	Response struct {
		Status   int               `json:"status"`
		Headers  map[string]string `json:"headers"`
		Body     json.RawMessage   `json:"body"`
		BodyText *string           `json:"body_text"`
		DelayMS  int               `json:"delay_ms"`
	} `json:"response"`
	Fault string `json:"fault"`

	file string
}

// Request is a request the server received, for tests to inspect.
type Request struct {
	Provider string
	Method   string
	Path     string
	Query    map[string][]string
	Header   http.Header
	Body     []byte
	Fixture  string // the file that answered; "" when none did
}

// Server serves fixtures by provider.
type Server struct {
	mu        sync.Mutex
	providers map[string][]*Fixture
	requests  []Request
	chaos     *Chaos
	injected  map[string]int64
}

// Chaos injects faults into a share of the answers that fixtures would
// give, at random (the soak suite): each field is the probability of its
// fault for one request.
type Chaos struct {
	ServerError float64 // 500 with a JSON error body
	RateLimited float64 // 429 with a JSON error body and retry-after: 1
	Timeout     float64 // no answer for TimeoutDelay (or until the caller gives up), then the fixture's
	Reset       float64 // the connection reset before any answer
	Truncate    float64 // half of the fixture's body after announcing all of it
	// TimeoutDelay is how long a timeout holds the answer back.
	TimeoutDelay time.Duration
}

// Chaos fault kinds, as Injected counts them.
const (
	ChaosServerError = "upstream: 5xx"
	ChaosRateLimited = "upstream: 429"
	ChaosTimeout     = "upstream: timeout"
	ChaosReset       = "upstream: reset"
	ChaosTruncate    = "upstream: truncated body"
)

// InjectChaos turns random faults on (nil turns them off).
func (s *Server) InjectChaos(c *Chaos) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chaos = c
}

// Injected counts the faults injected so far, by kind.
func (s *Server) Injected() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.injected))
	for k, v := range s.injected {
		out[k] = v
	}
	return out
}

// roll picks this request's fault under the chaos settings: "" for none.
func (s *Server) roll() (string, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chaos
	if c == nil {
		return "", 0
	}
	x := rand.Float64()
	for _, f := range []struct {
		p    float64
		kind string
	}{{c.ServerError, ChaosServerError}, {c.RateLimited, ChaosRateLimited}, {c.Timeout, ChaosTimeout},
		{c.Reset, ChaosReset}, {c.Truncate, ChaosTruncate}} {
		if x < f.p {
			if s.injected == nil {
				s.injected = map[string]int64{}
			}
			s.injected[f.kind]++
			return f.kind, c.TimeoutDelay
		}
		x -= f.p
	}
	return "", 0
}

// Load reads dir/<provider>/*.json.
func Load(dir string) (*Server, error) {
	s := &Server{providers: map[string][]*Fixture{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range entries {
		if !d.IsDir() {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, d.Name(), "*.json"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			var fx Fixture
			if err := json.Unmarshal(raw, &fx); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if err := s.Add(d.Name(), filepath.Base(f), fx); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return s, nil
}

// New is an empty server; tests add fixtures with Add.
func New() *Server { return &Server{providers: map[string][]*Fixture{}} }

// Add registers a fixture for provider under a name (its file name).
func (s *Server) Add(provider, name string, fx Fixture) error {
	if fx.Match.Path == "" {
		return fmt.Errorf("fixture %s has no match.path", name)
	}
	if _, err := path.Match(fx.Match.Path, "/"); err != nil {
		return fmt.Errorf("fixture %s: bad match.path: %w", name, err)
	}
	for field, want := range fx.Match.Body {
		if !json.Valid(want) {
			return fmt.Errorf("fixture %s: match.body.%s is not JSON", name, field)
		}
		if pattern, ok := bodyPattern(want); ok {
			if _, err := path.Match(pattern, ""); err != nil {
				return fmt.Errorf("fixture %s: bad match.body.%s pattern: %w", name, field, err)
			}
		}
	}
	for _, needle := range fx.Match.BodyContains {
		if needle == "" {
			// It would match every request while counting as a constraint.
			return fmt.Errorf("fixture %s: match.body_contains has an empty string", name)
		}
	}
	if fx.Fault != "" && fx.Fault != "reset" && fx.Fault != "truncate" {
		return fmt.Errorf("fixture %s: unknown fault %q", name, fx.Fault)
	}
	if fx.Fault == "truncate" && len(fx.Response.Body) < 2 && (fx.Response.BodyText == nil || len(*fx.Response.BodyText) < 2) {
		return fmt.Errorf("fixture %s: truncate needs a body of at least 2 bytes to cut", name)
	}
	if fx.Match.Method == "" {
		fx.Match.Method = http.MethodGet
	}
	if fx.Response.Status == 0 {
		fx.Response.Status = http.StatusOK
	}
	fx.file = name
	s.mu.Lock()
	defer s.mu.Unlock()
	s.providers[provider] = append(s.providers[provider], &fx)
	return nil
}

// Providers lists the providers that have fixtures.
func (s *Server) Providers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.providers))
	for n := range s.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Requests returns what the server has received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// find picks the fixture that answers a request, or nil.
func (s *Server) find(provider string, r *http.Request, rest string, body []byte) *Fixture {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best, fallback *Fixture
	q := r.URL.Query()
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(body, &fields) // not a JSON object: only fixtures without body constraints match
	for _, fx := range s.providers[provider] {
		if fx.Match.Method != r.Method {
			continue
		}
		if ok, _ := path.Match(fx.Match.Path, rest); !ok {
			continue
		}
		if fx.Default {
			if fallback == nil {
				fallback = fx
			}
			continue
		}
		if queryMatches(fx.Match.Query, q) && bodyMatches(fx.Match.Body, fields) && bodyContains(fx.Match.BodyContains, body) &&
			(best == nil || moreSpecific(fx, best)) {
			best = fx
		}
	}
	if best != nil {
		return best
	}
	return fallback
}

// moreSpecific: more query and body constraints win, then a literal path
// over a pattern.
func moreSpecific(a, b *Fixture) bool {
	na, nb := constraints(a), constraints(b)
	if na != nb {
		return na > nb
	}
	return !hasPattern(a.Match.Path) && hasPattern(b.Match.Path)
}

// constraints counts a fixture's query, body and body_contains constraints.
func constraints(fx *Fixture) int {
	return len(fx.Match.Query) + len(fx.Match.Body) + len(fx.Match.BodyContains)
}

func hasPattern(p string) bool { return strings.ContainsAny(p, `*?[\`) }

func queryMatches(want map[string]string, got map[string][]string) bool {
	for k, v := range want {
		values, ok := got[k]
		if !ok || (v != "*" && (len(values) == 0 || values[0] != v)) {
			return false
		}
	}
	return true
}

// bodyMatches reports whether every constrained field of a JSON object
// body matches: strings as path.Match patterns ("*" for any value present),
// other values by equality of their decoded JSON.
func bodyMatches(want, got map[string]json.RawMessage) bool {
	for field, w := range want {
		g, ok := got[field]
		if !ok {
			return false
		}
		if pattern, ok := bodyPattern(w); ok {
			if pattern == "*" {
				continue
			}
			value, isString := bodyPattern(g)
			if !isString {
				return false
			}
			if ok, _ := path.Match(pattern, value); !ok && pattern != value {
				return false
			}
			continue
		}
		var wv, gv any
		if json.Unmarshal(w, &wv) != nil || json.Unmarshal(g, &gv) != nil || !reflect.DeepEqual(wv, gv) {
			return false
		}
	}
	return true
}

// bodyContains reports whether every needle occurs in the raw body.
func bodyContains(needles []string, body []byte) bool {
	for _, needle := range needles {
		if !bytes.Contains(body, []byte(needle)) {
			return false
		}
	}
	return true
}

// bodyPattern is the value of a JSON string (a constraint's pattern, a
// field's value); ok is false for any other JSON value.
func bodyPattern(want json.RawMessage) (string, bool) {
	var pattern string
	trimmed := bytes.TrimSpace(want)
	if len(trimmed) == 0 || trimmed[0] != '"' || json.Unmarshal(trimmed, &pattern) != nil {
		return "", false
	}
	return pattern, true
}

// ServeHTTP answers /<provider>/<path>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	provider, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	rest = "/" + rest
	reqBody, _ := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	fx := s.find(provider, r, rest, reqBody)
	rec := Request{Provider: provider, Method: r.Method, Path: rest, Query: r.URL.Query(), Header: r.Header.Clone(), Body: reqBody}
	if fx != nil {
		rec.Fixture = fx.file
	}
	s.mu.Lock()
	if len(s.requests) == maxRecorded {
		s.requests = s.requests[1:] // a long-running local server keeps the latest only
	}
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	if fx == nil {
		// A plain refusal: not retried, and no route rests for a gap in the fixtures.
		w.Header().Set("x-replay", "no-fixture")
		http.Error(w, "replay upstream: no fixture for "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
		return
	}
	chaos, delay := s.roll()
	switch chaos {
	case ChaosServerError, ChaosRateLimited:
		status := http.StatusInternalServerError
		if chaos == ChaosRateLimited {
			// A short wait, so a provider's default one (often a
			// minute) does not rest its routes for a whole run.
			status = http.StatusTooManyRequests
			w.Header().Set("retry-after", "1")
		}
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":{"code":%d,"message":"injected by the replay upstream's chaos"}}`, status)
		return
	case ChaosReset:
		reset(w)
		return
	case ChaosTimeout:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if fx.Response.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(fx.Response.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	body := []byte(fx.Response.Body)
	if fx.Response.BodyText != nil {
		body = []byte(*fx.Response.BodyText)
	}
	if chaos == ChaosTruncate && len(body) >= 2 {
		fx = &Fixture{Fault: "truncate", Response: fx.Response}
	}
	switch fx.Fault {
	case "reset":
		reset(w)
		return
	case "truncate":
		w.Header().Set("content-length", fmt.Sprint(len(body)))
		w.WriteHeader(fx.Response.Status)
		_, _ = w.Write(body[:len(body)/2])
		// Returning with bytes unsent makes net/http close the connection.
		return
	}
	for k, v := range fx.Response.Headers {
		w.Header().Set(k, v)
	}
	if w.Header().Get("content-type") == "" && fx.Response.BodyText == nil {
		w.Header().Set("content-type", "application/json")
	}
	w.WriteHeader(fx.Response.Status)
	_, _ = w.Write(body)
}

// reset drops the connection with a TCP reset, before any answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// Listen serves on addr (e.g. 127.0.0.1:0) until stop is called, and
// returns the base URL providers are placed under.
func (s *Server) Listen(addr string) (baseURL string, stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), srv.Close, nil
}
