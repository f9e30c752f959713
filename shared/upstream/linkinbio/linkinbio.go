// Package linkinbio recognises the public pages of link-in-bio services and
// reads each into one shape, so an operation that fetched a profile's bio
// link through the page-fetch layer (shared/upstream/pages) can tell where
// it points: the page's title, bio and avatar, its links, and the social
// profiles among them with their handles.
//
// The API:
//
//   - Recognise(rawURL) tells which supported service a URL's page belongs
//     to, by host (and, for services that serve profiles under a path, a
//     profile path).
//   - Parse(service, page, pageURL) reads a fetched page of that service.
//   - Classify(rawURL) normalises one URL and tells its Kind, and the social
//     profile it names when it names one (the rule table of socials.go).
//
// # Services and how each page is read
//
//   - linktree (linktr.ee/<name>): the Next.js payload, <script
//     id="__NEXT_DATA__">, props.pageProps: account (username, pageTitle,
//     description, profilePictureUrl, socialLinks[] of {type, url}) and
//     links[] of {type, title, url, locked} (account.links when the page has
//     no top-level list). A missing account, username or links list is a
//     changed format.
//   - beacons (beacons.ai/<name>, beacons.page/<name>), bio_link
//     (bio.link/<name>) and carrd (<site>.carrd.co): the rendered page
//     itself: og:title / twitter:title / <title> for the title (the
//     service's own suffix removed), og:description / description for the
//     bio, og:image / twitter:image for the avatar, and the page's anchors
//     (href and text) for the links, without the service's own hosts (its
//     sign-up and branding links). A page with no outbound link is a changed
//     format (a client-rendered shell, say), never an empty result. At
//     most 10,000 anchors are read from one page.
//
// A page that reads as its service's page is that page, whatever text it
// holds: its owner writes its title and text (a Carrd site's HTML too), so
// a challenge's title, ids or scripts in it say nothing. A page that does
// not read is checked with htmldata.Challenge: a bot-protection page is a
// Rejected fault, anything else Malformed.
//
// # Links
//
// Only http(s) and mailto links are kept. Other schemes (javascript:,
// data:, tel:, sms:, app intents) are dropped, as are URLs with user
// information, control characters or more than MaxURLLength bytes. Kept
// URLs are normalised: scheme and host lowercased, the host's trailing dot
// and default port removed, the fragment removed, and tracking parameters
// (utm_*, fbclid, gclid and the like, see trackingParams) removed from the
// query. A mailto link keeps its address alone (its subject, body and other
// header fields are dropped), with the domain lowercased; several addresses
// or an address that does not look like one drop the link. Links are
// deduplicated by normalised URL, the first kept.
//
// Each link has a Kind:
//
//   - "social": a profile on a social platform, by the platform's own URL
//     rules (see Classify); its handle is in Page.Socials.
//   - "other": a page on a social platform that is not a profile (a post, a
//     video, a share link), or another link-in-bio page.
//   - "email": a mailto address.
//   - "website": any other http(s) page.
//
// # Faults
//
// Failures are *upstream.Fault: a page whose format changed, a broken
// payload or an oversized page is Malformed, a challenge page (one that
// does not read as the service's) Rejected. Reasons name the service, the
// missing field and the page's size, never the page's content (pages carry
// personal data and reasons are logged).
package linkinbio

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// Supported services, as Recognise names them.
const (
	Linktree = "linktree"
	Beacons  = "beacons"
	BioLink  = "bio_link"
	Carrd    = "carrd"
)

// Kinds of links.
const (
	KindSocial  = "social"
	KindWebsite = "website"
	KindOther   = "other"
	KindEmail   = "email"
)

// Bounds on what is read.
const (
	// MaxPageBytes is the largest page Parse reads; a larger one is
	// Malformed. Real profile pages are far smaller.
	MaxPageBytes = 8 << 20
	// MaxLinks is the most links a Page holds; the rest are dropped.
	MaxLinks = 200
	// MaxURLLength is the longest URL kept, in bytes.
	MaxURLLength = 2048
	// maxTitle and maxBio bound texts, in runes.
	maxTitle = 300
	maxBio   = 2000
)

// Page is a link-in-bio page, read.
type Page struct {
	// Service is the service's id (Linktree, Beacons, ...).
	Service string `json:"service"`
	// Title is the page's name for its owner; "" when the page gives none.
	Title string `json:"title"`
	// Bio is the page's description of its owner; "" when none.
	Bio string `json:"bio"`
	// AvatarURL is the owner's picture, an http(s) URL; "" when none (a
	// data: image is not kept).
	AvatarURL string `json:"avatar_url"`
	// Links are the page's links in page order, normalised and
	// deduplicated.
	Links []Link `json:"links"`
	// Socials are the social profiles among Links, one per platform and
	// handle, in page order.
	Socials []SocialLink `json:"socials"`
}

