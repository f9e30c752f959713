package pipeline

import "github.com/meridian-data/meridian/shared/registry"

// dryRunData is the body of a dry run (spec 4): a zero-credit estimate
// that fetches nothing, runs no AI and reserves nothing.
type dryRunData struct {
	DryRun bool `json:"dry_run"`
	// CreditCost is the endpoint's list price; EstimatedCredits what this
	// call would be charged now (0 when the cache would answer).
	CreditCost       int64 `json:"credit_cost"`
	EstimatedCredits int64 `json:"estimated_credits"`
	// Cache is a snapshot: HIT, MISS, BYPASS (Cache-Control) or OFF.
	Cache string `json:"cache"`
	// CanPay says whether the key's credit_limit and the wallet would admit
	// the call now; Refusal names the error type it would get otherwise.
	CanPay           *bool   `json:"can_pay"` // null when the balance could not be read
	Refusal          *string `json:"refusal"`
	CreditsRemaining *int64  `json:"credits_remaining"`
	KeyCreditLimit   *int64  `json:"key_credit_limit"`
	KeyCreditsUsed   *int64  `json:"key_credits_used"`
	// Capacity, on a limited-capacity endpoint, says whether its shared
	// monthly allowance remains (as in the catalogue); a cache hit needs none.
	Capacity *registry.Capacity `json:"capacity,omitempty"`
}

func (p *Pipeline) dryRun(x *exchange, c *Call, cu cacheUse) dryRunData {
	e := c.Endpoint
	d := dryRunData{DryRun: true, CreditCost: e.Cost, EstimatedCredits: e.Cost, Cache: cu.status}
	if cu.hit != nil {
		d.EstimatedCredits = 0
	}
	if e.LimitedCapacity {
		d.Capacity = p.svc.Capacity(x.r.Context(), e)
		if d.Capacity != nil && d.Capacity.Exhausted && cu.hit == nil {
			// The live call would be refused (429 capacity_exhausted) and
			// refunded: it would cost nothing.
			d.EstimatedCredits = 0
		}
	}
	yes := true
	if p.cfg.Store == nil {
		d.CanPay = &yes // nothing is billed without a store
		return d
	}
	ctx := x.r.Context()
	acct, err := p.cfg.Store.Account(ctx, c.Principal.AccountID)
	if err != nil {
		p.cfg.Logger.Warn("dry run: account read failed", "request_id", x.requestID, "error", err.Error())
		return d
	}
	key, err := p.cfg.Store.Key(ctx, c.Principal.AccountID, c.Principal.KeyID)
	if err != nil {
		p.cfg.Logger.Warn("dry run: key read failed", "request_id", x.requestID, "error", err.Error())
		return d
	}
	d.CreditsRemaining, d.KeyCreditLimit, d.KeyCreditsUsed = &acct.CreditsRemaining, key.CreditLimit, &key.CreditsUsed
	d.CanPay = &yes
	refuse := func(t string) { no := false; d.CanPay, d.Refusal = &no, &t }
	switch cost := d.EstimatedCredits; {
	case cost == 0:
	case key.CreditLimit != nil && key.CreditsUsed+cost > *key.CreditLimit:
		refuse("KEY_LIMIT_EXCEEDED")
	case acct.CreditsRemaining < cost:
		refuse("INSUFFICIENT_CREDITS")
	}
	return d
}
