package canary

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Baselines are the fill each operation's routes reach on the replay
// fixtures: operation -> route -> fill. scripts/canary.sh -replay
// -write-baseline writes them (make canary-baseline), and a test keeps the
// file in the repository equal to what the fixtures give.
type Baselines map[string]map[string]Fill

//go:embed baseline.json
var shippedBaselines []byte

// BaselineFile is the shipped baselines' path in the repository.
const BaselineFile = "shared/canary/baseline.json"

// baselineDoc is the file's form.
type baselineDoc struct {
	Note       string    `json:"note"`
	Operations Baselines `json:"operations"`
}

// Shipped are the baselines built into the binary.
func Shipped() (Baselines, error) {
	var doc baselineDoc
	if err := json.Unmarshal(shippedBaselines, &doc); err != nil {
		return nil, fmt.Errorf("canary: %s: %w", BaselineFile, err)
	}
	return doc.Operations, nil
}

// BaselinesOf are the fills of a run's checks that answered valid data:
// what -write-baseline saves from a replay run.
func BaselinesOf(r Report) Baselines {
	b := Baselines{}
	for _, c := range r.Checks {
		if !c.OK || c.FillRate == nil {
			continue
		}
		if b[c.Operation] == nil {
			b[c.Operation] = map[string]Fill{}
		}
		b[c.Operation][c.Route] = Fill{Rate: round(*c.FillRate), Items: c.Items, Fields: c.FilledFields}
	}
	return b
}

// EncodeBaselines is the baseline file for b.
func EncodeBaselines(b Baselines) ([]byte, error) {
	raw, err := json.MarshalIndent(baselineDoc{
		Note:       "Written by make canary-baseline (scripts/canary.sh -replay -write-baseline " + BaselineFile + ") from the replay fixtures: each operation's fill on each route. Do not edit by hand.",
		Operations: b,
	}, "", "  ")
	return append(raw, '\n'), err
}

// recentRuns is how many earlier runs the recent baseline takes the
// median of.
const recentRuns = 7

// baseline is what one operation's route is judged against: the shipped
// fixtures' fill when there is one, else the median fill rate of the last
// seven runs that answered data on that route (with the fields the most
// recent of them filled).
func baseline(shipped Baselines, history []Report, op, route string) (rate float64, fields []string, source string, ok bool) {
	if f, ok := shipped[op][route]; ok {
		return f.Rate, f.Fields, "fixtures", true
	}
	var rates []float64
	for _, r := range history {
		if len(rates) == recentRuns {
			break
		}
		for _, c := range r.Checks {
			if c.Operation == op && c.Route == route && c.OK && c.FillRate != nil {
				if fields == nil {
					fields = c.FilledFields
				}
				rates = append(rates, *c.FillRate)
			}
		}
	}
	if len(rates) == 0 {
		return 0, nil, "", false
	}
	sort.Float64s(rates)
	mid := len(rates) / 2
	rate = rates[mid]
	if len(rates)%2 == 0 {
		rate = (rates[mid-1] + rates[mid]) / 2
	}
	return rate, fields, "recent", true
}

// judge compares a check that answered data with its baseline: the fields
// the baseline had and this answer left null, and whether its fill rate
// fell below share of the baseline's.
func (c *Check) judge(shipped Baselines, history []Report, share float64) {
	if c.FillRate == nil {
		return
	}
	rate, fields, source, ok := baseline(shipped, history, c.Operation, c.Route)
	if !ok {
		return
	}
	c.BaselineFillRate, c.BaselineSource = &rate, source
	for _, f := range fields {
		if !slices.Contains(c.FilledFields, f) {
			c.NullFields = append(c.NullFields, f)
		}
	}
	c.Drifting = *c.FillRate < share*rate
}

// round keeps four decimals, so the file does not churn on float noise.
func round(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }
