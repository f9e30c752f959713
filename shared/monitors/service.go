package monitors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/store"
)

// DefaultPauseAfter is how many runs in a row may fail or be refused
// before a monitor pauses itself.
const DefaultPauseAfter = 5

// Config wires the monitors feature.
type Config struct {
	Registry *registry.Registry
	// Monitors keeps monitors and their runs; Keys reads the key each
	// monitor runs with.
	Monitors store.Monitors
	Keys     store.Store
	// Scheduler keeps one schedule per monitor; without one, /v1/monitors
	// is not served and a monitor cannot be created.
	Scheduler Scheduler
	// PauseAfter is how many runs in a row may fail before a monitor
	// pauses itself (0: DefaultPauseAfter).
	PauseAfter int
	Logger     *slog.Logger
	Now        func() time.Time
}

// Service is the monitors feature: the account's monitors API
// (/v1/monitors…, and the console's view of it) and the runs their
// schedules deliver. Each run is one call of the monitored operation with
// the monitor's key, made through the pipeline's Runner like any caller's
// (pipeline.Run); it touches the monitors' own records and reads the key,
// nothing else of the store.
type Service struct {
	cfg Config
	// api is the pipeline the service is given to: its runs go through it.
	api pipeline.Runner
}

var _ pipeline.Feature = (*Service)(nil)

// New builds the monitors feature; the pipeline it is given to (as a
// pipeline.Feature) is what its runs go through.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}
}

// Handlers implements pipeline.Feature: /v1/monitors… when the deployment
// can schedule monitors.
func (s *Service) Handlers(r pipeline.Runner) map[string]pipeline.Handler {
	s.api = r
	if s.cfg.Monitors == nil || s.cfg.Scheduler == nil || s.cfg.Keys == nil {
		return nil
	}
	return s.handlers()
}

// View is a monitor as the API shows it.
type View struct {
	ID                  string            `json:"id"`
	Name                string            `json:"name"`
	Platform            string            `json:"platform"`
	Endpoint            string            `json:"endpoint"`
	Operation           string            `json:"operation"`
	Params              map[string]string `json:"params"`
	IntervalMinutes     int               `json:"interval_minutes"`
	State               string            `json:"state"`
	PausedReason        *string           `json:"paused_reason"`
	PausedMessage       *string           `json:"paused_message"`
	ConsecutiveFailures int               `json:"consecutive_failures"`
	LastRunAt           *time.Time        `json:"last_run_at"`
	LastRunStatus       *string           `json:"last_run_status"`
	KeyID               string            `json:"key_id"`
	RunsURL             string            `json:"runs_url"`
	CreatedAt           time.Time         `json:"created_at"`
	UpdatedAt           time.Time         `json:"updated_at"`
}

// ViewOf is m as the API shows it.
func ViewOf(m store.Monitor) View {
	v := View{
		ID: m.ID, Name: m.Name, Platform: m.Platform, Endpoint: m.Endpoint, Operation: "/v1/" + m.Platform + "/" + m.Endpoint,
		Params: m.Params, IntervalMinutes: m.IntervalMinutes, State: m.State, ConsecutiveFailures: m.ConsecutiveFailures,
		LastRunAt: m.LastRunAt, KeyID: m.KeyID, RunsURL: "/v1/monitors/" + m.ID + "/runs",
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(),
	}
	if v.Params == nil {
		v.Params = map[string]string{}
	}
	if m.PausedReason != "" {
		v.PausedReason, v.PausedMessage = &m.PausedReason, &m.PausedMessage
	}
	if m.LastRunStatus != "" {
		v.LastRunStatus = &m.LastRunStatus
	}
	return v
}

// runView is a monitor run as the API shows it.
type runView struct {
	ID          string          `json:"id"`
	MonitorID   string          `json:"monitor_id"`
	ScheduledAt time.Time       `json:"scheduled_at"`
	StartedAt   time.Time       `json:"started_at"`
	FinishedAt  *time.Time      `json:"finished_at"`
	Status      string          `json:"status"`
	HTTPStatus  *int            `json:"http_status"`
	RequestID   *string         `json:"request_id"`
	CreditsUsed *int64          `json:"credits_used"`
	Error       *runError       `json:"error"`
	Attempt     int             `json:"attempt"`
	Data        json.RawMessage `json:"data"`
	Changes     json.RawMessage `json:"changes"`
	ExpiresAt   time.Time       `json:"expires_at"`
}

