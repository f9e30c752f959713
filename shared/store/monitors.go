package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Monitor states.
const (
	MonitorActive = "active"
	MonitorPaused = "paused"
)

// Why a monitor is paused (Monitor.PausedReason).
const (
	PausedByUser    = "paused_by_user"
	PausedFailing   = "failing"
	PausedKeyGone   = "key_not_active"
	PausedEndpoint  = "endpoint_gone"
	PausedNoBalance = "insufficient_credits"
)

// MaxMonitors caps an account's monitors.
const MaxMonitors = 50

// MonitorRunTTL is how long a monitor run and its data are kept.
const MonitorRunTTL = 30 * 24 * time.Hour

// MaxDocumentBytes bounds a stored run's data, changes, or a job's result
// (a DynamoDB item holds 400 KB, and the rest of the item needs room); a
// longer one is ErrInvalid.
const MaxDocumentBytes = 350 << 10

// Monitor is an account's schedule for one data operation with fixed
// parameters. Each run is a call of that operation made with KeyID.
type Monitor struct {
	ID        string
	AccountID string
	KeyID     string
	Name      string
	Platform  string
	Endpoint  string            // the endpoint id after the platform: "search", "profile/repos"
	Params    map[string]string // the canonical parameters each run sends
	// IntervalMinutes is the time between scheduled runs.
	IntervalMinutes int
	State           string // MonitorActive or MonitorPaused
	PausedReason    string // one of the Paused* values; empty while active
	PausedMessage   string // what the caller reads: why it paused
	// ConsecutiveFailures counts the runs since the last success that did
	// not succeed; a success resets it, and so does a resume.
	ConsecutiveFailures int
	LastRunAt           *time.Time // scheduled time of the latest completed run
	LastRunStatus       string     // its status (RunSucceeded, RunFailed, RunRefused)
	// LastSucceededRun is the id of the latest succeeded run: the run a
	// new one's changes are computed against.
	LastSucceededRun string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// AfterRun is the monitor once its run r finished at now: what both
// stores' CompleteRun write (store.Monitors documents the rules).
func (m Monitor) AfterRun(r MonitorRun, now time.Time, pauseAfter int, pauseReason, pauseMessage string) Monitor {
	// The latest run by scheduled time: a run completed late (taken over)
	// does not move LastRunAt or LastSucceededRun back.
	if at := r.ScheduledAt; m.LastRunAt == nil || !at.Before(*m.LastRunAt) {
		m.LastRunAt, m.LastRunStatus = &at, r.Status
	}
	m.UpdatedAt = now
	if r.Status == RunSucceeded {
		m.ConsecutiveFailures = 0
		if r.ID > m.LastSucceededRun { // run ids sort as their times
			m.LastSucceededRun = r.ID
		}
	} else {
		m.ConsecutiveFailures++
	}
	if m.State != MonitorActive {
		return m // paused already: it keeps its reason
	}
	switch {
	case pauseReason != "":
		m.State, m.PausedReason, m.PausedMessage = MonitorPaused, pauseReason, pauseMessage
	case pauseAfter > 0 && m.ConsecutiveFailures >= pauseAfter:
		m.State, m.PausedReason, m.PausedMessage = MonitorPaused, PausedFailing, pauseMessage
	}
	return m
}

// Monitor run states.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"  // the call ran and failed (its reservation refunded)
	RunRefused   = "refused" // the call was refused before it ran (credits, limits, key)
)

// MonitorRun is one scheduled run. Its id is derived from its scheduled
// time (RunID), so a duplicate delivery of one scheduled time names the
// same run and never runs (or charges) twice.
type MonitorRun struct {
	ID          string
	MonitorID   string
	AccountID   string
	ScheduledAt time.Time
	// Claim identifies the attempt that holds the run while it is
	// running; only that attempt completes it.
	Claim      string
	Attempt    int // 1 for the first claim; a claim taken over after its lease ended adds one
	Status     string
	HTTPStatus int
	RequestID  string // the call's request id (its ledger entries name it)
	// CreditsUsed is what the call was charged: 0 for a failure or
	// refusal, nil when its charge was pending reconciliation.
	CreditsUsed  *int64
	ErrorType    string
	ErrorMessage string
	Data         []byte // the success envelope's data, JSON
	Changes      []byte // what changed since the previous succeeded run, JSON; nil for the first
	StartedAt    time.Time
	FinishedAt   *time.Time
	LeaseUntil   time.Time
	ExpiresAt    time.Time
}

// RunID names the run of a monitor at a scheduled time: "run_" and the
// Unix second, zero-padded, so ids sort as times do.
func RunID(scheduledAt time.Time) string {
	return fmt.Sprintf("run_%012d", scheduledAt.Unix())
}

// RunQuery pages a monitor's runs, newest scheduled time first.
type RunQuery struct {
	Limit  int
	Cursor string // opaque, from the previous page
}

