// Package threads serves microblog_c's creator building blocks over Meta's
// official Threads API (graph.threads.net, Graph API v1.0) with the
// operator's Threads user access token:
//
//	microblog_c/profile   GET /v1.0/profile_lookup?username=   (threads_profile_discovery)
//	microblog_c/posts     GET /v1.0/profile_posts?username=    (threads_profile_discovery)
//	microblog_c/comments  GET /v1.0/{media-id}/replies         (threads_read_replies)
//
// The token is sent as the access_token query parameter, as every example
// of the source's documentation does. Lists page with the Graph cursors
// (paging.cursors.after, with paging.next present while more pages
// exist), passed through unchanged as cursor.
//
// What the source cannot give, and the data says so: per-post counters of
// another account's posts (insights are served to a post's own author
// only), like and reply counts of replies, a post count of an account, and
// the ids and display names of reply authors.
package threads

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// TokenSecret is the Threads user access token (a long-lived one lasts 60
// days and is refreshed with GET /refresh_access_token).
const TokenSecret = "MERIDIAN_THREADS_ACCESS_TOKEN"

const (
	// version prefixes every path: the source versions its API in the path.
	version = "/v1.0"
	// siteURL builds profile and post pages; threads.net redirects to it.
	siteURL = "https://www.threads.com"
)

// Provider is the Threads API provider; it needs the access token.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name: "threads_api",
		Protocol: "Threads API (Meta Graph API for Threads v1.0, JSON, Threads user access token): profile discovery " +
			"(profile_lookup, profile_posts) and media replies",
		Docs:    "https://developers.facebook.com/docs/threads",
		BaseURL: "https://graph.threads.net",
		Secrets: []upstream.Secret{{
			Name:     TokenSecret,
			Required: true,
			Doc: "A long-lived Threads user access token of an app with the Threads use case, granted threads_basic, " +
				"threads_profile_discovery (profile and posts of public accounts; standard access reaches only a few official " +
				"accounts, advanced access any public account) and threads_read_replies (replies). It lasts 60 days; refresh it " +
				"with GET /refresh_access_token before it expires.",
		}},
		Endpoints: map[string]upstream.Adapter{
			"microblog_c/profile":  profile,
			"microblog_c/posts":    posts,
			"microblog_c/comments": comments,
		},
	}
}

// graphError is the Graph API error object ({"error": {...}}).
type graphError struct {
	Message     string `json:"message"`
	Type        string `json:"type"`
	Code        int    `json:"code"`
	Subcode     int    `json:"error_subcode"`
	IsTransient bool   `json:"is_transient"`
	UserTitle   string `json:"error_user_title"`
	UserMsg     string `json:"error_user_msg"`
	FBTraceID   string `json:"fbtrace_id"`
}

type errorBody struct {
	Error *graphError `json:"error"`
}

// describe is an error for a fault reason: code, subcode and message, no
// trace id (it identifies nothing useful to a reader of Meridian's logs).
func (g *graphError) describe() string {
	s := "(#" + strconv.Itoa(g.Code)
	if g.Subcode != 0 {
		s += "/" + strconv.Itoa(g.Subcode)
	}
	s += ") " + cmp.Or(g.Message, g.UserMsg, g.Type)
	return upstream.Clip(s, 240)
}

// subject says what a request was about, for the classification of its
// errors: a code 100 ("invalid parameter") means an unknown username on
// the discovery calls and an unknown media id on the replies edge.
type subject int

const (
	account subject = iota // a username (profile_lookup, profile_posts)
	media                  // a media id (replies)
)

// request is one call: its path under the version, query and subject;
// cursor is whether the caller's cursor was sent as after.
type request struct {
	path   string
	query  url.Values
	about  subject
	cursor bool
}

// get makes one request and decodes a 2xx answer into out; failures are
// classified from the Graph error body, whatever the HTTP status.
func get(ctx context.Context, c *upstream.Call, r request, out any) error {
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	q.Set("access_token", c.Secret(TokenSecret))
	resp, err := c.Get(ctx, version+r.path, q, nil)
	if err != nil {
		return classify(resp, err, c.Now, r)
	}
	// A 2xx carrying an error object is still an error.
	var probe errorBody
	if json.Unmarshal(resp.Body, &probe) == nil && probe.Error != nil {
		return graphFault(probe.Error, resp.Status, resp.Header, c.Now, r)
	}
	return upstream.DecodeJSON(resp.Body, out)
}

