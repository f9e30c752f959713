package linkinbio

import (
	"net/url"
	"regexp"
	"strings"
)

// rule reads a platform's profile URLs: the platform's hosts, and path
// patterns of literal segments and one capture, "{h}" (the whole segment
// is the handle) or "@{h}" (the segment is "@" and the handle). A pattern
// may end with "?name={h}" to capture a query parameter instead. Literal
// segments compare case-insensitively; the path's trailing slash is
// ignored; the whole path must match (extra segments are a post, a
// repository, a video: not a profile).
type rule struct {
	platform string
	// hosts are compared after removing www., m. and mobile.
	hosts []string
	// countryHosts also accepts a two-letter subdomain (uk.linkedin.com).
	countryHosts bool
	// subdomainOf: the handle is the subdomain of one of these
	// (<name>.tumblr.com); no path pattern then.
	subdomainOf []string
	paths       []string
	// handle is the handle's shape.
	handle *regexp.Regexp
	// reserved are first path segments that are the platform's own pages.
	reserved []string
	// fold lowercases handles (the platform's names are case-insensitive).
	fold bool
}

// rules is the table of social platforms. Platform ids are Meridian's
// neutral ids where one exists, else a lowercase name.
var rules = []rule{
	{platform: "microblog_b", hosts: []string{"x.com", "twitter.com"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_]{1,15}$`), fold: true,
		reserved: []string{"home", "explore", "search", "intent", "share", "i", "hashtag", "settings", "login",
			"logout", "signup", "messages", "notifications", "tos", "privacy", "compose", "about", "download",
			"jobs", "who_to_follow", "account", "lists", "communities", "premium", "verified-choose"}},
	{platform: "photo_social", hosts: []string{"instagram.com", "instagr.am"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9._]{1,30}$`), fold: true,
		reserved: []string{"p", "reel", "reels", "explore", "stories", "accounts", "direct", "tv", "about",
			"developer", "legal", "privacy", "web", "challenge", "emails", "session", "ar", "directory", "topics"}},
	{platform: "short_video_a", hosts: []string{"tiktok.com"}, paths: []string{"/@{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_.]{2,24}$`), fold: true},
	{platform: "video_platform", hosts: []string{"youtube.com"},
		paths:  []string{"/@{h}", "/c/{h}", "/user/{h}", "/channel/{h}"},
		handle: regexp.MustCompile(`^[\p{L}\p{N}._\-·]{1,100}$`)},
	{platform: "social_a", hosts: []string{"facebook.com", "fb.com"},
		paths:  []string{"/{h}", "/profile.php?id={h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9.]{5,50}$`), fold: true,
		reserved: []string{"profile.php", "pages", "groups", "events", "watch", "share", "sharer", "sharer.php", "login",
			"login.php", "people", "photo", "photo.php", "photos", "story.php", "permalink.php", "hashtag",
			"marketplace", "gaming", "help", "policies", "privacy", "dialog", "plugins", "reel", "reels",
			"home.php", "settings", "business", "ads", "fundraisers", "legal", "l.php", "recover", "messages"}},
	{platform: "professional_network", hosts: []string{"linkedin.com"}, countryHosts: true,
		paths: []string{"/in/{h}"}, handle: regexp.MustCompile(`^[\p{L}\p{N}_\-]{3,100}$`), fold: true},
	{platform: "microblog_c", hosts: []string{"threads.net", "threads.com"}, paths: []string{"/@{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9._]{1,30}$`), fold: true},
	{platform: "microblog_a", hosts: []string{"bsky.app"}, paths: []string{"/profile/{h}"},
		handle: regexp.MustCompile(`^(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z0-9-]{0,62}|did:plc:[a-z2-7]{24}|did:web:[A-Za-z0-9.\-]{1,253})$`),
		fold:   true},
	{platform: "code_host", hosts: []string{"github.com"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`), fold: true,
		reserved: []string{"about", "features", "pricing", "login", "join", "signup", "sponsors", "orgs", "topics",
			"collections", "explore", "marketplace", "settings", "notifications", "search", "trending",
			"enterprise", "security", "site", "apps", "contact", "customer-stories", "readme", "team", "new",
			"organizations", "codespaces", "issues", "pulls", "events", "blog", "mobile", "stars", "watching",
			"dashboard", "home", "logout", "password_reset", "premium-support", "resources", "solutions"}},
	{platform: "twitch", hosts: []string{"twitch.tv"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_]{3,25}$`), fold: true,
		reserved: []string{"directory", "videos", "p", "downloads", "jobs", "settings", "subscriptions",
			"inventory", "wallet", "search", "turbo", "store", "prime", "login", "signup", "drops", "friends"}},
	{platform: "snapchat", hosts: []string{"snapchat.com"}, paths: []string{"/add/{h}", "/@{h}"},
		handle: regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._\-]{1,29}$`), fold: true},
	{platform: "pinterest", hosts: []string{"pinterest.com"}, countryHosts: true, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_]{3,30}$`), fold: true,
		reserved: []string{"pin", "search", "ideas", "today", "explore", "login", "business", "settings",
			"about", "categories", "topics", "_"}},
	{platform: "reddit", hosts: []string{"reddit.com", "old.reddit.com", "new.reddit.com"},
		paths:  []string{"/user/{h}", "/u/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_\-]{3,20}$`), fold: true},
	{platform: "soundcloud", hosts: []string{"soundcloud.com"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[a-z0-9_\-]{3,25}$`), fold: true,
		reserved: []string{"discover", "stream", "search", "upload", "you", "charts", "pages", "terms-of-use",
			"settings", "messages", "notifications", "people", "tags", "popular", "jobs", "imprint", "signin"}},
	{platform: "spotify", hosts: []string{"open.spotify.com"}, paths: []string{"/artist/{h}", "/user/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9._\-]{1,64}$`)},
	{platform: "patreon", hosts: []string{"patreon.com"}, paths: []string{"/{h}", "/c/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`), fold: true,
		reserved: []string{"posts", "join", "login", "signup", "home", "search", "messages", "settings",
			"about", "pricing", "explore", "user", "bePatron", "checkout", "policy", "create", "product"}},
	{platform: "kick", hosts: []string{"kick.com"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_\-]{3,25}$`), fold: true,
		reserved: []string{"categories", "browse", "search", "following", "login", "signup", "terms-of-service",
			"privacy-policy", "community-guidelines", "dashboard", "video", "clips"}},
	{platform: "telegram", hosts: []string{"t.me", "telegram.me"}, paths: []string{"/{h}"},
		handle: regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{4,31}$`), fold: true,
		reserved: []string{"joinchat", "addstickers", "addemoji", "share", "proxy", "socks", "login", "iv",
			"setlanguage", "addtheme", "confirmphone", "contact", "boost", "s"}},
	{platform: "medium", hosts: []string{"medium.com"}, paths: []string{"/@{h}"},
		handle: regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,50}$`), fold: true},
	{platform: "tumblr", subdomainOf: []string{"tumblr.com"},
		handle: regexp.MustCompile(`^[a-z0-9](?:[a-z0-9\-]{0,30}[a-z0-9])?$`), fold: true,
		reserved: []string{"www", "assets", "static", "media", "api", "help", "staff"}},
	{platform: "substack", subdomainOf: []string{"substack.com"},
		handle: regexp.MustCompile(`^[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?$`), fold: true,
		reserved: []string{"www", "on", "support", "cdn", "api", "open", "reader"}},
}

// platformHosts are hosts of social platforms whose other pages (posts,
// videos, share links, short links) are KindOther, not websites.
var platformHosts = []string{
	"x.com", "twitter.com", "t.co", "instagram.com", "instagr.am", "tiktok.com", "youtube.com", "youtu.be",
	"facebook.com", "fb.com", "fb.me", "fb.watch", "linkedin.com", "lnkd.in", "threads.net", "threads.com",
	"bsky.app", "github.com", "twitch.tv", "snapchat.com", "pinterest.com", "pin.it", "reddit.com", "redd.it",
	"soundcloud.com", "spotify.com", "spotify.link", "patreon.com", "kick.com", "t.me", "telegram.me",
	"medium.com", "tumblr.com", "substack.com", "discord.gg", "discord.com", "whatsapp.com", "wa.me",
	"music.apple.com", "podcasts.apple.com",
}

func onPlatform(host string) bool { return inDomains(host, platformHosts) }

// social reads u (normalised) as a profile URL by the rule table. A
// profile's query is no part of it (share and tracking parameters): it is
// removed from u, except a parameter that carries the handle.
func social(u *url.URL) (SocialLink, bool) {
	host := strings.ToLower(u.Hostname())
	for i := range rules {
		r := &rules[i]
		if h, param, ok := r.match(host, u); ok {
			u.RawQuery = ""
			if param != "" {
				u.RawQuery = url.Values{param: {h}}.Encode()
			}
			if r.fold {
				h = strings.ToLower(h)
			}
			return SocialLink{Platform: r.platform, Handle: h}, true
		}
	}
	return SocialLink{}, false
}

// bareHost removes the prefixes platforms serve the same pages under.
func bareHost(host string) string {
	for _, p := range []string{"www.", "m.", "mobile."} {
		if h, ok := strings.CutPrefix(host, p); ok {
			return h
		}
	}
	return host
}

func (r *rule) onHost(host string) bool {
	host = bareHost(host)
	for _, h := range r.hosts {
		if host == h {
			return true
		}
		if r.countryHosts {
			if cc, ok := strings.CutSuffix(host, "."+h); ok && len(cc) == 2 {
				return true
			}
		}
	}
	return false
}

func (r *rule) isReserved(seg string) bool {
	for _, s := range r.reserved {
		if strings.EqualFold(s, seg) {
			return true
		}
	}
	return false
}

// match reads u as one of the rule's profiles: the handle, and the query
// parameter that carried it ("" when the path did).
func (r *rule) match(host string, u *url.URL) (handle, param string, ok bool) {
	if len(r.subdomainOf) > 0 {
		for _, d := range r.subdomainOf {
			sub, ok := strings.CutSuffix(host, "."+d)
			if ok && !strings.Contains(sub, ".") && !r.isReserved(sub) && r.handle.MatchString(sub) {
				return sub, "", true
			}
		}
		return "", "", false
	}
	if !r.onHost(host) {
		return "", "", false
	}
	segs := segments(u.Path)
	for _, pat := range r.paths {
		if h, param, ok := r.matchPattern(pat, segs, u); ok {
			return h, param, true
		}
	}
	return "", "", false
}

// numericID is the shape of an id in a query (profile.php?id=).
var numericID = regexp.MustCompile(`^[0-9]{1,20}$`)

func segments(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

func (r *rule) matchPattern(pat string, segs []string, u *url.URL) (string, string, bool) {
	pat, param, query := strings.Cut(pat, "?")
	psegs := segments(pat)
	if len(psegs) != len(segs) {
		return "", "", false
	}
	handle := ""
	for i, p := range psegs {
		s := segs[i]
		switch {
		case p == "{h}":
			handle = s
		case p == "@{h}":
			h, ok := strings.CutPrefix(s, "@")
			if !ok {
				return "", "", false
			}
			handle = h
		case !strings.EqualFold(p, s):
			return "", "", false
		}
		if i == 0 && p == "{h}" && r.isReserved(s) {
			return "", "", false
		}
	}
	if query {
		name, want, _ := strings.Cut(param, "=")
		if want != "{h}" {
			return "", "", false
		}
		handle = u.Query().Get(name)
		if !numericID.MatchString(handle) {
			return "", "", false
		}
		return handle, name, true
	}
	if handle == "" || !r.handle.MatchString(handle) {
		return "", "", false
	}
	return handle, "", true
}
