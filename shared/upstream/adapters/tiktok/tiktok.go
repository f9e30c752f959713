// Package tiktok serves short_video_a's creator building blocks
// (short_video_a/profile, short_video_a/posts, short_video_a/comments).
//
// # Routes
//
// The official route is the TikTok Research API (ResearchProvider,
// provider tiktok_research), on the operator's research client: a client
// access token from the client-credentials grant (POST /v2/oauth/token/,
// form-encoded client_key, client_secret, grant_type=client_credentials;
// valid two hours, cached per client until shortly before it expires) is
// sent as a bearer token to
//
//	POST /v2/research/user/info/?fields=…          {"username": …}
//	POST /v2/research/video/query/?fields=…        {"query": {"and": [username EQ …]}, "start_date", "end_date", "max_count", "cursor", "search_id"}
//	POST /v2/research/video/comment/list/?fields=… {"video_id": <int64>, "max_count", "cursor"}
//
// which answer {"data": {…}, "error": {"code", "message", "log_id"}}, code
// "ok" on success (rate_limit_exceeded 429, access_token_invalid 401,
// scope_not_authorized 401, invalid_params 400, internal_error 500
// otherwise). The API is free but metered per client: a daily request
// quota, so a 429 rests the route until the next UTC midnight (the runner
// caps a rest at an hour) unless the answer gives its own retry-after.
//
// The second route, for the profile only, is the public profile page
// (Site, provider tiktok, then the unblocking services zyte_api and
// scraperapi): https://www.tiktok.com/@<handle> read logged out. Its
// <script id="__UNIVERSAL_DATA_FOR_REHYDRATION__" type="application/json">
// holds __DEFAULT_SCOPE__["webapp.user-detail"] = {userInfo: {user, stats,
// statsV2}, statusCode}: statsV2 carries exact counts as text, stats the
// display counts (rounded for large accounts). Pages of 2022–2023 held the
// same under <script id="SIGI_STATE"> (UserModule.users/stats keyed by the
// handle); both are read. statusCode 10221, 10223 and 10202 mean no such
// account (404), 10222 a private one. The logged-out page carries no post
// list (the site's front end loads posts from signed endpoints that need
// X-Bogus and msToken, which Meridian never forges), so posts and comments
// have the Research API as their only route.
//
// Video ids are 64-bit numbers (their top 32 bits are the creation time in
// Unix seconds); they are kept as their exact digits and never pass
// through a float.
package tiktok

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// Provider names: they name the routes, the fixture folders
// (testdata/upstream/<name>/) and MERIDIAN_UPSTREAM_<NAME>_URL.
const (
	ResearchName = "tiktok_research"
	Name         = "tiktok" // the public pages, read directly
)

// The research client's credentials (developers.tiktok.com > Research
// projects > the approved project's client).
const (
	ClientKeySecret    = "MERIDIAN_TIKTOK_CLIENT_KEY"
	ClientSecretSecret = "MERIDIAN_TIKTOK_CLIENT_SECRET"
)

// The endpoints served.
const (
	Platform         = "short_video_a"
	ProfileEndpoint  = "short_video_a/profile"
	PostsEndpoint    = "short_video_a/posts"
	CommentsEndpoint = "short_video_a/comments"
)

// Origin is the site's public origin; profile and video URLs are built on it.
const Origin = "https://www.tiktok.com"

// Hosts are the hosts a video URL may name: tiktok.com and its subdomains
// (www., m., and the short-link hosts vm. and vt., whose links are refused
// since only a fetch would tell what they point at).
var Hosts = []string{"tiktok.com"}

// ---- the data ----

// Profile is the data of short_video_a/profile; url is always set.
type Profile struct {
	creator.Profile
	Following  *int64  `json:"following"`
	LikesCount *int64  `json:"likes_count"`
	Verified   *bool   `json:"verified"`
	Private    *bool   `json:"private"`
	BioLink    *string `json:"bio_link"`
	SecUID     *string `json:"sec_uid"`
	CreatedAt  *string `json:"created_at"`
}

// Posts is the data of short_video_a/posts. HasMore is null when unknown.
type Posts struct {
	Handle string `json:"handle"`
	creator.Page[Post]
}

// Post is one video: the common fields (url always set), then the
// platform's extras.
type Post struct {
	creator.Post
	Saves      *int64   `json:"saves"`
	Duration   *int64   `json:"duration_seconds"`
	RegionCode *string  `json:"region_code"`
	Hashtags   []string `json:"hashtags"`
}

// Comments is the data of short_video_a/comments; has_more is always
// known.
type Comments struct {
	PostID string `json:"post_id"`
	creator.Page[Comment]
}

