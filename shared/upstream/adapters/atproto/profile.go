package atproto

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/meridian-data/meridian/shared/upstream"
)

// profileViewDetailed is app.bsky.actor.defs#profileViewDetailed, the
// answer of app.bsky.actor.getProfile; the fields mapped.
type profileViewDetailed struct {
	DID            string       `json:"did"`
	Handle         string       `json:"handle"`
	DisplayName    string       `json:"displayName"`
	Description    string       `json:"description"`
	Avatar         string       `json:"avatar"`
	Banner         string       `json:"banner"`
	FollowersCount *json.Number `json:"followersCount"`
	FollowsCount   *json.Number `json:"followsCount"`
	PostsCount     *json.Number `json:"postsCount"`
	CreatedAt      string       `json:"createdAt"`
	// Verification is the network's verification state; absent when the
	// view does not carry one.
	Verification *struct {
		VerifiedStatus string `json:"verifiedStatus"`
	} `json:"verification"`
}

// followerField is the view field followers comes from.
const followerField = "followersCount"

// profileData is the data of microblog_a/profile
// (shared/schemas/data/microblog_a__profile.json).
type profileData struct {
	ID        *string      `json:"id"`
	Handle    *string      `json:"handle"`
	Name      *string      `json:"name"`
	URL       *string      `json:"url"`
	Bio       *string      `json:"bio"`
	AvatarURL *string      `json:"avatar_url"`
	CoverURL  *string      `json:"cover_url"`
	Followers *json.Number `json:"followers"`
	// FollowerSourceField names where followers came from, so a composite
	// operation can cite it, as every creator profile does.
	FollowerSourceField *string      `json:"follower_source_field"`
	Following           *json.Number `json:"following"`
	PostsCount          *json.Number `json:"posts_count"`
	Verified            *bool        `json:"verified"`
	CreatedAt           *string      `json:"created_at"`
	Warnings            []string     `json:"_warnings,omitempty"`
}

// profileAdapter serves microblog_a/profile: handle → actor (a handle or a
// DID, both accepted by getProfile).
func profileAdapter(get fetcher) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		resp, err := get(ctx, c, profilePath, url.Values{"actor": {c.Param("handle")}})
		if err != nil {
			if f := profileNotFound(resp); f != nil {
				return nil, f
			}
			return nil, classify(resp, err, c.Now)
		}
		var p profileViewDetailed
		if err := upstream.DecodeJSON(resp.Body, &p); err != nil {
			return nil, err
		}
		if p.DID == "" {
			return nil, upstream.MalformedFault("getProfile answer has no did")
		}
		return mapProfile(p), nil
	}
}

// profileNotFound recognises getProfile's "no such account" answers, all
// HTTP 400: InvalidRequest "Profile not found" for an unknown handle or
// DID, and AccountDeactivated or AccountTakedown for an account that shows
// no public profile. They are definitive: another route would say the same.
func profileNotFound(resp *upstream.Response) *upstream.Fault {
	if resp == nil || resp.Status != http.StatusBadRequest {
		return nil
	}
	e, ok := readXRPCError(resp)
	switch {
	case !ok:
		return nil
	case e.Name == "InvalidRequest" && e.Message == "Profile not found":
		return upstream.NotFoundFault("getProfile: profile not found")
	case e.Name == "AccountDeactivated", e.Name == "AccountTakedown":
		return upstream.NotFoundFault("getProfile: " + e.Name)
	}
	return nil
}

func mapProfile(p profileViewDetailed) profileData {
	handle := validHandle(p.Handle)
	out := profileData{
		ID:         &p.DID,
		Handle:     handle,
		Name:       nonEmpty(p.DisplayName),
		URL:        ptr(profileURL(p.DID, handle)),
		Bio:        nonEmpty(p.Description),
		AvatarURL:  nonEmpty(p.Avatar),
		CoverURL:   nonEmpty(p.Banner),
		Followers:  p.FollowersCount,
		Following:  p.FollowsCount,
		PostsCount: p.PostsCount,
		CreatedAt:  dateTime(p.CreatedAt),
	}
	if p.FollowersCount != nil {
		out.FollowerSourceField = ptr(followerField)
	}
	if v := p.Verification; v != nil {
		// "valid" is verified; "none" and "invalid" (verifications that no
		// longer hold for the account) are not. Other values stay unknown.
		switch v.VerifiedStatus {
		case "valid":
			out.Verified = ptr(true)
		case "none", "invalid":
			out.Verified = ptr(false)
		}
	}
	if handle == nil && p.Handle != "" {
		out.Warnings = append(out.Warnings, "The account's handle does not currently resolve to it, so handle is null; id (the DID) still identifies it.")
	}
	if p.FollowersCount == nil || p.FollowsCount == nil || p.PostsCount == nil {
		out.Warnings = append(out.Warnings, "The source omitted some of the follower, following or post counters; those are null (unknown).")
	}
	if p.CreatedAt == "" {
		out.Warnings = append(out.Warnings, "The source gives no account creation time for this profile; created_at is null.")
	}
	return out
}
