package pages

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

// ChromeVersion is the desktop Chrome major version BrowserHeader claims:
// the stable milestone of November 2026 (Chrome ships a milestone every
// two weeks since 153 in September 2026). Keep it current; a browser
// months out of date is itself a bot signal.
const ChromeVersion = "158"

// BrowserHeader is what a current desktop Chrome on Windows sends when it
// navigates to a page: its reduced user-agent, its navigation accept, the
// given accept-language ("" for en-US) and the fetch metadata of a typed
// URL. A site's Header starts from it.
func BrowserHeader(acceptLanguage string) http.Header {
	if acceptLanguage == "" {
		acceptLanguage = "en-US,en;q=0.9"
	}
	h := http.Header{}
	h.Set("user-agent", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/"+ChromeVersion+".0.0.0 Safari/537.36")
	h.Set("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7")
	h.Set("accept-language", acceptLanguage)
	h.Set("sec-fetch-dest", "document")
	h.Set("sec-fetch-mode", "navigate")
	h.Set("sec-fetch-site", "none")
	h.Set("sec-fetch-user", "?1")
	h.Set("upgrade-insecure-requests", "1")
	return h
}

// Direct is the site's own route: a provider named after the site whose
// base URL is the site's origin (MERIDIAN_UPSTREAM_<NAME>_URL moves it, to
// a proxy or a test server), fetching with the site's browser-like headers.
// A request for another of the site's hosts goes to https://<Host> unless
// the base URL was moved; then it goes to the moved base URL with
// X-Forwarded-Host: <Host>. It declares the site's Secrets, the only
// route that does.
func Direct(s *Site) *upstream.Provider {
	protocol := s.Protocol
	if protocol == "" {
		protocol = "The site's public pages and front-end JSON over HTTPS, fetched directly with browser-like headers"
	}
	return &upstream.Provider{
		Name:      s.Name,
		Protocol:  protocol,
		Docs:      s.Origin,
		BaseURL:   s.Origin,
		Secrets:   slices.Clone(s.Secrets),
		Endpoints: endpoints([]*Site{s}, fetchDirect),
	}
}

// ForwardedHostHeader names the host a request is for when the direct
// route's base URL was moved (a proxy, a test server) and the request is
// not for the origin's host.
const ForwardedHostHeader = "X-Forwarded-Host"

// fetchDirect asks the site itself, relative to the route's base URL: the
// request's host when that is the origin, else the moved base URL. A POST
// carries its body and content type, and the origin a browser's fetch()
// from the site's pages sends.
func fetchDirect(ctx context.Context, c *upstream.Call, s *Site, r Request) (*Page, error) {
	h := browserHeader(s, r)
	// Set by hand, so Go's transport leaves the body alone and br (which it
	// cannot decode) is offered as a browser would; decode undoes both.
	h.Set("accept-encoding", "gzip, br")
	if r.post() {
		if h.Get("origin") == "" {
			h.Set("origin", strings.TrimSuffix(s.Origin, "/"))
		}
		if r.ContentType != "" {
			h.Set("content-type", r.ContentType)
		}
	}
	if r.Host != "" {
		if sameOrigin(c.BaseURL, s.Origin) {
			// A copy, so that only this request goes to the other host. The
			// configured client follows redirects within the first request's
			// host, which is now this one. The host is one the site declares
			// (Site.host), never a caller's value.
			moved := *c
			moved.BaseURL = s.base(r)
			c = &moved
		} else {
			// The base URL's host stays; whoever listens there is told.
			h.Set(ForwardedHostHeader, r.Host)
		}
	}
	resp, err := c.Send(ctx, r.method(), r.Path, r.Query, h, r.Body)
	if resp == nil {
		return nil, err
	}
	// A non-2xx answer is still the site's page: verdict classifies it.
	return page(resp.Status, resp.Header, resp.Body, s.target(r))
}

// browserHeader is the whole header set a browser on the site would send
// for r: the site's defaults, adjusted for a front end's JSON call and by
// the request's DirectHeader, the request's extra headers and the cookies.
func browserHeader(s *Site, r Request) http.Header {
	h := s.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if r.JSON {
		h.Set("accept", "application/json")
		if h.Get("sec-fetch-mode") != "" {
			// What the page's own fetch() sends, not a navigation.
			h.Set("sec-fetch-dest", "empty")
			h.Set("sec-fetch-mode", "cors")
			h.Set("sec-fetch-site", "same-origin")
			h.Del("sec-fetch-user")
			h.Del("upgrade-insecure-requests")
		}
	}
	for _, extra := range []http.Header{r.DirectHeader, r.Header} {
		for k, vs := range extra {
			h.Del(k)
			for _, v := range vs {
				h.Add(k, v)
			}
		}
	}
	if cookie := cookieHeader(s.Cookies, r.Header.Get("cookie")); cookie != "" {
		h.Set("cookie", cookie)
	}
	return h
}

// sameOrigin reports whether a base URL is the site's origin (not moved by
// MERIDIAN_UPSTREAM_<NAME>_URL), whatever its case or trailing slash.
func sameOrigin(base, origin string) bool {
	b, err1 := url.Parse(strings.TrimSuffix(base, "/"))
	o, err2 := url.Parse(strings.TrimSuffix(origin, "/"))
	return err1 == nil && err2 == nil && strings.EqualFold(b.Scheme, o.Scheme) && strings.EqualFold(b.Host, o.Host) &&
		b.Path == o.Path && b.RawQuery == "" && b.User == nil
}

// page builds the Page of a target's answer, decoding its body.
func page(status int, header http.Header, body []byte, target string) (*Page, error) {
	decoded, err := upstream.DecodeContent(body, header.Get("content-encoding"))
	if err != nil {
		return nil, err
	}
	header = header.Clone()
	header.Del("content-encoding") // the body is decoded now
	header.Del("content-length")
	return &Page{Status: status, Header: header, Body: decoded, URL: target}, nil
}
