package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
)

// Monitors, their runs and web jobs. The buckets are created by the first
// write that needs them (a file from before them reads as empty), and
// every write goes through s.update: one synced bbolt transaction, like
// the account's other records.
var (
	bMonitors = []byte("monitors") // account id \x00 monitor id -> store.Monitor
	// account id \x00 monitor id \x00 run id -> store.MonitorRun. Run ids
	// are store.RunID (zero-padded Unix seconds), so a monitor's runs sort
	// by scheduled time and are read backwards, newest first.
	bMonitorRuns = []byte("monitorruns")
	bJobs        = []byte("jobs") // account id \x00 job id -> store.Job
)

// Expired runs and jobs are dropped as later ones are written: a new run
// drops its monitor's expired runs from the oldest, and every
// sweepEvery-th new run, or new job, sweeps the whole bucket (the runs of
// deleted monitors, jobs of every account).
const sweepEvery = 256

var runClaims, jobCreates atomic.Int64

func runKey(accountID, monitorID, runID string) []byte {
	return []byte(accountID + "\x00" + monitorID + "\x00" + runID)
}

func runPrefix(accountID, monitorID string) []byte {
	return []byte(accountID + "\x00" + monitorID + "\x00")
}

// read decodes key of bucket name; a missing bucket or key is ErrNotFound.
func read[T any](tx *bolt.Tx, name, key []byte) (T, error) {
	b := tx.Bucket(name)
	if b == nil {
		var zero T
		return zero, store.ErrNotFound
	}
	return get[T](b, key)
}

func (s *Store) CreateMonitor(ctx context.Context, m store.Monitor) (store.Monitor, error) {
	if store.BadID(m.ID) || store.BadID(m.AccountID) || m.KeyID == "" || (m.State != store.MonitorActive && m.State != store.MonitorPaused) {
		return store.Monitor{}, store.ErrInvalid
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bAccounts).Get([]byte(m.AccountID)) == nil {
			return store.ErrNotFound
		}
		b, err := tx.CreateBucketIfNotExists(bMonitors)
		if err != nil {
			return err
		}
		key := join(m.AccountID, m.ID)
		if b.Get(key) != nil {
			return fmt.Errorf("%w: monitor id %s is taken", store.ErrInvalid, m.ID)
		}
		prefix := join(m.AccountID, "")
		n := 0
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			n++
		}
		if n >= store.MaxMonitors {
			return store.ErrTooManyMonitors
		}
		return put(b, key, m)
	})
	if err != nil {
		return store.Monitor{}, err
	}
	return m, nil
}

func (s *Store) Monitor(ctx context.Context, accountID, id string) (store.Monitor, error) {
	var m store.Monitor
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		m, err = read[store.Monitor](tx, bMonitors, join(accountID, id))
		return err
	})
	return m, err
}

func sortMonitors(ms []store.Monitor) {
	sort.Slice(ms, func(i, j int) bool {
		if !ms[i].CreatedAt.Equal(ms[j].CreatedAt) {
			return ms[i].CreatedAt.Before(ms[j].CreatedAt)
		}
		if ms[i].AccountID != ms[j].AccountID {
			return ms[i].AccountID < ms[j].AccountID
		}
		return ms[i].ID < ms[j].ID
	})
}

func (s *Store) ListMonitors(ctx context.Context, accountID string) ([]store.Monitor, error) {
	return s.monitors(ctx, join(accountID, ""))
}

func (s *Store) AllMonitors(ctx context.Context) ([]store.Monitor, error) {
	return s.monitors(ctx, nil)
}

// monitors lists the monitors whose keys begin with prefix, oldest first.
func (s *Store) monitors(ctx context.Context, prefix []byte) ([]store.Monitor, error) {
	out := []store.Monitor{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bMonitors)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var m store.Monitor
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortMonitors(out)
	return out, nil
}

func (s *Store) SetMonitorState(ctx context.Context, accountID, id, state, reason, message string, now time.Time) (store.Monitor, error) {
	switch {
	case state == store.MonitorPaused && reason == "":
		return store.Monitor{}, store.ErrInvalid
	case state != store.MonitorPaused && state != store.MonitorActive:
		return store.Monitor{}, store.ErrInvalid
	}
	var m store.Monitor
	err := s.update(ctx, func(tx *bolt.Tx) (err error) {
		key := join(accountID, id)
		if m, err = read[store.Monitor](tx, bMonitors, key); err != nil {
			return err
		}
		m.State, m.UpdatedAt = state, now
		if state == store.MonitorPaused {
			m.PausedReason, m.PausedMessage = reason, message
		} else {
			m.PausedReason, m.PausedMessage, m.ConsecutiveFailures = "", "", 0
		}
		return put(tx.Bucket(bMonitors), key, m)
	})
	if err != nil {
		return store.Monitor{}, err
	}
	return m, nil
}

