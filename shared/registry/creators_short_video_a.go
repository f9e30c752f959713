package registry

// shortVideoAHosts are the hosts of short_video_a's video pages: the site
// and its subdomains (www., m.). Its short-link hosts (vm., vt.) are
// subdomains too, but their links name no video without a fetch, so the
// post_id pattern leaves them out (422 with the pattern's hint).
var shortVideoAHosts = []string{"tiktok.com"}

// The source's usernames are letters, digits, underscores and periods, at
// most 24, stored in lower case: the value is folded, so both spellings
// share a cache entry. A leading @ is refused by the pattern, whose hint
// says so.
var shortVideoAHandle = handleParam.Named("handle", "Username, without a leading @.").
	Match(`[A-Za-z0-9._]{1,24}`, "a username of 1 to 24 letters, digits, underscores or periods, without a leading @").
	Lower().Len(24).Req().Ex("tiktok")

// shortVideoACreators are short_video_a's creator building blocks (see
// creators.go). The official route is the source's Research API on the
// operator's research client: free, but metered in requests per client
// and day, with no per-item charge; a call is one to five of its requests,
// so 1 credit each. profile and posts count towards fair use (metered):
// profile may be served through the paid web-unblocking services, posts
// may read several windows.
var shortVideoACreators = []Endpoint{
	{
		Platform: "short_video_a", ID: "profile", Family: Social, Kind: Data, Cost: 1, Origin: Addition, FairUse: metered,
		Name:        "Short video A account profile",
		Description: "A public account's profile: followers (and the field they came from), following, likes, video count, verification and bio.",
		Params:      []Param{shortVideoAHandle},
		Decision: "The creator building block for an account's profile. First route: the source's Research API user info by username " +
			"(display_name, bio_description, avatar_url, is_verified, follower_count (the field named in follower_source_field), " +
			"following_count, likes_count, video_count, bio_url); it reports no account id, so id is null and says so. Second route, " +
			"when the research client is not configured or fails: the public profile page read logged out (directly, then through the " +
			"web-unblocking services), whose rehydration data gives the id, exact counts (statsV2) and privacy. handle is the username " +
			"without @, folded to lower case. An unknown account is 404. Cost 1: one source request.",
	},
	{
		Platform: "short_video_a", ID: "posts", Family: Social, Kind: Data, Cost: 1, Origin: Addition, FairUse: metered,
		Name:        "Short video A account posts",
		Description: "A public account's latest videos, newest first, with likes, comments, shares, views and saves.",
		Params: []Param{
			shortVideoAHandle,
			P("limit", Integer, "Videos per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block for an account's latest posts: the source's Research API video query filtered by username. " +
			"The query takes windows of at most 30 days (start_date, end_date) and promises no order, so windows are read whole (100 " +
			"videos a request, following its cursor and search_id) from today backwards and sorted newest first, at most 4 requests a " +
			"call; limit (1-100, the query's page bound) is the page size and cursor an opaque token of where the next page starts (a day " +
			"and the last id returned). The first page looks the account up (an unknown account is 404; its video count tells when every " +
			"post was returned). Counters: like_count, comment_count, share_count, view_count, favourites_count (saves). The source " +
			"reports no thumbnails (null, said in _warnings) and its index can trail by a day or two. The logged-out profile page carries " +
			"no post list, so there is no second route. Cost 1: the source charges nothing per request, only a daily request quota.",
	},
	{
		Platform: "short_video_a", ID: "comments", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name:        "Short video A video comments",
		Description: "A sample of a video's comments and replies with likes and reply counts; the source does not identify comment authors.",
		Params: []Param{
			P("post_id", String, "Numeric video id, or the video's URL.").Req().Len(2048).
				Match(`[0-9]{1,19}|\S*/(video|photo)/[0-9]{1,19}([/?#]\S*)?|\S*/v/[0-9]{1,19}(\.html)?([?#]\S*)?|\S*/embed(/v2)?/[0-9]{1,19}([/?#]\S*)?`,
					"a numeric video id or a video URL (…/@<username>/video/<id>); short links are not resolved").
				Ex("7106594312292453675").OnHosts(shortVideoAHosts...),
			P("limit", Integer, "Comments per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block for a post's comments: the source's Research API comment list for one video (video_id " +
			"as an int64, max_count = limit 1-100, cursor = the source's own index, passed through). Comments and replies come in the " +
			"source's order; a reply's in_reply_to_id names its parent. The source does not identify comment authors, so author " +
			"fields are null and _warnings says so. post_id is the numeric id or a video URL on the platform's hosts (refused with 422 " +
			"otherwise, and for short links). An empty first page looks the video up by id (its creation day is in the id): none is " +
			"404. Cost 1: one source request (two for an empty first page).",
	},
}
