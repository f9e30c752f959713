package tiktok

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// Research API paths and the fields each asks for.
const (
	userInfoPath    = "/v2/research/user/info/"
	videoQueryPath  = "/v2/research/video/query/"
	commentListPath = "/v2/research/video/comment/list/"

	userFields    = "display_name,bio_description,avatar_url,is_verified,follower_count,following_count,likes_count,video_count,bio_url"
	videoFields   = "id,create_time,username,region_code,video_description,video_duration,hashtag_names,view_count,like_count,comment_count,share_count,favourites_count"
	commentFields = "id,video_id,text,like_count,reply_count,parent_comment_id,create_time"

	// followerField is where followers comes from on this route.
	followerField = "follower_count"
)

// ResearchProvider is the Research API route. Each call of it has its own
// token cache.
func ResearchProvider() *upstream.Provider {
	r := &research{tokens: newTokens()}
	return &upstream.Provider{
		Name: ResearchName,
		Protocol: "TikTok Research API v2 (JSON over HTTPS POST; a client access token from the OAuth client-credentials grant): " +
			"user info, video query by username, video comment list",
		Docs:    "https://developers.tiktok.com/doc/research-api-specs-query-videos",
		BaseURL: "https://open.tiktokapis.com",
		Secrets: []upstream.Secret{
			{Name: ClientKeySecret, Required: true, Doc: "The client key of an approved Research API project (developers.tiktok.com > " +
				"Research projects > the project's research client). The API is free for approved researchers, with a daily request quota per client."},
			{Name: ClientSecretSecret, Required: true, Doc: "The client secret of the same research client; it is sent only to the token endpoint " +
				"(POST /v2/oauth/token/, grant_type=client_credentials), whose two-hour client access token is cached and sent as a bearer token."},
		},
		// A query of the source often takes seconds, and posts may make a
		// few; the call's own deadline still bounds the whole.
		AttemptTimeout: 15 * time.Second,
		Endpoints: map[string]upstream.Adapter{
			ProfileEndpoint:  r.profile,
			PostsEndpoint:    r.posts,
			CommentsEndpoint: r.comments,
		},
	}
}

// research holds the route's per-process state: the token cache.
type research struct {
	tokens *tokens
}

// apiError is the source's error object, present on every answer (code
// "ok" on success).
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	LogID   string `json:"log_id"`
}

// answer is every Research API answer's envelope.
type answer[T any] struct {
	Data  *T        `json:"data"`
	Error *apiError `json:"error"`
}

