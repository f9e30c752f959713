// Package composite holds the operations built from the registry's own
// operations: search/all and search/creators (a fan-out over the
// platforms' searches), bundle/creator-vetting and web/social-profiles.
// The pipeline runs their legs (pipeline.LegRunner): every leg is
// validated, cached, traced and counted for fair use as a direct call, and
// the composite charges its list price once.
package composite

import "github.com/meridian-data/meridian/shared/pipeline"

// All is every composite, by endpoint key; fetch reads the public pages
// web/social-profiles follows (nil: none is read, and its answers say
// partial).
func All(fetch PageFetcher) map[string]pipeline.Composite {
	return map[string]pipeline.Composite{
		"search/all":             SearchAll(),
		"search/creators":        SearchCreators(),
		"bundle/creator-vetting": CreatorVetting(),
		"web/social-profiles":    SocialProfiles(fetch),
	}
}
