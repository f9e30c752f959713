package monitors

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// LocalScheduler is the local server's Scheduler: it keeps the schedules
// in memory and delivers each due run to the pipeline in process, as
// EventBridge Scheduler delivers them to the worker in AWS. A monitor runs
// at its creation time and every IntervalMinutes after (the scheduled
// times are fixed by that anchor, so a run's id never depends on when a
// tick happened); times missed while the server was down are skipped.
type LocalScheduler struct {
	logger *slog.Logger
	mu     sync.Mutex
	plans  map[string]*localPlan
	run    func(context.Context, RunRequest) error
	wg     sync.WaitGroup
}

type localPlan struct {
	accountID string
	anchor    time.Time
	every     time.Duration
	enabled   bool
	next      time.Time // the next scheduled time to deliver
}

// NewLocalScheduler returns a scheduler with no schedules; Start delivers.
func NewLocalScheduler(logger *slog.Logger) *LocalScheduler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &LocalScheduler{logger: logger, plans: map[string]*localPlan{}}
}

// Schedule implements Scheduler.
func (s *LocalScheduler) Schedule(_ context.Context, m store.Monitor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	every := time.Duration(m.IntervalMinutes) * time.Minute
	if every <= 0 {
		every = time.Hour
	}
	p := s.plans[m.ID]
	if p == nil || p.every != every || !p.anchor.Equal(m.CreatedAt) {
		p = &localPlan{accountID: m.AccountID, anchor: m.CreatedAt.UTC().Truncate(time.Second), every: every}
		p.next = p.anchor
		s.plans[m.ID] = p
	}
	p.enabled = m.State == store.MonitorActive
	return nil
}

// Unschedule implements Scheduler.
func (s *LocalScheduler) Unschedule(_ context.Context, m store.Monitor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.plans, m.ID)
	return nil
}

// Load schedules monitors found at start (store.Monitors.AllMonitors),
// from now on: a time missed while the server was down is not delivered.
func (s *LocalScheduler) Load(ms []store.Monitor, now time.Time) {
	for _, m := range ms {
		_ = s.Schedule(context.Background(), m)
		s.mu.Lock()
		p := s.plans[m.ID]
		for p.next.Before(now.Add(-time.Second)) {
			p.next = p.next.Add(p.every)
		}
		s.mu.Unlock()
	}
}

// Due returns the runs due at now and moves each schedule past them: the
// latest time due per monitor (a tick that came late delivers one run, as
// a schedule that missed several would).
func (s *LocalScheduler) Due(now time.Time) []RunRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []RunRequest
	for id, p := range s.plans {
		if now.Before(p.next) {
			continue
		}
		at := p.next
		for !now.Before(p.next) {
			at = p.next
			p.next = p.next.Add(p.every)
		}
		if p.enabled {
			due = append(due, RunRequest{AccountID: p.accountID, MonitorID: id, ScheduledAt: at})
		}
	}
	return due
}

// Start delivers due runs to run, checking every second, until ctx ends.
func (s *LocalScheduler) Start(ctx context.Context, run func(context.Context, RunRequest) error) {
	s.run = run
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				s.Deliver(ctx, now)
			}
		}
	}()
}

// Deliver runs what is due at now, each run on its own.
func (s *LocalScheduler) Deliver(ctx context.Context, now time.Time) {
	for _, rr := range s.Due(now) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.run(ctx, rr); err != nil {
				s.logger.Error("monitor run failed", "monitor_id", rr.MonitorID, "scheduled_at", rr.ScheduledAt, "error", err.Error())
			}
		}()
	}
}

// Wait waits for the runs under way (after ctx ended, for a clean stop).
func (s *LocalScheduler) Wait() { s.wg.Wait() }
