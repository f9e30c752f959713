package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/gateway"
)

// lockedBuffer is a log sink the server's goroutines and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}

// localServer is a running app.ListenAndServe.
type localServer struct {
	addr string // host:port
	log  *lockedBuffer
}

func (s *localServer) base() string    { return "http://" + s.addr }
func (s *localServer) docBase() string { return s.base() + "/docs/errors" }

// startLocal runs the local server on a free port; cleanup cancels its
// context and requires ListenAndServe to return nil.
func startLocal(t *testing.T) *localServer {
	t.Helper()
	t.Setenv(app.EnvErrorsURL, "")
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.ListenAndServe(ctx, "127.0.0.1:0", logger, app.Deps{}, func(a net.Addr) { ready <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("ListenAndServe returned before ready: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the local server did not become ready")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ListenAndServe returned %v after cancel, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ListenAndServe did not return after cancel")
		}
	})
	return &localServer{addr: addr.String(), log: logs}
}

// wireResponse is what came back over the wire.
type wireResponse struct {
	status int
	header http.Header
	body   []byte
}

func httpDo(t *testing.T, req *http.Request) wireResponse {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return wireResponse{resp.StatusCode, resp.Header, body}
}

func (s *localServer) get(t *testing.T, target string, header http.Header) wireResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base()+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return httpDo(t, req)
}

// raw sends one HTTP/1.1 request exactly as written, so paths reach the
// server without any client-side cleaning or escaping.
func (s *localServer) raw(t *testing.T, method, target string, header http.Header) wireResponse {
	t.Helper()
	conn, err := net.DialTimeout("tcp", s.addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: raw-test/1.0\r\nConnection: close\r\n", method, target, s.addr)
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %.80s: reading the response: %v", method, target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return wireResponse{resp.StatusCode, resp.Header, body}
}

// failure checks a wire response is the typed error envelope with status
// and type (reason too, when given) and returns it.
func (s *localServer) failure(t *testing.T, name string, r wireResponse, status int, typ, reason string) failureBody {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d; body %.400s", name, r.status, status, r.body)
	}
	f := checkEnvelope(t, name, r.status, r.header.Get("content-type"), r.header.Get("x-request-id"), r.header.Get("x-credits-used"), r.body, s.docBase())
	if f.Error.Type != typ {
		t.Errorf("%s: error.type %q, want %q", name, f.Error.Type, typ)
	}
	if got, _ := f.Error.Details["reason"].(string); reason != "" && got != reason {
		t.Errorf("%s: details.reason %q, want %q", name, got, reason)
	}
	return f
}

