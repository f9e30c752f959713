package console

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/store"
)

// serveConsoleMonitors is the console's monitors API (/console/monitors…):
// the account's monitors, as /v1/monitors serves them to a key, with the
// key each monitor runs with chosen in the request.
func (c *Console) serveConsoleMonitors(x *pipeline.Exchange, acct store.Account, segs []string) {
	if c.cfg.Monitors == nil || !c.cfg.Monitors.Enabled() {
		x.Fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "Monitors are not available in this deployment.", nil))
		return
	}
	ctx, m := x.Request().Context(), x.Request().Method
	answer := func(v any, refusal *envelope.Error, status int) {
		if refusal != nil {
			x.Fail(refusal)
			return
		}
		writeConsole(x, status, v)
	}
	switch {
	case len(segs) == 1 && m == http.MethodGet:
		list, err := c.cfg.Monitors.List(ctx, acct.ID)
		if err != nil {
			x.Fail(c.internal(x, "list monitors", err))
			return
		}
		writeConsole(x, http.StatusOK, list)
	case len(segs) == 1 && m == http.MethodPost:
		var body struct {
			KeyID           string          `json:"key_id"`
			Platform        string          `json:"platform"`
			Endpoint        string          `json:"endpoint"`
			Params          json.RawMessage `json:"params"`
			IntervalMinutes *int            `json:"interval_minutes"`
			Name            string          `json:"name"`
		}
		if e := readJSON(x.Request(), &body); e != nil {
			x.Fail(e)
			return
		}
		keyID, refusal := c.monitorKey(x, acct, body.KeyID)
		if refusal != nil {
			x.Fail(refusal)
			return
		}
		spec := monitors.Spec{Platform: body.Platform, Endpoint: body.Endpoint, Params: string(body.Params), Name: body.Name}
		if body.IntervalMinutes != nil {
			spec.IntervalMinutes = strconv.Itoa(*body.IntervalMinutes)
		}
		if len(spec.Name) > 100 {
			x.Fail(envelope.FieldError("name", "too_long", "name is at most 100 characters."))
			return
		}
		mon, refusal := c.cfg.Monitors.Create(ctx, acct.ID, keyID, spec)
		answer(viewOrNil(mon, refusal), refusal, http.StatusCreated)
	case len(segs) == 2 && m == http.MethodDelete:
		refusal := c.cfg.Monitors.Delete(ctx, acct.ID, segs[1])
		answer(map[string]any{"id": segs[1], "deleted": true}, refusal, http.StatusOK)
	case len(segs) == 3 && segs[2] == "pause" && m == http.MethodPost:
		mon, refusal := c.cfg.Monitors.SetState(ctx, acct.ID, segs[1], store.MonitorPaused)
		answer(viewOrNil(mon, refusal), refusal, http.StatusOK)
	case len(segs) == 3 && segs[2] == "resume" && m == http.MethodPost:
		mon, refusal := c.cfg.Monitors.SetState(ctx, acct.ID, segs[1], store.MonitorActive)
		answer(viewOrNil(mon, refusal), refusal, http.StatusOK)
	case len(segs) == 3 && segs[2] == "runs" && m == http.MethodGet:
		q := x.Request().URL.Query()
		limit := q.Get("limit")
		if limit != "" {
			if _, ok := monitors.ParseLimit(limit); !ok {
				x.Fail(envelope.FieldError("limit", "out_of_range", "limit is 1 to 100."))
				return
			}
		}
		page, refusal := c.cfg.Monitors.Runs(ctx, acct.ID, segs[1], limit, q.Get("cursor"))
		answer(page, refusal, http.StatusOK)
	default:
		x.Fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "No console operation matches this method and path.", nil))
	}
}

func viewOrNil(m store.Monitor, refusal *envelope.Error) any {
	if refusal != nil {
		return nil
	}
	return monitors.ViewOf(m)
}

// monitorKey is the key a console-made monitor runs with: the one asked
// for, which must be the account's and active, or else the account's
// oldest active key.
func (c *Console) monitorKey(x *pipeline.Exchange, acct store.Account, keyID string) (string, *envelope.Error) {
	keys, err := c.cfg.Store.Keys(x.Request().Context(), acct.ID)
	if err != nil {
		return "", c.internal(x, "list keys", err)
	}
	for _, k := range keys {
		if k.Status == store.KeyActive && (keyID == "" || k.ID == keyID) {
			return k.ID, nil
		}
	}
	if keyID == "" {
		return "", envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"A monitor runs with one of the account's active keys, and it has none: create or reactivate one first.",
			map[string]any{"field": "key_id", "reason": "no_active_key"})
	}
	return "", envelope.FieldError("key_id", "not_allowed", "key_id must name one of the account's active keys.")
}
