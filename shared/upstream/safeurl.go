package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// URLRefusedError says why a caller-supplied URL will not be fetched.
type URLRefusedError struct {
	Reason  string // machine-readable: scheme, host, credentials, address, resolve
	Message string
}

func (e *URLRefusedError) Error() string { return e.Message }

// Resolver looks up a host's addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// URLPolicy decides whether a caller-supplied URL may be fetched: http(s)
// only, and every address the host resolves to must be public. Its
// client dials only addresses it has just checked (the resolved address
// is pinned for the connection, so a second DNS answer cannot swap in a
// private one), and applies the same check to every redirect.
type URLPolicy struct {
	Resolver Resolver
	// Allow lists exceptions to the refused ranges: for tests, or an
	// operator's egress proxy on a private address.
	Allow []netip.Prefix

	once   sync.Once
	client *http.Client
}

// DefaultURLPolicy resolves with the system resolver and allows nothing extra.
func DefaultURLPolicy() *URLPolicy { return &URLPolicy{Resolver: net.DefaultResolver} }

// refusedRanges are the ranges a caller's URL may never reach, beyond what
// netip classifies as loopback, private, link-local, multicast or unspecified.
var refusedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 can reach IPv4 private space
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4 embeds any IPv4 address
	netip.MustParsePrefix("2001::/32"),       // Teredo embeds an IPv4 address
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated) addresses
	netip.MustParsePrefix("::ffff:0:0:0/96"), // SIIT-translated IPv4
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated, still routed privately)
}

// Public reports whether addr may be reached by a caller-supplied URL.
// Loopback, private (RFC 1918 and unique-local fc00::/7), link-local (which
// holds the cloud metadata address 169.254.169.254), CGNAT, multicast and
// reserved ranges are refused.
func (p *URLPolicy) Public(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, allowed := range p.Allow {
		if allowed.Contains(addr) {
			return true
		}
	}
	if !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() {
		return false
	}
	for _, r := range refusedRanges {
		if r.Contains(addr) {
			return false
		}
	}
	return true
}

// Check parses raw and refuses it unless it is an absolute http(s) URL
// whose host resolves only to public addresses. It returns the parsed URL.
func (p *URLPolicy) Check(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &URLRefusedError{"parse", "The URL cannot be parsed."}
	}
	if err := checkShape(u); err != nil {
		return nil, err
	}
	if _, err := p.resolve(ctx, u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// CheckOffline is Check without a DNS lookup: the URL's shape, and its
// address when the host is one. For URLs that are never dialled from here
// (the replay upstream answers them).
func (p *URLPolicy) CheckOffline(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &URLRefusedError{"parse", "The URL cannot be parsed."}
	}
	if err := checkShape(u); err != nil {
		return nil, err
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	if a, err := netip.ParseAddr(host); (err == nil && !p.Public(a)) || strings.EqualFold(host, "localhost") {
		return nil, &URLRefusedError{"address", "The URL's host is not a public internet address."}
	}
	return u, nil
}

func checkShape(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return &URLRefusedError{"scheme", "Only http and https URLs are fetched."}
	case u.Hostname() == "":
		return &URLRefusedError{"host", "The URL has no host."}
	case u.User != nil:
		return &URLRefusedError{"credentials", "URLs with credentials are not fetched."}
	}
	return nil
}

// resolve returns host's addresses when every one of them is public: a
// host with one private answer among public ones is refused, since the
// next lookup may return only that one.
func (p *URLPolicy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(host, ".")
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookupCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err = p.Resolver.LookupNetIP(lookupCtx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return nil, &URLRefusedError{"resolve", "The URL's host cannot be resolved."}
		}
	}
	for _, a := range addrs {
		if !p.Public(a) {
			return nil, &URLRefusedError{"address", "The URL's host is not a public internet address."}
		}
	}
	return addrs, nil
}

// maxRedirects bounds a fetch's redirect chain.
const maxRedirects = 5

// Client is the HTTP client for caller-supplied URLs under this policy.
func (p *URLPolicy) Client() *http.Client {
	p.once.Do(func() { p.client = p.newClient() })
	return p.client
}

func (p *URLPolicy) newClient() *http.Client {
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		// A last check at connect time, on the address actually dialled.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !p.Public(ap.Addr()) {
				return &URLRefusedError{"address", "The URL's host is not a public internet address."}
			}
			return nil
		},
	}
	transport := &http.Transport{
		Proxy: nil, // a proxy would resolve the host itself, after our check
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			addrs, err := p.resolve(ctx, host)
			if err != nil {
				return nil, err
			}
			var errs []error
			for _, a := range addrs { // dial exactly the addresses just checked
				conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
				if err == nil {
					return conn, nil
				}
				errs = append(errs, err)
			}
			return nil, errors.Join(errs...)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          20,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return &URLRefusedError{"redirects", fmt.Sprintf("The URL redirects more than %d times.", maxRedirects)}
			}
			return checkShape(req.URL) // the dialer checks the new host's addresses
		},
	}
}
