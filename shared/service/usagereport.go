package service

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

// UsageCounts are the figures of a day, an endpoint or the whole report.
type UsageCounts struct {
	Calls   int64 `json:"calls"`
	Credits int64 `json:"credits"`
	Errors  int64 `json:"errors"`
}

func (u *UsageCounts) add(d store.UsageDay) {
	u.Calls, u.Credits, u.Errors = u.Calls+d.Calls, u.Credits+d.Credits, u.Errors+d.Errors
}

// errorRate is errors/calls, 0 without calls.
func (u UsageCounts) errorRate() float64 {
	if u.Calls == 0 {
		return 0
	}
	return float64(u.Errors) / float64(u.Calls)
}

// UsageTotals are the report's totals.
type UsageTotals struct {
	UsageCounts
	ErrorRate float64 `json:"error_rate"`
}

// UsageDayRow is one day of the report, every day present (zero-filled).
type UsageDayRow struct {
	Date string `json:"date"`
	UsageCounts
}

// UsageEndpointRow is one endpoint's figures over the report's days.
type UsageEndpointRow struct {
	Endpoint string `json:"endpoint"`
	UsageCounts
	ErrorRate float64 `json:"error_rate"`
}

// UsageItem is one day and endpoint with calls.
type UsageItem struct {
	Date     string `json:"date"`
	Endpoint string `json:"endpoint"`
	UsageCounts
}

// UsageData is the data object of GET /v1/credits/usage: the UTC days from
// From to To (today), both included; Days has one row per day, oldest
// first; Endpoints one per endpoint called, most calls first (ties by
// endpoint); Items the non-zero day and endpoint rows, by date, then
// endpoint.
type UsageData struct {
	From      string             `json:"from"`
	To        string             `json:"to"`
	DaysCount int                `json:"days_count"`
	Totals    UsageTotals        `json:"totals"`
	Days      []UsageDayRow      `json:"days"`
	Endpoints []UsageEndpointRow `json:"endpoints"`
	Items     []UsageItem        `json:"items"`
}

// accountUsage builds the report of the days UTC days ending with now's.
// days must be 1 to maxUsageDays.
func accountUsage(ctx context.Context, o store.Outcomes, accountID string, days int, now time.Time) (UsageData, error) {
	if days < 1 || days > maxUsageDays {
		return UsageData{}, fmt.Errorf("%w: %d days of usage (1 to %d)", store.ErrInvalid, days, maxUsageDays)
	}
	last := store.UsageDayStart(now)
	first := last.AddDate(0, 0, 1-days)
	rows, err := o.AccountUsage(ctx, accountID, first, last)
	if err != nil {
		return UsageData{}, err
	}
	out := UsageData{From: store.UsageDate(first), To: store.UsageDate(last), DaysCount: days,
		Days: make([]UsageDayRow, 0, days), Endpoints: []UsageEndpointRow{}, Items: make([]UsageItem, 0, len(rows))}
	index := map[string]int{}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		index[store.UsageDate(d)] = len(out.Days)
		out.Days = append(out.Days, UsageDayRow{Date: store.UsageDate(d)})
	}
	endpoints := map[string]*UsageCounts{}
	for _, r := range rows {
		i, ok := index[r.Date]
		if !ok || r.Calls == 0 {
			continue // outside the days asked for (a store never returns one)
		}
		out.Days[i].add(r)
		out.Totals.add(r)
		if endpoints[r.Endpoint] == nil {
			endpoints[r.Endpoint] = &UsageCounts{}
		}
		endpoints[r.Endpoint].add(r)
		out.Items = append(out.Items, UsageItem{Date: r.Date, Endpoint: r.Endpoint,
			UsageCounts: UsageCounts{Calls: r.Calls, Credits: r.Credits, Errors: r.Errors}})
	}
	out.Totals.ErrorRate = out.Totals.errorRate()
	for name, c := range endpoints {
		out.Endpoints = append(out.Endpoints, UsageEndpointRow{Endpoint: name, UsageCounts: *c, ErrorRate: c.errorRate()})
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
func (s *Service) usageHandler(ctx context.Context, c *Call) (any, *envelope.Error) {
	days, err := strconv.Atoi(c.Values["days"])
	if err != nil {
		days = 30 // validation applies the default; this is a handler called directly
	}
	out, err := accountUsage(ctx, s.cfg.Outcomes, c.Principal.AccountID, days, s.cfg.Now())
	if err != nil {
		s.cfg.Logger.Error("usage read failed", "error", err.Error())
		return nil, envelope.Internal()
	}
	return out, nil
}