func (s *Store) DeleteMonitor(ctx context.Context, accountID, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bMonitors)
		key := join(accountID, id)
		if b == nil || b.Get(key) == nil {
			return store.ErrNotFound
		}
		return b.Delete(key)
	})
}

func runExpired(r store.MonitorRun, now time.Time) bool { return !now.Before(r.ExpiresAt) }

// ClaimRun: the first claim stores the run (Attempt 1, ExpiresAt
// StartedAt+MonitorRunTTL); a running run whose lease ended is taken over
// in place, keeping its StartedAt and ExpiresAt.
func (s *Store) ClaimRun(ctx context.Context, r store.MonitorRun, now time.Time) (store.MonitorRun, bool, error) {
	if r.ID != store.RunID(r.ScheduledAt) || store.BadID(r.MonitorID) || store.BadID(r.AccountID) || r.Claim == "" || r.StartedAt.IsZero() ||
		!r.LeaseUntil.After(now) {
		return store.MonitorRun{}, false, store.ErrInvalid
	}
	sweep := runClaims.Add(1)%sweepEvery == 0
	var out store.MonitorRun
	var claimed bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		out, claimed = store.MonitorRun{}, false
		b, err := tx.CreateBucketIfNotExists(bMonitorRuns)
		if err != nil {
			return err
		}
		key := runKey(r.AccountID, r.MonitorID, r.ID)
		old, err := get[store.MonitorRun](b, key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if err := dropExpiredRuns(b, runPrefix(r.AccountID, r.MonitorID), now, sweep); err != nil {
				return err
			}
			out = store.MonitorRun{
				ID: r.ID, MonitorID: r.MonitorID, AccountID: r.AccountID, ScheduledAt: r.ScheduledAt, Claim: r.Claim,
				Attempt: 1, Status: store.RunRunning, RequestID: r.RequestID, StartedAt: r.StartedAt,
				LeaseUntil: r.LeaseUntil, ExpiresAt: r.StartedAt.Add(store.MonitorRunTTL),
			}
		case err != nil:
			return err
		case old.Status == store.RunRunning && !old.LeaseUntil.After(now):
			out = old
			out.Attempt++
			out.Claim, out.RequestID, out.LeaseUntil = r.Claim, r.RequestID, r.LeaseUntil
		default:
			out = old
			return nil
		}
		claimed = true
		return put(b, key, out)
	})
	if err != nil {
		return store.MonitorRun{}, false, err
	}
	return out, claimed, nil
}

// dropExpiredRuns deletes the runs under prefix that expired by now, from
// the oldest up to the first live one; all of them when all is set, with
// the prefix nil meaning the whole bucket.
func dropExpiredRuns(b *bolt.Bucket, prefix []byte, now time.Time, all bool) error {
	if all {
		prefix = nil
	}
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); {
		var r store.MonitorRun
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if !runExpired(r, now) {
			if !all {
				return nil
			}
			k, v = c.Next()
			continue
		}
		deleted := append([]byte{}, k...)
		if err := c.Delete(); err != nil {
			return err
		}
		k, v = c.Seek(deleted) // the key after the one deleted
	}
	return nil
}

