package registry

// microblogACreators are microblog_a's creator building blocks (see creators.go).
var microblogACreators = []Endpoint{}
