// Package xapi serves the microblog_b endpoints over the official X API v2
// with the operator's app-only bearer token: GET /2/tweets/search/recent for
// microblog_b/search-posts, GET /2/users/by/username/:username for
// microblog_b/profile, and the creator building blocks on the same calls:
// microblog_b/posts (the user lookup, then GET /2/users/:id/tweets) and
// microblog_b/comments (recent search for the post's conversation, and
// GET /2/tweets/:id only when that finds nothing).
//
// Search uses recent search, which covers the last seven days on every
// self-serve access level; full-archive search (/2/tweets/search/all) needs
// a higher tier, so dates outside the window are handled here (see
// timeBounds). The cursors are X's next_token and pagination_token, passed
// through unchanged.
package xapi

import (
	"cmp"
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
)

// TokenSecret is the app-only bearer token (OAuth 2.0 App-Only).
const TokenSecret = "MERIDIAN_X_BEARER_TOKEN"

// pageSize is max_results for search (X allows 10..100). X meters its
// self-serve tiers by posts read, and a call costs the caller one credit
// whatever its size, so a page is the house default of 20, not 100.
const pageSize = "20"

// Requested fields. note_tweet carries the full text of posts longer than
// 280 characters, which text truncates.
const (
	tweetFields      = "created_at,public_metrics,author_id,entities,lang,referenced_tweets,note_tweet"
	searchUserFields = "username,name,verified,verified_type"
	// A timeline's posts are all the account's, so author_id is not asked for.
	timelineFields = "created_at,public_metrics,referenced_tweets,note_tweet,entities,lang"
	// Replies need no entities: a comment carries text, author and counters.
	replyFields       = "created_at,public_metrics,author_id,conversation_id,referenced_tweets,note_tweet,lang"
	replyUserFields   = "username,name"
	profileUserFields = "created_at,description,entities,location,pinned_tweet_id,profile_banner_url,profile_image_url," +
		"protected,public_metrics,url,verified,verified_type"
)

// Provider is the X API v2 provider; it needs the bearer token.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     "x_api",
		Protocol: "X API v2 (JSON, OAuth 2.0 App-Only bearer token): recent search, user lookup by username, user timelines and post lookup",
		Docs:     "https://docs.x.com/x-api",
		BaseURL:  "https://api.x.com",
		Secrets: []upstream.Secret{{
			Name:     TokenSecret,
			Required: true,
			Doc: "The Bearer Token of an X developer App attached to a Project (developer.x.com > Projects & Apps > " +
				"Keys and tokens), sent as Authorization: Bearer. Recent search and user lookup are read-only; " +
				"the App's access level sets the monthly post cap and the rate limits.",
		}},
		Endpoints: map[string]upstream.Adapter{
			"microblog_b/search-posts": searchPosts,
			"microblog_b/profile":      profile,
			"microblog_b/posts":        posts,
			"microblog_b/comments":     comments,
		},
	}
}

func headers(c *upstream.Call) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+c.Secret(TokenSecret))
	return h
}

// problem is X's error object: the top-level body of a refused request
// (RFC 7807 style) and each entry of an errors array.
type problem struct {
	Title      string              `json:"title"`
	Detail     string              `json:"detail"`
	Type       string              `json:"type"`
	Reason     string              `json:"reason"`
	Message    string              `json:"message"`
	Parameter  string              `json:"parameter"`
	Parameters map[string][]string `json:"parameters"`
}

type errorBody struct {
	problem
	Errors []problem `json:"errors"`
}

const (
	notFoundType      = "https://api.twitter.com/2/problems/resource-not-found"
	notAuthorizedType = "https://api.twitter.com/2/problems/not-authorized-for-resource"
	usageCapType      = "https://api.twitter.com/2/problems/usage-capped"
)

// usageCapWait rests the route after the monthly post cap is hit: the cap
// lasts until the billing period ends, which X does not say, so the
// runner's longest rest (an hour) is asked for.
const usageCapWait = time.Hour

// fields maps X's query parameters to the Meridian parameters they came
// from, so an X refusal of one is a 422 naming the caller's field.
var fields = map[string]string{
	"query": "query", "next_token": "cursor", "pagination_token": "cursor",
	"start_time": "from_date", "end_time": "to_date", "username": "handle", "max_results": "limit",
}

