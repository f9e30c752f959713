package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/assist"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/usage"
)

// ModelFairUseKey is the fair-use counter of an account's model calls:
// AI-assist has no surcharge, so a 30-day ceiling (Config.ModelFairUse)
// bounds what one account can spend of the model.
const ModelFairUseKey = "assist/model"

// DefaultModelFairUse is the default 30-day ceiling of model calls per
// account.
const DefaultModelFairUse = 20_000

// assist applies AI-assist to a fresh success of an AI endpoint (spec
// 4.5). It never fails the call, and charges nothing of its own. A
// composite's legs are not labelled (they ask with judgments=off). It
// reports whether the answer may be kept in the cache: a degraded one
// (the model failed) is not served to others.
func (p *Pipeline) assist(x *exchange, c *Call, data any) (any, bool) {
	e := c.Endpoint
	if p.cfg.Assist == nil || !e.AI || e.Records == nil || c.parent != "" {
		return data, true
	}
	call := assist.Call{
		Records: e.Records, Endpoint: e.Path(), AccountID: c.Principal.AccountID, RequestID: c.RequestID,
		Options: assist.OptionsFrom(c.Params.Values),
	}
	if !call.Options.Active() {
		return data, true
	}
	limit := p.cfg.ModelFairUse
	metered := p.cfg.Assist.Model != nil && limit > 0 && p.cfg.FairUse != nil
	if metered {
		used, err := p.cfg.FairUse.FairUseUsed(x.r.Context(), c.Principal.AccountID, ModelFairUseKey, p.cfg.Now())
		switch {
		case err != nil:
			p.cfg.Logger.Warn("model fair use unreadable", "request_id", x.requestID, "error", err.Error())
			call.Withheld = "The model's fair-use count cannot be read right now: records are returned unlabelled, and nothing is excluded or fitted."
		case used >= limit:
			call.Withheld = "This account reached its 30-day ceiling of " + strconv.FormatInt(limit, 10) +
				" model calls: records are returned unlabelled, and nothing is excluded or fitted."
		}
	}
	res := p.cfg.Assist.Apply(x.r.Context(), call, data)
	if res.Calls > 0 {
		c.model = &usage.Model{Calls: res.Calls, InputTokens: res.InputTokens, OutputTokens: res.OutputTokens, Legs: res.Trace.Legs}
		if metered {
			if _, err := billingOp(x, func(ctx context.Context) (int64, error) {
				return p.cfg.FairUse.AddFairUse(ctx, c.Principal.AccountID, ModelFairUseKey, int64(res.Calls), p.cfg.Now())
			}); err != nil {
				p.cfg.Logger.Warn("model fair use not counted", "request_id", x.requestID, "error", err.Error())
			}
		}
	}
	return res.Data, res.Complete
}

// recallHandler serves GET /v1/assist/recall/{id}: the records an answer
// removed, to the account that made the call, for 24 hours. Anything else
// (unknown, expired, another account's) is the same 404.
func recallHandler(recalls store.Recalls, now func() time.Time) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		r, err := recalls.GetRecall(ctx, c.Params.Values["id"], c.Principal.AccountID, now())
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
				"No recall with this id for this account: it may have expired (recalls last 24 hours).", nil)
		case err != nil:
			return nil, envelope.Internal()
		}
		return json.RawMessage(r.Data), nil
	}
}
