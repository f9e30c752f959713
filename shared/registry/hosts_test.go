package registry

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// hostName is a lowercase DNS name of two labels or more: no scheme, port,
// path, trailing dot or empty label.
var hostName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`)

// Every declared host list is well formed, and its parameter says so in
// the catalogue and OpenAPI description.
func TestDeclaredHostsAreWellFormed(t *testing.T) {
	for _, e := range Default().Endpoints() {
		entry := e.Entry()
		for i, p := range e.Accepted() {
			if len(p.Hosts) == 0 {
				if entry.Params[i].PlatformURL {
					t.Errorf("%s %s: platform_url without hosts", e.Key(), p.Name)
				}
				continue
			}
			where := e.Key() + " " + p.Name
			if p.Type != String && p.Type != URL {
				t.Errorf("%s: hosts on a %s parameter; only strings and URLs take them", where, p.Type)
			}
			if strings.Count(p.Description, PlatformURLNote) != 1 || !entry.Params[i].PlatformURL {
				t.Errorf("%s: the description and platform_url must say a URL is a page of the platform: %q", where, p.Description)
			}
			seen := map[string]bool{}
			for _, h := range p.Hosts {
				if !hostName.MatchString(h) {
					t.Errorf("%s: host %q is not a lowercase name without scheme, port or path", where, h)
				}
				if seen[h] {
					t.Errorf("%s: host %q twice", where, h)
				}
				seen[h] = true
			}
			for _, h := range p.Hosts {
				for _, other := range p.Hosts {
					if strings.HasSuffix(h, "."+other) {
						t.Errorf("%s: %q is already covered by %q", where, h, other)
					}
				}
			}
		}
	}
}

// Every commerce parameter that takes a URL of the platform's pages
// declares the platform's hosts (issue 15).
func TestCommerceURLParametersDeclareHosts(t *testing.T) {
	want := map[string]string{
		"marketplace_a/similar product_id": "aliexpress.com",
		"craft_market/reviews id":          "etsy.com",
		"marketplace_b/shop url":           "amazon.co.uk",
	}
	for _, e := range Default().Endpoints() {
		if e.Family != Commerce {
			continue
		}
		for _, p := range e.Params {
			takesURL := p.Type == URL || strings.Contains(p.Description, "URL")
			if takesURL && len(p.Hosts) == 0 {
				t.Errorf("%s %s takes a URL but declares no hosts", e.Key(), p.Name)
			}
			if host, ok := want[e.Key()+" "+p.Name]; ok {
				if !slices.Contains(p.Hosts, host) {
					t.Errorf("%s %s: hosts %v lack %s", e.Key(), p.Name, p.Hosts, host)
				}
				delete(want, e.Key()+" "+p.Name)
			}
		}
	}
	for k := range want {
		t.Errorf("%s is not declared", k)
	}
	// marketplace_b runs one domain per marketplace: every one of the
	// Selling Partner API's 23 is declared.
	if len(marketplaceBHosts) != 23 {
		t.Errorf("%d marketplace_b hosts", len(marketplaceBHosts))
	}
}

func TestAllowsHost(t *testing.T) {
	p := P("url", URL, "Page.").OnHosts("etsy.com", "amazon.co.uk")
	for host, want := range map[string]bool{
		"etsy.com":              true,
		"www.etsy.com":          true,
		"a.b.etsy.com":          true,
		"WWW.Etsy.COM":          true,
		"www.etsy.com.":         true,
		"amazon.co.uk":          true,
		"www.amazon.co.uk":      true,
		"etsy.com.evil.example": false,
		"notetsy.com":           false,
		"etsy.co":               false,
		"co.uk":                 false,
		"amazon.co.uk.evil":     false,
		".etsy.com":             false,
		"www..etsy.com":         false,
		"www.etsy.com..":        false,
		"":                      false,
		".":                     false,
	} {
		if got := p.AllowsHost(host); got != want {
			t.Errorf("AllowsHost(%q) = %v, want %v", host, got, want)
		}
	}
	if q := P("x", String, "Id.").OnHosts(); q.AllowsHost("etsy.com") {
		t.Error("an empty host list allows nothing")
	}
}
