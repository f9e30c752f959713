package youtube

// The creator building blocks (issue 16) over the Data API v3, each
// method call priced in the project's daily quota as the Data API's quota
// calculator lists it:
//
//	channels.list        1 unit  (profile; posts, to find the uploads playlist)
//	playlistItems.list   1 unit  (posts)
//	videos.list          1 unit  (posts; one call for up to 50 ids)
//	commentThreads.list  1 unit  (comments)
//
// so a profile costs 1 unit, a page of posts 3 and a page of comments 1,
// against search.list's 100.

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/creator"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

const (
	channelsPath       = "/youtube/v3/channels"
	playlistItemsPath  = "/youtube/v3/playlistItems"
	videosPath         = "/youtube/v3/videos"
	commentThreadsPath = "/youtube/v3/commentThreads"

	// subscriberField is where followers comes from.
	subscriberField = "statistics.subscriberCount"
)

// channelListResponse is channels.list's answer (youtube#channelListResponse).
type channelListResponse struct {
	Items []channelResource `json:"items"`
}

type channelResource struct {
	ID      string `json:"id"`
	Snippet *struct {
		Title       *string              `json:"title"`
		Description *string              `json:"description"`
		CustomURL   *string              `json:"customUrl"`
		PublishedAt *string              `json:"publishedAt"`
		Thumbnails  map[string]thumbnail `json:"thumbnails"`
		Country     *string              `json:"country"`
	} `json:"snippet"`
	Statistics *struct {
		ViewCount             *string `json:"viewCount"`
		SubscriberCount       *string `json:"subscriberCount"`
		HiddenSubscriberCount bool    `json:"hiddenSubscriberCount"`
		VideoCount            *string `json:"videoCount"`
	} `json:"statistics"`
	ContentDetails *struct {
		RelatedPlaylists struct {
			Uploads string `json:"uploads"`
		} `json:"relatedPlaylists"`
	} `json:"contentDetails"`
}

// Profile is the data of video_platform/profile.
// id and url are always set. The platform reports no verification
// state, so it has no verified.
type Profile struct {
	creator.Profile
	ViewsCount *int64  `json:"views_count"`
	CreatedAt  *string `json:"created_at"`
	Country    *string `json:"country"`
}

// lookupChannel asks channels.list for one channel by id (which wins) or
// handle; a channel the source does not know is NotFound.
func lookupChannel(ctx context.Context, c *upstream.Call, part string) (channelResource, error) {
	q := url.Values{}
	q.Set("part", part)
	if id := c.Param("channel_id"); id != "" {
		q.Set("id", id)
	} else {
		// forHandle takes the handle with or without @; the @ form is the
		// one the source displays.
		q.Set("forHandle", "@"+c.Param("handle"))
	}
	q.Set("key", c.Secret(KeySecret))
	var body channelListResponse
	resp, err := c.GetJSON(ctx, channelsPath, q, nil, &body)
	if err != nil {
		return channelResource{}, classifyLookup(resp, err, c, nil)
	}
	// An unknown handle or id is a 200 without items.
	for _, ch := range body.Items {
		if ch.ID != "" {
			return ch, nil
		}
	}
	return channelResource{}, upstream.NotFoundFault("no channel has this handle or id")
}

func profile(ctx context.Context, c *upstream.Call) (any, error) {
	ch, err := lookupChannel(ctx, c, "snippet,statistics")
	if err != nil {
		return nil, err
	}
	out := Profile{Profile: creator.Profile{ID: &ch.ID, URL: ptr(channelURL(ch.ID))}}
	var warnings []string
	if c.Param("channel_id") != "" && c.Param("handle") != "" {
		warnings = append(warnings, "Both channel_id and handle were sent: the channel was looked up by channel_id.")
	}
	if s := ch.Snippet; s != nil {
		out.Name = text(s.Title)
		out.Description = text(s.Description)
		out.AvatarURL = bestThumbnail(s.Thumbnails)
		out.CreatedAt = text(s.PublishedAt)
		out.Country = text(s.Country)
		if s.CustomURL != nil && strings.HasPrefix(*s.CustomURL, "@") && len(*s.CustomURL) > 1 {
			h := strings.TrimPrefix(*s.CustomURL, "@")
			out.Handle = &h
			out.URL = ptr(siteURL + "/@" + url.PathEscape(h))
		}
	}
	if out.Handle == nil && c.Param("channel_id") == "" {
		// Looked up by handle: the source matched it (handles are
		// case-insensitive, and customUrl spells it in lower case).
		h := c.Param("handle")
		out.Handle = &h
	}
	if st := ch.Statistics; st != nil {
		if st.HiddenSubscriberCount {
			warnings = append(warnings, "The channel hides its subscriber count: followers is null (unknown), not zero.")
		} else if n, ok := count(st.SubscriberCount); ok {
			out.Followers = &n
			f := subscriberField
			out.FollowerSourceField = &f
			warnings = append(warnings, "followers is the source's subscriber count, which it rounds down to three significant figures.")
		}
		out.PostsCount, _ = countPtr(st.VideoCount)
		out.ViewsCount, _ = countPtr(st.ViewCount)
	} else {
		warnings = append(warnings, "The source sent no statistics: followers, posts_count and views_count are null (unknown).")
	}
	out.Warnings = warnings
	return out, nil
}

