// Package youtube serves video_platform/search over the YouTube Data API v3
// search.list method (GET /youtube/v3/search, part=snippet), authenticated
// with an API key sent as the documented `key` query parameter, and the
// creator building blocks video_platform/profile, posts and comments over
// channels.list, playlistItems.list, videos.list and commentThreads.list
// (creators.go).
//
// search.list returns one quota-priced page of video, channel and playlist
// results with their snippets. It carries no durations, view counts or
// video counts (those need videos.list, channels.list or playlists.list,
// each another quota charge); this adapter makes no second call, so those
// fields stay absent and _warnings says so.
package youtube

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the quota resets at Pacific midnight; Lambda images carry no zone database

	"github.com/meridian-data/meridian/shared/upstream"
)

// KeySecret is the API key variable.
const KeySecret = "MERIDIAN_YOUTUBE_API_KEY"

const (
	platform   = "video_platform"
	searchPath = "/youtube/v3/search"
	siteURL    = "https://www.youtube.com"
)

// Provider is the YouTube Data API v3 provider.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     "youtube_data",
		Protocol: "YouTube Data API v3 (REST, JSON) with an API key: search.list (part=snippet), channels.list, playlistItems.list, videos.list and commentThreads.list",
		Docs:     "https://developers.google.com/youtube/v3/docs/search/list",
		BaseURL:  "https://www.googleapis.com",
		Secrets: []upstream.Secret{{
			Name:     KeySecret,
			Required: true,
			Doc: "A Google Cloud API key with the YouTube Data API v3 enabled: Google Cloud console > APIs & Services > " +
				"Library > YouTube Data API v3 > Enable, then Credentials > Create credentials > API key (restrict it to " +
				"that API). Calls are priced in the project's daily quota (10,000 units by default), which resets at " +
				"midnight Pacific Time: search.list 100 units (video_platform/search); channels.list 1, " +
				"playlistItems.list 1, videos.list 1 and commentThreads.list 1 (video_platform/profile 1 unit, " +
				"posts 3, comments 1).",
		}},
		Endpoints: map[string]upstream.Adapter{
			"video_platform/search":   search,
			"video_platform/profile":  profile,
			"video_platform/posts":    posts,
			"video_platform/comments": comments,
		},
	}
}

// orders maps sortBy to search.list's order values.
var orders = map[string]string{
	"relevance": "relevance",
	"date":      "date",
	"rating":    "rating",
	"title":     "title",
	"views":     "viewCount",
}

// durations maps duration to videoDuration: short is under 4 minutes,
// medium 4 to 20 minutes, long over 20 minutes (the upstream's buckets).
var durations = map[string]string{"short": "short", "medium": "medium", "long": "long"}

// uploadWindow is how far back each uploadDate value reaches from the
// time of the call. The windows are rolling, not calendar periods: the
// caller's time zone is unknown, so "today" is the last 24 hours, "month"
// the last 30 days and "year" the last 365 days.
var uploadWindow = map[string]time.Duration{
	"hour":  time.Hour,
	"today": 24 * time.Hour,
	"week":  7 * 24 * time.Hour,
	"month": 30 * 24 * time.Hour,
	"year":  365 * 24 * time.Hour,
}

// searchQuery builds search.list's parameters. It returns warnings about
// parameters it had to adjust.
func searchQuery(c *upstream.Call) (url.Values, []string) {
	q := url.Values{}
	var warnings []string
	q.Set("part", "snippet")
	q.Set("q", c.Param("query"))
	if t := c.Param("type"); t != "" {
		q.Set("type", t)
	}
	if d := c.Param("duration"); d != "" {
		// videoDuration is only accepted with type=video, and the spec says
		// duration forces video results.
		if t := c.Param("type"); t != "" && t != "video" {
			warnings = append(warnings, "duration applies to videos only, so only videos were searched (type "+t+" was narrowed to video).")
		}
		q.Set("type", "video")
		q.Set("videoDuration", durations[d])
	}
	if o := orders[c.Param("sortBy")]; o != "" {
		q.Set("order", o)
	}
	if w, ok := uploadWindow[c.Param("uploadDate")]; ok {
		q.Set("publishedAfter", c.Now.UTC().Add(-w).Truncate(time.Second).Format(time.RFC3339))
	}
	if r := c.Param("region"); r != "" {
		q.Set("regionCode", strings.ToUpper(r))
	}
	// Absent max_results sends nothing: the upstream's default page is 5.
	if n := c.Param("max_results"); n != "" {
		q.Set("maxResults", n)
	}
	if cur := c.Param("cursor"); cur != "" {
		q.Set("pageToken", cur)
	}
	q.Set("key", c.Secret(KeySecret))
	return q, warnings
}