// Comment is one comment, or a reply to one (InReplyTo names its parent).
// The Research API does not identify comment authors, so every author
// field is null there (and _warnings says so).
type Comment struct {
	creator.Comment[creator.Author]
	InReplyTo *string `json:"in_reply_to_id"`
}

// ---- values the source writes loosely ----

// flexID is an id the source writes as a JSON number or as text: its exact
// digits either way, never a float. Anything else does not decode.
type flexID string

func (f *flexID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexID(strings.TrimSpace(s))
		return nil
	case digits(string(b)):
		*f = flexID(b)
		return nil
	}
	return errors.New("an id is neither text nor a whole number")
}

// flexInt is a count the source writes as a JSON number or as numeric text
// (statsV2 writes counts as text). A negative, fractional or unreadable
// value is unknown (nil), never 0.
type flexInt struct{ v *int64 }

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return nil
		}
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && n >= 0 {
		f.v = &n
	}
	return nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// text is a present, non-empty string, or null.
func text(s *string) *string {
	if s == nil || strings.TrimSpace(*s) == "" {
		return nil
	}
	v := *s
	return &v
}

var str = upstream.Text

// unixTime is an RFC 3339 UTC time of Unix seconds, null when unknown.
func unixTime(f flexInt) *string {
	if f.v == nil || *f.v <= 0 {
		return nil
	}
	s := time.Unix(*f.v, 0).UTC().Format(time.RFC3339)
	return &s
}

// ---- handles and video ids ----

// usernamePattern is the source's rule for usernames: letters, digits,
// underscores and periods, at most 24 (the registry folds them to lower
// case, as the source stores them).
var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9._]{1,24}$`)

// handleOf is the call's handle, refused (422) when the source could not
// have such a username; the registry's pattern says the same first.
func handleOf(c *upstream.Call) (string, error) {
	h := strings.ToLower(c.Param("handle"))
	if !usernamePattern.MatchString(h) {
		return "", upstream.InvalidParameterFault("handle", "invalid_handle",
			"handle must be 1 to 24 letters, digits, underscores or periods, without a leading @.")
	}
	return h, nil
}

func profileURL(handle string) string { return Origin + "/@" + handle }

func videoURL(handle, id string) string { return Origin + "/@" + handle + "/video/" + id }

// VideoID reads a video id from post_id: the id itself (1 to 19 digits) or
// the URL of a video on the platform's hosts: /@<user>/video/<id>,
// /@<user>/photo/<id> (photo posts), /share/video/<id>, /v/<id>.html (the
// old mobile pages) and /embed/v2/<id> or /embed/<id>. Short links
// (vm.tiktok.com, vt.tiktok.com, /t/<code>) name no id without a fetch and
// are refused, as is anything else: 422 naming post_id.
func VideoID(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	bad := func(code, msg string) error { return upstream.InvalidParameterFault("post_id", code, msg) }
	const want = "post_id must be a numeric video id or a video URL (…/@<username>/video/<id>)."
	if digits(raw) {
		return canonicalID(raw, bad, want)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", bad("invalid_post_id", want)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if !registry.HostIn(host, Hosts) {
		return "", bad("not_a_post", want)
	}
	parts := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	if host == "vm.tiktok.com" || host == "vt.tiktok.com" || (len(parts) > 0 && parts[0] == "t") {
		return "", bad("short_link", "post_id is a short link, which names no video without a fetch: send the video id or its full URL (…/@<username>/video/<id>).")
	}
	id := ""
	for i, p := range parts {
		switch {
		case (p == "video" || p == "photo") && i+1 < len(parts):
			id = parts[i+1]
		case p == "v" && i+1 < len(parts):
			id = strings.TrimSuffix(parts[i+1], ".html")
		case p == "embed" && i+1 < len(parts):
			id = parts[i+1]
			if id == "v2" && i+2 < len(parts) {
				id = parts[i+2]
			}
		}
		if id != "" {
			break
		}
	}
	if !digits(id) {
		return "", bad("not_a_post", want)
	}
	return canonicalID(id, bad, want)
}

func canonicalID(id string, bad func(code, msg string) error, want string) (string, error) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 || n > 1<<63-1 {
		return "", bad("invalid_post_id", want)
	}
	return strconv.FormatUint(n, 10), nil
}

// idTime is when a video (or comment) with this id was created: the id's
// top 32 bits are Unix seconds. ok is false for an id that is no number.
func idTime(id string) (time.Time, bool) {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(int64(n>>32), 0).UTC(), true
}
