package registry

// microblogBCreators are microblog_b's creator building blocks (its
// profile is spec-listed: microblog_b/profile).
var microblogBCreators = []Endpoint{}