type runError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func viewRun(r store.MonitorRun) runView {
	v := runView{
		ID: r.ID, MonitorID: r.MonitorID, ScheduledAt: r.ScheduledAt.UTC(), StartedAt: r.StartedAt.UTC(), FinishedAt: r.FinishedAt,
		Status: r.Status, CreditsUsed: r.CreditsUsed, Attempt: r.Attempt, Data: jsonOrNull(r.Data), Changes: jsonOrNull(r.Changes),
		ExpiresAt: r.ExpiresAt.UTC(),
	}
	if r.HTTPStatus != 0 {
		v.HTTPStatus = &r.HTTPStatus
	}
	if r.RequestID != "" && r.Status != store.RunRunning {
		v.RequestID = &r.RequestID
	}
	if r.ErrorType != "" {
		v.Error = &runError{Type: r.ErrorType, Message: r.ErrorMessage}
	}
	return v
}

func jsonOrNull(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// Enabled reports whether monitors can be kept and scheduled here.
func (s *Service) Enabled() bool { return s.cfg.Monitors != nil && s.cfg.Scheduler != nil }

// handlers serve /v1/monitors: a free API over the account's monitors,
// for the key's account. Each run is made with the key that created the
// monitor.
func (s *Service) handlers() map[string]pipeline.Handler {
	return map[string]pipeline.Handler{
		"monitors": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			list, err := s.List(ctx, c.Principal.AccountID)
			if err != nil {
				return nil, s.storeFault(c, "list monitors", err)
			}
			return list, nil
		},
		"monitors/create": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			v := c.Params.Values
			m, refusal := s.Create(ctx, c.Principal.AccountID, c.Principal.KeyID, Spec{
				Platform: v["platform"], Endpoint: v["endpoint"], Params: v["params"], IntervalMinutes: v["interval_minutes"], Name: v["name"],
			})
			if refusal != nil {
				return nil, refusal
			}
			return ViewOf(m), nil
		},
		"monitors/{id}": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			m, refusal := s.own(ctx, c, c.Params.Values["id"])
			if refusal != nil {
				return nil, refusal
			}
			return ViewOf(m), nil
		},
		"monitors/{id}/pause": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			m, refusal := s.SetState(ctx, c.Principal.AccountID, c.Params.Values["id"], store.MonitorPaused)
			if refusal != nil {
				return nil, refusal
			}
			return ViewOf(m), nil
		},
		"monitors/{id}/resume": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			m, refusal := s.SetState(ctx, c.Principal.AccountID, c.Params.Values["id"], store.MonitorActive)
			if refusal != nil {
				return nil, refusal
			}
			return ViewOf(m), nil
		},
		"monitors/{id}/delete": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			id := c.Params.Values["id"]
			if refusal := s.Delete(ctx, c.Principal.AccountID, id); refusal != nil {
				return nil, refusal
			}
			return map[string]any{"id": id, "deleted": true}, nil
		},
		"monitors/{id}/runs": func(ctx context.Context, c *pipeline.Call) (any, *envelope.Error) {
			return s.Runs(ctx, c.Principal.AccountID, c.Params.Values["id"], c.Params.Values["limit"], c.Params.Values["cursor"])
		},
	}
}

// List is the account's monitors as /v1/monitors answers them.
func (s *Service) List(ctx context.Context, accountID string) (map[string]any, error) {
	list, err := s.cfg.Monitors.ListMonitors(ctx, accountID)
	if err != nil {
		return nil, err
	}
	views := make([]View, len(list))
	for i, m := range list {
		views[i] = ViewOf(m)
	}
	return map[string]any{"items": views, "count": len(views), "max": store.MaxMonitors}, nil
}

// Spec is a monitor as a caller asks for it (the query parameters of
// /v1/monitors/create, or the console's form).
type Spec struct {
	Platform, Endpoint string
	// Params is the operation's parameters: a JSON object of scalars.
	Params          string
	IntervalMinutes string
	Name            string
}