// CompleteRun changes the run and its monitor in one transaction.
func (s *Store) CompleteRun(ctx context.Context, r store.MonitorRun, pauseAfter int, pauseReason, pauseMessage string) (store.Monitor, error) {
	if !store.RunFinished(r.Status) || r.Claim == "" || r.ID == "" || r.MonitorID == "" || r.AccountID == "" {
		return store.Monitor{}, store.ErrInvalid
	}
	if err := store.CheckDocuments(r.Data, r.Changes); err != nil {
		return store.Monitor{}, err
	}
	finished := s.now()
	if r.FinishedAt != nil {
		finished = *r.FinishedAt
	}
	var m store.Monitor
	monitorGone := false
	err := s.update(ctx, func(tx *bolt.Tx) error {
		monitorGone = false
		key := runKey(r.AccountID, r.MonitorID, r.ID)
		run, err := read[store.MonitorRun](tx, bMonitorRuns, key)
		if errors.Is(err, store.ErrNotFound) || err == nil && (run.Claim != r.Claim || run.Status != store.RunRunning) {
			return store.ErrNotClaimed
		}
		if err != nil {
			return err
		}
		run.Status, run.HTTPStatus, run.CreditsUsed, run.ErrorType, run.ErrorMessage = r.Status, r.HTTPStatus, r.CreditsUsed, r.ErrorType, r.ErrorMessage
		run.Data, run.Changes, run.FinishedAt = r.Data, r.Changes, &finished
		if r.RequestID != "" {
			run.RequestID = r.RequestID // the call's, known once it ran
		}
		if err := put(tx.Bucket(bMonitorRuns), key, run); err != nil {
			return err
		}
		mkey := join(r.AccountID, r.MonitorID)
		if m, err = read[store.Monitor](tx, bMonitors, mkey); errors.Is(err, store.ErrNotFound) {
			monitorGone = true
			return nil
		} else if err != nil {
			return err
		}
		m = m.AfterRun(run, finished, pauseAfter, pauseReason, pauseMessage)
		return put(tx.Bucket(bMonitors), mkey, m)
	})
	switch {
	case err != nil:
		return store.Monitor{}, err
	case monitorGone:
		return store.Monitor{}, store.ErrNotFound
	}
	return m, nil
}

func (s *Store) Run(ctx context.Context, accountID, monitorID, runID string, now time.Time) (store.MonitorRun, error) {
	var r store.MonitorRun
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		r, err = read[store.MonitorRun](tx, bMonitorRuns, runKey(accountID, monitorID, runID))
		if err == nil && runExpired(r, now) {
			r, err = store.MonitorRun{}, store.ErrNotFound
		}
		return err
	})
	return r, err
}

// The runs cursor is base64url of the bbolt key of the last run returned:
// bound to the account and monitor it was issued for.
func (s *Store) Runs(ctx context.Context, accountID, monitorID string, q store.RunQuery, now time.Time) (store.RunPage, error) {
	limit := q.Size()
	prefix := runPrefix(accountID, monitorID)
	start := append(append([]byte{}, prefix...), 0xff) // past the monitor's newest run
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || !bytes.HasPrefix(raw, prefix) || len(raw) == len(prefix) {
			return store.RunPage{}, store.ErrBadCursor
		}
		start = raw
	}
	page := store.RunPage{Runs: []store.MonitorRun{}}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bMonitorRuns)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		k, v := before(c, start)
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			var r store.MonitorRun
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if runExpired(r, now) {
				continue
			}
			if len(page.Runs) == limit {
				last := page.Runs[limit-1]
				page.NextCursor = base64.RawURLEncoding.EncodeToString(runKey(accountID, monitorID, last.ID))
				return nil
			}
			page.Runs = append(page.Runs, r)
		}
		return nil
	})
	if err != nil {
		return store.RunPage{}, err
	}
	return page, nil
}

var _ store.Monitors = (*Store)(nil)

func jobExpired(j store.Job, now time.Time) bool { return !now.Before(j.ExpiresAt) }

// CreateJob stores j queued; a job without ExpiresAt keeps JobTTL from
// its CreatedAt.
func (s *Store) CreateJob(ctx context.Context, j store.Job) error {
	if err := store.PrepareJob(&j, s.now()); err != nil {
		return err
	}
	j.State = store.JobQueued
	sweep := jobCreates.Add(1)%sweepEvery == 0
	return s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bJobs)
		if err != nil {
			return err
		}
		if b.Get(join(j.AccountID, j.ID)) != nil {
			return store.ErrJobExists
		}
		c := b.Cursor()
		for k, v := c.First(); sweep && k != nil; {
			var old store.Job
			if json.Unmarshal(v, &old) != nil || !jobExpired(old, j.CreatedAt) {
				k, v = c.Next()
				continue
			}
			deleted := append([]byte{}, k...)
			if err := c.Delete(); err != nil {
				return err
			}
			k, v = c.Seek(deleted)
		}
		return put(b, join(j.AccountID, j.ID), j)
	})
}

func (s *Store) Job(ctx context.Context, accountID, id string, now time.Time) (store.Job, error) {
	var j store.Job
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		j, err = read[store.Job](tx, bJobs, join(accountID, id))
		if err == nil && jobExpired(j, now) {
			j, err = store.Job{}, store.ErrNotFound
		}
		return err
	})
	return j, err
}

