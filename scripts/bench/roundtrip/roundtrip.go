// Package roundtrip is the JSON that BenchmarkStoreRoundTrips
// (shared/pipeline) and BenchmarkRequestCollapsing (shared/app) write and
// make bench's report (scripts/bench) reads: one type each, so the two
// sides cannot drift apart.
package roundtrip

// Collapse is one setting of BenchmarkRequestCollapsing: bursts of
// identical requests at a slow source.
type Collapse struct {
	Setting string `json:"setting"`
	Bursts  int    `json:"bursts"`
	// SourceRequests per burst of BurstSize identical requests: the mean
	// and the most of any burst.
	BurstSize         int     `json:"burst_size"`
	SourceRequestsAvg float64 `json:"source_requests_avg"`
	SourceRequestsMax int64   `json:"source_requests_max"`
	// The waiters' added latency over the fill: each waiter's last byte
	// after the filler's (0 when it came first), in milliseconds.
	WaiterAddedP50MS float64 `json:"waiter_added_p50_ms"`
	WaiterAddedP95MS float64 `json:"waiter_added_p95_ms"`
	SourceDelayMS    int64   `json:"source_delay_ms"`
}

// Result is one request kind, averaged per request.
type Result struct {
	Kind             string  `json:"kind"`
	Requests         int     `json:"requests"`
	Status           int     `json:"status"`
	CritSteps        float64 `json:"crit_steps"`
	CritCalls        float64 `json:"crit_calls"`
	HandlerSteps     float64 `json:"handler_steps"`
	HandlerCalls     float64 `json:"handler_calls"`
	AllCalls         float64 `json:"all_calls"` // after-response work included
	Attempts         float64 `json:"attempts"`
	FailedConditions float64 `json:"failed_conditions"`
	RRU              float64 `json:"rru"`
	WRU              float64 `json:"wru"`
	LocalRCU         float64 `json:"local_rcu"`
	LocalWCU         float64 `json:"local_wcu"`
	Events           float64 `json:"events"`
	WorkerCalls      float64 `json:"worker_calls"`
	WorkerRRU        float64 `json:"worker_rru"`
	WorkerWRU        float64 `json:"worker_wru"`
	WorkerMS         float64 `json:"worker_ms"`
	// SweepRRU and SweepWRU are the reconciliation sweep's share per
	// request: reading the request's reservations once, as the sweep that
	// moves its shard's mark past them does. SweepFixedRRU and
	// SweepFixedWRU are one sweep run's own work (the shards' marks, a
	// query per shard, the marks moved), whatever it finds: the scheduled
	// sweep runs once a minute, not per request.
	SweepRRU      float64  `json:"sweep_rru"`
	SweepWRU      float64  `json:"sweep_wru"`
	SweepFixedRRU float64  `json:"sweep_fixed_rru"`
	SweepFixedWRU float64  `json:"sweep_fixed_wru"`
	LogBytes      float64  `json:"log_bytes"`
	HandlerMS     float64  `json:"handler_ms"`
	HandlerP50MS  float64  `json:"handler_p50_ms"`
	BilledP50MS   float64  `json:"billed_p50_ms"` // until the after-response work is done: what Lambda bills
	WorkerP50MS   float64  `json:"worker_p50_ms"`
	CritMS        float64  `json:"crit_ms"`
	ResponseBytes float64  `json:"response_bytes"`
	CritPath      []string `json:"crit_path"`
	AfterPath     []string `json:"after_path"`
	WorkerPath    []string `json:"worker_path"`
}
