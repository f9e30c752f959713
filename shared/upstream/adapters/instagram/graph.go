package instagram

// photo_social/profile and photo_social/posts (creator building blocks,
// issue 16) over the Instagram Graph API's business discovery, on the
// operator's own Instagram professional account and its access token:
//
//	GET https://graph.facebook.com/<version>/<operator's ig-user-id>
//	    ?fields=business_discovery.username(<handle>){<user fields>,media.limit(N).after(C){<media fields>}}
//
// Business discovery answers for other professional (business or creator)
// accounts only: a personal account, an unknown username and an age-gated
// account all answer error 110 with subcode 2207013 ("Invalid user id",
// "Cannot find User"), which the source does not tell apart, so each is
// 404. It carries no verified flag, no views or plays of another account's
// media and no share count: those are null and _warnings says so.
// like_count is left out of a medium whose owner hides its like count.
//
// Errors are the Graph API error object {"error": {message, type, code,
// error_subcode, fbtrace_id}}, classified by code whatever the HTTP status
// (the Graph API answers most of them with 400): 4, 17, 32, 341, 613 and the
// business-use-case limits 80001/80002 are rate limits, resting the route
// for the X-Business-Use-Case-Usage header's estimated_time_to_regain_access
// (minutes) or Retry-After; 190 and 102 are a refused token, 10 and
// 200-299 a missing permission, 1 and 2 the source's own failure.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// The Graph API route's provider name and variables.
const (
	GraphName = "instagram_graph"
	// TokenSecret is the operator's access token (a Facebook User access
	// token, or a System User token, of the app the professional account
	// is connected to), sent as Authorization: Bearer.
	TokenSecret = "MERIDIAN_INSTAGRAM_ACCESS_TOKEN"
	// AccountSecret is the operator's own Instagram professional account
	// id (the IG User id the queries are made on, not a username).
	AccountSecret = "MERIDIAN_INSTAGRAM_BUSINESS_ACCOUNT_ID"
	// AppSecretSecret, when set, signs every call with appsecret_proof, as
	// an app with "Require App Secret" turned on needs.
	AppSecretSecret = "MERIDIAN_INSTAGRAM_APP_SECRET"
	// VersionSecret overrides the Graph API version (GraphVersion).
	VersionSecret = "MERIDIAN_INSTAGRAM_GRAPH_VERSION"
)

// GraphVersion is the Graph API version called unless VersionSecret says
// otherwise (Meta keeps each version about two years).
const GraphVersion = "v25.0"

// The creator building blocks' endpoint keys.
const (
	ProfileEndpoint  = "photo_social/profile"
	PostsEndpoint    = "photo_social/posts"
	CommentsEndpoint = "photo_social/comments"
)

// followerField is where followers comes from.
const followerField = "business_discovery.followers_count"

// The fields asked for. The media fields are those business discovery
// serves for another account's media; views, plays and shares are not
// among them.
const (
	profileFields   = "id,username,name,biography,website,profile_picture_url,followers_count,follows_count,media_count"
	postsUserFields = "id,username,media_count"
	mediaFields     = "id,caption,media_type,media_product_type,permalink,timestamp,like_count,comments_count,thumbnail_url,media_url"
)

// GraphProvider is the Instagram Graph API route of photo_social/profile
// and photo_social/posts.
func GraphProvider() *upstream.Provider {
	return &upstream.Provider{
		Name: GraphName,
		Protocol: "Instagram Graph API (Instagram API with Facebook Login), business discovery: " +
			"GET /<version>/<ig-user-id>?fields=business_discovery.username(<handle>){...} on the operator's own professional account",
		Docs:    "https://developers.facebook.com/docs/instagram-platform/instagram-graph-api/reference/ig-user/business_discovery",
		BaseURL: "https://graph.facebook.com",
		Secrets: []upstream.Secret{
			{
				Name:     TokenSecret,
				Required: true,
				Doc: "An access token of the operator's own Meta app for the Facebook Page linked to the operator's Instagram " +
					"professional account, with instagram_basic, instagram_manage_insights and pages_read_engagement (or " +
					"pages_show_list); a long-lived User token or a System User token. Sent as Authorization: Bearer. " +
					"Business discovery is rate limited per app and account (Business Use Case limits).",
			},
			{
				Name:     AccountSecret,
				Required: true,
				Doc: "The operator's Instagram professional account id (the IG User id, e.g. 17841405309211844, from " +
					"GET /me/accounts?fields=instagram_business_account): the account business discovery queries are made on.",
			},
			{
				Name: AppSecretSecret,
				Doc: "Optional: the app secret of that Meta app; when set every call carries appsecret_proof " +
					"(HMAC-SHA256 of the token), which an app with Require App Secret turned on needs.",
			},
			{
				Name: VersionSecret,
				Doc:  "Optional: the Graph API version to call, e.g. " + GraphVersion + " (the default).",
			},
		},
		Endpoints: map[string]upstream.Adapter{
			ProfileEndpoint: profile,
			PostsEndpoint:   posts,
		},
	}
}

