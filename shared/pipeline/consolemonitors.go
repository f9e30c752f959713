package pipeline

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// serveConsoleMonitors is the console's monitors API (/console/monitors…):
// the account's monitors, as /v1/monitors serves them to a key, with the
// key each monitor runs with chosen in the request.
func (p *Pipeline) serveConsoleMonitors(x *exchange, acct store.Account, segs []string) {
	if p.cfg.Monitors == nil || p.cfg.Scheduler == nil {
		x.fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "Monitors are not available in this deployment.", nil))
		return
	}
	ctx, m := x.r.Context(), x.r.Method
	answer := func(v any, refusal *envelope.Error, status int) {
		if refusal != nil {
			x.fail(refusal)
			return
		}
		writeConsole(x, status, v)
	}
	switch {
	case len(segs) == 1 && m == http.MethodGet:
		list, err := p.cfg.Monitors.ListMonitors(ctx, acct.ID)
		if err != nil {
			x.fail(p.internal(x, "list monitors", err))
			return
		}
		views := make([]monitorView, len(list))
		for i, mon := range list {
			views[i] = viewMonitor(mon)
		}
		writeConsole(x, http.StatusOK, map[string]any{"items": views, "count": len(views), "max": store.MaxMonitors})
	case len(segs) == 1 && m == http.MethodPost:
		var body struct {
			KeyID           string          `json:"key_id"`
			Platform        string          `json:"platform"`
			Endpoint        string          `json:"endpoint"`
			Params          json.RawMessage `json:"params"`
			IntervalMinutes *int            `json:"interval_minutes"`
			Name            string          `json:"name"`
		}
		if e := readJSON(x.r, &body); e != nil {
			x.fail(e)
			return
		}
		keyID, refusal := p.monitorKey(x, acct, body.KeyID)
		if refusal != nil {
			x.fail(refusal)
			return
		}
		spec := MonitorSpec{Platform: body.Platform, Endpoint: body.Endpoint, Params: string(body.Params), Name: body.Name}
		if body.IntervalMinutes != nil {
			spec.IntervalMinutes = strconv.Itoa(*body.IntervalMinutes)
		}
		if len(spec.Name) > 100 {
			x.fail(fieldError("name", "too_long", "name is at most 100 characters."))
			return
		}
		mon, refusal := p.CreateMonitor(ctx, acct.ID, keyID, spec)
		answer(viewOrNil(mon, refusal), refusal, http.StatusCreated)
	case len(segs) == 2 && m == http.MethodDelete:
		refusal := p.DeleteMonitor(ctx, acct.ID, segs[1])
		answer(map[string]any{"id": segs[1], "deleted": true}, refusal, http.StatusOK)
	case len(segs) == 3 && segs[2] == "pause" && m == http.MethodPost:
		mon, refusal := p.SetMonitorState(ctx, acct.ID, segs[1], store.MonitorPaused)
		answer(viewOrNil(mon, refusal), refusal, http.StatusOK)
	case len(segs) == 3 && segs[2] == "resume" && m == http.MethodPost:
		mon, refusal := p.SetMonitorState(ctx, acct.ID, segs[1], store.MonitorActive)
		answer(viewOrNil(mon, refusal), refusal, http.StatusOK)
	case len(segs) == 3 && segs[2] == "runs" && m == http.MethodGet:
		q := x.r.URL.Query()
		limit := q.Get("limit")
		if limit != "" {
			if _, ok := parseLimit(limit); !ok {
				x.fail(fieldError("limit", "out_of_range", "limit is 1 to 100."))
				return
			}
		}
		page, refusal := p.MonitorRuns(ctx, acct.ID, segs[1], limit, q.Get("cursor"))
		answer(page, refusal, http.StatusOK)
	default:
		x.fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "No console operation matches this method and path.", nil))
	}
}

func viewOrNil(m store.Monitor, refusal *envelope.Error) any {
	if refusal != nil {
		return nil
	}
	return viewMonitor(m)
}

// monitorKey is the key a console-made monitor runs with: the one asked
// for, which must be the account's and active, or else the account's
// oldest active key.
func (p *Pipeline) monitorKey(x *exchange, acct store.Account, keyID string) (string, *envelope.Error) {
	keys, err := p.cfg.Store.Keys(x.r.Context(), acct.ID)
	if err != nil {
		return "", p.internal(x, "list keys", err)
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
	return "", fieldError("key_id", "not_allowed", "key_id must name one of the account's active keys.")
}