// getJSON fetches path and decodes a 2xx body into out; failures are
// classified from X's status, rate-limit headers and problem bodies.
func getJSON(ctx context.Context, c *upstream.Call, path string, q url.Values, out any) error {
	resp, err := c.GetJSON(ctx, path, q, headers(c), out)
	if err != nil {
		return classify(resp, err, c.Now)
	}
	return nil
}

func classify(resp *upstream.Response, err error, now time.Time) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var body errorBody
	_ = upstream.DecodeJSON(resp.Body, &body) // an unreadable body keeps the status classification
	detail := describe(body.problem)
	switch f.Status {
	case http.StatusTooManyRequests:
		f.Kind = upstream.RateLimited
		// The monthly cap outlasts the 15-minute window x-rate-limit-reset names.
		if body.Type == usageCapType {
			f.RetryAfter = usageCapWait
		} else if wait := upstream.UntilUnix(resp.Header.Get("x-rate-limit-reset"), now); wait > 0 {
			f.RetryAfter = max(wait, time.Second)
		}
		f.Reason = "rate limited (" + detail + ")"
	case http.StatusUnauthorized:
		f.Reason = "bearer token refused (is it valid?): " + detail
	case http.StatusForbidden:
		// client-not-enrolled: the App is not attached to a Project or its
		// access level lacks the endpoint.
		f.Reason = "forbidden: " + detail
	case http.StatusBadRequest:
		for _, e := range body.Errors {
			for p := range e.Parameters {
				if field, ok := fields[p]; ok {
					return upstream.InvalidParameterFault(field, "rejected_by_source",
						field+" was refused by the source: "+upstream.Clip(e.Message, 300))
				}
			}
		}
		f.Reason = "bad request: " + detail
	default:
		if body.Title != "" {
			f.Reason = http.StatusText(f.Status) + ": " + detail
		}
	}
	return f
}

// describe is a problem's title and detail for a fault reason.
func describe(p problem) string {
	s := strings.Trim(p.Title+": "+cmp.Or(p.Detail, p.Reason, p.Message), ": ")
	return upstream.Clip(s, 200)
}

// text is a string the source may send as null or "": both are unknown.
var text = upstream.Text

// ---- microblog_b/search-posts ----

type entities struct {
	Hashtags []struct {
		Tag string `json:"tag"`
	} `json:"hashtags"`
	Mentions []struct {
		Username string `json:"username"`
	} `json:"mentions"`
	URLs []struct {
		URL         string `json:"url"`
		ExpandedURL string `json:"expanded_url"`
		UnwoundURL  string `json:"unwound_url"`
	} `json:"urls"`
}

type tweet struct {
	ID            string `json:"id"`
	Text          string `json:"text"`
	AuthorID      string `json:"author_id"`
	CreatedAt     string `json:"created_at"`
	Lang          string `json:"lang"`
	PublicMetrics *struct {
		RetweetCount    *int64 `json:"retweet_count"`
		ReplyCount      *int64 `json:"reply_count"`
		LikeCount       *int64 `json:"like_count"`
		QuoteCount      *int64 `json:"quote_count"`
		BookmarkCount   *int64 `json:"bookmark_count"`
		ImpressionCount *int64 `json:"impression_count"`
	} `json:"public_metrics"`
	Entities         *entities `json:"entities"`
	ReferencedTweets []struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"referenced_tweets"`
	NoteTweet *struct {
		Text     string    `json:"text"`
		Entities *entities `json:"entities"`
	} `json:"note_tweet"`
}

// tweetsBody is a page of posts: recent search and user timelines answer
// the same envelope.
type tweetsBody struct {
	Data     []tweet `json:"data"`
	Includes struct {
		Users []user `json:"users"`
	} `json:"includes"`
	Meta *struct {
		ResultCount *int64 `json:"result_count"`
		NextToken   string `json:"next_token"`
	} `json:"meta"`
	Errors []problem `json:"errors"`
}

// Posts is the data of microblog_b/search-posts and microblog_b/posts: the
// common page, whose keys are the spec's, with has_more always known. Its
// items are the spec's search-posts items (stats, not creator.Counts).
type Posts = creator.Page[Post]

// Post is one post. Fields after Stats are the spec's unnamed extras.
type Post struct {
	ID        string   `json:"id"`
	URL       *string  `json:"url"`
	Text      *string  `json:"text"`
	CreatedAt *string  `json:"created_at"`
	Lang      *string  `json:"lang"`
	Author    *Author  `json:"author"`
	Stats     *Stats   `json:"stats"`
	Type      string   `json:"type"`
	Reference *string  `json:"referenced_id"`
	Hashtags  []string `json:"hashtags"`
	Mentions  []string `json:"mentions"`
	Links     []string `json:"links"`
}

// Author is a post's author, from the expanded users.
type Author struct {
	ID     string  `json:"id"`
	Handle *string `json:"handle"`
	Name   *string `json:"name"`
}

// Stats are the post's public counters; null when X did not send one.
type Stats struct {
	Likes     *int64 `json:"likes"`
	Retweets  *int64 `json:"retweets"`
	Replies   *int64 `json:"replies"`
	Quotes    *int64 `json:"quotes"`
	Bookmarks *int64 `json:"bookmarks"`
	Views     *int64 `json:"views"`
}

// tokenPattern is what next_token looks like; anything else was not handed
// out by this route and would only earn a 400 from X.
var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,512}$`)

