package storetest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

func monitorsOf(t *testing.T, s store.Store) store.Monitors {
	t.Helper()
	ms, ok := s.(store.Monitors)
	if !ok {
		t.Fatal("the store does not implement store.Monitors")
	}
	return ms
}

func jobsOf(t *testing.T, s store.Store) store.Jobs {
	t.Helper()
	js, ok := s.(store.Jobs)
	if !ok {
		t.Fatal("the store does not implement store.Jobs")
	}
	return js
}

// wallClock is a UTC time near now (the stores' own clock bounds what
// expires by the wall clock), whole microseconds.
func wallClock() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func monitorSpec(accountID, keyID string, created time.Time) store.Monitor {
	return store.Monitor{
		ID: store.NewMonitorID(), AccountID: accountID, KeyID: keyID, Name: "watch " + unique("m"), Platform: "code_host",
		Endpoint: "profile/repos", Params: map[string]string{"username": "octocat", "sort": "updated"}, IntervalMinutes: 60,
		State: store.MonitorActive, CreatedAt: created, UpdatedAt: created,
	}
}

// accountWithMonitor opens an account with one monitor created at base.
func accountWithMonitor(t *testing.T, s store.Store, base time.Time) (store.Monitors, store.Account, store.Monitor) {
	t.Helper()
	ms := monitorsOf(t, s)
	a := newAccount(t, s, 0)
	return ms, a, newMonitor(t, ms, a.ID, base)
}

func newMonitor(t *testing.T, ms store.Monitors, accountID string, created time.Time) store.Monitor {
	t.Helper()
	m, err := ms.CreateMonitor(ctx, monitorSpec(accountID, "key_"+unique("k"), created))
	if err != nil {
		t.Fatalf("CreateMonitor: %v", err)
	}
	return m
}

