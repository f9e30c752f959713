// Package creator holds the data types the creator building blocks
// ({platform}/profile, {platform}/posts, {platform}/comments) share, so
// that a reader of every platform's blocks (a bundle, a cross-platform
// search) meets one shape.
//
// A platform embeds these types and keeps what is its own as its own
// fields: encoding/json promotes an embedded struct's fields into the
// object, in declaration order, so the embedded fields come first (or
// where the embedding field stands) and the platform's extras after
// them. Only what every platform that embeds a type has is in it; a
// platform that lacks a field declares the rest itself rather than
// reporting a field it does not have.
//
// Null is "the source does not report it" (unknown), never zero.
package creator

// Counts are a post's counters. Each is null when the source does not
// report it for the post.
type Counts struct {
	Likes    *int64 `json:"likes"`
	Comments *int64 `json:"comments"`
	Shares   *int64 `json:"shares"`
	Views    *int64 `json:"views"`
}

// Author is who wrote a post or a comment, as the platforms that name
// authors by account share it; each field is null when the source does
// not say it.
type Author struct {
	ID        *string `json:"id"`
	Handle    *string `json:"handle"`
	Name      *string `json:"name"`
	URL       *string `json:"url"`
	AvatarURL *string `json:"avatar_url"`
}

// Page is one page of a list (posts, comments). A platform embeds it after
// the fields that say what the list is of (a handle, a post id).
type Page[T any] struct {
	Items []T `json:"items"`
	// Count is len(Items).
	Count int `json:"count"`
	// Cursor is passed back for the next page; null on the last page.
	Cursor *string `json:"cursor"`
	// HasMore says whether another page follows; null where the source
	// does not say (unknown). Where a platform always knows, it is always
	// set: see More.
	HasMore *bool `json:"has_more"`
	// Warnings say what the page leaves out or cannot vouch for.
	Warnings []string `json:"_warnings,omitempty"`
}

// More sets HasMore to a known value.
func (p *Page[T]) More(more bool) { p.HasMore = &more }

// Profile are the fields every creator profile has. Platforms add what is
// their own after it (verified, following, created_at, ...).
type Profile struct {
	ID     *string `json:"id"`
	Handle *string `json:"handle"`
	Name   *string `json:"name"`
	// URL is the profile's page on the platform.
	URL         *string `json:"url"`
	Description *string `json:"description"`
	AvatarURL   *string `json:"avatar_url"`
	// Followers is the follower (subscriber) count as the source reports
	// it; FollowerSourceField names the source field it came from, so a
	// composite operation can cite it.
	Followers           *int64  `json:"followers"`
	FollowerSourceField *string `json:"follower_source_field"`
	PostsCount          *int64  `json:"posts_count"`
	// Warnings say what the profile cannot vouch for.
	Warnings []string `json:"_warnings,omitempty"`
}

// Post are the fields every creator post has; Counts are its counters.
type Post struct {
	ID string `json:"id"`
	// URL is the post's page on the platform.
	URL          *string `json:"url"`
	Text         *string `json:"text"`
	CreatedAt    *string `json:"created_at"`
	ThumbnailURL *string `json:"thumbnail_url"`
	Counts       Counts  `json:"counts"`
}

// Comment are the fields every creator comment has. A is the platform's
// author type (Author, or one that embeds it, or the platform's own where
// it names authors otherwise).
type Comment[A any] struct {
	ID        string  `json:"id"`
	Text      *string `json:"text"`
	Author    A       `json:"author"`
	CreatedAt *string `json:"created_at"`
	Likes     *int64  `json:"likes"`
	Replies   *int64  `json:"replies"`
}