// classify re-reads a failed answer: a Graph error body decides the fault;
// without one the status classification stands, a bare 429 resting the
// route as a Graph rate limit does, and a bare 404 meaning a wrong base
// URL or path (the source answers an unknown object with a Graph error,
// not a bare 404).
func classify(resp *upstream.Response, err error, now time.Time, r request) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var body errorBody
	if upstream.DecodeJSON(resp.Body, &body) == nil && body.Error != nil {
		return graphFault(body.Error, resp.Status, resp.Header, now, r)
	}
	if f.Kind == upstream.RateLimited && f.RetryAfter == 0 {
		f.RetryAfter = rateWait(resp.Header, now)
	}
	if f.Kind == upstream.NotFound {
		return &upstream.Fault{Kind: upstream.Rejected, Status: f.Status,
			Reason: "the source path was not found without a Graph error: check the provider's base URL"}
	}
	return f
}

// Graph error codes (Graph API "Handling Errors" and rate-limit guides).
const (
	codeUnknown         = 1   // an unknown error, retried
	codeService         = 2   // the service is temporarily unavailable
	codeAppRateLimit    = 4   // the app's call count
	codePermission      = 10  // the permission is not granted, or the app lacks it
	codeUserRateLimit   = 17  // the user's call count
	codePageRateLimit   = 32  // the page-level call count
	codeInvalidParam    = 100 // an invalid parameter, or an object that cannot be loaded
	codeInvalidToken    = 190 // an expired, revoked or invalid access token
	codeCallLimit       = 613 // calls to this API exceed its rate limit
	subcodeUnsupported  = 33  // "Object with ID ... does not exist, cannot be loaded due to missing permissions ..."
	firstPermissionCode = 200 // 200-299: permission errors
	lastPermissionCode  = 299
	firstBUCRateLimit   = 80001 // business-use-case rate limits
	lastBUCRateLimit    = 80014
)

// graphFault maps a Graph error to a fault.
func graphFault(g *graphError, status int, h http.Header, now time.Time, r request) error {
	detail := g.describe()
	f := &upstream.Fault{Status: status}
	msg := strings.ToLower(g.Message)
	switch {
	case g.Code == codeAppRateLimit || g.Code == codeUserRateLimit || g.Code == codePageRateLimit || g.Code == codeCallLimit ||
		(g.Code >= firstBUCRateLimit && g.Code <= lastBUCRateLimit) || status == http.StatusTooManyRequests:
		f.Kind = upstream.RateLimited
		f.RetryAfter = rateWait(h, now)
		f.Reason = "rate limited " + detail + usage(h)
	case g.Code == codeInvalidToken:
		// A refusal of Meridian's own credential, as a 401 is: every later
		// call would meet it, so it counts against the route's health.
		f.Kind, f.Status = upstream.Rejected, http.StatusUnauthorized
		f.Reason = "access token refused (expired, revoked or invalid; refresh it) " + detail
	case g.Code == codePermission || (g.Code >= firstPermissionCode && g.Code <= lastPermissionCode):
		f.Kind, f.Status = upstream.Rejected, http.StatusForbidden
		f.Reason = "permission refused (is threads_profile_discovery or threads_read_replies granted, with the access level " +
			"the account needs?) " + detail
	case g.Code == codeInvalidParam && strings.Contains(msg, "nonexisting field"):
		// A field this adapter asks for is gone: the source changed.
		f.Kind = upstream.Rejected
		f.Reason = "the source refused a requested field (has its API changed?) " + detail
	case g.Code == codeInvalidParam && r.cursor:
		// With a cursor sent, the cursor is what changed since the first
		// page (which found the account or the post): a stale or foreign
		// one.
		return upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor was refused by the source; pass back a cursor from a previous response unchanged.")
	case g.Code == codeInvalidParam && (r.about == account || g.Subcode == subcodeUnsupported):
		// The source answers an unknown username, or an account it will not
		// show (private, or out of reach of the token's access level), and
		// an unknown media id alike.
		return upstream.NotFoundFault("the source has no such record it may show: " + detail)
	case g.Code == codeUnknown || g.Code == codeService || g.IsTransient:
		f.Kind = upstream.ServerError
		f.Reason = "transient source error " + detail
	case status >= 500:
		f.Kind = upstream.ServerError
		f.Reason = detail
	default:
		f.Kind = upstream.Rejected
		f.Reason = "refused " + detail
	}
	return f
}