// pageToken checks the caller's cursor before it is sent as name.
func pageToken(c *upstream.Call, q url.Values, name string) error {
	cur := c.Param("cursor")
	if cur == "" {
		return nil
	}
	if !tokenPattern.MatchString(cur) {
		return upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor is not a token from a previous response; pass it back unchanged.")
	}
	q.Set(name, cur)
	return nil
}

// getPage fetches a page of posts from path (recent search or a timeline);
// a page without meta is malformed.
func getPage(ctx context.Context, c *upstream.Call, path string, q url.Values) (*tweetsBody, error) {
	var body tweetsBody
	if err := getJSON(ctx, c, path, q, &body); err != nil {
		return nil, err
	}
	if body.Meta == nil {
		if len(body.Errors) > 0 {
			return nil, upstream.MalformedFault("%s answered only errors: %s", path, describe(body.Errors[0]))
		}
		return nil, upstream.MalformedFault("%s answer has no meta", path)
	}
	for _, t := range body.Data {
		if t.ID == "" {
			return nil, upstream.MalformedFault("a post has no id")
		}
	}
	return &body, nil
}

// usersByID indexes expanded users.
func usersByID(list []user) map[string]user {
	users := make(map[string]user, len(list))
	for _, u := range list {
		users[u.ID] = u
	}
	return users
}

// postsPage maps a page of posts as search-posts and posts answer it.
func postsPage(body *tweetsBody, users map[string]user) Posts {
	out := Posts{Items: make([]Post, 0, len(body.Data))}
	for _, t := range body.Data {
		out.Items = append(out.Items, post(t, users))
	}
	out.Count = len(out.Items)
	out.Cursor = text(body.Meta.NextToken)
	out.More(out.Cursor != nil)
	return out
}

func searchPosts(ctx context.Context, c *upstream.Call) (any, error) {
	q := url.Values{}
	query := c.Param("query")
	if c.Param("include_reposts") == "false" {
		query += " -is:retweet"
	}
	q.Set("query", query)
	if c.Param("mode") == "top" {
		q.Set("sort_order", "relevancy")
	} else {
		q.Set("sort_order", "recency")
	}
	start, end, err := timeBounds(c.Param("from_date"), c.Param("to_date"), c.Now)
	if err != nil {
		return nil, err
	}
	if start != "" {
		q.Set("start_time", start)
	}
	if end != "" {
		q.Set("end_time", end)
	}
	if err := pageToken(c, q, "next_token"); err != nil {
		return nil, err
	}
	q.Set("max_results", pageSize)
	q.Set("tweet.fields", tweetFields)
	q.Set("expansions", "author_id")
	q.Set("user.fields", searchUserFields)

	body, err := getPage(ctx, c, searchPath, q)
	if err != nil {
		return nil, err
	}
	page := postsPage(body, usersByID(body.Includes.Users))
	if from := c.Param("from_date"); from != "" && start == "" {
		page.Warnings = append(page.Warnings, WarnBeforeWindow)
	}
	return page, nil
}

// WarnBeforeWindow says a from_date reached back past what recent search
// holds, so the answer is the last 7 days, not the whole range asked for.
const WarnBeforeWindow = "from_date is before the source's search window: only posts of the last 7 days are searched, so older posts in the range are missing."

const searchPath = "/2/tweets/search/recent"