// Create validates spec as its operation validates a call, stores the
// monitor for the account's key and schedules it.
func (s *Service) Create(ctx context.Context, accountID, keyID string, spec Spec) (store.Monitor, *envelope.Error) {
	if s.cfg.Monitors == nil || s.cfg.Scheduler == nil {
		return store.Monitor{}, envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "Monitors are not available in this deployment.", nil)
	}
	e, canonical, refusal := s.operation(spec)
	if refusal != nil {
		return store.Monitor{}, refusal
	}
	interval := 60
	if spec.IntervalMinutes != "" {
		n, ok := parseInterval(spec.IntervalMinutes)
		if !ok {
			return store.Monitor{}, envelope.FieldError("interval_minutes", "out_of_range", "interval_minutes is a whole number of minutes from 5 to 10080.")
		}
		interval = n
	}
	now := s.cfg.Now().UTC()
	m := store.Monitor{
		ID: store.NewMonitorID(), AccountID: accountID, KeyID: keyID, Name: spec.Name, Platform: e.Platform, Endpoint: e.ID,
		Params: canonical, IntervalMinutes: interval, State: store.MonitorActive, CreatedAt: now, UpdatedAt: now,
	}
	m, err := s.cfg.Monitors.CreateMonitor(ctx, m)
	switch {
	case errors.Is(err, store.ErrTooManyMonitors):
		return store.Monitor{}, envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"An account holds at most 50 monitors; delete one first.", map[string]any{"reason": "too_many_monitors", "max": store.MaxMonitors})
	case err != nil:
		return store.Monitor{}, s.fault("create monitor", err)
	}
	if err := s.cfg.Scheduler.Schedule(ctx, m); err != nil {
		// Unscheduled, the monitor would never run: take it back.
		if derr := s.cfg.Monitors.DeleteMonitor(context.WithoutCancel(ctx), accountID, m.ID); derr != nil {
			s.cfg.Logger.Error("monitor left unscheduled", "monitor_id", m.ID, "error", derr.Error())
		}
		return store.Monitor{}, s.fault("schedule monitor", err)
	}
	return m, nil
}

// operation resolves and validates the operation a monitor runs:
// a live data endpoint this deployment serves, with parameters its own
// validation accepts. It returns the canonical parameters each run sends.
func (s *Service) operation(spec Spec) (*registry.Endpoint, map[string]string, *envelope.Error) {
	platform := strings.Trim(spec.Platform, "/")
	key := platform + "/" + strings.Trim(spec.Endpoint, "/")
	e, ok := s.cfg.Registry.Endpoint(key)
	if !ok && !s.knownPlatform(platform) {
		return nil, nil, envelope.FieldError("platform", "unknown_platform", platform+" is not a platform; GET /v1/utility/endpoints lists them.")
	}
	if !ok || e.Kind != registry.Data || e.IsIndex() {
		return nil, nil, envelope.FieldError("endpoint", "unknown_endpoint",
			key+" is not a data operation; GET /v1/utility/endpoints lists them.")
	}
	if e.Retired() {
		return nil, nil, envelope.FieldError("endpoint", "endpoint_removed", key+" is retired; use "+e.RetiredFor+".")
	}
	if s.api == nil || !s.api.Available(e) {
		return nil, nil, pipeline.NotAvailable(e)
	}
	query := params.Query{}
	if strings.TrimSpace(spec.Params) != "" {
		var raw map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(spec.Params))
		if err := dec.Decode(&raw); err != nil || raw == nil {
			return nil, nil, envelope.FieldError("params", "invalid_format", `params is a JSON object of the operation's parameters, e.g. {"query":"acme"}.`)
		}
		for name, v := range raw {
			value, ok := params.Scalar(v)
			if !ok {
				return nil, nil, envelope.FieldError("params", "invalid_format", "params."+name+" must be a string, number or boolean.")
			}
			query[name] = []string{value}
		}
	}
	for _, name := range []string{"dry_run", "async", "stream"} {
		if _, set := query[name]; set {
			return nil, nil, envelope.FieldError("params", "not_allowed", name+" cannot be part of a monitor: each run is a full call.")
		}
	}
	validated, verr := params.Validate(e, query, nil)
	if verr != nil {
		// The operation's own refusal, marked as being about params.
		if verr.Details == nil {
			verr.Details = map[string]any{}
		}
		verr.Details["in"] = "params"
		verr.Message = "params: " + verr.Message
		return nil, nil, verr
	}
	return e, validated.Values, nil
}

