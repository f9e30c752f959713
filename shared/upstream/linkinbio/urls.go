package linkinbio

import (
	"net/mail"
	"net/url"
	"strings"
)

// Classified is one URL, normalised and classified.
type Classified struct {
	// URL is the normalised URL.
	URL string
	// Kind is KindSocial, KindWebsite, KindOther or KindEmail.
	Kind string
	// Social is the profile the URL names when Kind is KindSocial.
	Social *SocialLink

	host string
}

// Classify normalises rawURL (an absolute http(s) or mailto URL) and
// classifies it as Parse classifies a page's links; ok is false for a URL
// Parse would drop.
func Classify(rawURL string) (Classified, bool) { return classify(rawURL, nil) }

func classify(raw string, base *url.URL) (Classified, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxURLLength || hasControl(raw) {
		return Classified{}, false
	}
	if scheme, rest, ok := strings.Cut(raw, ":"); ok && strings.EqualFold(scheme, "mailto") {
		addr, ok := mailAddress(rest)
		if !ok {
			return Classified{}, false
		}
		return Classified{URL: "mailto:" + addr, Kind: KindEmail}, true
	}
	u, ok := absolute(raw, base)
	if !ok {
		return Classified{}, false
	}
	out := Classified{Kind: KindWebsite, host: u.Hostname()}
	if s, ok := social(u); ok { // social drops the profile URL's query
		s.URL = u.String()
		out.Kind, out.Social = KindSocial, &s
	} else if onPlatform(u.Hostname()) {
		out.Kind = KindOther
	} else if isLinkInBioHost(u.Hostname()) {
		out.Kind = KindOther
	}
	out.URL = u.String()
	if len(out.URL) > MaxURLLength {
		return Classified{}, false
	}
	return out, true
}

// absolute resolves raw against base (nil: raw must be absolute) and
// normalises it; only http(s) URLs with a host and no user information are
// kept.
func absolute(raw string, base *url.URL) (*url.URL, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > MaxURLLength || hasControl(raw) {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" {
		return nil, false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" || strings.ContainsAny(host, " %\\") {
		return nil, false
	}
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") { // an IPv6 literal
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	u.Host = host
	u.Fragment, u.RawFragment = "", ""
	u.RawQuery = stripTracking(u.RawQuery)
	u.ForceQuery = false
	return u, true
}

// trackingParams are query parameters that only track a click; utm_* too.
var trackingParams = map[string]bool{
	"fbclid": true, "gclid": true, "dclid": true, "gbraid": true, "wbraid": true, "msclkid": true,
	"yclid": true, "twclid": true, "ttclid": true, "li_fat_id": true, "igshid": true, "igsh": true,
	"mc_cid": true, "mc_eid": true, "_hsenc": true, "_hsmkt": true, "_ga": true, "_gl": true,
	"mkt_tok": true, "oly_anon_id": true, "oly_enc_id": true, "vero_id": true, "rb_clickid": true,
	"s_cid": true, "ref_src": true, "ref_url": true, "mibextid": true,
}

func isTracking(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "utm_") || trackingParams[k]
}

// stripTracking removes tracking parameters from a raw query, keeping the
// others as they were written (order and encoding).
func stripTracking(raw string) string {
	if raw == "" {
		return ""
	}
	var kept []string
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		key, _, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); err == nil {
			key = k
		}
		if !isTracking(key) {
			kept = append(kept, part)
		}
	}
	return strings.Join(kept, "&")
}

// mailAddress reads the address of a mailto URL's rest (after "mailto:"):
// one address, the header fields after "?" dropped.
func mailAddress(rest string) (string, bool) {
	rest = strings.TrimPrefix(rest, "//")
	rest, _, _ = strings.Cut(rest, "?")
	rest, _, _ = strings.Cut(rest, "#")
	addr, err := url.PathUnescape(rest)
	if err != nil {
		return "", false
	}
	addr = strings.TrimSpace(addr)
	if addr == "" || len(addr) > 254 || hasControl(addr) || strings.ContainsAny(addr, " ,;<>\"()[]\\") {
		return "", false
	}
	parsed, err := mail.ParseAddress(addr)
	if err != nil || parsed.Address != addr {
		return "", false
	}
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") || !strings.Contains(domain, ".") {
		return "", false
	}
	return local + "@" + strings.ToLower(domain), true
}

// linkInBioHosts are link-in-bio services (those Parse reads and others);
// a link to one of their pages is KindOther, never a website.
var linkInBioHosts = []string{
	"linktr.ee", "beacons.ai", "beacons.page", "bio.link", "carrd.co", "lnk.bio", "taplink.cc", "taplink.at",
	"campsite.bio", "solo.to", "komi.io", "stan.store", "hoo.be", "allmylinks.com", "bio.site", "linkin.bio",
	"tap.bio", "snipfeed.co", "milkshake.app", "many.link", "linkr.bio", "msha.ke", "direct.me", "flow.page",
}

func isLinkInBioHost(host string) bool { return inDomains(host, linkInBioHosts) }

// inDomains reports whether host is one of domains or a subdomain of one.
func inDomains(host string, domains []string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range domains {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}
