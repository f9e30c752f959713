package registry

// photoSocialCreators are photo_social's creator building blocks (see creators.go).
var photoSocialCreators = []Endpoint{}
