package auth

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Throttle counts invalid-key attempts per client in fixed one-minute
// windows, so a client guessing keys is refused with 429 before any lookup
// (spec 5.4). It is per process: every Lambda instance throttles on its own.
type Throttle struct {
	Limit  int // invalid attempts allowed per window
	Window time.Duration
	Now    func() time.Time

	mu      sync.Mutex
	clients map[string]*window
}

type window struct {
	start time.Time
	count int
}

// maxClients bounds the memory a flood of distinct clients can take.
const maxClients = 10_000

// NewThrottle allows limit invalid attempts per client per minute.
func NewThrottle(limit int) *Throttle {
	return &Throttle{Limit: limit, Window: time.Minute, Now: time.Now, clients: map[string]*window{}}
}

// Blocked reports whether client must wait, and for how long.
func (t *Throttle) Blocked(client string) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.clients[client]
	now := t.Now()
	if !ok || now.Sub(w.start) >= t.Window || w.count < t.Limit {
		return 0, false
	}
	return w.start.Add(t.Window).Sub(now), true
}

// Failed records an invalid attempt by client.
func (t *Throttle) Failed(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.Now()
	w, ok := t.clients[client]
	if !ok || now.Sub(w.start) >= t.Window {
		if len(t.clients) >= maxClients {
			t.sweep(now)
			if len(t.clients) >= maxClients {
				return // every tracked client is blocked: keep them, bound memory
			}
		}
		t.clients[client] = &window{start: now, count: 1}
		return
	}
	w.count++
}

// sweep drops expired windows; if all are live, it drops the ones with the
// fewest failures, keeping the clients closest to being blocked.
func (t *Throttle) sweep(now time.Time) {
	for c, w := range t.clients {
		if now.Sub(w.start) >= t.Window {
			delete(t.clients, c)
		}
	}
	for c, w := range t.clients {
		if len(t.clients) < maxClients*3/4 {
			return
		}
		if w.count < t.Limit {
			delete(t.clients, c)
		}
	}
}

// ClientOf identifies the caller for invalid-key throttling: the source IP
// (API Gateway's requestContext.http.sourceIp becomes RemoteAddr), or its
// /64 for IPv6, since one host holds a whole /64 to rotate through.
func ClientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || addr.Is4() || addr.Is4In6() {
		return host
	}
	prefix, _ := addr.Prefix(64)
	return prefix.String()
}