func post(t tweet, users map[string]user) Post {
	// X leaves out entities a post does not have, so none is an empty list.
	// X sends a post's text with &, < and > escaped as HTML entities
	// (&amp; &lt; &gt;); they are decoded once, so a typed "&amp;" (sent
	// as "&amp;amp;") stays as typed.
	p := Post{ID: t.ID, Text: text(html.UnescapeString(t.Text)), CreatedAt: text(t.CreatedAt), Lang: text(t.Lang), Type: "post",
		Hashtags: []string{}, Mentions: []string{}, Links: []string{}}
	ents := t.Entities
	if t.NoteTweet != nil && t.NoteTweet.Text != "" { // a long post: text is cut at 280 characters
		p.Text = text(html.UnescapeString(t.NoteTweet.Text))
		if t.NoteTweet.Entities != nil {
			ents = t.NoteTweet.Entities
		}
	}
	if t.AuthorID != "" {
		a := &Author{ID: t.AuthorID}
		if u, ok := users[t.AuthorID]; ok {
			a.Handle, a.Name = text(u.Username), text(u.Name)
			if a.Handle != nil {
				link := "https://x.com/" + *a.Handle + "/status/" + t.ID
				p.URL = &link
			}
		}
		p.Author = a
	}
	if m := t.PublicMetrics; m != nil {
		p.Stats = &Stats{Likes: m.LikeCount, Retweets: m.RetweetCount, Replies: m.ReplyCount, Quotes: m.QuoteCount,
			Bookmarks: m.BookmarkCount, Views: m.ImpressionCount}
	}
	// A repost is the strongest reference, then a quote, then a reply.
	for _, kind := range []struct{ x, ours string }{{"retweeted", "repost"}, {"quoted", "quote"}, {"replied_to", "reply"}} {
		for _, r := range t.ReferencedTweets {
			if r.Type == kind.x && p.Type == "post" {
				p.Type, p.Reference = kind.ours, text(r.ID)
			}
		}
	}
	if ents != nil {
		for _, h := range ents.Hashtags {
			p.Hashtags = append(p.Hashtags, h.Tag)
		}
		for _, m := range ents.Mentions {
			p.Mentions = append(p.Mentions, m.Username)
		}
		for _, u := range ents.URLs {
			p.Links = append(p.Links, cmp.Or(u.UnwoundURL, u.ExpandedURL, u.URL))
		}
	}
	return p
}

// Recent search accepts start_time no earlier than seven days ago and
// end_time at least ten seconds before the request; both are RFC 3339.
const (
	window    = 7 * 24 * time.Hour
	endMargin = 30 * time.Second
)

// timeBounds turns the caller's dates (YYYY-MM-DD, UTC days, to_date
// inclusive) into start_time and end_time (exclusive). A bound that adds
// nothing to the seven-day window is left out, so a from_date before the
// window or a to_date of today still searches; a to_date before the window
// or a from_date in the future can match nothing recent search holds, and
// is refused before any request.
func timeBounds(from, to string, now time.Time) (start, end string, err error) {
	earliest := now.Add(-window).Add(time.Minute) // a minute's slack for clock skew and latency
	if from != "" {
		d, perr := time.Parse(time.DateOnly, from)
		if perr != nil {
			return "", "", upstream.InvalidParameterFault("from_date", "invalid_date", "from_date must be YYYY-MM-DD.")
		}
		if d.After(now) {
			return "", "", upstream.InvalidParameterFault("from_date", "out_of_window",
				"from_date is in the future; the source searches the last 7 days.")
		}
		if d.After(earliest) {
			start = d.UTC().Format(time.RFC3339)
		}
	}
	if to != "" {
		d, perr := time.Parse(time.DateOnly, to)
		if perr != nil {
			return "", "", upstream.InvalidParameterFault("to_date", "invalid_date", "to_date must be YYYY-MM-DD.")
		}
		e := d.AddDate(0, 0, 1)
		if !e.After(earliest) {
			return "", "", upstream.InvalidParameterFault("to_date", "out_of_window",
				"to_date is older than the source's search window (the last 7 days).")
		}
		if e.Before(now.Add(-endMargin)) {
			end = e.UTC().Format(time.RFC3339)
		}
	}
	return start, end, nil
}

// ---- microblog_b/profile ----

