// Package adapters lists every upstream provider Meridian ships, in route
// order: for an endpoint served by several providers, the earlier one is
// tried first and the later ones take over when it fails.
package adapters

import (
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/airbnb"
	"github.com/meridian-data/meridian/shared/upstream/adapters/aliexpress"
	"github.com/meridian-data/meridian/shared/upstream/adapters/amazon"
	"github.com/meridian-data/meridian/shared/upstream/adapters/atproto"
	"github.com/meridian-data/meridian/shared/upstream/adapters/booking"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingdemand"
	"github.com/meridian-data/meridian/shared/upstream/adapters/companieshouse"
	"github.com/meridian-data/meridian/shared/upstream/adapters/etsy"
	"github.com/meridian-data/meridian/shared/upstream/adapters/facebook"
	"github.com/meridian-data/meridian/shared/upstream/adapters/github"
	"github.com/meridian-data/meridian/shared/upstream/adapters/harvestapi"
	"github.com/meridian-data/meridian/shared/upstream/adapters/instagram"
	"github.com/meridian-data/meridian/shared/upstream/adapters/itunes"
	"github.com/meridian-data/meridian/shared/upstream/adapters/klarna"
	"github.com/meridian-data/meridian/shared/upstream/adapters/kohls"
	"github.com/meridian-data/meridian/shared/upstream/adapters/lix"
	"github.com/meridian-data/meridian/shared/upstream/adapters/playstore"
	"github.com/meridian-data/meridian/shared/upstream/adapters/quora"
	"github.com/meridian-data/meridian/shared/upstream/adapters/threads"
	"github.com/meridian-data/meridian/shared/upstream/adapters/tiktok"
	"github.com/meridian-data/meridian/shared/upstream/adapters/xapi"
	"github.com/meridian-data/meridian/shared/upstream/adapters/youtube"
	"github.com/meridian-data/meridian/shared/upstream/adapters/zoopla"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// All returns the providers, built fresh (providers hold per-process
// state such as sessions). A site without an API is read directly first,
// then through the web-unblocking services, which fetch the same public
// pages through their own browsers and proxies when the site blocks
// Meridian; an official API, where one exists, comes before its site.
func All() []*upstream.Provider {
	providers := atproto.Providers() // public AppView first, the authenticated session second
	providers = append(providers,
		itunes.Provider(),
		playstore.Provider(),
		companieshouse.Provider(),
		youtube.Provider(),
		github.Provider(),
		xapi.Provider(),
		instagram.GraphProvider(), // business discovery on the operator's professional account: photo_social/profile, posts
		harvestapi.Provider(),     // professional_network people search and locations (commercial API, operator's key)
		lix.Provider(),            // professional_network locations (second route), schools and industries typeaheads
		tiktok.ResearchProvider(), // the Research API, before the profile page's routes
		threads.Provider(),        // microblog_c's creator building blocks, on the operator's Threads token
		etsy.Provider(),
		aliexpress.Provider(),        // the affiliate API, with the operator's app credentials
		aliexpress.SimilarProvider(), // the same app's related products, under a monthly allowance
		facebook.SearchProvider(),    // people and event search, on the operator's RapidAPI key
		airbnb.Provider(),            // lodging_marketplace/locations: the web app's autocomplete, on the operator's own key
		bookingdemand.Provider(),     // travel_booking hotel, search-hotels and locations on the operator's Demand API credentials
	)
	sites := Sites()
	for _, s := range sites {
		providers = append(providers, pages.Direct(s))
	}
	providers = append(providers, pages.Zyte(sites...), pages.ScraperAPI(sites...))
	return providers
}

// Sites are the sites read from their public pages, built fresh.
func Sites() []*pages.Site {
	return []*pages.Site{etsy.Site(), kohls.Site(), klarna.Site(), aliexpress.Site(), amazon.Site(), instagram.Site(), facebook.Site(), tiktok.Site(), zoopla.Site(), quora.Site(),
		booking.Site(), // travel_booking from the site's own front end, after its partner API (bookingdemand, above)
	}
}