// playlistItemListResponse is playlistItems.list's answer.
type playlistItemListResponse struct {
	NextPageToken *string `json:"nextPageToken"`
	Items         []struct {
		ContentDetails *struct {
			VideoID string `json:"videoId"`
		} `json:"contentDetails"`
	} `json:"items"`
}

// videoListResponse is videos.list's answer.
type videoListResponse struct {
	Items []struct {
		ID      string `json:"id"`
		Snippet *struct {
			PublishedAt *string              `json:"publishedAt"`
			Title       *string              `json:"title"`
			Description *string              `json:"description"`
			Thumbnails  map[string]thumbnail `json:"thumbnails"`
		} `json:"snippet"`
		ContentDetails *struct {
			Duration *string `json:"duration"`
		} `json:"contentDetails"`
		Statistics *struct {
			ViewCount    *string `json:"viewCount"`
			LikeCount    *string `json:"likeCount"`
			CommentCount *string `json:"commentCount"`
		} `json:"statistics"`
	} `json:"items"`
}

// Posts is the data of video_platform/posts.
// has_more is always known.
type Posts struct {
	ChannelID string `json:"channel_id"`
	creator.Page[Post]
}

// Post is one upload: url is always set, and counts.shares is always null
// (not reported).
type Post struct {
	creator.Post
	Title    *string `json:"title"`
	Duration *string `json:"duration"`
}

func posts(ctx context.Context, c *upstream.Call) (any, error) {
	ch, err := lookupChannel(ctx, c, "contentDetails")
	if err != nil {
		return nil, err
	}
	out := Posts{ChannelID: ch.ID, Page: creator.Page[Post]{Items: []Post{}}}
	out.More(false)
	var warnings []string
	if c.Param("channel_id") != "" && c.Param("handle") != "" {
		warnings = append(warnings, "Both channel_id and handle were sent: the channel was looked up by channel_id.")
	}
	if ch.ContentDetails == nil || ch.ContentDetails.RelatedPlaylists.Uploads == "" {
		return nil, upstream.MalformedFault("channels.list gave no uploads playlist for %s", ch.ID)
	}

	q := url.Values{}
	q.Set("part", "contentDetails")
	q.Set("playlistId", ch.ContentDetails.RelatedPlaylists.Uploads)
	q.Set("maxResults", c.Param("limit"))
	if cur := c.Param("cursor"); cur != "" {
		q.Set("pageToken", cur)
	}
	q.Set("key", c.Secret(KeySecret))
	var page playlistItemListResponse
	resp, err := c.GetJSON(ctx, playlistItemsPath, q, nil, &page)
	if err != nil {
		err = classifyLookup(resp, err, c, map[string]bool{"playlistNotFound": true})
		var f *upstream.Fault
		if errors.As(err, &f) && f.Kind == upstream.NotFound {
			// The channel exists (channels.list found it) but its uploads
			// playlist does not: a channel without public uploads.
			out.Warnings = append(warnings, "The channel has no public uploads.")
			return out, nil
		}
		return nil, err
	}
	var ids []string
	seen := map[string]bool{}
	for _, it := range page.Items {
		if it.ContentDetails == nil || it.ContentDetails.VideoID == "" || seen[it.ContentDetails.VideoID] {
			continue
		}
		seen[it.ContentDetails.VideoID] = true
		ids = append(ids, it.ContentDetails.VideoID)
	}
	out.More(page.NextPageToken != nil && *page.NextPageToken != "")
	if *out.HasMore {
		out.Cursor = page.NextPageToken
	}

	if len(ids) > 0 {
		// limit is at most 50, the most ids videos.list takes in one call
		// (maxResults does not apply to an id lookup).
		vq := url.Values{}
		vq.Set("part", "snippet,statistics,contentDetails")
		vq.Set("id", strings.Join(ids, ","))
		vq.Set("key", c.Secret(KeySecret))
		var videos videoListResponse
		resp, err := c.GetJSON(ctx, videosPath, vq, nil, &videos)
		if err != nil {
			return nil, classifyLookup(resp, err, c, nil)
		}
		byID := map[string]int{}
		for i, v := range videos.Items {
			byID[v.ID] = i
		}
		missing, hiddenLikes, noComments := 0, 0, 0
		for _, id := range ids {
			i, ok := byID[id]
			if !ok {
				missing++
				continue
			}
			v := videos.Items[i]
			p := Post{Post: creator.Post{ID: id, URL: ptr(videoURL(id))}}
			if s := v.Snippet; s != nil {
				p.Title = text(s.Title)
				p.Text = text(s.Description)
				p.CreatedAt = text(s.PublishedAt)
				p.ThumbnailURL = bestThumbnail(s.Thumbnails)
			}
			if cd := v.ContentDetails; cd != nil {
				p.Duration = text(cd.Duration)
			}
			if st := v.Statistics; st != nil {
				p.Counts.Views, _ = countPtr(st.ViewCount)
				p.Counts.Likes, _ = countPtr(st.LikeCount)
				p.Counts.Comments, _ = countPtr(st.CommentCount)
			}
			if p.Counts.Likes == nil {
				hiddenLikes++
			}
			if p.Counts.Comments == nil {
				noComments++
			}
			out.Items = append(out.Items, p)
		}
		if missing > 0 {
			warnings = append(warnings, strconv.Itoa(missing)+" upload(s) listed by the channel could not be read (private, deleted or still processing) and were left out.")
		}
		if hiddenLikes > 0 {
			warnings = append(warnings, strconv.Itoa(hiddenLikes)+" video(s) do not report likes (hidden by the channel): counts.likes is null (unknown), not zero.")
		}
		if noComments > 0 {
			warnings = append(warnings, strconv.Itoa(noComments)+" video(s) do not report comments (turned off): counts.comments is null, not zero.")
		}
	}
	out.Count = len(out.Items)
	if out.Count > 0 {
		warnings = append(warnings, "The source does not report shares: counts.shares is null (unknown), not zero.")
	}
	out.Warnings = warnings
	return out, nil
}

