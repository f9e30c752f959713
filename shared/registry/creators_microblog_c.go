package registry

// microblogCCreators are microblog_c's creator building blocks (see creators.go).
var microblogCCreators = []Endpoint{}
