package pipeline

import "github.com/meridian-data/meridian/shared/service"

// Access to the service's endpoints for the tests here that exercise them
// through the pipeline (issue 44 moved them to shared/service): the
// catalogue's example request, and /v1/credits/usage's report decoded
// into types of this package (the shapes of service.UsageData).

var example = service.Example

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