// Size is the page size both stores use: Limit, 20 when unset, at most 100.
func (q RunQuery) Size() int {
	switch {
	case q.Limit <= 0:
		return 20
	case q.Limit > 100:
		return 100
	}
	return q.Limit
}

// RunPage is one page of runs.
type RunPage struct {
	Runs       []MonitorRun
	NextCursor string // empty when there is no further page
}

// Monitors keep monitors and their runs. Reads are owner-bound: another
// account's monitor is ErrNotFound, like one that does not exist.
type Monitors interface {
	// CreateMonitor stores m (ID, AccountID, KeyID, State and times set by
	// the caller); ErrTooManyMonitors when the account already holds
	// MaxMonitors, ErrInvalid for a missing id, account or key, an id or
	// account holding '#', a State that is neither active nor paused, or an
	// id already stored; ErrNotFound when the account does not exist.
	CreateMonitor(ctx context.Context, m Monitor) (Monitor, error)
	Monitor(ctx context.Context, accountID, id string) (Monitor, error)
	// ListMonitors lists the account's monitors, oldest first.
	ListMonitors(ctx context.Context, accountID string) ([]Monitor, error)
	// AllMonitors lists every account's monitors: the local scheduler
	// reads it when it starts. No request path calls it.
	AllMonitors(ctx context.Context) ([]Monitor, error)
	// SetMonitorState pauses (MonitorPaused, with reason and message) or
	// resumes (MonitorActive: reason, message and ConsecutiveFailures
	// cleared) a monitor. Another state, or a pause without a reason, is
	// ErrInvalid.
	SetMonitorState(ctx context.Context, accountID, id, state, reason, message string, now time.Time) (Monitor, error)
	// DeleteMonitor removes the monitor; its runs age out with their TTL
	// (Run and Runs still read them until then: an API that must hide them
	// finds no monitor first). ErrNotFound when absent.
	DeleteMonitor(ctx context.Context, accountID, id string) error

	// ClaimRun takes run r (ID = RunID(ScheduledAt), MonitorID, AccountID,
	// Claim, StartedAt and a LeaseUntil after now set, ErrInvalid
	// otherwise; RequestID when known, else CompleteRun's) unless it is
	// already stored: a run that finished, or one still running under its
	// lease, is returned with false. The store sets Status running,
	// Attempt 1 and ExpiresAt (StartedAt + MonitorRunTTL). A running run
	// whose lease ended at or before now (its worker died) is taken over:
	// Attempt goes up by one and the new claim, request id and lease
	// replace the old (StartedAt and ExpiresAt stay).
	ClaimRun(ctx context.Context, r MonitorRun, now time.Time) (MonitorRun, bool, error)
	// CompleteRun writes the finished run r (Status not running, else
	// ErrInvalid: its outcome fields, RequestID when set, FinishedAt or
	// now) if r.Claim still holds it (ErrNotClaimed otherwise), and
	// updates its monitor in the same atomic step: LastRunAt,
	// LastRunStatus, LastSucceededRun on success (these follow the latest
	// scheduled run: a run completed late leaves them), ConsecutiveFailures
	// (0 on success, one more otherwise).
	// When the failures reach pauseAfter (0: never) an active monitor is
	// paused with PausedFailing and pauseMessage; pauseReason, when not
	// empty, pauses an active monitor at once with that reason (a key
	// revoked); a paused monitor keeps its reason. A monitor deleted
	// meanwhile: the run is written alone and ErrNotFound returned.
	CompleteRun(ctx context.Context, r MonitorRun, pauseAfter int, pauseReason, pauseMessage string) (Monitor, error)
	// Run reads one run; ErrNotFound when absent, expired by now, or
	// another account's.
	Run(ctx context.Context, accountID, monitorID, runID string, now time.Time) (MonitorRun, error)
	// Runs pages the monitor's runs, newest scheduled time first, leaving
	// out runs expired by now. A bad cursor is ErrBadCursor.
	Runs(ctx context.Context, accountID, monitorID string, q RunQuery, now time.Time) (RunPage, error)
}

// Errors of Monitors and Jobs.
var (
	ErrTooManyMonitors = fmt.Errorf("store: an account holds at most %d monitors", MaxMonitors)
	ErrNotClaimed      = errors.New("store: another attempt holds this run")
	ErrJobExists       = errors.New("store: the job id is taken")
	// ErrJobQueueFull: TakeJobSlot found every slot of the account taken.
	ErrJobQueueFull = errors.New("store: the account's web jobs fill its queue")
)

// Web job states.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// JobTTL is how long a job and its result are kept.
const JobTTL = 7 * 24 * time.Hour

