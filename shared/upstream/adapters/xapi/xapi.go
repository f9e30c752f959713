// Package xapi serves the microblog_b endpoints over the official X API v2
// with the operator's app-only bearer token: GET /2/tweets/search/recent for
// microblog_b/search-posts and GET /2/users/by/username/:username for
// microblog_b/profile.
//
// Search uses recent search, which covers the last seven days on every
// self-serve access level; full-archive search (/2/tweets/search/all) needs
// a higher tier, so dates outside the window are handled here (see
// timeBounds). The cursor is X's next_token, passed through unchanged.
package xapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
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
	tweetFields       = "created_at,public_metrics,author_id,entities,lang,referenced_tweets,note_tweet"
	searchUserFields  = "username,name,verified,verified_type"
	profileUserFields = "created_at,description,entities,location,pinned_tweet_id,profile_banner_url,profile_image_url," +
		"protected,public_metrics,url,verified,verified_type"
)

// Provider is the X API v2 provider; it needs the bearer token.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     "x_api",
		Protocol: "X API v2 (JSON, OAuth 2.0 App-Only bearer token): recent search and user lookup by username",
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
	notFoundType = "https://api.twitter.com/2/problems/resource-not-found"
	usageCapType = "https://api.twitter.com/2/problems/usage-capped"
)

// usageCapWait rests the route after the monthly post cap is hit: the cap
// lasts until the billing period ends, which X does not say, so the
// runner's longest rest (an hour) is asked for.
const usageCapWait = time.Hour

// fields maps X's query parameters to the Meridian parameters they came
// from, so an X refusal of one is a 422 naming the caller's field.
var fields = map[string]string{
	"query": "query", "next_token": "cursor", "pagination_token": "cursor",
	"start_time": "from_date", "end_time": "to_date", "username": "handle",
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
	s := strings.Trim(p.Title+": "+firstNonEmpty(p.Detail, p.Reason, p.Message), ": ")
	return upstream.Clip(s, 200)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// text is a string the source may send as null or "": both are unknown.
func text(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

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

type searchBody struct {
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

// Posts is the data of microblog_b/search-posts.
type Posts struct {
	Items   []Post  `json:"items"`
	Count   int     `json:"count"`
	Cursor  *string `json:"cursor"`
	HasMore bool    `json:"has_more"`
}

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
	if cur := c.Param("cursor"); cur != "" {
		if !tokenPattern.MatchString(cur) {
			return nil, upstream.InvalidParameterFault("cursor", "invalid_cursor",
				"cursor is not a token from a previous response; pass it back unchanged.")
		}
		q.Set("next_token", cur)
	}
	q.Set("max_results", pageSize)
	q.Set("tweet.fields", tweetFields)
	q.Set("expansions", "author_id")
	q.Set("user.fields", searchUserFields)

	var body searchBody
	if err := getJSON(ctx, c, "/2/tweets/search/recent", q, &body); err != nil {
		return nil, err
	}
	if body.Meta == nil {
		if len(body.Errors) > 0 {
			return nil, upstream.MalformedFault("search answered only errors: %s", describe(body.Errors[0]))
		}
		return nil, upstream.MalformedFault("search answer has no meta")
	}
	users := make(map[string]user, len(body.Includes.Users))
	for _, u := range body.Includes.Users {
		users[u.ID] = u
	}
	out := Posts{Items: make([]Post, 0, len(body.Data))}
	for _, t := range body.Data {
		if t.ID == "" {
			return nil, upstream.MalformedFault("a post has no id")
		}
		out.Items = append(out.Items, post(t, users))
	}
	out.Count = len(out.Items)
	out.Cursor = text(body.Meta.NextToken)
	out.HasMore = out.Cursor != nil
	return out, nil
}

func post(t tweet, users map[string]user) Post {
	// X leaves out entities a post does not have, so none is an empty list.
	p := Post{ID: t.ID, Text: text(t.Text), CreatedAt: text(t.CreatedAt), Lang: text(t.Lang), Type: "post",
		Hashtags: []string{}, Mentions: []string{}, Links: []string{}}
	ents := t.Entities
	if t.NoteTweet != nil && t.NoteTweet.Text != "" { // a long post: text is cut at 280 characters
		p.Text = &t.NoteTweet.Text
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
			p.Links = append(p.Links, firstNonEmpty(u.UnwoundURL, u.ExpandedURL, u.URL))
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

func profile(ctx context.Context, c *upstream.Call) (any, error) {
	handle := c.Param("handle")
	if !usernamePattern.MatchString(handle) {
		return nil, upstream.InvalidParameterFault("handle", "invalid_handle",
			"handle must be 1 to 15 letters, digits or underscores, without a leading @.")
	}
	q := url.Values{"user.fields": {profileUserFields}}
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
		p.BioLink = text(firstNonEmpty(e.URL.URLs[0].ExpandedURL, e.URL.URLs[0].URL))
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