// commentThreadListResponse is commentThreads.list's answer.
type commentThreadListResponse struct {
	NextPageToken *string `json:"nextPageToken"`
	Items         []struct {
		ID      string `json:"id"`
		Snippet *struct {
			TopLevelComment *struct {
				ID      string `json:"id"`
				Snippet *struct {
					TextDisplay           *string `json:"textDisplay"`
					TextOriginal          *string `json:"textOriginal"`
					AuthorDisplayName     *string `json:"authorDisplayName"`
					AuthorProfileImageURL *string `json:"authorProfileImageUrl"`
					AuthorChannelURL      *string `json:"authorChannelUrl"`
					AuthorChannelID       *struct {
						Value *string `json:"value"`
					} `json:"authorChannelId"`
					LikeCount   *int64  `json:"likeCount"`
					PublishedAt *string `json:"publishedAt"`
				} `json:"snippet"`
			} `json:"topLevelComment"`
			TotalReplyCount *int64 `json:"totalReplyCount"`
		} `json:"snippet"`
	} `json:"items"`
}

// Comments is the data of video_platform/comments.
// has_more is always known.
type Comments struct {
	VideoID string `json:"video_id"`
	creator.Page[Comment]
}

// Comment is one top-level comment.
type Comment = creator.Comment[Author]

// Author is who wrote a comment: the platform names authors by channel,
// with no handle, so it is its own rather than creator.Author.
type Author struct {
	Name      *string `json:"name"`
	URL       *string `json:"url"`
	AvatarURL *string `json:"avatar_url"`
	ChannelID *string `json:"channel_id"`
}