type user struct {
	ID               string `json:"id"`
	Username         string `json:"username"`
	Name             string `json:"name"`
	Description      string `json:"description"`
	Location         string `json:"location"`
	URL              string `json:"url"`
	ProfileImageURL  string `json:"profile_image_url"`
	ProfileBannerURL string `json:"profile_banner_url"`
	CreatedAt        string `json:"created_at"`
	PinnedTweetID    string `json:"pinned_tweet_id"`
	Protected        *bool  `json:"protected"`
	Verified         *bool  `json:"verified"`
	VerifiedType     string `json:"verified_type"`
	PublicMetrics    *struct {
		FollowersCount *int64 `json:"followers_count"`
		FollowingCount *int64 `json:"following_count"`
		TweetCount     *int64 `json:"tweet_count"`
		ListedCount    *int64 `json:"listed_count"`
		LikeCount      *int64 `json:"like_count"`
	} `json:"public_metrics"`
	Entities *struct {
		URL *struct {
			URLs []struct {
				URL         string `json:"url"`
				ExpandedURL string `json:"expanded_url"`
			} `json:"urls"`
		} `json:"url"`
	} `json:"entities"`
}

type userBody struct {
	Data   *user     `json:"data"`
	Errors []problem `json:"errors"`
}

// Profile is the data of microblog_b/profile. Fields after CoverURL are
// extras the spec does not list.
type Profile struct {
	ID           string   `json:"id"`
	Handle       *string  `json:"handle"`
	Name         *string  `json:"name"`
	URL          *string  `json:"url"`
	Bio          *string  `json:"bio"`
	BioLink      *string  `json:"bio_link"`
	AvatarURL    *string  `json:"avatar_url"`
	Followers    *int64   `json:"followers"`
	Following    *int64   `json:"following"`
	Verified     *bool    `json:"verified"`
	VerifiedBlue *bool    `json:"verified_blue"`
	TweetsCount  *int64   `json:"tweets_count"`
	LikesCount   *int64   `json:"likes_count"`
	Location     *string  `json:"location"`
	CoverURL     *string  `json:"cover_url"`
	VerifiedType *string  `json:"verified_type"`
	Listed       *int64   `json:"listed_count"`
	Protected    *bool    `json:"protected"`
	PinnedPostID *string  `json:"pinned_post_id"`
	CreatedAt    *string  `json:"created_at"`
	Warnings     []string `json:"_warnings,omitempty"`
}

// usernamePattern is X's own rule for usernames; X answers 400 to others.
var usernamePattern = regexp.MustCompile(`^[A-Za-z0-9_]{1,15}$`)

// checkHandle refuses a handle X would answer 400 to, before any request.
func checkHandle(handle string) error {
	if !usernamePattern.MatchString(handle) {
		return upstream.InvalidParameterFault("handle", "invalid_handle",
			"handle must be 1 to 15 letters, digits or underscores, without a leading @.")
	}
	return nil
}

// lookupUser reads the account behind handle with userFields; an unknown
// or suspended account is not found.
func lookupUser(ctx context.Context, c *upstream.Call, handle, userFields string) (*user, error) {
	q := url.Values{"user.fields": {userFields}}
	var body userBody
	if err := getJSON(ctx, c, "/2/users/by/username/"+handle, q, &body); err != nil {
		return nil, err
	}
	if body.Data == nil {
		// X answers 200 with only errors for an unknown or suspended
		// account; both are resource-not-found.
		for _, e := range body.Errors {
			if e.Type == notFoundType {
				return nil, upstream.NotFoundFault(describe(e))
			}
		}
		if len(body.Errors) > 0 {
			return nil, upstream.MalformedFault("user lookup answered only errors: %s", describe(body.Errors[0]))
		}
		return nil, upstream.MalformedFault("user lookup answer has no data")
	}
	u := body.Data
	if u.ID == "" || u.Username == "" {
		return nil, upstream.MalformedFault("the user record has no id or username")
	}
	return u, nil
}