// Job is a long operation accepted with async=1: its reservation was made
// by the accepting request (RequestID), and its outcome settles or
// refunds it once.
type Job struct {
	ID        string
	AccountID string
	KeyID     string
	KeyPrefix string
	KeyHash   string // names the key's limits while the job's legs run
	RequestID string // the accepting request: the reservation and its ledger entries
	Platform  string
	Endpoint  string            // endpoint id after the platform
	Params    map[string]string // canonical parameters
	Cost      int64
	State     string
	// Progress: the operation's steps done of total (0 of 0 before it
	// knows how many there are).
	ProgressDone  int
	ProgressTotal int
	Attempts      int // how many times a worker started it
	// Status and Result are the HTTP status and full envelope the call
	// would have answered, once finished.
	Status int
	Result []byte
	// Billed: the outcome's settle or refund landed.
	Billed     bool
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	LeaseUntil time.Time // while running: a worker that died is taken over after it
	ExpiresAt  time.Time
}

// Jobs keep web jobs. Reads are owner-bound and check expiry themselves.
type Jobs interface {
	// CreateJob stores a queued job (a zero ExpiresAt is CreatedAt +
	// JobTTL); ErrJobExists when the id is taken, ErrInvalid for a missing
	// id, account or request id.
	CreateJob(ctx context.Context, j Job) error
	// Job reads a job; ErrNotFound when absent, expired by now, or another
	// account's.
	Job(ctx context.Context, accountID, id string, now time.Time) (Job, error)
	// StartJob moves a queued job, or a running one whose lease ended at or
	// before now, to running under leaseUntil, Attempts one more, and
	// reports true. A finished job, or one running under a live lease, is
	// returned with false.
	StartJob(ctx context.Context, accountID, id string, now, leaseUntil time.Time) (Job, bool, error)
	// JobProgress records progress of a running job (ignored otherwise;
	// ErrNotFound when there is no such job).
	JobProgress(ctx context.Context, accountID, id string, done, total int) error
	// FinishJob stores the outcome (JobSucceeded or JobFailed, else
	// ErrInvalid; its status and envelope) of a queued or running job
	// unless it already finished: the first outcome wins, and the stored
	// job is returned either way. ErrNotFound when absent or expired by now.
	FinishJob(ctx context.Context, accountID, id, state string, status int, result []byte, now time.Time) (Job, error)
	// MarkJobBilled records that the outcome's settle or refund landed;
	// replaced, when not nil, replaces the stored outcome (its State must
	// be JobSucceeded or JobFailed, else ErrInvalid): a success whose
	// reservation was refunded before it settled becomes a failure.
	MarkJobBilled(ctx context.Context, accountID, id string, replaced *JobOutcome) error
	// TakeJobSlot counts job id against its account's open web jobs until
	// it is released (ReleaseJobSlot) or until, whichever comes first: one
	// conditional write on a record of the account, so concurrent takers
	// never hold more than max slots live at now between them. A slot
	// the job holds already is kept (nil); ErrJobQueueFull when max other
	// slots are live.
	TakeJobSlot(ctx context.Context, accountID, id string, now, until time.Time, max int) error
	// ReleaseJobSlot frees the job's slot; one not held (released, or
	// never taken) is fine.
	ReleaseJobSlot(ctx context.Context, accountID, id string) error
}

// JobOutcome is a finished job's outcome: its state, the HTTP status and
// the envelope the call would have answered.
type JobOutcome struct {
	State  string
	Status int
	Result []byte
}

// CheckOutcome is ErrInvalid for an outcome no job ends with (a state
// that is not final, a document over MaxDocumentBytes).
func CheckOutcome(o JobOutcome) error {
	if !JobFinished(o.State) {
		return ErrInvalid
	}
	return CheckDocuments(o.Result)
}

// BadID reports an id both stores refuse (ErrInvalid): ids are parts of
// their keys, and '#' or NUL would make those ambiguous.
func BadID(id string) bool { return id == "" || strings.ContainsAny(id, "#\x00") }

// CheckDocuments is ErrInvalid when a document is over MaxDocumentBytes.
func CheckDocuments(docs ...[]byte) error {
	for _, d := range docs {
		if len(d) > MaxDocumentBytes {
			return ErrInvalid
		}
	}
	return nil
}

// RunFinished reports a run status that ends a run.
func RunFinished(status string) bool {
	return status == RunSucceeded || status == RunFailed || status == RunRefused
}

// JobFinished reports a job state that ends a job.
func JobFinished(state string) bool { return state == JobSucceeded || state == JobFailed }

// PrepareJob checks a new job as both stores do before storing it and
// fills its defaults: CreatedAt now, ExpiresAt JobTTL after CreatedAt.
func PrepareJob(j *Job, now time.Time) error {
	if BadID(j.ID) || BadID(j.AccountID) || j.RequestID == "" {
		return ErrInvalid
	}
	if err := CheckDocuments(j.Result); err != nil {
		return err
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = now
	}
	if j.ExpiresAt.IsZero() {
		j.ExpiresAt = j.CreatedAt.Add(JobTTL)
	}
	return nil
}
