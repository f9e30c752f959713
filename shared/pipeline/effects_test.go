package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// gatedCache holds every cache write until release closes.
type gatedCache struct {
	store.Cache
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedCache) CachePut(ctx context.Context, key string, data []byte, now, expiresAt time.Time) error {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return g.Cache.CachePut(ctx, key, data, now, expiresAt)
}

// sentWriter records whether anything of the answer has been sent.
type sentWriter struct {
	*httptest.ResponseRecorder
	mu   sync.Mutex
	sent bool
}

func (w *sentWriter) WriteHeader(code int) {
	w.mu.Lock()
	w.sent = true
	w.mu.Unlock()
	w.ResponseRecorder.WriteHeader(code)
}

func (w *sentWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.sent = true
	w.mu.Unlock()
	return w.ResponseRecorder.Write(b)
}

func (w *sentWriter) Flush() { w.ResponseRecorder.Flush() }

func (w *sentWriter) anythingSent() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

// An answer is held until its effects have landed (issue 40.1): while its
// cache write is still in flight, not one byte of a plain answer, nor the
// result event of a stream, has left; once it lands, the answer goes out
// whole. The transport (local server, API Gateway, function URL) cannot
// send what the pipeline has not written.
func TestAnswerIsHeldUntilItsEffectsLand(t *testing.T) {
	for _, tc := range []struct{ name, target string }{
		{"plain", "/v1/marketplace_a/search?query=held"},
		{"stream", "/v1/search/all?stream=1&query=ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gc := &gatedCache{entered: make(chan struct{}), release: make(chan struct{})}
			b, _ := newComposed(t, newBilled, 100, func(c *Config) {
				gc.Cache = c.Cache
				c.Cache = gc
			})
			req := httptest.NewRequest(http.MethodGet, tc.target, nil)
			req.Header.Set("x-api-key", b.key)
			w := &sentWriter{ResponseRecorder: httptest.NewRecorder()}
			done := make(chan struct{})
			go func() {
				defer close(done)
				b.p.ServeHTTP(w, req)
			}()
			<-gc.entered
			time.Sleep(20 * time.Millisecond) // time for a premature write to show
			body := w.Body.String()
			switch {
			case tc.name == "plain" && w.anythingSent():
				t.Fatalf("the answer was sent before its cache entry landed: %.200s", body)
			case tc.name == "stream" && strings.Contains(body, "event: result"):
				t.Fatalf("the result event was sent before the cache entry landed: %.300s", body)
			}
			close(gc.release)
			<-done
			if w.Code != 200 || !strings.Contains(w.Body.String(), `"credits_used":`) {
				t.Fatalf("%d %.300s", w.Code, w.Body.String())
			}
			if tc.name == "stream" && !strings.Contains(w.Body.String(), "event: result") {
				t.Fatalf("no result event: %.300s", w.Body.String())
			}
		})
	}
}