func profile(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	if err := checkHandle(handle); err != nil {
		return nil, err
	}
	u, err := lookupUser(ctx, c, handle, profileUserFields)
	if err != nil {
		return nil, err
	}
	link := "https://x.com/" + u.Username
	p := Profile{
		ID: u.ID, Handle: text(u.Username), Name: text(u.Name), URL: &link, Bio: text(u.Description),
		AvatarURL: text(u.ProfileImageURL), CoverURL: text(u.ProfileBannerURL), Location: text(u.Location),
		Verified: u.Verified, VerifiedType: text(u.VerifiedType), Protected: u.Protected,
		PinnedPostID: text(u.PinnedTweetID), CreatedAt: text(u.CreatedAt),
	}
	if u.VerifiedType != "" {
		blue := u.VerifiedType == "blue"
		p.VerifiedBlue = &blue
	}
	if e := u.Entities; e != nil && e.URL != nil && len(e.URL.URLs) > 0 {
		p.BioLink = text(cmp.Or(e.URL.URLs[0].ExpandedURL, e.URL.URLs[0].URL))
	} else {
		p.BioLink = text(u.URL) // the t.co link when X sent no expansion
	}
	if m := u.PublicMetrics; m != nil {
		p.Followers, p.Following, p.TweetsCount, p.Listed, p.LikesCount = m.FollowersCount, m.FollowingCount, m.TweetCount, m.ListedCount, m.LikeCount
	}
	if p.LikesCount == nil {
		p.Warnings = append(p.Warnings, "The source did not report the account's likes; likes_count is null (unknown), not zero.")
	}
	if u.Protected != nil && *u.Protected {
		p.Warnings = append(p.Warnings, "The account is protected: its posts are visible only to approved followers and are not searchable.")
	}
	return p, nil
}

// ---- microblog_b/posts ----

// posts reads an account's timeline: the handle is looked up for the
// numeric id the timeline needs (and whether the account is protected),
// then GET /2/users/:id/tweets gives its latest posts, newest first. X
// serves a timeline's most recent 3,200 posts.
func posts(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	if err := checkHandle(handle); err != nil {
		return nil, err
	}
	q := url.Values{}
	if err := pageToken(c, q, "pagination_token"); err != nil {
		return nil, err
	}
	u, err := lookupUser(ctx, c, handle, "protected")
	if err != nil {
		return nil, err
	}
	if u.Protected != nil && *u.Protected {
		// An app-only token is no approved follower: X would answer an
		// authorization error, so the timeline is not asked for.
		out := Posts{Items: []Post{}, Warnings: []string{
			"The account is protected: its posts are visible only to approved followers, so none are returned."}}
		out.More(false)
		return out, nil
	}
	q.Set("max_results", c.Param("limit"))
	if c.Param("include_reposts") != "true" {
		q.Set("exclude", "retweets")
	}
	q.Set("tweet.fields", timelineFields)
	body, err := getPage(ctx, c, "/2/users/"+u.ID+"/tweets", q)
	if err != nil {
		return nil, err
	}
	for i := range body.Data {
		if body.Data[i].AuthorID == "" { // every post of a timeline is the account's (a repost too)
			body.Data[i].AuthorID = u.ID
		}
	}
	return postsPage(body, map[string]user{u.ID: *u}), nil
}

// ---- microblog_b/comments ----

// Comments is the data of microblog_b/comments.
// has_more is always known.
type Comments struct {
	PostID string `json:"post_id"`
	creator.Page[Comment]
}

// Comment is one reply to the post (or to another reply in its
// conversation): the common fields, with the search-posts item's author
// (null when the source does not expand it), then the platform's extras.
type Comment struct {
	creator.Comment[*Author]
	URL       *string `json:"url"`
	Lang      *string `json:"lang"`
	InReplyTo *string `json:"in_reply_to_id"`
}

// maxPostID is the largest id X hands out (a signed 64-bit Snowflake).
const maxPostID = 1<<63 - 1

// statusPath finds the id in a post URL's path: /<user>/status/<id>,
// /i/web/status/<id>, the older /<user>/statuses/<id>, each possibly
// followed by /photo/1 and the like.
var statusPath = regexp.MustCompile(`^/(?:[^/]+/)*status(?:es)?/([0-9]{1,19})(?:/|$)`)

// postID is the numeric post id of post_id: the id itself, or the id in a
// post URL (the registry has already held the URL to the platform's hosts).
func postID(raw string) (string, error) {
	id := raw
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		m := statusPath.FindStringSubmatch(u.Path)
		if m == nil {
			return "", upstream.InvalidParameterFault("post_id", "not_a_post",
				"post_id must be a numeric post id or the URL of a post (…/status/<id>).")
		}
		id = m[1]
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 || n > maxPostID {
		return "", upstream.InvalidParameterFault("post_id", "invalid_post_id",
			"post_id must be a numeric post id or the URL of a post (…/status/<id>).")
	}
	return strconv.FormatUint(n, 10), nil
}

