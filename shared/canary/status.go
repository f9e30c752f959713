package canary

import "time"

// PlatformResult is a platform's part of the last run, as /v1/status and
// the console show it: no route or vendor names, only the public
// operations.
type PlatformResult struct {
	CheckedAt time.Time `json:"checked_at"`
	// State is the worst of its operations' (failing, drifting,
	// not_checked, ok).
	State          string            `json:"state"`
	SourceAttempts int               `json:"source_attempts"`
	Operations     []OperationResult `json:"operations"`
}

// OperationResult is one operation of a PlatformResult.
type OperationResult struct {
	Operation        string   `json:"operation"`
	State            string   `json:"state"`
	SchemaValid      *bool    `json:"schema_valid"`
	FillRate         *float64 `json:"fill_rate"`
	BaselineFillRate *float64 `json:"baseline_fill_rate"`
	NullFields       []string `json:"null_fields"`
	LatencyMS        float64  `json:"latency_ms"`
}

// severity orders the states, worst last.
var severity = map[string]int{StateOK: 0, StateNotChecked: 1, StateDrifting: 2, StateFailing: 3}

// Platforms is the run by platform.
func (r Report) Platforms() map[string]*PlatformResult {
	out := map[string]*PlatformResult{}
	for _, o := range r.Operations {
		p := out[o.Platform]
		if p == nil {
			p = &PlatformResult{CheckedAt: r.FinishedAt, State: StateOK, Operations: []OperationResult{}}
			out[o.Platform] = p
		}
		p.SourceAttempts += o.Attempts
		p.Operations = append(p.Operations, OperationResult{
			Operation: o.Operation, State: o.State, SchemaValid: o.SchemaValid, FillRate: o.FillRate,
			BaselineFillRate: o.BaselineFillRate, NullFields: o.NullFields, LatencyMS: o.LatencyMS,
		})
		if severity[o.State] > severity[p.State] {
			p.State = o.State
		}
	}
	return out
}
