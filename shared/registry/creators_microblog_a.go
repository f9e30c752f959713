package registry

import (
	"net/url"
	"regexp"
	"strings"
)

// microblogAHosts are the hosts of microblog_a's post pages: the network's
// reference web client (bsky.app and its subdomains).
var microblogAHosts = []string{"bsky.app"}

// An account is named by an at-identifier: a domain handle or a DID. Both
// shapes are the AT Protocol's (atproto.com/specs/handle, /specs/did), so
// a value the source would refuse as malformed is refused here first, with
// 422 before any charge.
var (
	atHandle = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	atDID    = regexp.MustCompile(`^did:[a-z]+:[A-Za-z0-9._:%-]*[A-Za-z0-9._-]$`)
	// atRkey is a record key (atproto.com/specs/record-key); "." and ".."
	// are excluded separately.
	atRkey = regexp.MustCompile(`^[A-Za-z0-9._:~-]{1,512}$`)
)

// atIdentifier reports whether s is a handle or a DID.
func atIdentifier(s string) bool {
	return len(s) <= 253 && atHandle.MatchString(s) || len(s) <= 2048 && atDID.MatchString(s)
}

var microblogAActor = handleParam.Named("handle", "Handle (e.g. alice.example.com) or DID, without a leading @.").Len(253).Ex("bsky.app").
	Checked(func(v string) (string, string) {
		if atIdentifier(v) {
			return "", ""
		}
		return "invalid_handle", "handle must be a domain handle such as alice.bsky.social or a DID such as did:plc:z72i7hdynmk6r22z27h6tvur."
	})

// microblogAPostRef checks a post reference's shape: an at:// URI of a
// post record, or a post page URL of the web client (its host is OnHosts').
func microblogAPostRef(v string) (string, string) {
	if strings.HasPrefix(v, "at://") {
		if _, _, ok := splitPostURI(v); ok {
			return "", ""
		}
		return "invalid_post_id", "post_id must be the at:// URI of a post (as microblog_a/search returns it in id) or the post's page URL."
	}
	u, err := url.Parse(v)
	if err != nil || u.Hostname() == "" {
		return "invalid_post_id", "post_id must be an at:// URI of a post or the post's page URL (…/profile/<handle or DID>/post/<record key>)."
	}
	if _, _, ok := splitPostPath(u.Path); !ok {
		return "invalid_post_id", "post_id must be the URL of a post page (…/profile/<handle or DID>/post/<record key>) or an at:// URI of a post."
	}
	return "", ""
}

// splitPostURI reads at://<authority>/app.bsky.feed.post/<rkey>.
func splitPostURI(v string) (authority, rkey string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(v, "at://"), "/")
	if len(parts) != 3 || parts[1] != "app.bsky.feed.post" {
		return "", "", false
	}
	return validPostRef(parts[0], parts[2])
}

// splitPostPath reads /profile/<authority>/post/<rkey>, with an optional
// trailing slash.
func splitPostPath(path string) (authority, rkey string, ok bool) {
	parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/"), "/")
	if len(parts) != 4 || parts[0] != "profile" || parts[2] != "post" {
		return "", "", false
	}
	return validPostRef(parts[1], parts[3])
}

func validPostRef(authority, rkey string) (string, string, bool) {
	if !atIdentifier(authority) || !atRkey.MatchString(rkey) || rkey == "." || rkey == ".." {
		return "", "", false
	}
	return authority, rkey, true
}

// microblogACreators are microblog_a's creator building blocks (its
// profile is spec-named: microblog_a/profile).
var microblogACreators = []Endpoint{
	{
		Platform: "microblog_a", ID: "posts", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Microblog A account posts", Description: "An account's latest posts, newest first, with their public counters (likes, replies, reposts, quotes; views are not reported).",
		Params: []Param{
			microblogAActor.Req(),
			P("limit", Integer, "Posts per page, 1-100.").Range(1, 100).Def("20"),
			P("include_replies", Boolean, "true adds the account's replies to other posts; keep it across pages.").Def("false"),
			P("include_reposts", Boolean, "true adds the account's reposts of others' posts; keep it across pages.").Def("false"),
			cursorParam,
		},
		Decision: "The creator building block for an account's latest posts: the network's author feed (app.bsky.feed.getAuthorFeed) by " +
			"handle or DID (both accepted by the source), newest first, without the pinned post; limit is its page size (the source's " +
			"bounds, 1-100) and cursor its opaque page token. include_replies chooses the source's filter (posts_no_replies by default, " +
			"posts_with_replies when true). The source has no filter without reposts, so include_reposts=false (the default: a creator's " +
			"own posts are what is measured) leaves them out of the page after reading it, and _warnings says when a page is shorter " +
			"for it. counts are likeCount, replyCount (comments), repostCount (shares) and quoteCount; the source reports no views, so " +
			"views is null and says so. Cost 1: one source call, as microblog_a/profile.",
	},
	{
		Platform: "microblog_a", ID: "comments", Family: Social, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Microblog A post replies", Description: "A sample of the direct replies to a post, newest first: text, author, likes and replies of each.",
		Params: []Param{
			P("post_id", String, "The post's at:// URI (as microblog_a/search and microblog_a/posts return it in id) or its page URL (…/profile/<handle or DID>/post/<record key>).").
				Req().Len(2048).Ex("https://bsky.app/profile/bsky.app/post/3l6oveex3ii2l").
				// The shape here, so the catalogue and OpenAPI state it; the
				// host is OnHosts', each part the Check's.
				Match(`at://\S+|\S*/profile/[^\s/]+/post/\S+`, "an at:// URI of a post or a post page URL (…/profile/<handle or DID>/post/<record key>)").
				OnHosts(microblogAHosts...).OrScheme("at").Checked(microblogAPostRef),
			P("limit", Integer, "Replies per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block for a post's comments: the post's thread (app.bsky.feed.getPostThread, depth 1, no parents), " +
			"whose direct replies are the comments. post_id is the post's at:// URI or its page URL on the web client (bsky.app, refused " +
			"with 422 otherwise); a handle in either is passed in the at:// URI, which the source resolves. The source returns a thread's " +
			"replies in one answer without paging, so Meridian sorts them newest first and pages through them with limit (1-100) and an " +
			"opaque cursor; replies to replies are counted, not listed. Cost 1: one source call.",
	},
}
