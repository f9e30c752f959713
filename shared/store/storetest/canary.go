package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// testCanaryLog: runs come back newest first, up to the limit, within the
// retention; a run at the same instant replaces the one there.
func testCanaryLog(t *testing.T, s store.Store) {
	log, ok := s.(store.CanaryLog)
	if !ok {
		t.Fatal("the store keeps no canary runs")
	}
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	if runs, err := log.CanaryRuns(ctx, 7, now); err != nil || len(runs) != 0 {
		t.Fatalf("empty log: %v %v", runs, err)
	}
	for _, bad := range []store.CanaryRun{{At: now}, {Report: []byte("{}")}, {At: now, Report: make([]byte, store.MaxCanaryRunBytes+1)}} {
		if err := log.RecordCanaryRun(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("run at %v with %d bytes: %v, want ErrInvalid", bad.At, len(bad.Report), err)
		}
	}
	// An old run, past the retention, then ten hourly runs.
	old := store.CanaryRun{At: now.Add(-store.CanaryRetention - time.Hour), Report: []byte(`"old"`)}
	if err := log.RecordCanaryRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r := store.CanaryRun{At: now.Add(time.Duration(i-9) * time.Hour), Report: []byte(fmt.Sprintf(`{"run":%d}`, i))}
		if err := log.RecordCanaryRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.RecordCanaryRun(ctx, store.CanaryRun{At: now, Report: []byte(`{"run":"again"}`)}); err != nil {
		t.Fatal(err)
	}
	runs, err := log.CanaryRuns(ctx, 7, now)
	if err != nil || len(runs) != 7 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	if !runs[0].At.Equal(now) || string(runs[0].Report) != `{"run":"again"}` {
		t.Errorf("newest: %v %s", runs[0].At, runs[0].Report)
	}
	for i := 1; i < len(runs); i++ {
		want := fmt.Sprintf(`{"run":%d}`, 9-i)
		if !runs[i].At.Equal(now.Add(-time.Duration(i)*time.Hour)) || string(runs[i].Report) != want {
			t.Errorf("run %d: %v %s, want %s", i, runs[i].At, runs[i].Report, want)
		}
	}
	all, err := log.CanaryRuns(ctx, 100, now)
	if err != nil || len(all) != 10 {
		t.Errorf("every run within the retention: %d, %v", len(all), err)
	}
	if one, err := log.CanaryRuns(ctx, 1, now); err != nil || len(one) != 1 || !one[0].At.Equal(now) {
		t.Errorf("the last run: %v %v", one, err)
	}
}