// Link is one link of a page.
type Link struct {
	// Title is the link's label on the page; "" when it has none.
	Title string `json:"title"`
	// URL is the normalised URL (http, https or mailto).
	URL string `json:"url"`
	// Kind is KindSocial, KindWebsite, KindOther or KindEmail.
	Kind string `json:"kind"`
}

// SocialLink is a social profile a page links to.
type SocialLink struct {
	// Platform is Meridian's neutral platform id (microblog_b for X,
	// photo_social for Instagram, ...) or, for platforms without one, a
	// lowercase name (twitch, snapchat, ...).
	Platform string `json:"platform"`
	// Handle is the profile's name as the platform's URL carries it,
	// without "@" (for YouTube /channel/ URLs, the channel id; for Bluesky,
	// the domain handle or DID; for Facebook's profile.php?id=, the
	// numeric id). Platforms whose names are case-insensitive have it
	// lowercased; YouTube's and Spotify's keep their case (channel and
	// artist ids are case-sensitive).
	Handle string `json:"handle"`
	// URL is the link's normalised URL.
	URL string `json:"url"`
}

// service is one supported service.
type service struct {
	// id is the service's id, as Recognise names it.
	id string
	// hosts are the service's host names; a URL on one of them, or on a
	// subdomain of one, is the service's own.
	hosts []string
	// subdomains: profiles are subdomains (<site>.carrd.co), not paths.
	subdomains bool
	// suffixes are the service's additions to page titles, removed.
	suffixes []string
	// parse reads a page.
	parse func(page []byte, base *url.URL, s *service) (*Page, error)
	// origin is the service's public origin, the base of relative URLs
	// when the page's own URL is unusable.
	origin string
}

var services = map[string]*service{
	Linktree: {hosts: []string{"linktr.ee"}, parse: parseLinktree, origin: "https://linktr.ee"},
	Beacons: {hosts: []string{"beacons.ai", "beacons.page"}, parse: parseRendered, origin: "https://beacons.ai",
		suffixes: []string{"| Beacons", "- Beacons", "on Beacons", "| Beacons.ai", "- Beacons.ai", "on Beacons.ai", "| beacons.ai"}},
	BioLink: {hosts: []string{"bio.link"}, parse: parseRendered, origin: "https://bio.link",
		suffixes: []string{"| bio.link", "- bio.link", "| Bio Link", "- Bio Link", "| BioLink"}},
	Carrd: {hosts: []string{"carrd.co"}, subdomains: true, parse: parseRendered, origin: "https://carrd.co"},
}

func init() {
	for id, s := range services {
		s.id = id
	}
}

// Services lists the supported services' ids.
func Services() []string { return []string{Linktree, Beacons, BioLink, Carrd} }

// Hosts are the host names a service's pages are on; with subdomains its
// pages are on subdomains of them (<site>.carrd.co). Nil for an unknown
// service.
func Hosts(service string) (hosts []string, subdomains bool) {
	s, ok := services[service]
	if !ok {
		return nil, false
	}
	return slices.Clone(s.hosts), s.subdomains
}

// Recognise tells which supported service rawURL's page belongs to. A URL
// without a scheme is read as https. The URL must be http(s) without user
// information or port; the host is compared without "www." and a trailing
// dot. Path services (linktree, beacons, bio_link) need a profile path (a
// first path segment that is not one of the service's own pages); carrd
// needs a site subdomain.
func Recognise(rawURL string) (string, bool) {
	u, ok := parseLoose(rawURL)
	if !ok {
		return "", false
	}
	host := strings.TrimPrefix(u.Hostname(), "www.")
	for _, id := range Services() {
		s := services[id]
		for _, h := range s.hosts {
			switch {
			case s.subdomains:
				sub, found := strings.CutSuffix(host, "."+h)
				if found && sub != "" && !strings.Contains(sub, ".") && sub != "www" {
					return id, true
				}
			case host == h:
				if first := firstSegment(u); first != "" && !reservedPath(id, first) {
					return id, true
				}
			}
		}
	}
	return "", false
}