// loggedOnce checks the server logged exactly one "request" line for id.
func (s *localServer) loggedOnce(t *testing.T, name, id string) {
	t.Helper()
	n := 0
	for _, line := range requestLines(t, name, s.log.Bytes()) {
		if line["request_id"] == id {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%s: %d request log lines carry %s, want 1", name, n, id)
	}
}

// testKey is well-formed (mn_ + 43 base64url characters) and unknown to
// a deployment without a key store.
var testKey = "mn_" + strings.Repeat("k", 43)

func keyHeader() http.Header { return http.Header{"X-Api-Key": {testKey}} }

func TestLocalServer(t *testing.T) {
	s := startLocal(t)

	t.Run("index without key", func(t *testing.T) {
		r := s.get(t, "/v1", nil)
		f := s.failure(t, "GET /v1", r, http.StatusUnauthorized, "UNAUTHORIZED", "missing_api_key")
		if f.Error.DocURL != s.docBase()+"#unauthorized" {
			t.Errorf("doc_url %q, want %s#unauthorized", f.Error.DocURL, s.docBase())
		}
		s.loggedOnce(t, "GET /v1", f.RequestID)
	})

	t.Run("unknown key", func(t *testing.T) {
		r := s.get(t, "/v1/marketplace_a/search?query=x", keyHeader())
		f := s.failure(t, "unknown key", r, http.StatusUnauthorized, "UNAUTHORIZED", "invalid_api_key")
		s.loggedOnce(t, "unknown key", f.RequestID)
	})

	t.Run("unknown platform", func(t *testing.T) {
		r := s.get(t, "/v1/nope/x", nil)
		f := s.failure(t, "GET /v1/nope/x", r, http.StatusNotFound, "ENDPOINT_NOT_FOUND", "")
		if f.Error.Details["platform"] != "nope" || f.Error.Details["endpoint"] != "x" {
			t.Errorf("details %v, want platform nope and endpoint x", f.Error.Details)
		}
		if f.Error.DocURL != s.docBase()+"#endpoint-not-found" {
			t.Errorf("doc_url %q", f.Error.DocURL)
		}
		s.loggedOnce(t, "GET /v1/nope/x", f.RequestID)
	})

	t.Run("errors reference", func(t *testing.T) {
		r := s.get(t, "/docs/errors", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("content-type"), "text/html") {
			t.Fatalf("GET /docs/errors: %d %q", r.status, r.header.Get("content-type"))
		}
		for _, anchor := range []string{"endpoint-not-found", "unauthorized", "invalid-parameters", "key-revoked"} {
			if !bytes.Contains(r.body, []byte(`id="`+anchor+`"`)) {
				t.Errorf("the errors reference has no id=%q", anchor)
			}
		}
	})

	t.Run("body over 6 MiB", func(t *testing.T) {
		body := bytes.Repeat([]byte("a"), gateway.MaxEventBody+1024)
		req, err := http.NewRequest(http.MethodPost, s.base()+"/v1/batch", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("content-type", "application/json")
		req.Header.Set("x-api-key", testKey)
		r := httpDo(t, req)
		f := s.failure(t, "POST /v1/batch 6 MiB", r, http.StatusRequestEntityTooLarge, "INVALID_PARAMETERS", "body_too_large")
		if f.Error.DocURL != s.docBase()+"#invalid-parameters" {
			t.Errorf("doc_url %q", f.Error.DocURL)
		}
	})

	t.Run("bad input over the wire", func(t *testing.T) {
		long := "/v1/marketplace_a/" + strings.Repeat("p", 5000-len("/v1/marketplace_a/"))
		targets := []struct{ name, method, target string }{
			{"100 KB query", "GET", "/v1/marketplace_a/search?query=" + strings.Repeat("q", 100<<10)},
			{"100 KB query on batch", "POST", "/v1/batch?" + strings.Repeat("x=1&", 25<<10)},
			{"invalid UTF-8 in query", "GET", "/v1/marketplace_a/search?query=%ff%fe"},
			{"invalid UTF-8 in name", "GET", "/v1/marketplace_a/search?%ff%fe=1&query=x"},
			{"repeated parameters", "GET", "/v1/marketplace_a/search?query=a&query=b&page=1&page=2"},
			{"NUL in value", "GET", "/v1/marketplace_a/search?query=a%00b"},
			{"NUL in path", "GET", "/v1/marketplace_a/se%00arch?query=x"},
			{"NUL as platform", "GET", "/v1/%00/search"},
			{"5000-character path", "GET", long},
			{"5000-character sandbox path", "GET", "/sandbox" + long[len("/v1"):]},
			{"dot-dot to another platform", "GET", "/v1/marketplace_a/../microblog_b/profile?handle=x"},
			{"dot-dot out of v1", "GET", "/v1/../docs/errors"},
			{"dot-dot out of sandbox", "GET", "/sandbox/../v1/marketplace_a/search?query=x"},
			{"encoded dot-dot", "GET", "/v1/marketplace_a/%2e%2e/search?query=x"},
			{"double slash at start", "GET", "//v1/marketplace_a/search?query=x"},
			{"double slash after v1", "GET", "/v1//marketplace_a/search?query=x"},
			{"double slash in endpoint", "GET", "/v1/marketplace_a//search?query=x"},
			{"encoded slash", "GET", "/v1/marketplace_a%2Fsearch?query=x"},
			{"bad escape in query", "GET", "/v1/marketplace_a/search?query=%zz"},
			{"raw invalid UTF-8 in path", "GET", "/v1/marketplace_a/\xff\xfe"},
			{"unknown method", "BREW", "/v1/marketplace_a/search?query=x"},
			{"POST to a GET endpoint", "POST", "/v1/marketplace_a/search?query=x"},
		}
		for _, tc := range targets {
			for _, withKey := range []bool{false, true} {
				name := tc.name
				var h http.Header
				if withKey {
					name += " (key)"
					h = keyHeader()
				}
				t.Run(name, func(t *testing.T) {
					r := s.raw(t, tc.method, tc.target, h)
					t.Logf("%d %.200s", r.status, r.body)
					if r.status < 400 || r.status > 499 {
						t.Errorf("status %d, want a 4xx; body %.300s", r.status, r.body)
					}
					f := s.failure(t, name, r, r.status, typeOr(r.body), "")
					if f.Error.Type == "" {
						t.Errorf("untyped failure: %.300s", r.body)
					}
					if bytes.Contains(r.body, []byte(testKey)) {
						t.Errorf("the response echoes the key")
					}
					if f.RequestID != "" {
						s.loggedOnce(t, name, f.RequestID)
					}
				})
			}
		}
	})

	if bytes.Contains(s.log.Bytes(), []byte(testKey)) {
		t.Errorf("the server log contains the API key that was sent")
	}
}

// typeOr reads error.type from a body so checks that only need "some
// typed failure" can pass it back as the expectation.
func typeOr(body []byte) string {
	var f failureBody
	_ = json.Unmarshal(body, &f)
	return f.Error.Type
}