// changeJob loads a live job in a write transaction; fn edits it and
// reports whether to store it.
func (s *Store) changeJob(ctx context.Context, accountID, id string, now time.Time, fn func(j *store.Job) bool) (store.Job, error) {
	var j store.Job
	err := s.update(ctx, func(tx *bolt.Tx) (err error) {
		key := join(accountID, id)
		if j, err = read[store.Job](tx, bJobs, key); err != nil {
			return err
		}
		if jobExpired(j, now) {
			return store.ErrNotFound
		}
		if !fn(&j) {
			return nil
		}
		return put(tx.Bucket(bJobs), key, j)
	})
	if err != nil {
		return store.Job{}, err
	}
	return j, nil
}

func (s *Store) StartJob(ctx context.Context, accountID, id string, now, leaseUntil time.Time) (store.Job, bool, error) {
	started := false
	j, err := s.changeJob(ctx, accountID, id, now, func(j *store.Job) bool {
		started = j.State == store.JobQueued || j.State == store.JobRunning && !j.LeaseUntil.After(now)
		if !started {
			return false
		}
		j.State, j.LeaseUntil = store.JobRunning, leaseUntil
		j.Attempts++
		if j.StartedAt == nil {
			at := now
			j.StartedAt = &at
		}
		return true
	})
	return j, started, err
}

func (s *Store) JobProgress(ctx context.Context, accountID, id string, done, total int) error {
	_, err := s.changeJob(ctx, accountID, id, s.now(), func(j *store.Job) bool {
		if j.State != store.JobRunning {
			return false
		}
		j.ProgressDone, j.ProgressTotal = done, total
		return true
	})
	return err
}

func (s *Store) FinishJob(ctx context.Context, accountID, id, state string, status int, result []byte, now time.Time) (store.Job, error) {
	if !store.JobFinished(state) {
		return store.Job{}, store.ErrInvalid
	}
	if err := store.CheckDocuments(result); err != nil {
		return store.Job{}, err
	}
	return s.changeJob(ctx, accountID, id, now, func(j *store.Job) bool {
		if store.JobFinished(j.State) {
			return false // the first outcome stands
		}
		at := now
		j.State, j.Status, j.Result, j.FinishedAt = state, status, result, &at
		return true
	})
}

func (s *Store) MarkJobBilled(ctx context.Context, accountID, id string, replaced *store.JobOutcome) error {
	if replaced != nil {
		if err := store.CheckOutcome(*replaced); err != nil {
			return err
		}
	}
	_, err := s.changeJob(ctx, accountID, id, s.now(), func(j *store.Job) bool {
		j.Billed = true
		if replaced != nil {
			j.State, j.Status, j.Result = replaced.State, replaced.Status, replaced.Result
		}
		return true
	})
	return err
}

// bJobSlots holds each account's open web jobs: account id -> job id ->
// the end of its slot's lease.
var bJobSlots = []byte("jobslots")

// TakeJobSlot counts and takes in one bbolt transaction: exact, as every
// write transaction runs alone. Lapsed slots are dropped as it goes.
func (s *Store) TakeJobSlot(ctx context.Context, accountID, id string, now, until time.Time, max int) error {
	if store.BadID(accountID) || store.BadID(id) || max <= 0 {
		return store.ErrInvalid
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bJobSlots)
		if err != nil {
			return err
		}
		slots := map[string]time.Time{}
		if raw := b.Get([]byte(accountID)); raw != nil {
			if err := json.Unmarshal(raw, &slots); err != nil {
				return err
			}
		}
		for job, end := range slots {
			if !end.After(now) {
				delete(slots, job)
			}
		}
		if _, held := slots[id]; !held && len(slots) >= max {
			return store.ErrJobQueueFull
		}
		if until.After(slots[id]) {
			slots[id] = until.UTC()
		}
		return put(b, []byte(accountID), slots)
	})
}

func (s *Store) ReleaseJobSlot(ctx context.Context, accountID, id string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bJobSlots)
		if b == nil {
			return nil
		}
		raw := b.Get([]byte(accountID))
		if raw == nil {
			return nil
		}
		slots := map[string]time.Time{}
		if err := json.Unmarshal(raw, &slots); err != nil {
			return err
		}
		if _, held := slots[id]; !held {
			return nil
		}
		delete(slots, id)
		if len(slots) == 0 {
			return b.Delete([]byte(accountID))
		}
		return put(b, []byte(accountID), slots)
	})
}

var _ store.Jobs = (*Store)(nil)