// knownPlatform reports whether a data endpoint lives under platform.
func (s *Service) knownPlatform(platform string) bool {
	for _, e := range s.cfg.Registry.Endpoints() {
		if e.Platform == platform && e.Kind == registry.Data {
			return true
		}
	}
	return false
}

func parseInterval(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 5 && n <= 10080
}

func monitorNotFound() *envelope.Error {
	return envelope.New(envelope.ResourceNotFound, http.StatusNotFound, "No monitor with this id for this account.", nil)
}

// fault logs a store or scheduler error and answers 500.
func (s *Service) fault(what string, err error) *envelope.Error {
	s.cfg.Logger.Error(what+" failed", "error", err.Error())
	return envelope.Internal()
}

func (s *Service) storeFault(c *pipeline.Call, what string, err error) *envelope.Error {
	s.cfg.Logger.Error(what+" failed", "request_id", c.RequestID, "error", err.Error())
	return envelope.Internal()
}

func (s *Service) own(ctx context.Context, c *pipeline.Call, id string) (store.Monitor, *envelope.Error) {
	m, err := s.cfg.Monitors.Monitor(ctx, c.Principal.AccountID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Monitor{}, monitorNotFound()
	case err != nil:
		return store.Monitor{}, s.storeFault(c, "read monitor", err)
	}
	return m, nil
}

// SetState pauses or resumes an account's monitor and its schedule.
func (s *Service) SetState(ctx context.Context, accountID, id, state string) (store.Monitor, *envelope.Error) {
	reason, message := "", ""
	if state == store.MonitorPaused {
		reason, message = store.PausedByUser, "Paused by the account."
	}
	m, err := s.cfg.Monitors.SetMonitorState(ctx, accountID, id, state, reason, message, s.cfg.Now().UTC())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Monitor{}, monitorNotFound()
	case err != nil:
		return store.Monitor{}, s.fault("set monitor state", err)
	}
	if err := s.cfg.Scheduler.Schedule(ctx, m); err != nil {
		// The state is stored; a paused monitor's run does nothing anyway,
		// and a resumed one's schedule is written again on the next change.
		return store.Monitor{}, s.fault("reschedule monitor", err)
	}
	return m, nil
}

// Delete deletes an account's monitor and its schedule: the schedule
// first, so a monitor is never left running unseen.
func (s *Service) Delete(ctx context.Context, accountID, id string) *envelope.Error {
	m, err := s.cfg.Monitors.Monitor(ctx, accountID, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return monitorNotFound()
	case err != nil:
		return s.fault("read monitor", err)
	}
	if err := s.cfg.Scheduler.Unschedule(ctx, m); err != nil {
		return s.fault("unschedule monitor", err)
	}
	if err := s.cfg.Monitors.DeleteMonitor(ctx, accountID, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return s.fault("delete monitor", err)
	}
	return nil
}

// Runs pages a monitor's runs, newest first.
func (s *Service) Runs(ctx context.Context, accountID, id, limit, cursor string) (any, *envelope.Error) {
	if _, err := s.cfg.Monitors.Monitor(ctx, accountID, id); errors.Is(err, store.ErrNotFound) {
		return nil, monitorNotFound()
	} else if err != nil {
		return nil, s.fault("read monitor", err)
	}
	n := 20
	if limit != "" {
		if v, ok := ParseLimit(limit); ok {
			n = v
		}
	}
	page, err := s.cfg.Monitors.Runs(ctx, accountID, id, store.RunQuery{Limit: n, Cursor: cursor}, s.cfg.Now())
	switch {
	case errors.Is(err, store.ErrBadCursor):
		return nil, envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"The cursor is not valid; pass back the cursor of the previous page unchanged.", map[string]any{"field": "cursor", "reason": "invalid_cursor"})
	case err != nil:
		return nil, s.fault("list runs", err)
	}
	items := make([]runView, len(page.Runs))
	for i, r := range page.Runs {
		items[i] = viewRun(r)
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	return map[string]any{"items": items, "count": len(items), "cursor": next, "has_more": next != nil}, nil
}

// ParseLimit reads a runs page's limit: 1 to 100.
func ParseLimit(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= 100
}