// ---- the Graph API's answers ----

// graphError is the Graph API error object.
type graphError struct {
	Message        string `json:"message"`
	Type           string `json:"type"`
	Code           int    `json:"code"`
	Subcode        int    `json:"error_subcode"`
	IsTransient    bool   `json:"is_transient"`
	ErrorUserTitle string `json:"error_user_title"`
	ErrorUserMsg   string `json:"error_user_msg"`
	FBTraceID      string `json:"fbtrace_id"`
}

// notProfessional is the subcode of a username business discovery cannot
// see: a personal account, an age-gated one, or none at all.
const notProfessional = 2207013

type discoveryBody struct {
	ID                idText      `json:"id"`
	BusinessDiscovery *discovered `json:"business_discovery"`
	Error             *graphError `json:"error"`
}

// discovered is the IG User business discovery returns.
type discovered struct {
	ID                idText      `json:"id"`
	Username          *string     `json:"username"`
	Name              *string     `json:"name"`
	Biography         *string     `json:"biography"`
	Website           *string     `json:"website"`
	ProfilePictureURL *string     `json:"profile_picture_url"`
	FollowersCount    *graphCount `json:"followers_count"`
	FollowsCount      *graphCount `json:"follows_count"`
	MediaCount        *graphCount `json:"media_count"`
	Media             *struct {
		Data   []medium `json:"data"`
		Paging *struct {
			Cursors *struct {
				Before string `json:"before"`
				After  string `json:"after"`
			} `json:"cursors"`
			Next string `json:"next"`
		} `json:"paging"`
	} `json:"media"`
}

// medium is an IG Media of the account.
type medium struct {
	ID               idText      `json:"id"`
	Caption          *string     `json:"caption"`
	MediaType        *string     `json:"media_type"`
	MediaProductType *string     `json:"media_product_type"`
	Permalink        *string     `json:"permalink"`
	Timestamp        *string     `json:"timestamp"`
	LikeCount        *graphCount `json:"like_count"`
	CommentsCount    *graphCount `json:"comments_count"`
	ThumbnailURL     *string     `json:"thumbnail_url"`
	MediaURL         *string     `json:"media_url"`
}

// idText is an id as the source writes it: a JSON string, or a number
// whose digits are kept exactly (never through a float).
type idText string

func (t *idText) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*t = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = idText(s)
	default:
		if strings.Trim(string(b), "0123456789") != "" {
			return errors.New("an id that is neither a string nor a whole number")
		}
		*t = idText(b)
	}
	return nil
}

// graphCount is a counter: a whole number (or its digits as a string); null,
// negative or anything else is unknown.
type graphCount struct{ n *int64 }

func (c *graphCount) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(bytes.TrimSpace(b)), `"`)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		c.n = &n
	}
	return nil
}

func (c *graphCount) value() *int64 {
	if c == nil {
		return nil
	}
	return c.n
}

// ---- requests ----

