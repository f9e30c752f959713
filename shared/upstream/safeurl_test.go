package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
)

// fakeResolver answers from a table; hosts not in it do not resolve.
type fakeResolver struct {
	table map[string][]string
	calls atomic.Int32
	// next, when set, answers instead of table (per call number).
	next func(n int, host string) []string
}

func (f *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n := int(f.calls.Add(1))
	answers := f.table[host]
	if f.next != nil {
		answers = f.next(n, host)
	}
	if len(answers) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range answers {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// watched is a listener that counts the connections it accepts.
type watched struct {
	addr     string
	accepted atomic.Int32
}

func listen(t *testing.T, ip string, handler http.Handler) *watched {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		// Linux routes all of 127/8 to loopback; some systems only 127.0.0.1.
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("cannot listen on %s: %v", ip, err)
		}
		t.Skipf("cannot listen on %s (set CI=true to fail instead): %v", ip, err)
	}
	w := &watched{addr: ln.Addr().String()}
	srv := &http.Server{Handler: handler}
	counting := &countingListener{Listener: ln, n: &w.accepted}
	go func() { _ = srv.Serve(counting) }()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func TestURLPolicyRefuses(t *testing.T) {
	policy := &URLPolicy{Resolver: &fakeResolver{table: map[string][]string{
		"public.example":   {"93.184.215.14"},
		"internal.example": {"10.0.0.5"},
		"mixed.example":    {"93.184.215.14", "192.168.1.1"},
		"loopback.example": {"127.0.0.1"},
		"v6local.example":  {"::1"},
	}}}
	refused := map[string]string{
		"http://127.0.0.1/":                          "address",
		"http://127.1.2.3:8080/x":                    "address",
		"http://[::1]/":                              "address",
		"http://10.0.0.1/":                           "address",
		"http://172.16.5.4/":                         "address",
		"http://192.168.0.1/":                        "address",
		"http://169.254.169.254/latest/meta-data/":   "address",
		"http://[fd00:ec2::254]/latest/meta-data/":   "address",
		"http://100.64.0.1/":                         "address",
		"http://[fc00::1]/":                          "address",
		"http://[fe80::1]/":                          "address",
		"http://[::ffff:127.0.0.1]/":                 "address",
		"http://[::7f00:1]/":                         "address",
		"http://[::ffff:0:7f00:1]/":                  "address",
		"http://[fec0::1]/":                          "address",
		"http://[2001::1]/":                          "address",
		"http://[64:ff9b::a00:1]/":                   "address",
		"http://0.0.0.0/":                            "address",
		"http://internal.example/":                   "address",
		"http://mixed.example/":                      "address",
		"http://loopback.example./":                  "address",
		"http://v6local.example/":                    "address",
		"http://unknown.example/":                    "resolve",
		"ftp://public.example/":                      "scheme",
		"file:///etc/passwd":                         "scheme",
		"gopher://public.example/":                   "scheme",
		"http://user:secret@public.example/":         "credentials",
		"http:///nohost":                             "host",
		"https://public.example:443/path?q=1#anchor": "",
		"http://public.example/":                     "",
		"http://93.184.215.14/":                      "",
	}
	for raw, want := range refused {
		_, err := policy.Check(context.Background(), raw)
		var r *URLRefusedError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s refused: %v", raw, err)
		case want != "" && (!errors.As(err, &r) || r.Reason != want):
			t.Errorf("%s: err = %v; want refusal %q", raw, err, want)
		}
	}
}

func TestLocalhostIsRefusedAfterResolution(t *testing.T) {
	// The system resolver answers localhost from /etc/hosts, offline.
	if _, err := DefaultURLPolicy().Check(context.Background(), "http://localhost:8080/"); err == nil {
		t.Fatal("localhost accepted")
	}
}

// getPublic fetches raw through a Call under policy.
func getPublic(policy *URLPolicy, raw string) error {
	c := &Call{public: policy}
	_, err := c.GetPublic(context.Background(), "url", raw, nil)
	return err
}

func TestRefusedURLsAreNeverConnected(t *testing.T) {
	target := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	_, port, _ := net.SplitHostPort(target.addr)
	policy := &URLPolicy{Resolver: &fakeResolver{table: map[string][]string{"sneaky.example": {"127.0.0.1"}}}}
	for _, raw := range []string{
		"http://" + target.addr + "/",
		"http://sneaky.example:" + port + "/",
		"http://localhost:" + port + "/",
	} {
		err := getPublic(policy, raw)
		var f *Fault
		if !errors.As(err, &f) || f.Kind != InvalidParameter || f.Field != "url" {
			t.Errorf("%s: err = %v; want an InvalidParameter fault naming url", raw, err)
		}
		if e := (Outcome{Fault: f}).Error(); e.Status != http.StatusUnprocessableEntity || e.Details["field"] != "url" {
			t.Errorf("%s: caller's error = %+v; want 422 naming url", raw, e)
		}
	}
	if n := target.accepted.Load(); n != 0 {
		t.Fatalf("the refused address accepted %d connections", n)
	}
}

func TestRedirectToPrivateAddressIsRefused(t *testing.T) {
	private := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	_, privatePort, _ := net.SplitHostPort(private.addr)
	// The first hop stands in for a public site: the policy allows its
	// address and nothing else on loopback.
	for _, location := range []string{
		"http://" + private.addr + "/",
		"http://rebound.example:" + privatePort + "/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"file:///etc/passwd",
	} {
		site := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, location, http.StatusFound)
		}))
		policy := &URLPolicy{
			Resolver: &fakeResolver{table: map[string][]string{"rebound.example": {"127.0.0.2"}}},
			Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		}
		err := getPublic(policy, "http://"+site.addr+"/start")
		var f *Fault
		if !errors.As(err, &f) || f.Kind != InvalidParameter || f.Field != "url" {
			t.Errorf("redirect to %s: err = %v; want an InvalidParameter fault naming url", location, err)
		}
		if site.accepted.Load() != 1 {
			t.Errorf("redirect to %s: the first hop was not fetched", location)
		}
	}
	if n := private.accepted.Load(); n != 0 {
		t.Fatalf("the private redirect target accepted %d connections", n)
	}
}

func TestResolvedAddressIsPinned(t *testing.T) {
	// A rebinding resolver: an allowed answer for the check, a private one
	// for the connection. The dial uses its own checked answer, so the
	// private address is refused, not connected.
	private := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	_, port, _ := net.SplitHostPort(private.addr)
	res := &fakeResolver{next: func(n int, _ string) []string {
		if n == 1 {
			return []string{"127.0.0.1"}
		}
		return []string{"127.0.0.2"}
	}}
	policy := &URLPolicy{Resolver: res, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	err := getPublic(policy, "http://rebinding.example:"+port+"/")
	var f *Fault
	if !errors.As(err, &f) || f.Kind != InvalidParameter {
		t.Fatalf("err = %v; want InvalidParameter", err)
	}
	if private.accepted.Load() != 0 {
		t.Fatal("the rebound private address was connected")
	}
}