// post sends one Research API request under the cached client token and
// decodes the answer's data into out. When the source refuses the token
// (expired or revoked before its time) a fresh token is fetched once and
// the request repeated. On failure the source's own error comes back too,
// when it sent one, for the callers that tell "no such thing" from other
// refusals.
func post[T any](ctx context.Context, r *research, c *upstream.Call, path, fields string, body any, out *T) (*apiError, error) {
	tok, err := r.tokens.get(ctx, c, "")
	if err != nil {
		return nil, err
	}
	target := path + "?fields=" + fields
	resp, err := c.Post(ctx, target, bearer(tok), body)
	if tokenRefused(resp) {
		if tok, err = r.tokens.get(ctx, c, tok); err != nil {
			return nil, err
		}
		resp, err = c.Post(ctx, target, bearer(tok), body)
	}
	if resp == nil {
		return nil, err // transport, timeout
	}
	var a answer[T]
	decodeErr := upstream.DecodeJSON(resp.Body, &a)
	if err != nil || (a.Error != nil && a.Error.Code != "" && a.Error.Code != "ok") {
		return a.Error, classify(resp.Status, resp.Header, a.Error, c.Now)
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	if a.Data == nil {
		return nil, upstream.MalformedFault("%s answered without data", path)
	}
	*out = *a.Data
	return nil, nil
}

func bearer(token string) http.Header {
	h := http.Header{}
	h.Set("authorization", "Bearer "+token)
	return h
}

// tokenRefused: a 401 that says access_token_invalid (or says nothing)
// asks for a new token; scope_not_authorized, also a 401, would meet the
// new one too.
func tokenRefused(resp *upstream.Response) bool {
	if resp == nil || resp.Status != http.StatusUnauthorized {
		return false
	}
	var a answer[struct{}]
	if upstream.DecodeJSON(resp.Body, &a) != nil || a.Error == nil || a.Error.Code == "" {
		return true
	}
	return a.Error.Code == "access_token_invalid"
}

// classify maps a refused request to a fault by the source's error code
// (https://developers.tiktok.com/doc/tiktok-api-v2-error-handling), or by
// the HTTP status when the body has none. Reasons carry the code, the
// source's message (clipped) and its log id, never the token.
func classify(status int, header http.Header, e *apiError, now time.Time) *upstream.Fault {
	code, detail := "", "HTTP "+strconv.Itoa(status)
	if e != nil && e.Code != "" {
		code = e.Code
		detail = code
		if e.Message != "" {
			detail += ": " + upstream.Clip(e.Message, 200)
		}
		if e.LogID != "" {
			detail += " (log_id " + upstream.Clip(e.LogID, 64) + ")"
		}
	}
	f := &upstream.Fault{Status: status}
	switch {
	case code == "rate_limit_exceeded" || status == http.StatusTooManyRequests:
		f.Kind, f.Status, f.Reason = upstream.RateLimited, http.StatusTooManyRequests, "rate limited: "+detail
		f.RetryAfter = quotaWait(header, now)
	case code == "access_token_invalid" || status == http.StatusUnauthorized:
		f.Kind, f.Status, f.Reason = upstream.Rejected, http.StatusUnauthorized, "the client access token was refused: "+detail
	case code == "scope_not_authorized" || code == "scope_permission_missed" || status == http.StatusForbidden:
		// The client is not (or no longer) approved for research.data.basic.
		f.Kind, f.Status, f.Reason = upstream.Rejected, http.StatusForbidden, "the research client lacks the scope: "+detail
	case code == "internal_error" || status >= 500:
		f.Kind, f.Reason = upstream.ServerError, "the source failed: "+detail
		if f.Status < 500 {
			f.Status = http.StatusInternalServerError
		}
	case status == http.StatusNotFound:
		f.Kind, f.Reason = upstream.NotFound, "not found: "+detail
	default:
		// invalid_params (400) and anything undocumented.
		f.Kind, f.Reason = upstream.Rejected, "the request was refused: "+detail
		if f.Status < 400 {
			f.Status = http.StatusBadRequest
		}
	}
	return f
}

// quotaWait is how long a rate-limited route rests: the answer's
// Retry-After when it gives one, else until the daily quota resets at the
// next midnight UTC (the runner caps a rest at an hour).
func quotaWait(header http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(header.Get("retry-after")); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	next := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return max(next.Sub(now), time.Second)
}

// invalidParams reports whether the source refused the request's
// parameters with a message about what (a user, a video) it names.
func invalidParams(e *apiError, about string) bool {
	return e != nil && e.Code == "invalid_params" && strings.Contains(strings.ToLower(e.Message), about)
}

// ---- short_video_a/profile ----

// userRecord is user/info's data.
type userRecord struct {
	DisplayName    *string `json:"display_name"`
	BioDescription *string `json:"bio_description"`
	AvatarURL      *string `json:"avatar_url"`
	IsVerified     *bool   `json:"is_verified"`
	FollowerCount  flexInt `json:"follower_count"`
	FollowingCount flexInt `json:"following_count"`
	LikesCount     flexInt `json:"likes_count"`
	VideoCount     flexInt `json:"video_count"`
	BioURL         *string `json:"bio_url"`
}

func (u userRecord) empty() bool {
	return u.DisplayName == nil && u.BioDescription == nil && u.AvatarURL == nil && u.IsVerified == nil &&
		u.FollowerCount.v == nil && u.FollowingCount.v == nil && u.LikesCount.v == nil && u.VideoCount.v == nil && u.BioURL == nil
}

// userInfo looks an account up. An unknown account, or one the source
// does not serve (private, banned), is not found: a 404, a refusal of the
// parameters that names the user, or an answer without any field.
func (r *research) userInfo(ctx context.Context, c *upstream.Call, handle, fields string) (userRecord, error) {
	var u userRecord
	apiErr, err := post(ctx, r, c, userInfoPath, fields, map[string]string{"username": handle}, &u)
	if err != nil {
		var f *upstream.Fault
		if errors.As(err, &f) && (f.Kind == upstream.NotFound || invalidParams(apiErr, "user")) {
			return u, &upstream.Fault{Kind: upstream.NotFound, Status: f.Status, Reason: "no public account has this username: " + f.Reason}
		}
		return u, err
	}
	if u.empty() {
		return u, upstream.NotFoundFault("the source answered no field of the account")
	}
	return u, nil
}

// The profile's _warnings sentences, fixed so that callers can match them.
const (
	WarnNoID        = "The source does not report the account's numeric id: id is null."
	WarnNoFollowers = "The source did not report the follower count: followers is null (unknown), not zero."
)

func (r *research) profile(ctx context.Context, c *upstream.Call) (any, error) {
	handle, err := handleOf(c)
	if err != nil {
		return nil, err
	}
	u, err := r.userInfo(ctx, c, handle, userFields)
	if err != nil {
		return nil, err
	}
	p := Profile{
		Profile: creator.Profile{Handle: &handle, URL: ptr(profileURL(handle)), Name: text(u.DisplayName),
			Description: text(u.BioDescription), AvatarURL: text(u.AvatarURL), Followers: u.FollowerCount.v,
			PostsCount: u.VideoCount.v, Warnings: []string{WarnNoID}},
		Verified: u.IsVerified, BioLink: text(u.BioURL), Following: u.FollowingCount.v, LikesCount: u.LikesCount.v,
	}
	if p.Followers != nil {
		p.FollowerSourceField = str(followerField)
	} else {
		p.Warnings = append(p.Warnings, WarnNoFollowers)
	}
	return p, nil
}
