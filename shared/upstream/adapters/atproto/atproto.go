// Package atproto serves the microblog_a endpoints over the AT Protocol's
// XRPC HTTP API: app.bsky.feed.searchPosts for microblog_a/search,
// app.bsky.actor.getProfile for microblog_a/profile, and for the creator
// building blocks app.bsky.feed.getAuthorFeed (microblog_a/posts) and
// app.bsky.feed.getPostThread (microblog_a/comments).
//
// It offers two routes. The public AppView answers without credentials,
// but it has refused unauthenticated post search (HTTP 403) for long
// stretches and always refuses search cursors from anonymous callers; the
// session route then asks the same methods through an account's PDS, which
// proxies them to the AppView under an app-password session.
package atproto

import (
	"context"
	"net/http"
	"net/url"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Provider names: they name the routes, the fixture folders and the
// MERIDIAN_UPSTREAM_<NAME>_URL overrides.
const (
	PublicName  = "atproto_public"
	SessionName = "atproto_session"
)

// The session route's credentials.
const (
	IdentifierVar  = "MERIDIAN_ATPROTO_IDENTIFIER"
	AppPasswordVar = "MERIDIAN_ATPROTO_APP_PASSWORD"
)

// The endpoints served and the XRPC methods that serve them.
const (
	searchEndpoint   = "microblog_a/search"
	profileEndpoint  = "microblog_a/profile"
	postsEndpoint    = "microblog_a/posts"
	commentsEndpoint = "microblog_a/comments"

	searchPath        = "/xrpc/app.bsky.feed.searchPosts"
	profilePath       = "/xrpc/app.bsky.actor.getProfile"
	createSessionPath = "/xrpc/com.atproto.server.createSession"

	// webBase is where the network's reference web client shows profiles
	// and posts; it accepts a handle or a DID in its profile paths.
	webBase = "https://bsky.app"

	docs = "https://docs.bsky.app/docs/advanced-guides/api-directory"
)

// fetcher makes one XRPC query (GET) for an adapter: anonymously on the
// public route, under the cached session on the session route.
type fetcher func(ctx context.Context, c *upstream.Call, path string, query url.Values) (*upstream.Response, error)

// Providers returns the public route first and the session route second:
// a refused anonymous call (401/403 are Rejected faults) moves the runner
// on to the session route.
func Providers() []*upstream.Provider {
	return []*upstream.Provider{Public(), Session()}
}

// Public is the unauthenticated public AppView.
func Public() *upstream.Provider {
	anonymous := func(ctx context.Context, c *upstream.Call, path string, query url.Values) (*upstream.Response, error) {
		return c.Get(ctx, path, query, nil)
	}
	return &upstream.Provider{
		Name:     PublicName,
		Protocol: "AT Protocol XRPC over HTTPS (JSON), unauthenticated queries to the public AppView",
		Docs:     docs,
		BaseURL:  "https://public.api.bsky.app",
		Endpoints: map[string]upstream.Adapter{
			searchEndpoint:   searchAdapter(anonymous),
			profileEndpoint:  profileAdapter(anonymous),
			postsEndpoint:    postsAdapter(anonymous),
			commentsEndpoint: commentsAdapter(anonymous),
		},
	}
}

// Session is the same XRPC queries through an account's PDS under an
// app-password session. Each call of Session has its own session cache.
func Session() *upstream.Provider {
	s := newSessions()
	return &upstream.Provider{
		Name:     SessionName,
		Protocol: "AT Protocol XRPC over HTTPS (JSON): com.atproto.server.createSession with an app password, then queries with a Bearer access token, proxied by the PDS to the AppView",
		Docs:     docs,
		BaseURL:  "https://bsky.social",
		Secrets: []upstream.Secret{
			{
				Name:     IdentifierVar,
				Required: true,
				Doc:      "Handle (e.g. example.bsky.social) or e-mail of the account whose session serves post search, profiles, account posts and post replies. Point MERIDIAN_UPSTREAM_ATPROTO_SESSION_URL at the account's PDS when it is not hosted at the default.",
			},
			{
				Name:     AppPasswordVar,
				Required: true,
				Doc:      "An app password of that account (Settings > Privacy and security > App passwords; format xxxx-xxxx-xxxx-xxxx), never the account's main password. App passwords skip e-mail two-factor sign-in and can be revoked on their own.",
			},
		},
		Endpoints: map[string]upstream.Adapter{
			searchEndpoint:   searchAdapter(s.get),
			profileEndpoint:  profileAdapter(s.get),
			postsEndpoint:    postsAdapter(s.get),
			commentsEndpoint: commentsAdapter(s.get),
		},
	}
}

// bearer is the Authorization header of an XRPC call under a session.
func bearer(token string) http.Header {
	return http.Header{"Authorization": []string{"Bearer " + token}}
}
