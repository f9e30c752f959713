package registry

import "time"

// photoSocialHandle is an account's username: the source's usernames are
// 1 to 30 letters, digits, periods and underscores, case-insensitive
// (folded to lower case, so equivalent spellings share a cache entry).
var photoSocialHandle = handleParam.Named("handle", "Account username, without a leading @.").Len(30).Lower().Ex("bluebottle").
	Checked(func(v string) (string, string) {
		for _, r := range v {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_') {
				return "invalid_handle", "handle must be 1 to 30 letters, digits, periods or underscores, without a leading @."
			}
		}
		return "", ""
	})

// photoSocialCreators are photo_social's creator building blocks: profile
// and posts over the official Graph API's business discovery (the
// operator's own professional account and token), comments from the
// public post page post-stats reads.
var photoSocialCreators = []Endpoint{
	{
		Platform: "photo_social", ID: "profile", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Photo social account profile", Description: "A professional (business or creator) account's public profile: followers (and the field they came from), following and post counts. Personal accounts are not visible to the source.",
		Params: []Param{photoSocialHandle.Req()},
		Decision: "The creator building block of issue 16 for the photo network: the official Graph API's business discovery " +
			"(business_discovery.username(handle){id, username, name, biography, website, profile_picture_url, followers_count, " +
			"follows_count, media_count}), queried on the operator's own Instagram professional account with its token. It sees " +
			"business and creator accounts only: a personal account, an age-gated one and an unknown username all answer the " +
			"source's error 110/2207013, which does not tell them apart, so each is 404. followers is followers_count " +
			"(follower_source_field says so); the source reports no verified flag, so verified is null and _warnings says so. " +
			"handle is the username without @ (folded to lower case, as the source stores it). Cost 1: one Graph API call, " +
			"metered by the source's hourly business-use-case limits rather than by money.",
	},
	{
		Platform: "photo_social", ID: "posts", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Photo social account posts", Description: "A professional account's latest posts, newest first, with likes and comments (shares and views are not reported for another account's posts).",
		Params: []Param{
			photoSocialHandle.Req(),
			P("limit", Integer, "Posts per page, 1-50.").Range(1, 50).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block of issue 16 for the photo network: business discovery's media edge " +
			"(media.limit(limit).after(cursor){id, caption, media_type, media_product_type, permalink, timestamp, like_count, " +
			"comments_count, thumbnail_url, media_url}) on the operator's own professional account, newest first. limit is " +
			"1-50, a page size the nested edge serves in one call; cursor is the source's after cursor, passed back unchanged. " +
			"like_count is left out when the owner hides likes, so counts.likes is null with a warning; business discovery " +
			"carries no shares, views or plays of another account's media, so those are null and _warnings says so. Each " +
			"item's shortcode (from its permalink) is what photo_social/comments and post-stats take. Professional accounts " +
			"only, as for profile (404 otherwise). Cost 1: one Graph API call.",
	},
	{
		Platform: "photo_social", ID: "comments", Family: Social, Kind: Data, Cost: 1, Origin: Addition, FairUse: metered, CacheTTL: 5 * time.Minute,
		Name: "Photo social post comments", Description: "A sample of a public post's top-level comments as its public page shows them: text, author, likes and reply counts; the first comments only.",
		Params: []Param{
			P("post_id", String, "The post's shortcode, or its post or reel URL.").Req().Len(2048).
				Match(`[A-Za-z0-9_-]{5,64}|\S*/(p|reel|reels|tv)/[A-Za-z0-9_-]{5,64}/?([?#]\S*)?`, "a shortcode or a post URL (…/p/<code>/ or …/reel/<code>/)").
				Ex("https://www.instagram.com/p/DCmNtGql123/").OnHosts(photoSocialHosts...),
			P("limit", Integer, "Comments to return, 1-50 (the page may show fewer).").Range(1, 50).Def("20"),
		},
		Decision: "The creator building block of issue 16 for the photo network: the Graph API's comments edge answers only for " +
			"the token's own media, so another account's comments are read from the public post page photo_social/post-stats " +
			"reads (logged out, directly, then through the web-unblocking services), whose embedded data may carry a preview " +
			"of the post's top-level comments (id, text, author, created_at, likes, reply count). post_id is the shortcode or " +
			"a post or reel URL on the platform's hosts (422 otherwise, before any fetch). Only that first preview is served: " +
			"the next page needs a signed-in session, so there is no cursor parameter, cursor is always null and has_more " +
			"says whether the post has more comments than were returned. A page that carries the post but none of its " +
			"comments fails typed (502, refunded) rather than answering an empty sample; comments turned off is an empty " +
			"page that says so. Cost 1, as every creator building block, so a composite can sample several posts; the page " +
			"fetch goes through paid unblocking services when the site blocks the direct route, so the endpoint is metered " +
			"for fair use and cached five minutes, as post-stats is.",
	},
}