func comments(ctx context.Context, c *upstream.Call) (any, error) {
	id, ok := videoID(c.Param("video_id"))
	if !ok {
		return nil, upstream.InvalidParameterFault("video_id", "invalid_video_id",
			"video_id must be an 11-character video id or the URL of a video page (watch, youtu.be, shorts, live or embed).")
	}
	q := url.Values{}
	q.Set("part", "snippet")
	q.Set("videoId", id)
	q.Set("maxResults", c.Param("limit"))
	q.Set("order", "relevance")
	q.Set("textFormat", "plainText")
	if cur := c.Param("cursor"); cur != "" {
		q.Set("pageToken", cur)
	}
	q.Set("key", c.Secret(KeySecret))
	out := Comments{VideoID: id, Page: creator.Page[Comment]{Items: []Comment{}}}
	out.More(false)
	var body commentThreadListResponse
	resp, err := c.GetJSON(ctx, commentThreadsPath, q, nil, &body)
	if err != nil {
		if hasReason(resp, "commentsDisabled") {
			out.Warnings = []string{"The video's comments are turned off: there are no comments to sample."}
			return out, nil
		}
		return nil, classifyLookup(resp, err, c, map[string]bool{"videoNotFound": true})
	}
	for _, t := range body.Items {
		s := t.Snippet
		if t.ID == "" || s == nil || s.TopLevelComment == nil || s.TopLevelComment.Snippet == nil {
			continue
		}
		cs := s.TopLevelComment.Snippet
		cm := Comment{
			ID:        t.ID,
			Text:      commentText(cs.TextOriginal, cs.TextDisplay),
			CreatedAt: text(cs.PublishedAt),
			Likes:     cs.LikeCount,
			Replies:   s.TotalReplyCount,
			Author: Author{
				Name:      text(cs.AuthorDisplayName),
				URL:       text(cs.AuthorChannelURL),
				AvatarURL: text(cs.AuthorProfileImageURL),
			},
		}
		if cs.AuthorChannelID != nil {
			cm.Author.ChannelID = text(cs.AuthorChannelID.Value)
		}
		out.Items = append(out.Items, cm)
	}
	out.Count = len(out.Items)
	out.More(body.NextPageToken != nil && *body.NextPageToken != "")
	if *out.HasMore {
		out.Cursor = body.NextPageToken
	}
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, "A sample of top-level comments in the source's relevance order; replies are counted, not listed.")
	}
	return out, nil
}

var (
	bareVideoID = regexp.MustCompile(`^[A-Za-z0-9_-]{11}$`)
	// videoPathPrefixes are the youtube.com paths whose next segment is
	// the video id.
	videoPathPrefixes = []string{"/shorts/", "/live/", "/embed/", "/v/", "/e/"}
)

// videoID reads a video id from an id or a URL of the platform's pages
// (the registry has checked the host and made it absolute).
func videoID(v string) (string, bool) {
	if bareVideoID.MatchString(v) {
		return v, true
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return "", false
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	var id string
	switch {
	case host == "youtu.be":
		id = strings.SplitN(strings.TrimPrefix(u.Path, "/"), "/", 2)[0]
	case u.Path == "/watch":
		id = u.Query().Get("v")
	default:
		for _, prefix := range videoPathPrefixes {
			if strings.HasPrefix(u.Path, prefix) {
				id = strings.SplitN(strings.TrimPrefix(u.Path, prefix), "/", 2)[0]
				break
			}
		}
	}
	if !bareVideoID.MatchString(id) {
		return "", false
	}
	return id, true
}

func videoURL(id string) string { return siteURL + "/watch?v=" + url.QueryEscape(id) }

func ptr[T any](v T) *T { return &v }

// commentText is what the author wrote: textOriginal, the raw text, when
// the answer carries it; else textDisplay, which the source renders as
// HTML (entities, <br>, <b>, links) even when plain text was asked for,
// read once as HTML.
func commentText(original, display *string) *string {
	if t := text(original); t != nil {
		return t
	}
	if display == nil {
		return nil
	}
	return text(ptr(htmldata.FragmentText(*display)))
}

// text is a present, non-empty string, or null.
func text(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	v := *s
	return &v
}

// count parses a count the source sends as numeric text (uint64 values
// are JSON strings in Google's APIs).
func count(s *string) (int64, bool) {
	if s == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(*s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func countPtr(s *string) (*int64, bool) {
	n, ok := count(s)
	if !ok {
		return nil, false
	}
	return &n, true
}

// hasReason reports whether a failed answer's Google error names reason.
func hasReason(resp *upstream.Response, reason string) bool {
	if resp == nil {
		return false
	}
	var body googleError
	if upstream.DecodeJSON(resp.Body, &body) != nil {
		return false
	}
	for _, r := range body.reasons() {
		if r == reason {
			return true
		}
	}
	return false
}

// classifyLookup is classify for the lookups: a 404 whose error names one
// of notFound (videoNotFound, playlistNotFound) is a definitive "not
// found"; any other 404 means a wrong base URL or path, as for search.
func classifyLookup(resp *upstream.Response, err error, c *upstream.Call, notFound map[string]bool) error {
	if resp != nil && resp.Status == http.StatusNotFound {
		var body googleError
		if upstream.DecodeJSON(resp.Body, &body) == nil {
			for _, r := range body.reasons() {
				if notFound[r] {
					return upstream.NotFoundFault("the source has no such " + strings.TrimSuffix(r, "NotFound"))
				}
			}
		}
	}
	err = classify(resp, err, c.Now)
	var f *upstream.Fault
	if errors.As(err, &f) && f.Kind == upstream.Rejected && strings.HasPrefix(f.Reason, "the search path") {
		f.Reason = "the source path was not found: check the provider's base URL"
	}
	return err
}
