package registry

// videoPlatformCreators are video_platform's creator building blocks.
var videoPlatformCreators = []Endpoint{}
