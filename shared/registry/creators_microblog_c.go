package registry

// microblogCHosts are the hosts of microblog_c's post pages: the site moved
// from threads.net to threads.com in 2025 and both still serve (www. is a
// subdomain).
var microblogCHosts = []string{"threads.net", "threads.com"}

// The source's usernames are its parent network's: at most 30 letters,
// digits, periods and underscores, stored in lower case (the source's
// lookup wants an exact match, so the value is folded, which also lets
// both spellings share a cache entry). A leading @ is refused by the
// pattern, whose hint says so.
var microblogCHandle = handleParam.Named("handle", "Username, without a leading @.").
	Match(`[A-Za-z0-9._]{1,30}`, "a username of 1 to 30 letters, digits, periods or underscores, without a leading @").
	Lower().Len(30).Req().Ex("threads")

// microblogCCreators are microblog_c's creator building blocks (see
// creators.go), served by the source's official API with the operator's
// access token (profile discovery and reply reading). Each call is one to
// three source requests against a rolling 24-hour call budget, and none is
// metered per item, so 1 credit each.
var microblogCCreators = []Endpoint{
	{
		Platform: "microblog_c", ID: "profile", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name:        "Microblog C account profile",
		Description: "A public account's profile: followers (and the field they came from), verification, bio and its recent engagement totals.",
		Params:      []Param{microblogCHandle},
		Decision: "The creator building block for an account's profile: the source's profile discovery lookup by exact username (handle without @, " +
			"folded to lower case) gives the follower count (follower_count, the field named in follower_source_field), verification, bio, " +
			"avatar and the account's recent engagement totals (likes, replies, reposts, quotes, views over the source's recent window). " +
			"The source reports no post count, so posts_count is null and says so. Unknown, private or undiscoverable accounts are 404. " +
			"Cost 1: one source request.",
	},
	{
		Platform: "microblog_c", ID: "posts", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name:        "Microblog C account posts",
		Description: "A public account's latest posts, newest first; the source reports no per-post counters for other accounts, so counts are null and say so.",
		Params: []Param{
			microblogCHandle,
			P("limit", Integer, "Posts per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block for an account's latest posts: the source's profile discovery posts list by exact username " +
			"(limit is its page size, at most 100; cursor is its opaque after cursor). Per-post counters (likes, replies, reposts, quotes, " +
			"views) are served by the source only to the posts' own author (its insights), so counts.likes, comments, shares and views are " +
			"null (unknown, never 0) and _warnings says so; has_replies, media type and quote/repost references are passed on. Cost 1: one " +
			"source request.",
	},
	{
		Platform: "microblog_c", ID: "comments", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name:        "Microblog C post replies",
		Description: "A sample of a post's top-level replies, newest first: text, author and whether each has replies; the source reports no reply counters.",
		Params: []Param{
			P("post_id", String, "The post's numeric media id (the id microblog_c/posts returns), or the post's URL.").Req().Len(2048).
				Match(`[0-9]{1,25}|(https?:)?(//)?[A-Za-z0-9.-]+\.[A-Za-z]{2,}\.?(:[0-9]+)?/@[A-Za-z0-9._]{1,30}/post/[A-Za-z0-9_-]{1,64}/?([?#]\S*)?`,
					"a numeric media id or a post URL (…/@<username>/post/<code>)").
				Ex("18050206876707110").OnHosts(microblogCHosts...),
			P("limit", Integer, "Replies per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block for a post's comments: the source's replies edge of the post (top-level replies, newest first; " +
			"limit is the page size asked for, cursor its opaque after cursor). post_id is the source's numeric media id, or a post URL " +
			"(a page of the platform, refused with 422 otherwise) whose code is matched among the author's latest 200 posts (a URL " +
			"not found there is 422 asking for the id). The source documents reply reading for the token account's own posts; for other " +
			"posts it may refuse or answer that the post cannot be loaded (404). It reports no like or reply counts of replies: they are " +
			"null and _warnings says so. Cost 1: one to three source requests.",
	},
}