// snowflakeEpoch is X's id epoch (2010-11-04T01:42:54.657Z) in Unix
// milliseconds: an id's bits above the lowest 22 are its creation time
// in milliseconds since then.
const snowflakeEpoch = 1288834974657

// postedBefore reports whether the post with id was created before t, read
// from the id itself. An id from before Snowflake (2010) reads as 2010,
// old enough for any window.
func postedBefore(id string, t time.Time) bool {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return false
	}
	return time.UnixMilli(int64(n>>22) + snowflakeEpoch).Before(t)
}

// tweetBody is the answer of GET /2/tweets/:id.
type tweetBody struct {
	Data *struct {
		ID             string `json:"id"`
		ConversationID string `json:"conversation_id"`
	} `json:"data"`
	Errors []problem `json:"errors"`
}

// comments samples a post's replies by recent search for its conversation
// (conversation_id:<id> is:reply), newest first. Recent search holds the
// last seven days, so the replies of an older post are only its recent
// ones: the post's age is read from its id, and _warnings says so. An
// empty first page is ambiguous, so only then is the post looked up, to
// answer 404 for a post that does not exist.
func comments(ctx context.Context, c *upstream.Call) (any, error) {
	id, err := postID(c.Param("post_id"))
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if err := pageToken(c, q, "next_token"); err != nil {
		return nil, err
	}
	q.Set("query", "conversation_id:"+id+" is:reply")
	q.Set("sort_order", "recency")
	q.Set("max_results", c.Param("limit"))
	q.Set("tweet.fields", replyFields)
	q.Set("expansions", "author_id")
	q.Set("user.fields", replyUserFields)
	body, err := getPage(ctx, c, searchPath, q)
	if err != nil {
		return nil, err
	}
	page := postsPage(body, usersByID(body.Includes.Users))
	out := Comments{PostID: id, Page: creator.Page[Comment]{Items: make([]Comment, 0, len(page.Items)), Count: page.Count,
		Cursor: page.Cursor, HasMore: page.HasMore}}
	for _, p := range page.Items {
		cm := Comment{Comment: creator.Comment[*Author]{ID: p.ID, Text: p.Text, CreatedAt: p.CreatedAt, Author: p.Author},
			URL: p.URL, Lang: p.Lang}
		if p.Stats != nil {
			cm.Likes, cm.Replies = p.Stats.Likes, p.Stats.Replies
		}
		if p.Type == "reply" {
			cm.InReplyTo = p.Reference
		}
		out.Items = append(out.Items, cm)
	}
	if len(out.Items) == 0 && c.Param("cursor") == "" {
		warning, err := checkPost(ctx, c, id)
		if err != nil {
			return nil, err
		}
		if warning != "" {
			out.Warnings = append(out.Warnings, warning)
		}
	}
	if postedBefore(id, c.Now.Add(-window)) {
		out.Warnings = append(out.Warnings, "The post is older than 7 days and the source searches replies of the last 7 days only: "+
			"older replies are missing, so this is a sample of its recent replies, not of all of them.")
	}
	return out, nil
}

// checkPost looks a post up (GET /2/tweets/:id) to tell an unknown post,
// which is not found, from one without replies; it returns a warning when
// the empty answer has a reason the caller can act on.
func checkPost(ctx context.Context, c *upstream.Call, id string) (string, error) {
	var body tweetBody
	if err := getJSON(ctx, c, "/2/tweets/"+id, url.Values{"tweet.fields": {"conversation_id"}}, &body); err != nil {
		return "", err
	}
	if body.Data == nil {
		for _, e := range body.Errors {
			switch e.Type {
			case notFoundType: // deleted, never existed, or its account suspended
				return "", upstream.NotFoundFault(describe(e))
			case notAuthorizedType:
				return "The post is from a protected account: its replies are visible only to approved followers.", nil
			}
		}
		if len(body.Errors) > 0 {
			return "", upstream.MalformedFault("post lookup answered only errors: %s", describe(body.Errors[0]))
		}
		return "", upstream.MalformedFault("post lookup answer has no data")
	}
	if root := body.Data.ConversationID; root != "" && root != id {
		return "The post is itself a reply: replies are found by conversation, so send the conversation's first post, post_id=" +
			root + ", for the replies of the whole thread.", nil
	}
	return "", nil
}
