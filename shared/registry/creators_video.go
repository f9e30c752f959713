package registry

// videoPlatformHosts are the hosts a video URL may be on: the site (www.,
// m., music.) and its short-link domain youtu.be, whose path is the video
// id itself (no fetch is needed to read it).
var videoPlatformHosts = []string{"youtube.com", "youtu.be"}

// A channel is named by its handle (without @, as creator-vetting takes
// it) or by its channel id; the source's handles are 3 to 30 characters,
// and may be written in many scripts, so only the leading @ and spaces are
// refused here.
var (
	videoHandle    = handleParam.Named("handle", "Channel handle, without a leading @.").Len(30).Ex("GoogleDevelopers")
	videoChannelID = P("channel_id", String, "Channel id (UC followed by 22 letters, digits, - or _).").
			Match(`UC[A-Za-z0-9_-]{22}`, "a channel id such as UC_x5XG1OV2P6uZZ5FSM9Ttw")
	videoChannel = [][]string{{"handle", "channel_id"}}
)

// videoPlatformCreators are video_platform's creator building blocks.
// Each is served by the Data API v3 with an API key; a call takes 1 quota
// unit per upstream method call (profile 1, posts 3, comments 1), far less
// than video_platform/search's 100, so 1 credit each.
var videoPlatformCreators = []Endpoint{
	{
		Platform: "video_platform", ID: "profile", Family: Media, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Video platform channel profile", Description: "A channel's public profile: subscribers (and the field they came from), video and view counts.",
		Params:   []Param{videoHandle, videoChannelID},
		AnyOf:    videoChannel,
		Decision: "The creator building block of issue 16 for the video platform: the Data API's channels.list (snippet, statistics) looks a channel up by handle (forHandle) or by id, one quota unit. handle is taken without @ as creator-vetting takes it; channel_id is the alternative, and wins when both are sent. followers is statistics.subscriberCount (the source rounds it) and null when the channel hides it.",
	},
	{
		Platform: "video_platform", ID: "posts", Family: Media, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Video platform channel videos", Description: "A channel's latest uploads with their counters (likes, comments, views; shares are not reported).",
		Params: []Param{
			videoHandle, videoChannelID,
			P("limit", Integer, "Videos per page, 1-50.").Range(1, 50).Def("20"),
			cursorParam,
		},
		AnyOf:    videoChannel,
		Decision: "The creator building block of issue 16 for the video platform: the channel's uploads playlist (channels.list contentDetails), its latest items (playlistItems.list, newest first, at most 50 a page, the page token as cursor) and their counters and durations (videos.list statistics, contentDetails), three quota units in all. The source reports no share count, so shares is null and says so.",
	},
	{
		Platform: "video_platform", ID: "comments", Family: Media, Kind: Data, Cost: 1, Origin: Addition,
		Name: "Video platform video comments", Description: "A sample of a video's top-level comments, most relevant first, with likes and reply counts.",
		Params: []Param{
			P("video_id", String, "Video id (11 characters) or the video's URL.").Req().Len(2048).Ex("dQw4w9WgXcQ").OnHosts(videoPlatformHosts...),
			P("limit", Integer, "Comments per page, 1-100.").Range(1, 100).Def("20"),
			cursorParam,
		},
		Decision: "The creator building block of issue 16 for the video platform: commentThreads.list for one video (snippet, plain text, relevance order, at most 100 a page, the page token as cursor), one quota unit. video_id takes the id or a URL of the platform's pages (watch, youtu.be, shorts, live, embed). A video whose comments are turned off answers an empty page that says so.",
	},
}