// defaultRateWait rests the route after a rate limit that names no wait:
// the source counts calls over a rolling 24 hours and sends no reset time,
// so the route rests a while rather than hammering a spent budget.
const defaultRateWait = 15 * time.Minute

// rateWait is how long a rate limit asks to wait: the Graph business use
// case header's estimated_time_to_regain_access (minutes), then
// retry-after (seconds), then defaultRateWait.
func rateWait(h http.Header, now time.Time) time.Duration {
	if v := h.Get("x-business-use-case-usage"); v != "" {
		var usage map[string][]struct {
			Regain *float64 `json:"estimated_time_to_regain_access"`
		}
		if json.Unmarshal([]byte(v), &usage) == nil {
			var longest float64
			for _, entries := range usage {
				for _, e := range entries {
					if e.Regain != nil && *e.Regain > longest {
						longest = *e.Regain
					}
				}
			}
			if longest > 0 {
				return time.Duration(longest * float64(time.Minute))
			}
		}
	}
	if v := strings.TrimSpace(h.Get("retry-after")); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	return defaultRateWait
}

// usage is the x-app-usage header (percentages of the app's budget) for a
// fault reason, when the source sent it.
func usage(h http.Header) string {
	v := h.Get("x-app-usage")
	if v == "" {
		return ""
	}
	var u map[string]json.Number
	if json.Unmarshal([]byte(v), &u) != nil {
		return ""
	}
	return "; x-app-usage call_count " + u["call_count"].String() + "%, total_time " + u["total_time"].String() +
		"%, total_cputime " + u["total_cputime"].String() + "%"
}

// paging is a Graph list's paging object: next is present while another
// page exists; cursors.after is the cursor that fetches it.
type paging struct {
	Cursors *struct {
		Before string `json:"before"`
		After  string `json:"after"`
	} `json:"cursors"`
	Next string `json:"next"`
}

// nextCursor is the page's next cursor, or nil on the last page.
func (p *paging) nextCursor() *string {
	if p == nil || p.Next == "" {
		return nil
	}
	if p.Cursors != nil && p.Cursors.After != "" {
		return &p.Cursors.After
	}
	// The next URL carries the cursor when cursors does not.
	if u, err := url.Parse(p.Next); err == nil {
		if after := u.Query().Get("after"); after != "" {
			return &after
		}
	}
	return nil
}

// cursorPattern is what Graph cursors look like (URL-safe base64 and
// friends); anything else was not handed out by this route.
var cursorPattern = regexp.MustCompile(`^[A-Za-z0-9+/=_.\-]+$`)

// maxCursor bounds a cursor's length (the source's are well under it).
const maxCursor = 2048

// pageCursor puts the caller's cursor into q as after, after checking it.
func pageCursor(c *upstream.Call, q url.Values) (bool, error) {
	cur := c.Param("cursor")
	if cur == "" {
		return false, nil
	}
	if len(cur) > maxCursor || !cursorPattern.MatchString(cur) {
		return false, upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor is not a cursor from a previous response; pass it back unchanged.")
	}
	q.Set("after", cur)
	return true, nil
}

// text is a string the source may send empty: empty is unknown.
var text = upstream.Text

// timestamp turns the source's ISO 8601 time ("2024-09-12T23:17:39+0000")
// into RFC 3339 UTC; anything else is kept as sent rather than lost.
func timestamp(s string) *string {
	if s == "" {
		return nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05-0700", time.RFC3339} {
		if t, err := time.Parse(layout, s); err == nil {
			v := t.UTC().Format(time.RFC3339)
			return &v
		}
	}
	return &s
}

// ref reads a media reference the source writes as {"id": "..."} (or, to
// be safe, as the id string itself).
func ref(raw json.RawMessage) *string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.ID != "" {
		return &obj.ID
	}
	var id string
	if json.Unmarshal(raw, &id) == nil && id != "" {
		return &id
	}
	return nil
}

func profileURL(username string) string { return siteURL + "/@" + url.PathEscape(username) }
