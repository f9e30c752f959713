// Package service is the service's own free endpoints, beside the request
// pipeline: discovery (the API and platform indexes, the catalogue
// /v1/utility/endpoints and /endpoint, quickstart, llms), the OpenAPI
// document (/openapi.json and .yaml), /v1/status, the credit endpoints
// (/v1/credits/balance, /transactions) and usage reports
// (/v1/credits/usage).
//
// It reads the registry, the store (the account, its ledger, the recorded
// outcomes, the canary's runs) and the upstream runner's allowances; it
// writes nothing. It does not import the pipeline: the pipeline serves its
// Handlers as built-ins, through an adapter that hands each a Call, and
// tells it through Config.Available which endpoints this deployment serves.
// The console reads Status, LedgerPage and AccountUsage.
package service

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/openapi"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Config is what the service's endpoints read.
type Config struct {
	Registry *registry.Registry
	// Store serves the credit endpoints (nil: not served).
	Store store.Store
	// Outcomes serves /v1/status and /v1/credits/usage (nil: not served).
	Outcomes store.Outcomes
	// Canary holds the canary's runs: /v1/status shows each platform's
	// part of the last one (nil: no canary column).
	Canary store.CanaryLog
	// Upstream tells the capacity left of limited-capacity endpoints.
	Upstream *upstream.Runner
	// DataSchemas publishes each data endpoint's data schema; Contact is
	// the OpenAPI document's info.contact (nil: the default).
	DataSchemas openapi.DataSchemas
	Contact     *openapi.Contact
	// ErrorsURL is the configured errors reference (it names the base URL
	// of examples when it is this deployment's /docs/errors).
	ErrorsURL string
	// Available reports whether this deployment serves an endpoint on /v1
	// (the pipeline's handler table), so every catalogue view agrees with
	// what calls get.
	Available func(*registry.Endpoint) bool
	Logger    *slog.Logger
	Now       func() time.Time
}

// Call is what an endpoint's handler reads of a validated call.
type Call struct {
	RequestID string
	Endpoint  *registry.Endpoint
	// Values are the validated, canonical parameters.
	Values    map[string]string
	Principal auth.Principal
	Request   *http.Request
	// CreditsRemaining may be set by a handler that learns the balance.
	CreditsRemaining *int64
}

// Handler serves one endpoint: the data object of the success envelope
// (or an envelope.Raw), or a typed error.
type Handler func(ctx context.Context, c *Call) (any, *envelope.Error)

// Service serves the service's own endpoints.
type Service struct {
	cfg     Config
	openapi openAPIDocs
}

// New builds the service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Available == nil {
		cfg.Available = func(*registry.Endpoint) bool { return false }
	}
	return &Service{cfg: cfg}
}

// available reports whether this deployment can serve e on /v1.
func (s *Service) available(e *registry.Endpoint) bool { return s.cfg.Available(e) }

// Handlers are the service's endpoints by key: discovery and the indexes
// always; the credit endpoints with a store; status and usage reports with
// outcomes.
func (s *Service) Handlers() map[string]Handler {
	out := s.discoveryHandlers(s.cfg.Registry)
	for _, e := range s.cfg.Registry.Endpoints() {
		if e.IsIndex() {
			out[e.Key()] = s.index // platform indexes say which entries this deployment serves
		}
	}
	if s.cfg.Store != nil {
		out["credits/balance"] = balanceHandler(s.cfg.Store)
		out["credits/transactions"] = transactionsHandler(s.cfg.Store)
	}
	if s.cfg.Outcomes != nil {
		out["status"] = s.statusHandler
		out["credits/usage"] = s.usageHandler
	}
	return out
}

// Status is /v1/status's data: each data platform's health over the last
// 15 minutes beside its part of the canary's last run (the console shows
// it too). It needs Config.Outcomes.
func (s *Service) Status(ctx context.Context) (any, *envelope.Error) { return s.platformStatus(ctx) }

// Capacity is what is left of a limited-capacity endpoint's shared monthly
// allowance, as the catalogue and a dry run show it.
func (s *Service) Capacity(ctx context.Context, e *registry.Endpoint) *registry.Capacity {
	return s.capacity(ctx, e)
}

// LedgerPage is a page of an account's ledger as /v1/credits/transactions
// shows it (the console's too).
func LedgerPage(ctx context.Context, st store.Store, accountID string, q store.LedgerQuery) (any, *envelope.Error) {
	return ledgerPage(ctx, st, accountID, q)
}

// AccountUsage is an account's usage over its last days (UTC, today
// included) as /v1/credits/usage shows it (the console's too).
func AccountUsage(ctx context.Context, o store.Outcomes, accountID string, days int, now time.Time) (UsageData, error) {
	return accountUsage(ctx, o, accountID, days, now)
}

// Example is e's ready-to-run request on base's /v1 as the catalogue shows
// it, from the declared examples (the batch example's item is picked from
// every registered endpoint).
func Example(reg *registry.Registry, e *registry.Endpoint, base string) exampleRequest {
	return example(reg, e, base)
}