// Run makes the run a schedule delivered: one real call of the
// monitor's operation with its key, recorded under the scheduled time. A
// second delivery of the same time finds the run claimed or done and does
// nothing, so it never charges twice. A deleted or paused monitor's
// delivery does nothing.
func (s *Service) Run(ctx context.Context, rr RunRequest) error {
	if s.cfg.Monitors == nil || s.cfg.Keys == nil {
		return errors.New("monitors: monitors are not configured")
	}
	if s.api == nil {
		return errors.New("monitors: the service was not given to a pipeline")
	}
	if rr.AccountID == "" || rr.MonitorID == "" || rr.ScheduledAt.IsZero() {
		return errors.New("monitors: a monitor run needs an account, a monitor and a scheduled time")
	}
	m, err := s.cfg.Monitors.Monitor(ctx, rr.AccountID, rr.MonitorID)
	if errors.Is(err, store.ErrNotFound) {
		// A schedule that outlived its monitor: remove it.
		if s.cfg.Scheduler != nil {
			if uerr := s.cfg.Scheduler.Unschedule(ctx, store.Monitor{ID: rr.MonitorID, AccountID: rr.AccountID}); uerr != nil {
				s.cfg.Logger.Warn("stale monitor schedule not removed", "monitor_id", rr.MonitorID, "error", uerr.Error())
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	if m.State != store.MonitorActive {
		return nil
	}
	now := s.cfg.Now().UTC()
	scheduled := rr.ScheduledAt.UTC().Truncate(time.Second)
	claim := store.NewEntryID()
	run, claimed, err := s.cfg.Monitors.ClaimRun(ctx, store.MonitorRun{
		ID: store.RunID(scheduled), MonitorID: m.ID, AccountID: m.AccountID, ScheduledAt: scheduled, Claim: claim,
		Attempt: 1, Status: store.RunRunning, StartedAt: now, LeaseUntil: now.Add(pipeline.RunLease), ExpiresAt: now.Add(store.MonitorRunTTL),
	}, now)
	if err != nil || !claimed {
		return err
	}
	outcome := s.call(ctx, m)
	run.Status, run.HTTPStatus, run.RequestID, run.CreditsUsed = outcome.status, outcome.httpStatus, outcome.requestID, outcome.creditsUsed
	run.ErrorType, run.ErrorMessage = outcome.errType, outcome.errMessage
	finished := s.cfg.Now().UTC()
	run.FinishedAt = &finished
	if outcome.status == store.RunSucceeded {
		run.Data = keepDocument(outcome.data)
		if run.Data == nil {
			run.ErrorMessage = "The data was larger than the 350 KB a run keeps; the call succeeded and was charged."
		}
		run.Changes = s.changes(ctx, m, run.Data)
	}
	pauseReason, pauseMessage := outcome.pauseNow()
	if pauseReason == "" {
		pauseMessage = "Paused after " + strconv.Itoa(s.pauseAfter()) + " runs in a row did not succeed; the last: " + outcome.errType + ": " + outcome.errMessage
	}
	updated, err := s.cfg.Monitors.CompleteRun(context.WithoutCancel(ctx), run, s.pauseAfter(), pauseReason, pauseMessage)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotClaimed) {
		return nil // deleted meanwhile, or a takeover finished it
	}
	if err != nil {
		return err
	}
	if updated.State == store.MonitorPaused && m.State == store.MonitorActive && s.cfg.Scheduler != nil {
		if err := s.cfg.Scheduler.Schedule(context.WithoutCancel(ctx), updated); err != nil {
			s.cfg.Logger.Warn("paused monitor's schedule not disabled; its runs do nothing", "monitor_id", m.ID, "error", err.Error())
		}
	}
	return nil
}

func (s *Service) pauseAfter() int {
	if s.cfg.PauseAfter > 0 {
		return s.cfg.PauseAfter
	}
	return DefaultPauseAfter
}

// keepDocument is b when a run may keep it.
func keepDocument(b []byte) []byte {
	if len(b) > store.MaxDocumentBytes {
		return nil
	}
	return b
}

// changes compares a run's data with the monitor's previous succeeded run.
func (s *Service) changes(ctx context.Context, m store.Monitor, data []byte) []byte {
	if m.LastSucceededRun == "" || data == nil {
		return nil
	}
	prev, err := s.cfg.Monitors.Run(ctx, m.AccountID, m.ID, m.LastSucceededRun, s.cfg.Now())
	if err != nil || prev.Data == nil {
		return nil // aged out or unreadable: no base to compare with
	}
	ch, err := Compare(prev.Data, data)
	if err != nil {
		return nil
	}
	ch.SinceRun = prev.ID
	b, err := json.Marshal(ch)
	if err != nil {
		return nil
	}
	return keepDocument(b)
}

// callOutcome is what a monitor's call answered.
type callOutcome struct {
	status      string // store.RunSucceeded, RunFailed or RunRefused
	httpStatus  int
	requestID   string
	creditsUsed *int64
	errType     string
	errMessage  string
	data        []byte
}

// pauseNow is the reason to pause at once: the run can never succeed
// until the account acts.
func (o callOutcome) pauseNow() (reason, message string) {
	switch {
	case o.errType == string(envelope.Unauthorized):
		return store.PausedKeyGone, "The key this monitor runs with is revoked or deleted. Reactivate it and resume the monitor, or create the monitor again with an active key."
	case o.httpStatus == http.StatusGone:
		return store.PausedEndpoint, "The monitored operation is retired: " + o.errMessage
	}
	return "", ""
}

// call runs the monitor's operation as the GET a caller would
// send, with the monitor's key, through the whole pipeline: admission,
// validation, fair use, billing, usage event and log line; it skips the
// cache lookup (Cache-Control: no-cache) but refreshes the entry.
func (s *Service) call(ctx context.Context, m store.Monitor) callOutcome {
	fail := func(t envelope.Type, msg string) callOutcome {
		return callOutcome{status: store.RunFailed, httpStatus: http.StatusInternalServerError, errType: string(t), errMessage: msg}
	}
	k, err := s.cfg.Keys.Key(ctx, m.AccountID, m.KeyID)
	if errors.Is(err, store.ErrNotFound) {
		return callOutcome{status: store.RunRefused, httpStatus: http.StatusUnauthorized, errType: string(envelope.Unauthorized), errMessage: "The key is deleted."}
	}
	if err != nil {
		return fail(envelope.InternalError, "The key could not be read.")
	}
	q := url.Values{}
	for name, v := range m.Params {
		q.Set(name, v)
	}
	target := "/v1/" + m.Platform
	for _, seg := range strings.Split(m.Endpoint, "/") {
		target += "/" + url.PathEscape(seg)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"?"+q.Encode(), nil)
	if err != nil {
		return fail(envelope.InternalError, "The call could not be made.")
	}
	req.RemoteAddr = "monitor"
	// A monitor watches the source: each run reads it afresh, and its
	// answer refreshes the cache for everyone else.
	req.Header.Set("cache-control", "no-cache")
	a := s.api.Run(req, pipeline.RunAs{KeyHash: k.Hash, Parent: m.ID})
	return readOutcome(a.Status, a.Header.Get("x-request-id"), a.Body)
}

// readOutcome reads a call's envelope.
func readOutcome(status int, requestID string, body []byte) callOutcome {
	var env struct {
		Data        json.RawMessage `json:"data"`
		CreditsUsed *int64          `json:"credits_used"`
		RequestID   string          `json:"request_id"`
		Error       *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	o := callOutcome{httpStatus: status, requestID: requestID}
	if json.Unmarshal(bytes.TrimSpace(body), &env) != nil {
		o.status, o.errType, o.errMessage = store.RunFailed, string(envelope.InternalError), "The call's answer could not be read."
		return o
	}
	if env.RequestID != "" {
		o.requestID = env.RequestID
	}
	o.creditsUsed = env.CreditsUsed
	if status == http.StatusOK {
		o.status, o.data = store.RunSucceeded, env.Data
		return o
	}
	o.status = store.RunFailed
	if env.Error != nil {
		o.errType, o.errMessage = env.Error.Type, env.Error.Message
	}
	switch envelope.Type(o.errType) {
	case envelope.Unauthorized, envelope.InsufficientCredits, envelope.KeyLimitExceeded, envelope.RateLimited:
		o.status = store.RunRefused // refused before it ran: nothing was charged
	}
	return o
}