// searchListResponse is search.list's answer (youtube#searchListResponse).
type searchListResponse struct {
	NextPageToken *string `json:"nextPageToken"`
	PageInfo      *struct {
		TotalResults *int64 `json:"totalResults"`
	} `json:"pageInfo"`
	Items []searchResult `json:"items"`
}

type searchResult struct {
	ID struct {
		Kind       string `json:"kind"`
		VideoID    string `json:"videoId"`
		ChannelID  string `json:"channelId"`
		PlaylistID string `json:"playlistId"`
	} `json:"id"`
	Snippet *struct {
		PublishedAt  string               `json:"publishedAt"`
		ChannelID    string               `json:"channelId"`
		Title        *string              `json:"title"`
		Description  *string              `json:"description"`
		Thumbnails   map[string]thumbnail `json:"thumbnails"`
		ChannelTitle *string              `json:"channelTitle"`
	} `json:"snippet"`
}

type thumbnail struct {
	URL string `json:"url"`
}

// Result is the data of video_platform/search.
type Result struct {
	Items    []Item   `json:"items"`
	Count    int      `json:"count"`
	Cursor   *string  `json:"cursor"`
	HasMore  *bool    `json:"has_more"`
	Total    *int64   `json:"total"`
	Query    string   `json:"query"`
	Warnings []string `json:"_warnings,omitempty"`
}

// Item is one video, channel or playlist. duration, duration_seconds,
// views and video_count are not carried by search results, so they are
// never set here.
type Item struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Platform     string   `json:"platform"`
	Title        *string  `json:"title"`
	URL          string   `json:"url"`
	Description  *string  `json:"description"`
	ThumbnailURL *string  `json:"thumbnail_url"`
	Channel      *Channel `json:"channel,omitempty"`
	PublishedAt  *string  `json:"published_at"`
}

// Channel is the channel that published a video or playlist.
type Channel struct {
	ID   string  `json:"id"`
	Name *string `json:"name"`
	URL  string  `json:"url"`
}

func search(ctx context.Context, c *upstream.Call) (any, error) {
	q, warnings := searchQuery(c)
	var body searchListResponse
	resp, err := c.GetJSON(ctx, searchPath, q, nil, &body)
	if err != nil {
		return nil, classify(resp, err, c.Now)
	}
	out := Result{Items: []Item{}, Query: c.Param("query")}
	skipped := 0
	for _, r := range body.Items {
		item, ok := mapResult(r)
		if !ok {
			skipped++
			continue
		}
		out.Items = append(out.Items, item)
	}
	out.Count = len(out.Items)
	hasMore := body.NextPageToken != nil && *body.NextPageToken != ""
	out.HasMore = &hasMore
	if hasMore {
		out.Cursor = body.NextPageToken
	}
	if body.PageInfo != nil && body.PageInfo.TotalResults != nil {
		out.Total = body.PageInfo.TotalResults
	}
	if out.Total != nil && *out.Total > 0 {
		// Kept rather than nulled: an order of magnitude is still useful.
		warnings = append(warnings, "total is the source's estimate of matching results (often rounded or capped at 1000000), not an exact count, and paging does not reach all of them.")
	}
	if out.Count > 0 {
		warnings = append(warnings,
			"The source's search results do not carry duration, view counts or video counts: duration, duration_seconds, views and video_count are absent (unknown), not zero.",
			"description is the shortened excerpt the source's search returns, not the full text.")
	}
	if skipped > 0 {
		warnings = append(warnings, strconv.Itoa(skipped)+" result(s) of a kind other than video, channel or playlist were left out.")
	}
	out.Warnings = warnings
	return out, nil
}

