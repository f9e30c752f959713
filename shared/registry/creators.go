package registry

// The creator building blocks (issue 16): for each creator platform a
// profile (followers and the field they came from), its latest posts with
// their counters, and a sample of a post's comments, as ordinary data
// endpoints ({platform}/profile, {platform}/posts, {platform}/comments)
// beyond the specification (Origin Addition), so the composite operations
// are built from public operations. Each platform's declarations live in a
// file of their own.
func creators() []Endpoint {
	var all []Endpoint
	for _, group := range [][]Endpoint{videoPlatformCreators, microblogBCreators, microblogACreators, microblogCCreators, photoSocialCreators, shortVideoACreators} {
		all = append(all, group...)
	}
	return all
}