// usernamePattern is the source's username alphabet: letters, digits,
// periods and underscores, at most 30. It also keeps the handle from
// changing the field expression it is written into.
var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9._]{1,30}$`)

// cursorPattern is what the source's paging cursors look like (base64);
// anything else could change the field expression it is written into.
var cursorPattern = regexp.MustCompile(`^[A-Za-z0-9_=+/-]+$`)

func checkHandle(handle string) error {
	if !usernamePattern.MatchString(handle) {
		return upstream.InvalidParameterFault("handle", "invalid_handle",
			"handle must be 1 to 30 letters, digits, periods or underscores, without a leading @.")
	}
	return nil
}

// discover asks business discovery for handle with the given field list.
func discover(ctx context.Context, c *upstream.Call, handle, fields string) (*discovered, error) {
	cursorSent := c.Param("cursor") != ""
	account := c.Secret(AccountSecret)
	if account == "" {
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusForbidden,
			Reason: "no Instagram professional account id is configured (" + AccountSecret + ")"}
	}
	version := c.Secret(VersionSecret)
	if version == "" {
		version = GraphVersion
	}
	q := url.Values{}
	// Instagram usernames are case-insensitive and stored in lower case.
	q.Set("fields", "business_discovery.username("+strings.ToLower(handle)+"){"+fields+"}")
	token := c.Secret(TokenSecret)
	if secret := c.Secret(AppSecretSecret); secret != "" {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(token))
		q.Set("appsecret_proof", hex.EncodeToString(mac.Sum(nil)))
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	path := "/" + url.PathEscape(version) + "/" + url.PathEscape(account)
	var body discoveryBody
	resp, err := c.GetJSON(ctx, path, q, h, &body)
	if err != nil {
		return nil, classifyGraph(resp, err, c.Now, cursorSent)
	}
	if body.Error != nil { // an error object is an error whatever the status
		return nil, graphFault(&upstream.Fault{Status: resp.Status}, body.Error, resp.Header, c.Now, cursorSent)
	}
	bd := body.BusinessDiscovery
	if bd == nil {
		return nil, upstream.MalformedFault("the answer has no business_discovery object")
	}
	if bd.ID == "" {
		return nil, upstream.MalformedFault("the discovered account has no id")
	}
	return bd, nil
}

// classifyGraph reads a failed answer's Graph API error object.
func classifyGraph(resp *upstream.Response, err error, now time.Time, cursorSent bool) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var body struct {
		Error *graphError `json:"error"`
	}
	if upstream.DecodeJSON(resp.Body, &body) != nil || body.Error == nil {
		if f.Kind == upstream.NotFound {
			// The Graph API answers a missing object with 400 and an error
			// object; a bare 404 is a wrong base URL or path, not an answer.
			f.Kind = upstream.Rejected
			f.Reason = "the Graph API path was not found: check the provider's base URL and version"
		}
		return f
	}
	return graphFault(f, body.Error, resp.Header, now, cursorSent)
}

// graphFault classifies by the error's code and subcode. An invalid
// parameter is the caller's cursor only when one was sent and the message
// is about it; every other parameter is Meridian's own.
func graphFault(f *upstream.Fault, e *graphError, h http.Header, now time.Time, cursorSent bool) *upstream.Fault {
	detail := describeGraph(e)
	switch {
	case e.Subcode == notProfessional:
		return upstream.NotFoundFault("no professional account has this username (or it is age-gated): " + detail)
	case e.Code == 4 || e.Code == 17 || e.Code == 32 || e.Code == 341 || e.Code == 613 || e.Code == 80001 || e.Code == 80002:
		f.Kind = upstream.RateLimited
		f.RetryAfter = graphWait(h, now)
		f.Reason = "rate limited: " + detail
	case e.Code == 190 || e.Code == 102:
		// The Graph API refuses a token with 400 and says so in the body;
		// 401 makes the runner count it against the route's health.
		f.Kind, f.Status = upstream.Rejected, http.StatusUnauthorized
		f.Reason = "the access token was refused (expired or revoked?): " + detail
	case e.Code == 10 || (e.Code >= 200 && e.Code <= 299):
		f.Kind, f.Status = upstream.Rejected, http.StatusForbidden
		f.Reason = "a permission is missing from the access token: " + detail
	case e.Code == 100 && e.Subcode == 33, e.Code == 110:
		// The configured account id is not an object the token can read.
		f.Kind, f.Status = upstream.Rejected, http.StatusForbidden
		f.Reason = "the configured account (" + AccountSecret + ") cannot be read with this token: " + detail
	case e.Code == 100 && cursorSent && (strings.Contains(strings.ToLower(e.Message), "cursor") || strings.Contains(e.Message, "after")):
		return upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor is not a page cursor the source accepts; pass back the value a response gave, unchanged.")
	case e.Code == 1 || e.Code == 2 || e.IsTransient:
		f.Kind = upstream.ServerError
		f.Reason = "the source failed: " + detail
	default:
		if f.Kind == "" || f.Kind == upstream.NotFound {
			f.Kind = upstream.Rejected
		}
		f.Reason = "refused: " + detail
	}
	return f
}

// describeGraph is an error's code, subcode and message for a fault reason.
func describeGraph(e *graphError) string {
	s := "code " + strconv.Itoa(e.Code)
	if e.Subcode != 0 {
		s += "/" + strconv.Itoa(e.Subcode)
	}
	if e.Message != "" {
		s += " " + e.Message
	}
	return upstream.Clip(s, 200)
}

// graphWait is the wait a rate-limited answer gives: the longest
// estimated_time_to_regain_access (minutes) in X-Business-Use-Case-Usage,
// else Retry-After; 0 when the source gives none (X-App-Usage carries
// percentages only).
func graphWait(h http.Header, now time.Time) time.Duration {
	var usage map[string][]struct {
		Wait *float64 `json:"estimated_time_to_regain_access"`
	}
	var wait time.Duration
	if raw := h.Get("x-business-use-case-usage"); raw != "" && json.Unmarshal([]byte(raw), &usage) == nil {
		for _, entries := range usage {
			for _, e := range entries {
				if e.Wait != nil && *e.Wait > 0 {
					wait = max(wait, time.Duration(*e.Wait*float64(time.Minute)))
				}
			}
		}
	}
	if wait > 0 {
		return wait
	}
	if v := strings.TrimSpace(h.Get("retry-after")); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	return 0
}

// ---- photo_social/profile ----

// Profile is the data of photo_social/profile.
// id is always set.
type Profile struct {
	creator.Profile
	Website   *string `json:"website"`
	Following *int64  `json:"following"`
	Verified  *bool   `json:"verified"`
}

// The _warnings sentences of profile and posts, fixed so callers can match them.
const (
	WarnVerifiedUnknown  = "The source does not report whether the account is verified: verified is null (unknown)."
	WarnFollowersMissing = "The source did not report the follower count: followers is null (unknown), not zero."
	WarnSharesViews      = "The source does not report shares, views or plays of another account's posts: counts.shares and counts.views are null (unknown), not zero."
)

func profile(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	if err := checkHandle(handle); err != nil {
		return nil, err
	}
	bd, err := discover(ctx, c, handle, profileFields)
	if err != nil {
		return nil, err
	}
	id := string(bd.ID)
	out := Profile{
		Profile: creator.Profile{ID: &id, Handle: text(bd.Username), Name: text(bd.Name), Description: text(bd.Biography),
			AvatarURL: text(bd.ProfilePictureURL), Followers: bd.FollowersCount.value(), PostsCount: bd.MediaCount.value()},
		Website: text(bd.Website), Following: bd.FollowsCount.value(),
	}
	if out.Handle == nil {
		h := strings.ToLower(handle) // the source matched it
		out.Handle = &h
	}
	link := profileURL(*out.Handle)
	out.URL = &link
	if out.Followers != nil {
		f := followerField
		out.FollowerSourceField = &f
	} else {
		out.Warnings = append(out.Warnings, WarnFollowersMissing)
	}
	out.Warnings = append(out.Warnings, WarnVerifiedUnknown)
	return out, nil
}

func profileURL(handle string) string { return Origin + "/" + url.PathEscape(handle) + "/" }

// ---- photo_social/posts ----

// Posts is the data of photo_social/posts.
// has_more is always known.
type Posts struct {
	Handle    *string `json:"handle"`
	AccountID string  `json:"account_id"`
	creator.Page[Post]
}

// Post is one of the account's media: the common fields, then the
// platform's extras.
type Post struct {
	creator.Post
	Shortcode   *string `json:"shortcode"`
	MediaType   *string `json:"media_type"`
	ProductType *string `json:"product_type"`
}

func posts(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	if err := checkHandle(handle); err != nil {
		return nil, err
	}
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 20
	}
	edge := "media.limit(" + strconv.Itoa(limit) + ")"
	if cur := c.Param("cursor"); cur != "" {
		if len(cur) > 2048 || !cursorPattern.MatchString(cur) {
			return nil, upstream.InvalidParameterFault("cursor", "invalid_cursor",
				"cursor is not a token from a previous response; pass it back unchanged.")
		}
		edge += ".after(" + cur + ")"
	}
	bd, err := discover(ctx, c, handle, postsUserFields+","+edge+"{"+mediaFields+"}")
	if err != nil {
		return nil, err
	}
	out := Posts{Handle: text(bd.Username), AccountID: string(bd.ID), Page: creator.Page[Post]{Items: []Post{}}}
	if out.Handle == nil {
		h := strings.ToLower(handle)
		out.Handle = &h
	}
	var after, next string
	if m := bd.Media; m != nil {
		for _, md := range m.Data {
			if md.ID == "" {
				return nil, upstream.MalformedFault("a medium has no id")
			}
			out.Items = append(out.Items, post(md))
		}
		if p := m.Paging; p != nil {
			next = p.Next
			if p.Cursors != nil {
				after = p.Cursors.After
			}
		}
	}
	out.Count = len(out.Items)
	// Nested edges carry cursors but not always a next link: a short page
	// is the last one.
	out.More(after != "" && (next != "" || out.Count >= limit))
	if *out.HasMore {
		out.Cursor = &after
	}
	var hidden, noComments int
	for _, p := range out.Items {
		if p.Counts.Likes == nil {
			hidden++
		}
		if p.Counts.Comments == nil {
			noComments++
		}
	}
	if hidden > 0 {
		out.Warnings = append(out.Warnings, strconv.Itoa(hidden)+
			" post(s) do not report likes (the owner hides like counts): counts.likes is null (unknown), not zero.")
	}
	if noComments > 0 {
		out.Warnings = append(out.Warnings, strconv.Itoa(noComments)+
			" post(s) do not report a comment count: counts.comments is null (unknown), not zero.")
	}
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, WarnSharesViews)
	}
	if out.Count == 0 && c.Param("cursor") == "" {
		if n := bd.MediaCount.value(); n != nil && *n > 0 {
			out.Warnings = append(out.Warnings, "The source listed none of the account's "+strconv.FormatInt(*n, 10)+" posts.")
		}
	}
	return out, nil
}

func post(m medium) Post {
	p := Post{Post: creator.Post{ID: string(m.ID), URL: text(m.Permalink), Text: text(m.Caption), CreatedAt: graphTime(m.Timestamp)},
		MediaType: text(m.MediaType), ProductType: text(m.MediaProductType)}
	if p.URL != nil {
		if code, err := Shortcode(*p.URL); err == nil {
			p.Shortcode = &code
		}
	}
	// A video's still is thumbnail_url; a photo's or an album's is its
	// own media_url (the album's first item).
	if m.MediaType != nil && *m.MediaType == "VIDEO" {
		p.ThumbnailURL = text(m.ThumbnailURL)
	} else {
		p.ThumbnailURL = text(m.MediaURL)
		if p.ThumbnailURL == nil {
			p.ThumbnailURL = text(m.ThumbnailURL)
		}
	}
	p.Counts.Likes = m.LikeCount.value()
	p.Counts.Comments = m.CommentsCount.value()
	return p
}

// graphTime turns the source's timestamps (2019-12-27T00:20:34+0000) into
// RFC 3339 UTC; one in another form is passed on as written.
func graphTime(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05-0700", time.RFC3339} {
		if t, err := time.Parse(layout, *s); err == nil {
			v := t.UTC().Format(time.RFC3339)
			return &v
		}
	}
	v := *s
	return &v
}

// text is a present, non-empty string, or null.
func text(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	v := *s
	return &v
}
