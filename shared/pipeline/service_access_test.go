package pipeline

import (
	"context"
	"encoding/json"
	"time"

	"github.com/meridian-data/meridian/shared/service"
	"github.com/meridian-data/meridian/shared/store"
)

// Access to the service's endpoints for the tests here that exercise them
// through the pipeline (issue 44 moved them to shared/service): the
// catalogue's example request, and /v1/credits/usage's report read into
// types of this package (the shapes of service.UsageData, decoded from its
// JSON).

var example = service.Example

// accountUsage is service.AccountUsage's report.
func accountUsage(ctx context.Context, o store.Outcomes, accountID string, days int, now time.Time) (usageData, error) {
	u, err := service.AccountUsage(ctx, o, accountID, days, now)
	if err != nil {
		return usageData{}, err
	}
	raw, err := json.Marshal(u)
	if err != nil {
		return usageData{}, err
	}
	var out usageData
	err = json.Unmarshal(raw, &out)
	return out, err
}

type usageCounts struct {
	Calls   int64 `json:"calls"`
	Credits int64 `json:"credits"`
	Errors  int64 `json:"errors"`
}

type usageTotals struct {
	usageCounts
	ErrorRate float64 `json:"error_rate"`
}

type usageDayRow struct {
	Date string `json:"date"`
	usageCounts
}

type usageEndpointRow struct {
	Endpoint string `json:"endpoint"`
	usageCounts
	ErrorRate float64 `json:"error_rate"`
}

type usageItem struct {
	Date     string `json:"date"`
	Endpoint string `json:"endpoint"`
	usageCounts
}

type usageData struct {
	From      string             `json:"from"`
	To        string             `json:"to"`
	DaysCount int                `json:"days_count"`
	Totals    usageTotals        `json:"totals"`
	Days      []usageDayRow      `json:"days"`
	Endpoints []usageEndpointRow `json:"endpoints"`
	Items     []usageItem        `json:"items"`
}
