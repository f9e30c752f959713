package registry

// microblogBHosts are the hosts of microblog_b's post pages (x.com, and the
// twitter.com links still in circulation; mobile. and www. are subdomains).
var microblogBHosts = []string{"x.com", "twitter.com"}

// microblogBCreators are microblog_b's creator building blocks (its
// profile is spec-listed: microblog_b/profile).
var microblogBCreators = []Endpoint{
	{
		Platform: "microblog_b", ID: "posts", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Microblog B account posts", Description: "An account's latest posts, newest first, with their public counters (likes, reposts, replies, quotes, views).",
		Params: []Param{
			handleParam.Req().Ex("example"),
			P("limit", Integer, "Posts per page, 5-100.").Range(5, 100).Def("20"),
			P("include_reposts", Boolean, "true adds the account's reposts; keep it across pages.").Def("false"),
			cursorParam,
		},
		Decision: "The creator building block for an account's latest posts: the source's user timeline needs the account's numeric id, " +
			"so the handle (the rule of microblog_b/profile) is looked up first, then the timeline is read with limit as its page size " +
			"(the source's bounds, 5-100), include_reposts (default false: reposts are excluded, as a creator's own posts are what is measured) " +
			"and the source's opaque page token as cursor. Items and counters are those of search-posts. Cost 1, as search-posts: " +
			"the extra lookup reads no posts, which is what the source meters.",
	},
	{
		Platform: "microblog_b", ID: "comments", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Microblog B post replies", Description: "A sample of the replies to a post, newest first: text, author, likes and replies of each; the source covers the last 7 days of replies.",
		Params: []Param{
			P("post_id", String, "Numeric post id, or the post's URL.").Req().Len(2048).
				Match(`[0-9]{1,19}|\S*/status(es)?/[0-9]{1,19}([/?#]\S*)?`, "a numeric post id or a post URL (…/status/<id>)").
				Ex("1899234567890123457").OnHosts(microblogBHosts...),
			P("limit", Integer, "Replies per page, 10-100.").Range(10, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block for a post's comments: replies are found by recent search for the post's conversation " +
			"(conversation_id:<id> is:reply), which holds the last 7 days only, so a post older than that says in _warnings that its " +
			"older replies are missing. post_id is the numeric id or the post's URL (x.com or twitter.com, refused with 422 otherwise); " +
			"limit is the search page size (the source's bounds, 10-100); cursor is the source's opaque page token. An empty first page " +
			"looks the post up once to tell an unknown post (404) from one without recent replies. Cost 1, as search-posts.",
	},
}