// mapResult maps one search result; ok is false for a result that is not
// a video, channel or playlist or has no id.
func mapResult(r searchResult) (Item, bool) {
	var item Item
	switch r.ID.Kind {
	case "youtube#video":
		item.ID, item.Type = r.ID.VideoID, "video"
		item.URL = siteURL + "/watch?v=" + url.QueryEscape(r.ID.VideoID)
	case "youtube#channel":
		item.ID, item.Type = r.ID.ChannelID, "channel"
		item.URL = channelURL(r.ID.ChannelID)
	case "youtube#playlist":
		item.ID, item.Type = r.ID.PlaylistID, "playlist"
		item.URL = siteURL + "/playlist?list=" + url.QueryEscape(r.ID.PlaylistID)
	default:
		return Item{}, false
	}
	if item.ID == "" {
		return Item{}, false
	}
	item.Platform = platform
	s := r.Snippet
	if s == nil {
		return item, true
	}
	// Search snippets are HTML-escaped (&#39;, &amp;, &quot;); the data is text.
	item.Title = unescape(s.Title)
	item.Description = unescape(s.Description)
	item.ThumbnailURL = bestThumbnail(s.Thumbnails)
	if s.PublishedAt != "" {
		item.PublishedAt = &s.PublishedAt
	}
	if item.Type != "channel" && s.ChannelID != "" {
		item.Channel = &Channel{ID: s.ChannelID, Name: unescape(s.ChannelTitle), URL: channelURL(s.ChannelID)}
	}
	return item, true
}

func channelURL(id string) string { return siteURL + "/channel/" + url.PathEscape(id) }

// unescape decodes HTML entities; empty text is unknown (null).
func unescape(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	v := html.UnescapeString(*s)
	return &v
}

// bestThumbnail picks the largest thumbnail the result lists.
func bestThumbnail(thumbs map[string]thumbnail) *string {
	for _, size := range []string{"maxres", "standard", "high", "medium", "default"} {
		if t, ok := thumbs[size]; ok && t.URL != "" {
			return &t.URL
		}
	}
	return nil
}

// googleError is the error body Google APIs send.
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Reason string `json:"reason"`
			Domain string `json:"domain"`
		} `json:"errors"`
		Status  string `json:"status"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}

// reasons lists the error reasons of a Google error body: the classic
// errors[].reason codes and the newer details[].reason (ErrorInfo) codes.
func (g googleError) reasons() []string {
	var rs []string
	for _, e := range g.Error.Errors {
		if e.Reason != "" {
			rs = append(rs, e.Reason)
		}
	}
	for _, d := range g.Error.Details {
		if d.Reason != "" {
			rs = append(rs, d.Reason)
		}
	}
	return rs
}

// classify re-reads a failed answer's error body: Google reports quota
// and rate limits as 403 with a reason, and a search has no record that
// could be "not found".
func classify(resp *upstream.Response, err error, now time.Time) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var body googleError
	_ = upstream.DecodeJSON(resp.Body, &body) // an unreadable error body keeps the status classification
	reasons := body.reasons()
	if len(reasons) > 0 {
		f.Reason = http.StatusText(f.Status) + ": " + strings.Join(reasons, ", ")
	}
	for _, r := range reasons {
		switch r {
		case "quotaExceeded", "dailyLimitExceeded":
			f.Kind = upstream.RateLimited
			if ra := retryAfter(resp.Header); ra > 0 {
				f.RetryAfter = ra
			}
			if f.RetryAfter <= 0 {
				f.RetryAfter = untilQuotaReset(now)
			}
			f.Reason = "the project's daily quota is used up (" + r + "); it resets at midnight Pacific Time"
			return f
		case "rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED":
			// A short-term limit: only the upstream's own wait, when it gives one.
			f.Kind = upstream.RateLimited
			if ra := retryAfter(resp.Header); ra > 0 {
				f.RetryAfter = ra
			}
			return f
		case "keyInvalid", "API_KEY_INVALID", "keyExpired", "API_KEY_EXPIRED":
			f.Kind = upstream.Rejected
			f.Reason = "the configured API key was refused (" + r + ")"
			return f
		case "invalidPageToken":
			return upstream.InvalidParameterFault("cursor", "invalid_cursor",
				"cursor is not a page token the source accepts; pass back the value a response gave, unchanged.")
		}
	}
	if f.Kind == upstream.NotFound {
		// A search with no match is a 200 with no items; a 404 means the
		// base URL or path is wrong, which is not an answer about the query.
		f.Kind = upstream.Rejected
		f.Reason = "the search path was not found: check the provider's base URL"
	}
	return f
}

// retryAfter reads a Retry-After of whole seconds.
func retryAfter(h http.Header) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h.Get("retry-after")))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// untilQuotaReset is the wait until the daily quota resets, at midnight
// Pacific Time. Without the zone database it uses Pacific Standard Time,
// which is at most an hour late.
func untilQuotaReset(now time.Time) time.Duration {
	loc, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		loc = time.FixedZone("PST", -8*60*60)
	}
	local := now.In(loc)
	midnight := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, loc)
	return midnight.Sub(now)
}
