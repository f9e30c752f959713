package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/meridian-data/meridian/scripts/bench/roundtrip"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
)

// BenchmarkRequestCollapsing sends bursts of 50 identical requests at a
// source that answers after 300 ms (49 of them 100 ms after the first): on the embedded store in one process,
// and on DynamoDB Local in one process and across two. Each b.N is one
// burst of each setting. MERIDIAN_BENCH_OUT names a JSON file for the
// figures (make bench).
func BenchmarkRequestCollapsing(b *testing.B) {
	// The first request starts the fill; the other 49 come lead later,
	// while it is in flight, so each is waiting (past its own admission)
	// when the fill lands, and its added latency is what the wait adds.
	const burstSize, delay, lead = 50, 300 * time.Millisecond, 100 * time.Millisecond
	settings := []struct {
		name      string
		open      func(testing.TB) store.Store
		processes int
	}{
		{"embedded, one process", func(tb testing.TB) store.Store { return newEmbedded(tb) }, 1},
		{"DynamoDB, one process", func(tb testing.TB) store.Store { return dynamotest.NewStore(tb) }, 1},
		{"DynamoDB, two processes", func(tb testing.TB) store.Store { return dynamotest.NewStore(tb) }, 2},
	}
	var results []roundtrip.Collapse
	for _, st := range settings {
		s := st.open(b)
		src, base := newSlowSource(b, delay)
		// One key per request, as a burst from many clients: ten
		// accounts of five keys (no key's in-flight slots are shared).
		var keys []string
		for range burstSize / store.MaxActiveKeys {
			_, k := keysFor(b, s, int64(10*b.N+10))
			keys = append(keys, k...)
		}
		var apis []string
		for range st.processes {
			apis = append(apis, collapsingProcess(b, s, base, 0))
		}
		r := roundtrip.Collapse{Setting: st.name, BurstSize: burstSize, SourceDelayMS: delay.Milliseconds()}
		var added []float64
		var total int64
		b.Run(st.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				before := src.hits.Load()
				answers := burstAfter(b, apis, keys, burstSize, searchPath(fmt.Sprintf("BURST %d %d LIMITED", i, time.Now().UnixNano())), nil, lead)
				n := src.hits.Load() - before
				total += n
				r.SourceRequestsMax = max(r.SourceRequestsMax, n)
				r.Bursts++
				var fill time.Time
				for _, a := range answers {
					if a.cache == "MISS" && (fill.IsZero() || a.done.Before(fill)) {
						fill = a.done
					}
				}
				for _, a := range answers {
					if a.cache == "HIT" && !fill.IsZero() {
						added = append(added, max(0, float64(a.done.Sub(fill).Microseconds())/1000))
					}
				}
			}
			b.ReportMetric(float64(total)/float64(max(1, r.Bursts)), "source-requests/burst")
		})
		if r.Bursts > 0 {
			r.SourceRequestsAvg = float64(total) / float64(r.Bursts)
		}
		slices.Sort(added)
		r.WaiterAddedP50MS, r.WaiterAddedP95MS = quantile(added, 0.5), quantile(added, 0.95)
		results = append(results, r)
	}
	if out := os.Getenv("MERIDIAN_BENCH_OUT"); out != "" {
		raw, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(out, raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// quantile of sorted values (0 when there are none).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
