package auth

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newKey(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "mn_" + base64.RawURLEncoding.EncodeToString(b)
}

func TestWellFormed(t *testing.T) {
	for i := 0; i < 100; i++ {
		k := newKey(t)
		if len(k) != 46 || !WellFormed(k) {
			t.Fatalf("spec 2.6 key %q refused", k)
		}
	}
	k := newKey(t)
	for _, bad := range []string{"", "mn_", k[:45], k + "A", "mx_" + k[3:], "mn_" + strings.Repeat("+", 43), " " + k,
		"MN_" + k[3:], k[:45] + "/", k[:45] + "=", k[:44] + "é", k[:45] + "\x00", k[:45] + "\n"} {
		if WellFormed(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFromRequest(t *testing.T) {
	r := httptest.NewRequest("GET", "/v1", nil)
	r.Header.Set("x-api-key", " abc ")
	r.Header.Set("authorization", "Bearer other")
	if p := FromRequest(r, true); p.Key != "abc" || p.FromBearer {
		t.Errorf("x-api-key wins: %+v", p)
	}
	r.Header.Del("x-api-key")
	if p := FromRequest(r, true); p.Key != "other" || !p.FromBearer {
		t.Errorf("bearer where allowed: %+v", p)
	}
	if p := FromRequest(r, false); p.Key != "" || !p.BearerRefused {
		t.Errorf("bearer where refused: %+v", p)
	}
	for _, h := range []string{"Basic abc", "Bearer", "Bearer   ", "abc"} {
		r.Header.Set("authorization", h)
		if p := FromRequest(r, true); p.Key != "" || p.BearerRefused {
			t.Errorf("%q: %+v", h, p)
		}
	}
}

func TestHintNeverRevealsTheKey(t *testing.T) {
	k := newKey(t)
	h := Hint(k)
	if h != k[:7]+"…"+k[42:] || strings.Contains(h, k[7:42]) {
		t.Errorf("hint %q", h)
	}
	if Hint("mn_short_secret") != "malformed" {
		t.Error("a malformed key is not echoed")
	}
}

func TestRedact(t *testing.T) {
	k := newKey(t)
	for _, s := range []string{k, "/v1/x/" + k + "/y", "lookup " + k[:20] + " failed"} {
		if got := Redact(s); strings.Contains(got, k[3:12]) || !strings.Contains(got, "mn_[redacted]") {
			t.Errorf("Redact(%q) = %q", s, got)
		}
	}
	for _, s := range []string{"/v1/company_registry/search", "mn_short", "amn_" + k[3:8]} {
		if got := Redact(s); got != s {
			t.Errorf("Redact(%q) = %q, want it unchanged", s, got)
		}
	}
	if got := ForLog("/v1/"+strings.Repeat("a", 300), 20); got != "/v1/aaaaaaaaaaaaaaaa…" {
		t.Errorf("ForLog bound: %q", got)
	}
	token := NewSecret("mc_")
	if got := ForLog("/console/"+token, 15); strings.Contains(got, token[3:10]) {
		t.Errorf("a console token cut by the bound is still redacted: %q", got)
	}
}

func TestThrottle(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	th := NewThrottle(2)
	th.Now = func() time.Time { return now }
	th.Failed("a")
	if _, blocked := th.Blocked("a"); blocked {
		t.Fatal("one failure is allowed")
	}
	th.Failed("a")
	wait, blocked := th.Blocked("a")
	if !blocked || wait != time.Minute {
		t.Fatalf("blocked %v wait %v", blocked, wait)
	}
	if _, blocked := th.Blocked("b"); blocked {
		t.Error("other clients are not blocked")
	}
	now = now.Add(time.Minute)
	if _, blocked := th.Blocked("a"); blocked {
		t.Error("the window ends")
	}
	// A flood of distinct clients does not unblock a blocked one.
	th.Failed("a")
	th.Failed("a")
	for i := 0; i < maxClients+10; i++ {
		th.Failed(fmt.Sprint("flood", i))
	}
	if _, blocked := th.Blocked("a"); !blocked {
		t.Error("a blocked client stays blocked through a flood")
	}
	if len(th.clients) > maxClients {
		t.Errorf("memory is bounded: %d", len(th.clients))
	}
}