// sameMonitor compares every field; times with Equal.
func sameMonitor(t *testing.T, what string, got, want store.Monitor) {
	t.Helper()
	timesEqual := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
	if got.ID != want.ID || got.AccountID != want.AccountID || got.KeyID != want.KeyID || got.Name != want.Name ||
		got.Platform != want.Platform || got.Endpoint != want.Endpoint || !maps.Equal(got.Params, want.Params) ||
		got.IntervalMinutes != want.IntervalMinutes || got.State != want.State || got.PausedReason != want.PausedReason ||
		got.PausedMessage != want.PausedMessage || got.ConsecutiveFailures != want.ConsecutiveFailures ||
		!timesEqual(got.LastRunAt, want.LastRunAt) || got.LastRunStatus != want.LastRunStatus ||
		got.LastSucceededRun != want.LastSucceededRun || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// runSpec is a run as a worker claims it: scheduled at sched, started at
// started, leased for a minute.
func runSpec(m store.Monitor, sched, started time.Time, claim string) store.MonitorRun {
	return store.MonitorRun{
		ID: store.RunID(sched), MonitorID: m.ID, AccountID: m.AccountID, ScheduledAt: sched, Claim: claim,
		RequestID: "req_" + claim, Attempt: 1, Status: store.RunRunning, StartedAt: started,
		LeaseUntil: started.Add(time.Minute), ExpiresAt: started.Add(store.MonitorRunTTL),
	}
}

func claimRun(t *testing.T, ms store.Monitors, r store.MonitorRun, now time.Time) (store.MonitorRun, bool) {
	t.Helper()
	got, claimed, err := ms.ClaimRun(ctx, r, now)
	if err != nil {
		t.Fatalf("ClaimRun %s: %v", r.ID, err)
	}
	return got, claimed
}

// finish is run r as its worker completes it.
func finish(r store.MonitorRun, status string, at time.Time) store.MonitorRun {
	r.Status, r.FinishedAt = status, &at
	switch status {
	case store.RunSucceeded:
		r.HTTPStatus, r.CreditsUsed, r.Data = 200, ptr(2), []byte(`{"items":["`+r.ID+`"]}`)
	case store.RunFailed:
		r.HTTPStatus, r.CreditsUsed, r.ErrorType, r.ErrorMessage = 502, ptr(0), "UPSTREAM_ERROR", "the source answered 503"
	case store.RunRefused:
		r.HTTPStatus, r.ErrorType, r.ErrorMessage = 402, "INSUFFICIENT_CREDITS", "2 credits required, 0 remaining"
	}
	return r
}

func sameRun(t *testing.T, what string, got, want store.MonitorRun) {
	t.Helper()
	timesEqual := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
	intsEqual := func(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
	if got.ID != want.ID || got.MonitorID != want.MonitorID || got.AccountID != want.AccountID ||
		!got.ScheduledAt.Equal(want.ScheduledAt) || got.Claim != want.Claim || got.Attempt != want.Attempt ||
		got.Status != want.Status || got.HTTPStatus != want.HTTPStatus || got.RequestID != want.RequestID ||
		!intsEqual(got.CreditsUsed, want.CreditsUsed) || got.ErrorType != want.ErrorType || got.ErrorMessage != want.ErrorMessage ||
		!bytes.Equal(got.Data, want.Data) || (got.Data == nil) != (want.Data == nil) ||
		!bytes.Equal(got.Changes, want.Changes) || (got.Changes == nil) != (want.Changes == nil) ||
		!got.StartedAt.Equal(want.StartedAt) || !timesEqual(got.FinishedAt, want.FinishedAt) ||
		!got.LeaseUntil.Equal(want.LeaseUntil) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		short := func(r store.MonitorRun) store.MonitorRun {
			r.Data, r.Changes = []byte(fmt.Sprintf("%d bytes", len(r.Data))), []byte(fmt.Sprintf("%d bytes", len(r.Changes)))
			return r
		}
		t.Errorf("%s:\n got  %+v\n want %+v", what, short(got), short(want))
	}
}

// Create, read, list (oldest first), owner-bound reads and deletes.
func testMonitorsCRUD(t *testing.T, s store.Store) {
	ms := monitorsOf(t, s)
	a, b := newAccount(t, s, 0), newAccount(t, s, 0)
	base := wallClock()
	spec := monitorSpec(a.ID, newKey(t, s, a.ID, nil).ID, base.Add(2*time.Second))
	m1, err := ms.CreateMonitor(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	sameMonitor(t, "created", m1, spec)
	got, err := ms.Monitor(ctx, a.ID, m1.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMonitor(t, "read back", got, spec)
	m0 := newMonitor(t, ms, a.ID, base) // older
	paused := monitorSpec(a.ID, "key_x", base.Add(time.Second))
	paused.State, paused.PausedReason, paused.PausedMessage, paused.Params = store.MonitorPaused, store.PausedByUser, "by hand", nil
	if _, err := ms.CreateMonitor(ctx, paused); err != nil {
		t.Fatal(err)
	}
	mb := newMonitor(t, ms, b.ID, base)

	list, err := ms.ListMonitors(ctx, a.ID)
	if err != nil || len(list) != 3 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	for i, want := range []store.Monitor{m0, paused, m1} {
		sameMonitor(t, fmt.Sprintf("list[%d]", i), list[i], want)
	}
	if list, err := ms.ListMonitors(ctx, "acct_nobody"); err != nil || len(list) != 0 {
		t.Errorf("an account without monitors: %d %v", len(list), err)
	}
	all, err := ms.AllMonitors(ctx)
	if err != nil || len(all) != 4 {
		t.Fatalf("all monitors: %d %v", len(all), err)
	}
	ids := map[string]string{}
	for _, m := range all {
		ids[m.ID] = m.AccountID
	}
	if ids[m0.ID] != a.ID || ids[m1.ID] != a.ID || ids[paused.ID] != a.ID || ids[mb.ID] != b.ID {
		t.Errorf("all monitors: %v", ids)
	}

	// Owner-bound: another account's monitor is not there.
	if _, err := ms.Monitor(ctx, b.ID, m1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account's monitor: %v", err)
	}
	if _, err := ms.Monitor(ctx, a.ID, "mon_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing monitor: %v", err)
	}
	if _, err := ms.SetMonitorState(ctx, b.ID, m1.ID, store.MonitorPaused, store.PausedByUser, "x", base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("pausing another account's monitor: %v", err)
	}
	if err := ms.DeleteMonitor(ctx, b.ID, m1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleting another account's monitor: %v", err)
	}
	if _, err := ms.Monitor(ctx, a.ID, m1.ID); err != nil {
		t.Errorf("the monitor survives a stranger's delete: %v", err)
	}

	// Refusals.
	for name, bad := range map[string]func(m *store.Monitor){
		"no id":      func(m *store.Monitor) { m.ID = "" },
		"no account": func(m *store.Monitor) { m.AccountID = "" },
		"no key":     func(m *store.Monitor) { m.KeyID = "" },
	} {
		m := monitorSpec(a.ID, "key_x", base)
		bad(&m)
		if _, err := ms.CreateMonitor(ctx, m); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ms.CreateMonitor(ctx, spec); err == nil {
		t.Error("a monitor id is stored once")
	}
	if _, err := ms.CreateMonitor(ctx, monitorSpec("acct_nobody", "key_x", base)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a monitor of an account that does not exist: %v", err)
	}
	if got, _ := ms.Monitor(ctx, a.ID, m1.ID); got.Name != spec.Name {
		t.Errorf("the refused second create changed the monitor: %+v", got)
	}

	// Delete.
	if err := ms.DeleteMonitor(ctx, a.ID, m1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Monitor(ctx, a.ID, m1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted: %v", err)
	}
	if err := ms.DeleteMonitor(ctx, a.ID, m1.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted twice: %v", err)
	}
	if list, _ := ms.ListMonitors(ctx, a.ID); len(list) != 2 || list[0].ID != m0.ID || list[1].ID != paused.ID {
		t.Errorf("after the delete: %+v", list)
	}
	if all, _ := ms.AllMonitors(ctx); len(all) != 3 {
		t.Errorf("all monitors after the delete: %d", len(all))
	}
}

// Of 60 concurrent creates on one account exactly MaxMonitors succeed; a
// delete frees one place.
func testConcurrentMonitorCap(t *testing.T, s store.Store) {
	ms := monitorsOf(t, s)
	a, other := newAccount(t, s, 0), newAccount(t, s, 0)
	base := wallClock()
	var ok, capped atomic.Int64
	created := make(chan string, 60)
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m, err := ms.CreateMonitor(ctx, monitorSpec(a.ID, "key_x", base.Add(time.Duration(i)*time.Millisecond)))
			switch {
			case err == nil:
				ok.Add(1)
				created <- m.ID
			case errors.Is(err, store.ErrTooManyMonitors):
				capped.Add(1)
			default:
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	close(created)
	if ok.Load() != store.MaxMonitors || capped.Load() != 60-store.MaxMonitors {
		t.Fatalf("%d created, %d capped", ok.Load(), capped.Load())
	}
	list, err := ms.ListMonitors(ctx, a.ID)
	if err != nil || len(list) != store.MaxMonitors {
		t.Fatalf("%d monitors stored: %v", len(list), err)
	}
	for i := 1; i < len(list); i++ {
		if !list[i-1].CreatedAt.Before(list[i].CreatedAt) {
			t.Errorf("not oldest first at %d: %v then %v", i, list[i-1].CreatedAt, list[i].CreatedAt)
		}
	}
	if _, err := ms.CreateMonitor(ctx, monitorSpec(a.ID, "key_x", base)); !errors.Is(err, store.ErrTooManyMonitors) {
		t.Errorf("the 51st: %v", err)
	}
	if _, err := ms.CreateMonitor(ctx, monitorSpec(other.ID, "key_x", base)); err != nil {
		t.Errorf("the cap is per account: %v", err)
	}
	if err := ms.DeleteMonitor(ctx, a.ID, <-created); err != nil {
		t.Fatal(err)
	}
	if _, err := ms.CreateMonitor(ctx, monitorSpec(a.ID, "key_x", base)); err != nil {
		t.Errorf("a delete frees a place: %v", err)
	}
	if _, err := ms.CreateMonitor(ctx, monitorSpec(a.ID, "key_x", base)); !errors.Is(err, store.ErrTooManyMonitors) {
		t.Errorf("and only one: %v", err)
	}
}

// Pause keeps reason and message; resume clears them and the failures.
func testMonitorPauseResume(t *testing.T, s store.Store) {
	base := wallClock()
	ms, a, m := accountWithMonitor(t, s, base)
	// Two failed runs first, so there are failures to clear.
	for i := 0; i < 2; i++ {
		sched := base.Add(time.Duration(i+1) * time.Hour).Truncate(time.Second)
		r, _ := claimRun(t, ms, runSpec(m, sched, sched, unique("c")), sched)
		if _, err := ms.CompleteRun(ctx, finish(r, store.RunFailed, sched.Add(time.Second)), 0, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	at := base.Add(3 * time.Hour)
	got, err := ms.SetMonitorState(ctx, a.ID, m.ID, store.MonitorPaused, store.PausedByUser, "Paused by the account.", at)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.MonitorPaused || got.PausedReason != store.PausedByUser || got.PausedMessage != "Paused by the account." ||
		got.ConsecutiveFailures != 2 || !got.UpdatedAt.Equal(at) || got.LastRunStatus != store.RunFailed {
		t.Errorf("paused: %+v", got)
	}
	if read, _ := ms.Monitor(ctx, a.ID, m.ID); read.State != store.MonitorPaused || read.PausedReason != store.PausedByUser || read.ConsecutiveFailures != 2 {
		t.Errorf("paused, read back: %+v", read)
	}
	// Pausing again replaces the reason.
	if got, err := ms.SetMonitorState(ctx, a.ID, m.ID, store.MonitorPaused, store.PausedNoBalance, "no credits", at); err != nil ||
		got.PausedReason != store.PausedNoBalance || got.PausedMessage != "no credits" {
		t.Errorf("paused again: %+v %v", got, err)
	}
	at = at.Add(time.Minute)
	got, err = ms.SetMonitorState(ctx, a.ID, m.ID, store.MonitorActive, "ignored", "ignored", at)
	if err != nil {
		t.Fatal(err)
	}
	want := m
	want.ConsecutiveFailures, want.UpdatedAt, want.LastRunAt, want.LastRunStatus = 0, at, got.LastRunAt, store.RunFailed
	if got.LastRunAt == nil || !got.LastRunAt.Equal(base.Add(2*time.Hour).Truncate(time.Second)) {
		t.Errorf("last run at %v", got.LastRunAt)
	}
	sameMonitor(t, "resumed", got, want)
	read, _ := ms.Monitor(ctx, a.ID, m.ID)
	sameMonitor(t, "resumed, read back", read, want)
	for _, st := range []string{"", "deleted", "running"} {
		if _, err := ms.SetMonitorState(ctx, a.ID, m.ID, st, store.PausedByUser, "", at); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("state %q: %v", st, err)
		}
	}
	if _, err := ms.SetMonitorState(ctx, a.ID, "mon_missing", store.MonitorActive, "", "", at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing monitor: %v", err)
	}
}

// Of 30 concurrent claims of one run exactly one holds it; the others get
// the holder's run. A finished run is never claimed again; a running one
// is taken over once its lease ended (at or before now), with one more
// attempt, and only the new claim completes it.
func testClaimRun(t *testing.T, s store.Store) {
	base := wallClock()
	ms, a, m := accountWithMonitor(t, s, base)
	sched := base.Add(time.Hour).Truncate(time.Second)
	started := sched.Add(150 * time.Millisecond)

	var wins atomic.Int64
	var winner atomic.Value
	results := make([]store.MonitorRun, 30)
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, claimed, err := ms.ClaimRun(ctx, runSpec(m, sched, started, fmt.Sprintf("claim_%d", i)), started)
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = r
			if claimed {
				wins.Add(1)
				winner.Store(fmt.Sprintf("claim_%d", i))
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d claims won", wins.Load())
	}
	holder := winner.Load().(string)
	want := runSpec(m, sched, started, holder)
	for i, r := range results {
		sameRun(t, fmt.Sprintf("claim %d's answer", i), r, want)
	}
	got, err := ms.Run(ctx, a.ID, m.ID, store.RunID(sched), started)
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, "stored", got, want)

	// Under its lease (one nanosecond before it ends) nobody takes it.
	lease := want.LeaseUntil
	late := runSpec(m, sched, lease.Add(-time.Nanosecond), "claim_early")
	if r, claimed := claimRun(t, ms, late, lease.Add(-time.Nanosecond)); claimed || r.Claim != holder {
		t.Errorf("taken under a live lease: %+v", r)
	}
	// At the end of the lease it is taken over.
	next := runSpec(m, sched, lease, "claim_next")
	next.RequestID, next.LeaseUntil = "req_next", lease.Add(90*time.Second)
	taken, claimed := claimRun(t, ms, next, lease)
	wantTaken := want
	wantTaken.Claim, wantTaken.RequestID, wantTaken.LeaseUntil, wantTaken.Attempt = "claim_next", "req_next", next.LeaseUntil, 2
	if !claimed {
		t.Fatalf("not taken over at the end of the lease: %+v", taken)
	}
	sameRun(t, "taken over (StartedAt and ExpiresAt kept)", taken, wantTaken)
	got, _ = ms.Run(ctx, a.ID, m.ID, want.ID, lease)
	sameRun(t, "taken over, read back", got, wantTaken)

	// The first claim's worker comes back: it completes nothing.
	stale := finish(want, store.RunSucceeded, lease.Add(time.Second))
	if _, err := ms.CompleteRun(ctx, stale, 3, "", ""); !errors.Is(err, store.ErrNotClaimed) {
		t.Errorf("a stale claim completes: %v", err)
	}
	got, _ = ms.Run(ctx, a.ID, m.ID, want.ID, lease)
	sameRun(t, "after the stale completion", got, wantTaken)
	if mon, _ := ms.Monitor(ctx, a.ID, m.ID); mon.LastRunAt != nil || mon.LastSucceededRun != "" || mon.ConsecutiveFailures != 0 {
		t.Errorf("a stale completion changed the monitor: %+v", mon)
	}

	// The holder completes it; from then on it is never claimed again.
	done := finish(taken, store.RunFailed, lease.Add(2*time.Second))
	mon, err := ms.CompleteRun(ctx, done, 3, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if mon.ConsecutiveFailures != 1 || mon.LastRunStatus != store.RunFailed {
		t.Errorf("after the run: %+v", mon)
	}
	for _, at := range []time.Time{lease.Add(time.Hour), lease.Add(24 * time.Hour)} {
		again := runSpec(m, sched, at, unique("claim_"))
		if r, claimed := claimRun(t, ms, again, at); claimed {
			t.Errorf("a finished run was claimed again at %v", at)
		} else {
			sameRun(t, "a finished run's claim answer", r, done)
		}
	}
	if _, err := ms.CompleteRun(ctx, done, 3, "", ""); !errors.Is(err, store.ErrNotClaimed) {
		t.Errorf("completed twice: %v", err)
	}
	if again, _ := ms.Monitor(ctx, a.ID, m.ID); again.ConsecutiveFailures != 1 {
		t.Errorf("a second completion counted: %+v", again)
	}

	// Refusals.
	for name, bad := range map[string]func(r *store.MonitorRun){
		"id not of its scheduled time": func(r *store.MonitorRun) { r.ID = store.RunID(sched.Add(time.Second)) },
		"no monitor":                   func(r *store.MonitorRun) { r.MonitorID = "" },
		"no account":                   func(r *store.MonitorRun) { r.AccountID = "" },
		"no claim":                     func(r *store.MonitorRun) { r.Claim = "" },
		"a lease already ended":        func(r *store.MonitorRun) { r.LeaseUntil = r.StartedAt },
	} {
		r := runSpec(m, sched.Add(time.Hour), sched.Add(time.Hour), "c")
		bad(&r)
		if _, _, err := ms.ClaimRun(ctx, r, sched.Add(time.Hour)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("claim with %s: %v", name, err)
		}
	}
	if _, err := ms.CompleteRun(ctx, finish(taken, store.RunRunning, lease), 3, "", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("completed as running: %v", err)
	}
	r := runSpec(m, sched.Add(2*time.Hour), sched.Add(2*time.Hour), "c")
	if _, err := ms.CompleteRun(ctx, finish(r, store.RunSucceeded, sched.Add(2*time.Hour)), 3, "", ""); !errors.Is(err, store.ErrNotClaimed) {
		t.Errorf("a run never claimed completes: %v", err)
	}
	if _, err := ms.Run(ctx, a.ID, m.ID, r.ID, sched.Add(2*time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a run never claimed was written: %v", err)
	}
}

// CompleteRun moves the monitor's counters: a success resets them, each
// other outcome counts one more; pauseAfter pauses an active monitor as
// failing; a pause reason pauses it at once; a monitor paused by its user
// keeps its reason.
func testCompleteRunCounters(t *testing.T, s store.Store) {
	base := wallClock()
	ms, a, m := accountWithMonitor(t, s, base)
	n := 0
	step := func(mon store.Monitor, status string, pauseAfter int, reason, message string) (store.Monitor, store.MonitorRun) {
		t.Helper()
		n++
		sched := base.Add(time.Duration(n) * time.Hour).Truncate(time.Second)
		r, claimed := claimRun(t, ms, runSpec(mon, sched, sched.Add(time.Second), unique("c")), sched.Add(time.Second))
		if !claimed {
			t.Fatalf("run %d not claimed", n)
		}
		done := finish(r, status, sched.Add(2*time.Second))
		got, err := ms.CompleteRun(ctx, done, pauseAfter, reason, message)
		if err != nil {
			t.Fatalf("CompleteRun %d: %v", n, err)
		}
		read, err := ms.Monitor(ctx, a.ID, mon.ID)
		if err != nil {
			t.Fatal(err)
		}
		sameMonitor(t, fmt.Sprintf("run %d: the monitor returned and stored", n), got, read)
		if got.LastRunAt == nil || !got.LastRunAt.Equal(sched) || got.LastRunStatus != status {
			t.Errorf("run %d: last run %v %q", n, got.LastRunAt, got.LastRunStatus)
		}
		stored, err := ms.Run(ctx, a.ID, mon.ID, r.ID, sched.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		sameRun(t, fmt.Sprintf("run %d stored", n), stored, done)
		return got, done
	}
	expect := func(what string, got store.Monitor, state, reason, message string, failures int, lastOK string) {
		t.Helper()
		if got.State != state || got.PausedReason != reason || got.PausedMessage != message || got.ConsecutiveFailures != failures || got.LastSucceededRun != lastOK {
			t.Errorf("%s: state %q reason %q message %q failures %d last succeeded %q; want %q %q %q %d %q", what,
				got.State, got.PausedReason, got.PausedMessage, got.ConsecutiveFailures, got.LastSucceededRun, state, reason, message, failures, lastOK)
		}
	}
	const msg = "Paused after 3 runs in a row did not succeed"
	got, _ := step(m, store.RunFailed, 3, "", msg)
	expect("one failure", got, store.MonitorActive, "", "", 1, "")
	got, ok1 := step(m, store.RunSucceeded, 3, "", msg)
	expect("a success", got, store.MonitorActive, "", "", 0, ok1.ID)
	got, _ = step(m, store.RunFailed, 3, "", msg)
	got, _ = step(m, store.RunRefused, 3, "", msg) // a refusal is not a success
	expect("two not succeeded", got, store.MonitorActive, "", "", 2, ok1.ID)
	if got.UpdatedAt.IsZero() || !got.UpdatedAt.After(m.UpdatedAt) {
		t.Errorf("UpdatedAt %v", got.UpdatedAt)
	}
	got, _ = step(m, store.RunFailed, 3, "", msg)
	expect("the third pauses it", got, store.MonitorPaused, store.PausedFailing, msg, 3, ok1.ID)
	got, _ = step(m, store.RunFailed, 3, "", "another message")
	expect("paused: still counting, reason kept", got, store.MonitorPaused, store.PausedFailing, msg, 4, ok1.ID)
	got, ok2 := step(m, store.RunSucceeded, 3, "", msg)
	expect("a success while paused: counters reset, still paused", got, store.MonitorPaused, store.PausedFailing, msg, 0, ok2.ID)

	// A run scheduled before the latest completes late (its first worker
	// died): it counts, but the latest run and latest success stay.
	latest, _ := ms.Monitor(ctx, a.ID, m.ID)
	early := base.Add(30 * time.Minute).Truncate(time.Second)
	r, _ := claimRun(t, ms, runSpec(m, early, early, "c_late"), early)
	got, err := ms.CompleteRun(ctx, finish(r, store.RunSucceeded, base.Add(100*time.Hour)), 3, "", msg)
	if err != nil {
		t.Fatal(err)
	}
	if !got.LastRunAt.Equal(*latest.LastRunAt) || got.LastRunStatus != store.RunSucceeded || got.LastSucceededRun != ok2.ID || got.ConsecutiveFailures != 0 {
		t.Errorf("a late run moved the latest back: %+v", got)
	}
	got, _ = step(m, store.RunFailed, 3, "", msg)
	r, _ = claimRun(t, ms, runSpec(m, early.Add(time.Minute), early, "c_late2"), early)
	if got, err = ms.CompleteRun(ctx, finish(r, store.RunFailed, base.Add(100*time.Hour)), 3, "", msg); err != nil ||
		got.LastRunStatus != store.RunFailed || !got.LastRunAt.Equal(base.Add(time.Duration(n)*time.Hour).Truncate(time.Second)) || got.ConsecutiveFailures != 2 {
		t.Errorf("a late failure: %+v %v", got, err)
	}

	// pauseAfter 0 never pauses.
	m2 := newMonitor(t, ms, a.ID, base)
	for i := 1; i <= 4; i++ {
		got, _ = step(m2, store.RunFailed, 0, "", msg)
	}
	expect("pauseAfter 0", got, store.MonitorActive, "", "", 4, "")

	// A pause reason pauses at once, even a success.
	m3 := newMonitor(t, ms, a.ID, base)
	got, _ = step(m3, store.RunRefused, 10, store.PausedKeyGone, "the key is revoked")
	expect("key gone", got, store.MonitorPaused, store.PausedKeyGone, "the key is revoked", 1, "")
	m4 := newMonitor(t, ms, a.ID, base)
	got, ok4 := step(m4, store.RunSucceeded, 10, store.PausedEndpoint, "retired")
	expect("endpoint gone", got, store.MonitorPaused, store.PausedEndpoint, "retired", 0, ok4.ID)

	// Paused by its user: neither failures nor a reason change why.
	m5 := newMonitor(t, ms, a.ID, base)
	if _, err := ms.SetMonitorState(ctx, a.ID, m5.ID, store.MonitorPaused, store.PausedByUser, "mine", base); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		got, _ = step(m5, store.RunFailed, 2, "", msg)
	}
	expect("paused by user, failing", got, store.MonitorPaused, store.PausedByUser, "mine", 3, "")
	got, _ = step(m5, store.RunRefused, 2, store.PausedKeyGone, "the key is revoked")
	expect("paused by user, key gone", got, store.MonitorPaused, store.PausedByUser, "mine", 4, "")
	got, err = ms.SetMonitorState(ctx, a.ID, m5.ID, store.MonitorActive, "", "", base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expect("resumed", got, store.MonitorActive, "", "", 0, "")
	got, _ = step(m5, store.RunFailed, 2, "", msg)
	expect("resumed, one failure", got, store.MonitorActive, "", "", 1, "")
}

// A monitor deleted while its run ran: the run is still written, alone,
// and CompleteRun says ErrNotFound.
func testCompleteRunAfterDelete(t *testing.T, s store.Store) {
	base := wallClock()
	ms, a, m := accountWithMonitor(t, s, base)
	sched := base.Add(time.Hour).Truncate(time.Second)
	r, _ := claimRun(t, ms, runSpec(m, sched, sched, "c1"), sched)
	if err := ms.DeleteMonitor(ctx, a.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	done := finish(r, store.RunSucceeded, sched.Add(time.Second))
	done.RequestID = "req_the_call"
	if _, err := ms.CompleteRun(ctx, done, 3, "", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("completed after the delete: %v", err)
	}
	got, err := ms.Run(ctx, a.ID, m.ID, r.ID, sched.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	sameRun(t, "the run written alone", got, done)
	if _, err := ms.Monitor(ctx, a.ID, m.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the monitor came back: %v", err)
	}
	if _, err := ms.CompleteRun(ctx, done, 3, "", ""); !errors.Is(err, store.ErrNotClaimed) {
		t.Errorf("completed twice after the delete: %v", err)
	}
	// Another run, its claim stale: ErrNotClaimed wins over the missing monitor.
	sched2 := sched.Add(time.Hour)
	r2, _ := claimRun(t, ms, runSpec(m, sched2, sched2, "c2"), sched2)
	stale := finish(r2, store.RunFailed, sched2.Add(time.Second))
	stale.Claim = "c_other"
	if _, err := ms.CompleteRun(ctx, stale, 3, "", ""); !errors.Is(err, store.ErrNotClaimed) {
		t.Errorf("a stale claim on a deleted monitor: %v", err)
	}
	if got, _ := ms.Run(ctx, a.ID, m.ID, r2.ID, sched2); got.Status != store.RunRunning || got.Claim != "c2" {
		t.Errorf("the stale claim changed the run: %+v", got)
	}
}

// Runs pages newest scheduled time first through its cursor, leaving out
// expired runs; Run and Runs are owner-bound.
func testRunsPaging(t *testing.T, s store.Store) {
	ms := monitorsOf(t, s)
	a, b := newAccount(t, s, 0), newAccount(t, s, 0)
	base := wallClock().Truncate(time.Second)
	m := newMonitor(t, ms, a.ID, base)
	other := newMonitor(t, ms, a.ID, base)
	now := base.Add(store.MonitorRunTTL + 10*24*time.Hour) // when the pages are read

	// 25 runs an hour apart; those with i%5 == 2 started so long before
	// now that they expired (their scheduled times stay among the others).
	var live []store.MonitorRun
	for i := 0; i < 25; i++ {
		sched := base.Add(time.Duration(i) * time.Hour)
		started := base.Add(20 * 24 * time.Hour).Add(time.Duration(i) * time.Second)
		if i%5 == 2 {
			started = base.Add(5 * 24 * time.Hour).Add(time.Duration(i) * time.Second) // expires before now
		}
		r, claimed := claimRun(t, ms, runSpec(m, sched, started, fmt.Sprintf("c%d", i)), started)
		if !claimed {
			t.Fatalf("run %d not claimed", i)
		}
		if i%3 != 0 { // the rest stay running
			r = finish(r, store.RunSucceeded, started.Add(time.Second))
			if _, err := ms.CompleteRun(ctx, r, 0, "", ""); err != nil {
				t.Fatal(err)
			}
		}
		if i%5 != 2 {
			live = append([]store.MonitorRun{r}, live...) // newest first
		}
	}
	// A run of another monitor of the same account, scheduled in between.
	sched := base.Add(90 * time.Minute)
	claimRun(t, ms, runSpec(other, sched, base.Add(20*24*time.Hour), "o1"), base.Add(20*24*time.Hour))

	var got []store.MonitorRun
	var cursors []string
	q := store.RunQuery{Limit: 7}
	for pages := 0; ; pages++ {
		page, err := ms.Runs(ctx, a.ID, m.ID, q, now)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if pages < 2 && len(page.Runs) != 7 || pages == 2 && len(page.Runs) != 6 {
			t.Errorf("page %d holds %d runs", pages, len(page.Runs))
		}
		got = append(got, page.Runs...)
		if page.NextCursor == "" {
			break
		}
		cursors = append(cursors, page.NextCursor)
		if pages > 10 {
			t.Fatal("the cursor does not end")
		}
		q.Cursor = page.NextCursor
	}
	if len(got) != len(live) || len(cursors) != 2 {
		t.Fatalf("%d runs in %d pages, want %d in 3", len(got), len(cursors)+1, len(live))
	}
	for i := range live {
		sameRun(t, fmt.Sprintf("run %d of the pages", i), got[i], live[i])
	}
	// A page that ends exactly at the last run has no cursor.
	if page, err := ms.Runs(ctx, a.ID, m.ID, store.RunQuery{Limit: len(live)}, now); err != nil || len(page.Runs) != len(live) || page.NextCursor != "" {
		t.Errorf("one exact page: %d %q %v", len(page.Runs), page.NextCursor, err)
	}
	// Read earlier, nothing has expired: 25 runs, 20 on the default page.
	earlier := base.Add(20*24*time.Hour + time.Hour)
	if page, err := ms.Runs(ctx, a.ID, m.ID, store.RunQuery{Limit: 100}, earlier); err != nil || len(page.Runs) != 25 || page.NextCursor != "" {
		t.Errorf("before any expiry: %d %v", len(page.Runs), err)
	}
	if page, err := ms.Runs(ctx, a.ID, m.ID, store.RunQuery{}, earlier); err != nil || len(page.Runs) != 20 || page.NextCursor == "" ||
		page.Runs[0].ID != store.RunID(base.Add(24*time.Hour)) {
		t.Errorf("default page: %d %q %v", len(page.Runs), page.NextCursor, err)
	}

	// Run: expiry exact, owner-bound.
	expired := store.RunID(base.Add(2 * time.Hour))
	exp := base.Add(5 * 24 * time.Hour).Add(2 * time.Second).Add(store.MonitorRunTTL)
	if r, err := ms.Run(ctx, a.ID, m.ID, expired, exp.Add(-time.Nanosecond)); err != nil || !r.ExpiresAt.Equal(exp) {
		t.Errorf("just before it expires: %+v %v", r.ExpiresAt, err)
	}
	if _, err := ms.Run(ctx, a.ID, m.ID, expired, exp); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired at ExpiresAt: %v", err)
	}
	if _, err := ms.Run(ctx, b.ID, m.ID, live[0].ID, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account's run: %v", err)
	}
	if _, err := ms.Run(ctx, a.ID, other.ID, live[0].ID, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a run read under another monitor: %v", err)
	}
	if page, err := ms.Runs(ctx, b.ID, m.ID, store.RunQuery{}, now); err != nil || len(page.Runs) != 0 || page.NextCursor != "" {
		t.Errorf("another account's runs: %d %v", len(page.Runs), err)
	}
	if page, err := ms.Runs(ctx, a.ID, other.ID, store.RunQuery{}, now); err != nil || len(page.Runs) != 1 || page.Runs[0].Claim != "o1" {
		t.Errorf("the other monitor's runs: %+v %v", page.Runs, err)
	}

	// Cursors: garbage, and good cursors of another account or monitor.
	bad := []string{"!!!", "not a cursor", base64.RawURLEncoding.EncodeToString([]byte("v1|" + a.ID + "|ledger#x")), strings.Repeat("A", 5000)}
	for _, c := range bad {
		if _, err := ms.Runs(ctx, a.ID, m.ID, store.RunQuery{Cursor: c}, now); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %.40q: %v", c, err)
		}
	}
	if _, err := ms.Runs(ctx, b.ID, m.ID, store.RunQuery{Cursor: cursors[0]}, now); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("another account's cursor: %v", err)
	}
	if _, err := ms.Runs(ctx, a.ID, other.ID, store.RunQuery{Cursor: cursors[0]}, now); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("another monitor's cursor: %v", err)
	}
}

// randomDoc is n bytes of JSON that compresses no better than base64 does.
func randomDoc(n int) []byte {
	raw := make([]byte, n)
	_, _ = rand.Read(raw)
	doc := []byte(`{"blob":"` + base64.RawStdEncoding.EncodeToString(raw))
	return append(doc[:n-2], '"', '}')
}

// recordsDoc is about n bytes of JSON records, as an operation's data.
func recordsDoc(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; b.Len() < n-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		raw := make([]byte, 12)
		_, _ = rand.Read(raw)
		fmt.Fprintf(&b, `{"id":"%x","name":"repository %d","stars":%d,"language":"Go","topics":["api","data"]}`, raw, i, i*7)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// Documents round-trip byte for byte up to MaxDocumentBytes, through Run,
// Runs and a claim's answer; one byte more is ErrInvalid.
func testRunDocuments(t *testing.T, s store.Store) {
	base := wallClock().Truncate(time.Second)
	ms, a, m := accountWithMonitor(t, s, base)
	random := make([]byte, store.MaxDocumentBytes)
	_, _ = rand.Read(random)
	cases := []struct {
		name          string
		data, changes []byte
	}{
		{"records of about 300 KB, no changes", recordsDoc(300 << 10), nil},
		{"records of about 300 KB and their changes", recordsDoc(300 << 10), recordsDoc(300 << 10)},
		{"two high-entropy documents of the largest size", randomDoc(store.MaxDocumentBytes), randomDoc(store.MaxDocumentBytes)},
		{"two random byte strings of the largest size", random, append([]byte{}, random...)},
		{"empty documents", []byte{}, []byte{}},
		{"small", []byte(`{"a":1}`), []byte(`{"added":[]}`)},
	}
	var stored []store.MonitorRun
	for i, c := range cases {
		sched := base.Add(time.Duration(i+1) * time.Hour)
		r, _ := claimRun(t, ms, runSpec(m, sched, sched, fmt.Sprintf("c%d", i)), sched)
		done := finish(r, store.RunSucceeded, sched.Add(time.Second))
		done.Data, done.Changes = c.data, c.changes
		if _, err := ms.CompleteRun(ctx, done, 0, "", ""); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := ms.Run(ctx, a.ID, m.ID, r.ID, sched.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		sameRun(t, c.name, got, done)
		again, claimed := claimRun(t, ms, runSpec(m, sched, sched.Add(time.Hour), "late"), sched.Add(time.Hour))
		if claimed {
			t.Fatal("a finished run was claimed")
		}
		sameRun(t, c.name+": a claim's answer", again, done)
		stored = append([]store.MonitorRun{done}, stored...)
	}
	for _, limit := range []int{100, 1, 2} {
		var got []store.MonitorRun
		q := store.RunQuery{Limit: limit}
		for {
			page, err := ms.Runs(ctx, a.ID, m.ID, q, base.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Runs...)
			if page.NextCursor == "" {
				break
			}
			q.Cursor = page.NextCursor
		}
		if len(got) != len(stored) {
			t.Fatalf("limit %d: %d runs", limit, len(got))
		}
		for i := range stored {
			sameRun(t, fmt.Sprintf("limit %d: run %d of the page", limit, i), got[i], stored[i])
		}
	}

	// One byte over: refused, and the run still holds for its claim.
	sched := base.Add(100 * time.Hour)
	r, _ := claimRun(t, ms, runSpec(m, sched, sched, "big"), sched)
	before, _ := ms.Monitor(ctx, a.ID, m.ID)
	for name, set := range map[string]func(r *store.MonitorRun){
		"data":    func(r *store.MonitorRun) { r.Data = make([]byte, store.MaxDocumentBytes+1) },
		"changes": func(r *store.MonitorRun) { r.Changes = make([]byte, store.MaxDocumentBytes+1) },
	} {
		done := finish(r, store.RunSucceeded, sched.Add(time.Second))
		set(&done)
		if _, err := ms.CompleteRun(ctx, done, 0, "", ""); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s over MaxDocumentBytes: %v", name, err)
		}
	}
	if got, _ := ms.Run(ctx, a.ID, m.ID, r.ID, sched); got.Status != store.RunRunning || got.Data != nil {
		t.Errorf("a refused completion changed the run: %s", got.Status)
	}
	if after, _ := ms.Monitor(ctx, a.ID, m.ID); !after.UpdatedAt.Equal(before.UpdatedAt) || after.LastRunAt == nil || !after.LastRunAt.Equal(before.LastRunAt.UTC()) {
		t.Errorf("a refused completion changed the monitor: %+v", after)
	}
	if _, err := ms.CompleteRun(ctx, finish(r, store.RunSucceeded, sched.Add(time.Second)), 0, "", ""); err != nil {
		t.Errorf("the run completes after the refusal: %v", err)
	}
}

func jobSpec(accountID string, created time.Time) store.Job {
	return store.Job{
		ID: store.NewJobID(), AccountID: accountID, KeyID: "key_" + unique("k"), KeyPrefix: "mn_abcd", KeyHash: hash(unique("kh")),
		RequestID: unique("req_"), Platform: "web", Endpoint: "social-profiles", Params: map[string]string{"handle": "octocat"},
		Cost: 5, State: store.JobQueued, CreatedAt: created, ExpiresAt: created.Add(store.JobTTL),
	}
}

func sameJob(t *testing.T, what string, got, want store.Job) {
	t.Helper()
	timesEqual := func(a, b *time.Time) bool { return a == nil && b == nil || a != nil && b != nil && a.Equal(*b) }
	if got.ID != want.ID || got.AccountID != want.AccountID || got.KeyID != want.KeyID || got.KeyPrefix != want.KeyPrefix ||
		got.KeyHash != want.KeyHash || got.RequestID != want.RequestID || got.Platform != want.Platform ||
		got.Endpoint != want.Endpoint || !maps.Equal(got.Params, want.Params) || got.Cost != want.Cost || got.State != want.State ||
		got.ProgressDone != want.ProgressDone || got.ProgressTotal != want.ProgressTotal || got.Attempts != want.Attempts ||
		got.Status != want.Status || !bytes.Equal(got.Result, want.Result) || got.Billed != want.Billed ||
		!got.CreatedAt.Equal(want.CreatedAt) || !timesEqual(got.StartedAt, want.StartedAt) ||
		!timesEqual(got.FinishedAt, want.FinishedAt) || !got.LeaseUntil.Equal(want.LeaseUntil) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		short := func(j store.Job) store.Job {
			if len(j.Result) > 200 {
				j.Result = []byte(fmt.Sprintf("%d bytes", len(j.Result)))
			}
			return j
		}
		t.Errorf("%s:\n got  %+v\n want %+v", what, short(got), short(want))
	}
}

// A job's life: create, read (owner-bound, expiring), start, progress,
// takeover, finish (the first outcome stands), billed.
func testJobs(t *testing.T, s store.Store) {
	js := jobsOf(t, s)
	a, b := newAccount(t, s, 0), newAccount(t, s, 0)
	now := wallClock()
	j := jobSpec(a.ID, now)
	if err := js.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := js.Job(ctx, a.ID, j.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "created", got, j)
	if err := js.CreateJob(ctx, j); !errors.Is(err, store.ErrJobExists) {
		t.Errorf("the id twice: %v", err)
	}
	for name, bad := range map[string]func(j *store.Job){
		"no id":         func(j *store.Job) { j.ID = "" },
		"no account":    func(j *store.Job) { j.AccountID = "" },
		"no request id": func(j *store.Job) { j.RequestID = "" },
	} {
		x := jobSpec(a.ID, now)
		bad(&x)
		if err := js.CreateJob(ctx, x); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Owner-bound and expiring.
	if _, err := js.Job(ctx, b.ID, j.ID, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account's job: %v", err)
	}
	if _, err := js.Job(ctx, a.ID, "job_missing", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing job: %v", err)
	}
	if _, err := js.Job(ctx, a.ID, j.ID, j.ExpiresAt.Add(-time.Nanosecond)); err != nil {
		t.Errorf("just before it expires: %v", err)
	}
	if _, err := js.Job(ctx, a.ID, j.ID, j.ExpiresAt); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired: %v", err)
	}
	if _, _, err := js.StartJob(ctx, b.ID, j.ID, now, now.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account starts the job: %v", err)
	}
	if _, err := js.FinishJob(ctx, b.ID, j.ID, store.JobFailed, 500, []byte(`{}`), now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account finishes the job: %v", err)
	}
	if err := js.JobProgress(ctx, b.ID, j.ID, 1, 2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account's progress: %v", err)
	}
	if err := js.MarkJobBilled(ctx, b.ID, j.ID, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another account marks the job billed: %v", err)
	}
	if _, _, err := js.StartJob(ctx, a.ID, j.ID, j.ExpiresAt, j.ExpiresAt.Add(time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired job starts: %v", err)
	}
	if got, _ := js.Job(ctx, a.ID, j.ID, now); got.State != store.JobQueued {
		t.Errorf("the refusals changed the job: %+v", got)
	}

	// Progress of a queued job is ignored.
	if err := js.JobProgress(ctx, a.ID, j.ID, 1, 4); err != nil {
		t.Errorf("progress of a queued job: %v", err)
	}
	if err := js.JobProgress(ctx, a.ID, "job_missing", 1, 4); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("progress of a missing job: %v", err)
	}

	// Start, lease, takeover.
	t1 := now.Add(time.Second)
	lease := t1.Add(time.Minute)
	started, ok, err := js.StartJob(ctx, a.ID, j.ID, t1, lease)
	if err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	want := j
	want.State, want.Attempts, want.StartedAt, want.LeaseUntil = store.JobRunning, 1, &t1, lease
	sameJob(t, "started", started, want)
	if again, ok, err := js.StartJob(ctx, a.ID, j.ID, lease.Add(-time.Nanosecond), lease.Add(time.Hour)); err != nil || ok {
		t.Errorf("started under a live lease: %v %v", ok, err)
	} else {
		sameJob(t, "the holder's job", again, want)
	}
	if err := js.JobProgress(ctx, a.ID, j.ID, 2, 5); err != nil {
		t.Fatal(err)
	}
	want.ProgressDone, want.ProgressTotal = 2, 5
	got, _ = js.Job(ctx, a.ID, j.ID, t1)
	sameJob(t, "progress", got, want)
	lease2 := lease.Add(2 * time.Minute)
	taken, ok, err := js.StartJob(ctx, a.ID, j.ID, lease, lease2)
	if err != nil || !ok {
		t.Fatalf("takeover at the end of the lease: %v %v", ok, err)
	}
	want.Attempts, want.LeaseUntil = 2, lease2
	sameJob(t, "taken over (StartedAt kept)", taken, want)

	// Finish: the first outcome stands.
	result := []byte(`{"success":true,"data":{"profiles":[]},"credits_used":5}`)
	fin := lease.Add(time.Second)
	done, err := js.FinishJob(ctx, a.ID, j.ID, store.JobSucceeded, 200, result, fin)
	if err != nil {
		t.Fatal(err)
	}
	want.State, want.Status, want.Result, want.FinishedAt = store.JobSucceeded, 200, result, &fin
	sameJob(t, "finished", done, want)
	second, err := js.FinishJob(ctx, a.ID, j.ID, store.JobFailed, 502, []byte(`{"success":false}`), fin.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sameJob(t, "a second outcome", second, want)
	if err := js.JobProgress(ctx, a.ID, j.ID, 5, 5); err != nil {
		t.Errorf("progress of a finished job: %v", err)
	}
	for _, at := range []time.Time{fin, fin.Add(time.Hour)} {
		if again, ok, err := js.StartJob(ctx, a.ID, j.ID, at, at.Add(time.Minute)); err != nil || ok {
			t.Errorf("a finished job started again at %v: %v %v", at, ok, err)
		} else {
			sameJob(t, "a finished job's start answer", again, want)
		}
	}

	// Billed, with and without a replacement.
	if err := js.MarkJobBilled(ctx, a.ID, j.ID, nil); err != nil {
		t.Fatal(err)
	}
	want.Billed = true
	got, _ = js.Job(ctx, a.ID, j.ID, fin)
	sameJob(t, "billed", got, want)
	replaced := []byte(`{"success":false,"error":{"type":"INTERNAL_ERROR"},"credits_used":0}`)
	if err := js.MarkJobBilled(ctx, a.ID, j.ID, &store.JobOutcome{State: store.JobFailed, Status: 500, Result: replaced}); err != nil {
		t.Fatal(err)
	}
	want.State, want.Status, want.Result = store.JobFailed, 500, replaced
	got, _ = js.Job(ctx, a.ID, j.ID, fin)
	sameJob(t, "billed with a replaced outcome", got, want)
	for _, st := range []string{store.JobQueued, store.JobRunning, ""} {
		if err := js.MarkJobBilled(ctx, a.ID, j.ID, &store.JobOutcome{State: st, Status: 200}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("an outcome %q: %v", st, err)
		}
	}
	got, _ = js.Job(ctx, a.ID, j.ID, fin)
	sameJob(t, "refused replacements change nothing", got, want)
	if err := js.MarkJobBilled(ctx, a.ID, "job_missing", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a missing job billed: %v", err)
	}

	// A queued job can be ended failed without starting (it was never queued).
	q := jobSpec(a.ID, now)
	if err := js.CreateJob(ctx, q); err != nil {
		t.Fatal(err)
	}
	ended, err := js.FinishJob(ctx, a.ID, q.ID, store.JobFailed, 500, []byte(`{"success":false}`), now)
	if err != nil || ended.State != store.JobFailed || ended.Status != 500 || ended.Attempts != 0 || ended.StartedAt != nil {
		t.Errorf("a queued job ended: %+v %v", ended, err)
	}
	if _, ok, _ := js.StartJob(ctx, a.ID, q.ID, now, now.Add(time.Minute)); ok {
		t.Error("an ended job started")
	}
	// Refusals.
	x := jobSpec(a.ID, now)
	if err := js.CreateJob(ctx, x); err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{store.JobQueued, store.JobRunning, "", "done"} {
		if _, err := js.FinishJob(ctx, a.ID, x.ID, st, 200, nil, now); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("finished as %q: %v", st, err)
		}
	}
	if _, err := js.FinishJob(ctx, a.ID, x.ID, store.JobSucceeded, 200, make([]byte, store.MaxDocumentBytes+1), now); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a result over MaxDocumentBytes: %v", err)
	}
	if _, err := js.FinishJob(ctx, a.ID, x.ID, store.JobSucceeded, 200, nil, x.ExpiresAt); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired job finished: %v", err)
	}
	if got, _ := js.Job(ctx, a.ID, x.ID, now); got.State != store.JobQueued {
		t.Errorf("the refusals finished the job: %+v", got)
	}
}

// Results round-trip byte for byte up to MaxDocumentBytes.
func testJobDocuments(t *testing.T, s store.Store) {
	js := jobsOf(t, s)
	a := newAccount(t, s, 0)
	now := wallClock()
	random := make([]byte, store.MaxDocumentBytes)
	_, _ = rand.Read(random)
	for name, doc := range map[string][]byte{
		"records of about 300 KB": recordsDoc(300 << 10),
		"random, the largest":     random,
		"high-entropy JSON":       randomDoc(store.MaxDocumentBytes),
		"empty":                   {},
	} {
		j := jobSpec(a.ID, now)
		if err := js.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		done, err := js.FinishJob(ctx, a.ID, j.ID, store.JobSucceeded, 200, doc, now)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := js.Job(ctx, a.ID, j.ID, now)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(done.Result, doc) || !bytes.Equal(got.Result, doc) || got.Result == nil {
			t.Errorf("%s: %d and %d bytes back of %d", name, len(done.Result), len(got.Result), len(doc))
		}
		if err := js.MarkJobBilled(ctx, a.ID, j.ID, &store.JobOutcome{State: store.JobSucceeded, Status: 200, Result: random}); err != nil {
			t.Fatal(err)
		}
		if got, _ := js.Job(ctx, a.ID, j.ID, now); !bytes.Equal(got.Result, random) || !got.Billed {
			t.Errorf("%s: replaced by %d bytes of %d", name, len(got.Result), len(random))
		}
	}
	j := jobSpec(a.ID, now)
	if err := js.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := js.MarkJobBilled(ctx, a.ID, j.ID, &store.JobOutcome{State: store.JobSucceeded, Status: 200, Result: make([]byte, store.MaxDocumentBytes+1)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a replacement over MaxDocumentBytes: %v", err)
	}
}

// Of 30 concurrent starts one owns the job; the others get it running
// under the owner's lease.
func testConcurrentStartJob(t *testing.T, s store.Store) {
	js := jobsOf(t, s)
	a := newAccount(t, s, 0)
	now := wallClock()
	j := jobSpec(a.ID, now)
	if err := js.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	var owners atomic.Int64
	var ownerLease atomic.Int64
	answers := make([]store.Job, 30)
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lease := now.Add(time.Minute + time.Duration(i)*time.Millisecond)
			got, ok, err := js.StartJob(ctx, a.ID, j.ID, now, lease)
			if err != nil {
				t.Error(err)
				return
			}
			answers[i] = got
			if ok {
				owners.Add(1)
				ownerLease.Store(lease.UnixNano())
			}
		}(i)
	}
	wg.Wait()
	if owners.Load() != 1 {
		t.Fatalf("%d owners", owners.Load())
	}
	for i, got := range answers {
		if got.State != store.JobRunning || got.Attempts != 1 || got.LeaseUntil.UnixNano() != ownerLease.Load() {
			t.Errorf("start %d answered %+v", i, got)
		}
	}
	if got, _ := js.Job(ctx, a.ID, j.ID, now); got.Attempts != 1 || got.LeaseUntil.UnixNano() != ownerLease.Load() {
		t.Errorf("stored: %+v", got)
	}
}

// Of 20 concurrent finishes with different outcomes exactly one is stored
// and every caller gets it back.
func testConcurrentFinishJob(t *testing.T, s store.Store) {
	js := jobsOf(t, s)
	a := newAccount(t, s, 0)
	now := wallClock()
	j := jobSpec(a.ID, now)
	if err := js.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := js.StartJob(ctx, a.ID, j.ID, now, now.Add(time.Minute)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	answers := make([]store.Job, 20)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			state := store.JobSucceeded
			if i%2 == 1 {
				state = store.JobFailed
			}
			got, err := js.FinishJob(ctx, a.ID, j.ID, state, 200+i, []byte(fmt.Sprintf(`{"outcome":%d}`, i)), now.Add(time.Duration(i)*time.Millisecond))
			if err != nil {
				t.Error(err)
				return
			}
			answers[i] = got
		}(i)
	}
	wg.Wait()
	stored, err := js.Job(ctx, a.ID, j.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	i := stored.Status - 200
	if i < 0 || i >= 20 || string(stored.Result) != fmt.Sprintf(`{"outcome":%d}`, i) ||
		(stored.State == store.JobSucceeded) != (i%2 == 0) || stored.FinishedAt == nil || !stored.FinishedAt.Equal(now.Add(time.Duration(i)*time.Millisecond)) {
		t.Fatalf("stored outcome %+v", stored)
	}
	for k, got := range answers {
		sameJob(t, fmt.Sprintf("finish %d's answer", k), got, stored)
	}
}

// Runs of one monitor completing at once: no completion's change of the
// monitor is lost, and a pause by its user while they land stands.
func testConcurrentCompleteRuns(t *testing.T, s store.Store) {
	base := wallClock().Truncate(time.Second)
	ms, a, m := accountWithMonitor(t, s, base)
	var runs []store.MonitorRun
	for i := 0; i < 20; i++ {
		sched := base.Add(time.Duration(i+1) * time.Hour)
		r, _ := claimRun(t, ms, runSpec(m, sched, sched, fmt.Sprintf("c%d", i)), sched)
		runs = append(runs, r)
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func(r store.MonitorRun) {
			defer wg.Done()
			if _, err := ms.CompleteRun(ctx, finish(r, store.RunFailed, r.StartedAt.Add(time.Second)), 0, "", ""); err != nil {
				t.Error(err)
			}
		}(r)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := ms.SetMonitorState(ctx, a.ID, m.ID, store.MonitorPaused, store.PausedByUser, "mine", base); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
	got, err := ms.Monitor(ctx, a.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := runs[len(runs)-1].ScheduledAt
	if got.LastRunAt == nil || !got.LastRunAt.Equal(last) || got.LastRunStatus != store.RunFailed {
		t.Errorf("the last run is the latest scheduled: %v %q, want %v", got.LastRunAt, got.LastRunStatus, last)
	}
	if got.ConsecutiveFailures != 20 || got.State != store.MonitorPaused || got.PausedReason != store.PausedByUser || got.PausedMessage != "mine" {
		t.Errorf("after 20 concurrent failures and a pause: %+v", got)
	}
	for _, r := range runs {
		if stored, err := ms.Run(ctx, a.ID, m.ID, r.ID, base); err != nil || stored.Status != store.RunFailed {
			t.Errorf("run %s: %s %v", r.ID, stored.Status, err)
		}
	}
}
