package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// GET /v1/credits/usage: an account's calls, credits and errors per UTC day
// and per endpoint, as the worker counts them from usage events
// (store.Outcomes.AccountUsage). The console shows the same figures
// (accountUsage).

// maxUsageDays is the longest report accountUsage builds: the days the
// stores keep. The endpoint's own days parameter stops at 30.
const maxUsageDays = int(store.AccountUsageRetention / (24 * time.Hour))

// usageCounts are the figures of a day, an endpoint or the whole report.
type usageCounts struct {
	Calls   int64 `json:"calls"`
	Credits int64 `json:"credits"`
	Errors  int64 `json:"errors"`
}

func (u *usageCounts) add(d store.UsageDay) {
	u.Calls, u.Credits, u.Errors = u.Calls+d.Calls, u.Credits+d.Credits, u.Errors+d.Errors
}

// errorRate is errors/calls, 0 without calls.
func (u usageCounts) errorRate() float64 {
	if u.Calls == 0 {
		return 0
	}
	return float64(u.Errors) / float64(u.Calls)
}

// usageTotals are the report's totals.
type usageTotals struct {
	usageCounts
	ErrorRate float64 `json:"error_rate"`
}

// usageDayRow is one day of the report, every day present (zero-filled).
type usageDayRow struct {
	Date string `json:"date"`
	usageCounts
}

// usageEndpointRow is one endpoint's figures over the report's days.
type usageEndpointRow struct {
	Endpoint string `json:"endpoint"`
	usageCounts
	ErrorRate float64 `json:"error_rate"`
}

// usageItem is one day and endpoint with calls.
type usageItem struct {
	Date     string `json:"date"`
	Endpoint string `json:"endpoint"`
	usageCounts
}

// usageData is the data object of GET /v1/credits/usage: the UTC days from
// From to To (today), both included; Days has one row per day, oldest
// first; Endpoints one per endpoint called, most calls first (ties by
// endpoint); Items the non-zero day and endpoint rows, by date, then
// endpoint.
type usageData struct {
	From      string             `json:"from"`
	To        string             `json:"to"`
	DaysCount int                `json:"days_count"`
	Totals    usageTotals        `json:"totals"`
	Days      []usageDayRow      `json:"days"`
	Endpoints []usageEndpointRow `json:"endpoints"`
	Items     []usageItem        `json:"items"`
}

// accountUsage builds the report of the days UTC days ending with now's.
// days must be 1 to maxUsageDays.
func accountUsage(ctx context.Context, o store.Outcomes, accountID string, days int, now time.Time) (usageData, error) {
	if days < 1 || days > maxUsageDays {
		return usageData{}, fmt.Errorf("%w: %d days of usage (1 to %d)", store.ErrInvalid, days, maxUsageDays)
	}
	last := store.UsageDayStart(now)
	first := last.AddDate(0, 0, 1-days)
	rows, err := o.AccountUsage(ctx, accountID, first, last)
	if err != nil {
		return usageData{}, err
	}
	out := usageData{From: store.UsageDate(first), To: store.UsageDate(last), DaysCount: days,
		Days: make([]usageDayRow, 0, days), Endpoints: []usageEndpointRow{}, Items: make([]usageItem, 0, len(rows))}
	index := map[string]int{}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		index[store.UsageDate(d)] = len(out.Days)
		out.Days = append(out.Days, usageDayRow{Date: store.UsageDate(d)})
	}
	endpoints := map[string]*usageCounts{}
	for _, r := range rows {
		i, ok := index[r.Date]
		if !ok || r.Calls == 0 {
			continue // outside the days asked for (a store never returns one)
		}
		out.Days[i].add(r)
		out.Totals.add(r)
		if endpoints[r.Endpoint] == nil {
			endpoints[r.Endpoint] = &usageCounts{}
		}
		endpoints[r.Endpoint].add(r)
		out.Items = append(out.Items, usageItem{Date: r.Date, Endpoint: r.Endpoint,
			usageCounts: usageCounts{Calls: r.Calls, Credits: r.Credits, Errors: r.Errors}})
	}
	out.Totals.ErrorRate = out.Totals.errorRate()
	for name, c := range endpoints {
		out.Endpoints = append(out.Endpoints, usageEndpointRow{Endpoint: name, usageCounts: *c, ErrorRate: c.errorRate()})
	}
	sort.Slice(out.Endpoints, func(i, j int) bool {
		a, b := out.Endpoints[i], out.Endpoints[j]
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		return a.Endpoint < b.Endpoint
	})
	sort.SliceStable(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		return a.Date < b.Date || (a.Date == b.Date && a.Endpoint < b.Endpoint)
	})
	return out, nil
}

// usageHandler serves GET /v1/credits/usage for the caller's account
// (wired beside /v1/status: both need the Outcomes store).
func (p *Pipeline) usageHandler(ctx context.Context, c *Call) (any, *envelope.Error) {
	days, err := strconv.Atoi(c.Params.Values["days"])
	if err != nil {
		days = 30 // validation applies the default; this is a handler called directly
	}
	out, err := accountUsage(ctx, p.cfg.Outcomes, c.Principal.AccountID, days, p.cfg.Now())
	if err != nil {
		p.cfg.Logger.Error("usage read failed", "error", err.Error())
		return nil, envelope.Internal()
	}
	return out, nil
}