// parseLoose parses a URL a profile may give without a scheme.
func parseLoose(rawURL string) (*url.URL, bool) {
	raw := strings.TrimSpace(rawURL)
	if raw == "" || len(raw) > MaxURLLength || hasControl(raw) {
		return nil, false
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + strings.TrimPrefix(raw, "//")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Port() != "" || u.Opaque != "" {
		return nil, false
	}
	u.Host = strings.TrimSuffix(strings.ToLower(u.Host), ".")
	if u.Host == "" {
		return nil, false
	}
	return u, true
}

func firstSegment(u *url.URL) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	return first
}

// reservedPaths are the services' own pages, which are not profiles.
var reservedPaths = map[string][]string{
	Linktree: {"s", "admin", "login", "register", "signup", "help", "blog", "pricing", "features", "marketplace",
		"templates", "privacy", "terms", "about", "careers", "discover", "api"},
	Beacons: {"login", "signup", "register", "dashboard", "settings", "admin", "api", "app", "help", "support",
		"about", "pricing", "features", "blog", "terms", "privacy", "contact", "faq", "creators", "explore", "search"},
	BioLink: {"login", "signup", "register", "admin", "api", "blog", "pricing", "help", "terms", "privacy", "about"},
}

func reservedPath(id, seg string) bool {
	seg = strings.ToLower(seg)
	for _, r := range reservedPaths[id] {
		if seg == r {
			return true
		}
	}
	return false
}

// Parse reads page, a page of service fetched from pageURL (the page's
// public URL, used to resolve relative links; "" or an unusable URL means
// the service's origin).
func Parse(service string, page []byte, pageURL string) (Page, error) {
	s, ok := services[service]
	if !ok {
		return Page{}, upstream.MalformedFault("linkinbio: unknown service %q", service)
	}
	if len(page) > MaxPageBytes {
		return Page{}, upstream.MalformedFault("%s page of %d bytes is over the %d-byte limit", service, len(page), MaxPageBytes)
	}
	base, ok := parseLoose(pageURL)
	if !ok {
		base, _ = url.Parse(s.origin)
	}
	p, err := s.parse(page, base, s)
	if err != nil {
		// A page that does not read as the service's may be a bot
		// check; one that reads is the page, whatever text its owner
		// wrote into it (a challenge's title or ids on a Carrd site).
		if reason, blocked := htmldata.Challenge(page); blocked {
			return Page{}, &upstream.Fault{Kind: upstream.Rejected,
				Reason: fmt.Sprintf("the %s page is a block or challenge page: %s", service, reason)}
		}
		return Page{}, err
	}
	p.Service = service
	if p.Links == nil {
		p.Links = []Link{}
	}
	if p.Socials == nil {
		p.Socials = []SocialLink{}
	}
	return *p, nil
}

// collector builds a Page's links.
type collector struct {
	page *Page
	seen map[string]bool
	// socials dedupes Socials by platform and handle.
	socials map[string]bool
	// own drops links to the service's own hosts (rendered pages only).
	own func(host string) bool
}

func newCollector(p *Page) *collector {
	return &collector{page: p, seen: map[string]bool{}, socials: map[string]bool{}}
}

// add keeps one link: raw is resolved against base (nil: raw must be
// absolute), normalised and classified. It reports whether it was kept.
func (c *collector) add(title, raw string, base *url.URL) bool {
	if len(c.page.Links) >= MaxLinks {
		return false
	}
	cl, ok := classify(raw, base)
	if !ok || c.seen[cl.URL] {
		return false
	}
	if c.own != nil && cl.Kind != KindEmail && c.own(cl.host) {
		return false
	}
	c.seen[cl.URL] = true
	c.page.Links = append(c.page.Links, Link{Title: clean(title, maxTitle), URL: cl.URL, Kind: cl.Kind})
	if cl.Social != nil {
		key := cl.Social.Platform + "\x00" + strings.ToLower(cl.Social.Handle)
		if !c.socials[key] {
			c.socials[key] = true
			c.page.Socials = append(c.page.Socials, *cl.Social)
		}
	}
	return true
}

// clean collapses white space, drops control characters and invalid UTF-8
// and bounds the text to max runes.
func clean(s string, max int) string {
	var b strings.Builder
	space := false
	n := 0
	for _, r := range s {
		if n >= max {
			break
		}
		switch {
		case r == utf8.RuneError:
			continue
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\u00a0':
			space = b.Len() > 0
			continue
		case r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u200b' || r == '\ufeff':
			continue
		}
		if space {
			b.WriteByte(' ')
			n++
			space = false
			if n >= max {
				break
			}
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// avatar returns an absolute http(s) image URL, or "".
func avatar(raw string, base *url.URL) string {
	u, ok := absolute(raw, base)
	if !ok {
		return ""
	}
	return u.String()
}
