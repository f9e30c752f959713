package replay

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Each chaos fault, at probability 1, strikes every answer and is counted;
// without chaos the fixture answers.
func TestChaos(t *testing.T) {
	s := New()
	if err := s.Add("p", "default", fixture("/x", nil, true, `{"items":[1,2,3],"note":"a body long enough to cut"}`)); err != nil {
		t.Fatal(err)
	}
	base, stop, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	call := func() (int, string, error) {
		res, err := client.Get(base + "/p/x")
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, string(b), err
	}
	for _, c := range []struct {
		kind  string
		chaos Chaos
		check func(status int, body string, err error) bool
	}{
		{ChaosServerError, Chaos{ServerError: 1}, func(s int, b string, err error) bool { return s == 500 && strings.Contains(b, "injected") }},
		{ChaosRateLimited, Chaos{RateLimited: 1}, func(s int, b string, err error) bool { return s == 429 && strings.Contains(b, "injected") }},
		{ChaosReset, Chaos{Reset: 1}, func(s int, b string, err error) bool { return err != nil && s == 0 }},
		{ChaosTruncate, Chaos{Truncate: 1}, func(s int, b string, err error) bool { return s == 200 && err != nil && len(b) < 40 }},
		{ChaosTimeout, Chaos{Timeout: 1, TimeoutDelay: 2 * time.Second}, func(s int, b string, err error) bool { return err != nil }},
	} {
		s.InjectChaos(&c.chaos)
		for i := 0; i < 3; i++ {
			if status, body, err := call(); !c.check(status, body, err) {
				t.Errorf("%s: %d %q %v", c.kind, status, body, err)
			}
		}
		if n := s.Injected()[c.kind]; n != 3 {
			t.Errorf("%s counted %d times, want 3", c.kind, n)
		}
	}
	s.InjectChaos(nil)
	if status, body, err := call(); status != 200 || err != nil || !strings.Contains(body, "long enough") {
		t.Errorf("without chaos: %d %q %v", status, body, err)
	}
}
