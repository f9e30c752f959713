package registry

// shortVideoACreators are short_video_a's creator building blocks (see creators.go).
var shortVideoACreators = []Endpoint{}
