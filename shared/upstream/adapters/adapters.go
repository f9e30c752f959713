// Package adapters lists every upstream provider Meridian ships, in route
// order: for an endpoint served by several providers, the earlier one is
// tried first and the later ones take over when it fails.
package adapters

import (
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/atproto"
	"github.com/meridian-data/meridian/shared/upstream/adapters/companieshouse"
	"github.com/meridian-data/meridian/shared/upstream/adapters/github"
	"github.com/meridian-data/meridian/shared/upstream/adapters/itunes"
	"github.com/meridian-data/meridian/shared/upstream/adapters/playstore"
	"github.com/meridian-data/meridian/shared/upstream/adapters/youtube"
)

// All returns the providers, built fresh (providers hold per-process
// state such as sessions).
func All() []*upstream.Provider {
	providers := atproto.Providers() // public AppView first, the authenticated session second
	return append(providers,
		itunes.Provider(),
		playstore.Provider(),
		companieshouse.Provider(),
		youtube.Provider(),
		github.Provider(),
	)
}
