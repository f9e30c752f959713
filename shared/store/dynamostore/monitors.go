package dynamostore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Monitors, their runs and web jobs live in the account's partition:
//
//	monitor      acct#<account id>  mon#<monitor id>            key_id, name, platform, endpoint, params M,
//	                                                            interval_minutes N, state, paused_reason,
//	                                                            paused_message, consecutive_failures N,
//	                                                            last_run_at, last_run_status,
//	                                                            last_succeeded_run, created_at, updated_at,
//	                                                            version N (+1 on every change)
//	run          acct#<account id>  run#<monitor id>#<run id>   scheduled_at, claim, attempt N, status,
//	                                                            request_id, http_status N, credits_used N
//	                                                            (absent: pending), error_type, error_message,
//	                                                            data B (gzip), changes B (gzip),
//	                                                            changes_ext BOOL, started_at, finished_at,
//	                                                            lease_until_ns N, expires_at_ns N, expires_at N
//	run changes  acct#<account id>  runx#<monitor id>#<run id>  changes B (gzip), expires_at N: a run's
//	                                                            changes when they do not fit beside its data
//	job          acct#<account id>  job#<job id>                key_id, key_prefix, key_hash, request_id,
//	                                                            platform, endpoint, params M, cost N, state,
//	                                                            progress_done N, progress_total N,
//	                                                            attempts N, http_status N, result B (gzip),
//	                                                            billed BOOL, created_at, started_at,
//	                                                            finished_at, lease_until_ns N,
//	                                                            expires_at_ns N, expires_at N
//
// and the account item counts its monitors (monitors N), changed in the
// transaction that creates or deletes one, so MaxMonitors holds under
// concurrency. Run ids are store.RunID (zero-padded Unix seconds), so a
// Query of begins_with(sk, "run#<monitor id>#") with ScanIndexForward=false
// reads a monitor's runs newest scheduled time first; monitor ids may not
// hold '#', so one monitor's prefix never covers another's runs.
//
// Documents (a run's data and changes, a job's result, each at most
// store.MaxDocumentBytes) are stored gzip-compressed; gzip never grows one
// by more than a few dozen bytes, so each fits in an item alone. When a
// run's two compressed documents together would not fit, its changes go
// to the run changes item (written in the same transaction) and
// changes_ext is set.
//
// expires_at is the table's TTL attribute (Unix seconds, rounded up);
// reads compare expires_at_ns exactly, since TTL deletion is lazy. Leases
// (lease_until_ns) are Unix nanoseconds too, so "ended at or before now" is
// exact.
const (
	pfxMonitor = "mon#"
	pfxRun     = "run#"
	pfxRunExt  = "runx#"
	pfxJob     = "job#"

	attrMonitors = "monitors" // on the account item
)

// runDocBudget bounds a run item's two compressed documents together; the
// rest of the item (at most a few KB) fits in the 400 KB beside them.
const runDocBudget = 380_000

type monitorItem struct {
	PK                  string            `dynamodbav:"pk"`
	SK                  string            `dynamodbav:"sk"`
	KeyID               string            `dynamodbav:"key_id"`
	Name                string            `dynamodbav:"name"`
	Platform            string            `dynamodbav:"platform"`
	Endpoint            string            `dynamodbav:"endpoint"`
	Params              map[string]string `dynamodbav:"params,omitempty"`
	IntervalMinutes     int               `dynamodbav:"interval_minutes"`
	State               string            `dynamodbav:"state"`
	PausedReason        string            `dynamodbav:"paused_reason,omitempty"`
	PausedMessage       string            `dynamodbav:"paused_message,omitempty"`
	ConsecutiveFailures int               `dynamodbav:"consecutive_failures"`
	LastRunAt           *time.Time        `dynamodbav:"last_run_at,omitempty"`
	LastRunStatus       string            `dynamodbav:"last_run_status,omitempty"`
	LastSucceededRun    string            `dynamodbav:"last_succeeded_run,omitempty"`
	CreatedAt           time.Time         `dynamodbav:"created_at"`
	UpdatedAt           time.Time         `dynamodbav:"updated_at"`
	Version             int64             `dynamodbav:"version"`
}

func newMonitorItem(m store.Monitor, version int64) monitorItem {
	return monitorItem{
		PK: accountPK(m.AccountID), SK: pfxMonitor + m.ID, KeyID: m.KeyID, Name: m.Name, Platform: m.Platform,
		Endpoint: m.Endpoint, Params: m.Params, IntervalMinutes: m.IntervalMinutes, State: m.State,
		PausedReason: m.PausedReason, PausedMessage: m.PausedMessage, ConsecutiveFailures: m.ConsecutiveFailures,
		LastRunAt: m.LastRunAt, LastRunStatus: m.LastRunStatus, LastSucceededRun: m.LastSucceededRun,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Version: version,
	}
}

func (it monitorItem) monitor() store.Monitor {
	return store.Monitor{
		ID: strings.TrimPrefix(it.SK, pfxMonitor), AccountID: strings.TrimPrefix(it.PK, pfxAccount), KeyID: it.KeyID,
		Name: it.Name, Platform: it.Platform, Endpoint: it.Endpoint, Params: it.Params, IntervalMinutes: it.IntervalMinutes,
		State: it.State, PausedReason: it.PausedReason, PausedMessage: it.PausedMessage,
		ConsecutiveFailures: it.ConsecutiveFailures, LastRunAt: it.LastRunAt, LastRunStatus: it.LastRunStatus,
		LastSucceededRun: it.LastSucceededRun, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
	}
}

type runItem struct {
	PK           string     `dynamodbav:"pk"`
	SK           string     `dynamodbav:"sk"`
	ScheduledAt  time.Time  `dynamodbav:"scheduled_at"`
	Claim        string     `dynamodbav:"claim"`
	Attempt      int        `dynamodbav:"attempt"`
	Status       string     `dynamodbav:"status"`
	RequestID    string     `dynamodbav:"request_id"`
	HTTPStatus   int        `dynamodbav:"http_status,omitempty"`
	CreditsUsed  *int64     `dynamodbav:"credits_used,omitempty"`
	ErrorType    string     `dynamodbav:"error_type,omitempty"`
	ErrorMessage string     `dynamodbav:"error_message,omitempty"`
	Data         []byte     `dynamodbav:"data,omitempty"`
	Changes      []byte     `dynamodbav:"changes,omitempty"`
	ChangesExt   bool       `dynamodbav:"changes_ext,omitempty"`
	StartedAt    time.Time  `dynamodbav:"started_at"`
	FinishedAt   *time.Time `dynamodbav:"finished_at,omitempty"`
	LeaseUntilNS int64      `dynamodbav:"lease_until_ns"`
	ExpiresAtNS  int64      `dynamodbav:"expires_at_ns"`
	ExpiresAt    int64      `dynamodbav:"expires_at"`
}

type runExtItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	Changes   []byte `dynamodbav:"changes"`
	ExpiresAt int64  `dynamodbav:"expires_at"`
}

type jobItem struct {
	PK            string            `dynamodbav:"pk"`
	SK            string            `dynamodbav:"sk"`
	KeyID         string            `dynamodbav:"key_id"`
	KeyPrefix     string            `dynamodbav:"key_prefix"`
	KeyHash       string            `dynamodbav:"key_hash"`
	RequestID     string            `dynamodbav:"request_id"`
	Platform      string            `dynamodbav:"platform"`
	Endpoint      string            `dynamodbav:"endpoint"`
	Params        map[string]string `dynamodbav:"params,omitempty"`
	Cost          int64             `dynamodbav:"cost"`
	State         string            `dynamodbav:"state"`
	ProgressDone  int               `dynamodbav:"progress_done"`
	ProgressTotal int               `dynamodbav:"progress_total"`
	Attempts      int               `dynamodbav:"attempts"`
	HTTPStatus    int               `dynamodbav:"http_status,omitempty"`
	Result        []byte            `dynamodbav:"result,omitempty"`
	Billed        bool              `dynamodbav:"billed"`
	CreatedAt     time.Time         `dynamodbav:"created_at"`
	StartedAt     *time.Time        `dynamodbav:"started_at,omitempty"`
	FinishedAt    *time.Time        `dynamodbav:"finished_at,omitempty"`
	LeaseUntilNS  int64             `dynamodbav:"lease_until_ns"`
	ExpiresAtNS   int64             `dynamodbav:"expires_at_ns"`
	ExpiresAt     int64             `dynamodbav:"expires_at"`
}

func (it jobItem) job() (store.Job, error) {
	result, err := unpack(it.Result)
	if err != nil {
		return store.Job{}, err
	}
	return store.Job{
		ID: strings.TrimPrefix(it.SK, pfxJob), AccountID: strings.TrimPrefix(it.PK, pfxAccount), KeyID: it.KeyID,
		KeyPrefix: it.KeyPrefix, KeyHash: it.KeyHash, RequestID: it.RequestID, Platform: it.Platform,
		Endpoint: it.Endpoint, Params: it.Params, Cost: it.Cost, State: it.State, ProgressDone: it.ProgressDone,
		ProgressTotal: it.ProgressTotal, Attempts: it.Attempts, Status: it.HTTPStatus, Result: result,
		Billed: it.Billed, CreatedAt: it.CreatedAt, StartedAt: it.StartedAt, FinishedAt: it.FinishedAt,
		LeaseUntil: fromNS(it.LeaseUntilNS), ExpiresAt: fromNS(it.ExpiresAtNS),
	}, nil
}

// ns is t as Unix nanoseconds; the zero time is 0.
func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// ttl is the TTL attribute for a record that expires at t: Unix seconds,
// rounded up, so DynamoDB never deletes it before t.
func ttl(t time.Time) int64 { return t.Unix() + 1 }

// pack gzips a document; nil stays nil (the attribute is left out).
func pack(doc []byte) ([]byte, error) {
	if doc == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	w := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(doc); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gzipWriters are reused: a new writer allocates its whole compressor,
// far more than the documents and cache entries it packs.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// unpack reads what pack wrote.
func unpack(b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("dynamostore: document: %w", err)
	}
	doc, err := io.ReadAll(io.LimitReader(r, store.MaxDocumentBytes+1))
	if err != nil {
		return nil, fmt.Errorf("dynamostore: document: %w", err)
	}
	return doc, nil
}

func binary(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }

// names aliases attribute names for hand-written expressions (#name ->
// name), so reserved words (state, status, data, result...) are safe.
func names(attrs ...string) map[string]string {
	m := make(map[string]string, len(attrs))
	for _, a := range attrs {
		m["#"+a] = a
	}
	return m
}

// CreateMonitor counts the monitor on the account item (monitors <
// MaxMonitors, then +1) and puts it, in one transaction.
func (s *Store) CreateMonitor(ctx context.Context, m store.Monitor) (store.Monitor, error) {
	if store.BadID(m.ID) || store.BadID(m.AccountID) || m.KeyID == "" || (m.State != store.MonitorActive && m.State != store.MonitorPaused) {
		return store.Monitor{}, store.ErrInvalid
	}
	av, err := marshal(newMonitorItem(m, 0))
	if err != nil {
		return store.Monitor{}, err
	}
	pk := accountPK(m.AccountID)
	items := []types.TransactWriteItem{
		update(s, pk, skAccount, "attribute_exists(pk) AND (attribute_not_exists(#monitors) OR #monitors < :max)",
			"ADD #monitors :one", names(attrMonitors), vals{":max": num(store.MaxMonitors), ":one": num(1)}),
		putNew(s, av),
	}
	for attempt := 0; ; attempt++ {
		c, err := s.transact(ctx, items)
		if err != nil {
			return store.Monitor{}, err
		}
		if c == nil {
			return m, nil
		}
		if bad, old := c.failed(0); bad {
			if old == nil {
				return store.Monitor{}, store.ErrNotFound
			}
			return store.Monitor{}, store.ErrTooManyMonitors
		}
		if bad, _ := c.failed(1); bad {
			return store.Monitor{}, fmt.Errorf("%w: monitor id %s is taken", store.ErrInvalid, m.ID)
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Monitor{}, err
		}
	}
}

func (s *Store) Monitor(ctx context.Context, accountID, id string) (store.Monitor, error) {
	it, err := get[monitorItem](ctx, s, accountPK(accountID), pfxMonitor+id)
	if err != nil {
		return store.Monitor{}, err
	}
	if it == nil {
		return store.Monitor{}, store.ErrNotFound
	}
	return it.monitor(), nil
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

func appendMonitors(out []store.Monitor, items []map[string]types.AttributeValue) ([]store.Monitor, error) {
	var got []monitorItem
	if err := attributevalue.UnmarshalListOfMaps(items, &got); err != nil {
		return nil, fmt.Errorf("dynamostore: monitors: %w", err)
	}
	for _, it := range got {
		out = append(out, it.monitor())
	}
	return out, nil
}

// ListMonitors is a consistent Query of the account's mon# items.
func (s *Store) ListMonitors(ctx context.Context, accountID string) ([]store.Monitor, error) {
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName:                 s.table,
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :mon)"),
		ExpressionAttributeValues: vals{":pk": str(accountPK(accountID)), ":mon": str(pfxMonitor)},
	})
	out := []store.Monitor{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: list monitors: %w", err)
		}
		if out, err = appendMonitors(out, page.Items); err != nil {
			return nil, err
		}
	}
	sortMonitors(out)
	return out, nil
}

// AllMonitors is a consistent Scan of the whole table filtered to the
// mon# items: only the local scheduler calls it, once when it starts, so
// it does not earn an index.
func (s *Store) AllMonitors(ctx context.Context) ([]store.Monitor, error) {
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
		TableName:                 s.table,
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("begins_with(sk, :mon) AND begins_with(pk, :acct)"),
		ExpressionAttributeValues: vals{":mon": str(pfxMonitor), ":acct": str(pfxAccount)},
	})
	out := []store.Monitor{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: all monitors: %w", err)
		}
		if out, err = appendMonitors(out, page.Items); err != nil {
			return nil, err
		}
	}
	sortMonitors(out)
	return out, nil
}

// SetMonitorState is one UpdateItem (version +1, so a CompleteRun that
// read the monitor before it retries from the new state).
func (s *Store) SetMonitorState(ctx context.Context, accountID, id, state, reason, message string, now time.Time) (store.Monitor, error) {
	in := &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 itemKey(accountPK(accountID), pfxMonitor+id),
		ConditionExpression:                 aws.String("attribute_exists(pk)"),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	switch {
	case state == store.MonitorPaused && reason != "":
		in.UpdateExpression = aws.String("SET #state = :state, #paused_reason = :reason, #paused_message = :message, " +
			"#updated_at = :now ADD #version :one")
		in.ExpressionAttributeNames = names("state", "paused_reason", "paused_message", "updated_at", "version")
		in.ExpressionAttributeValues = vals{":state": str(state), ":reason": str(reason), ":message": str(message),
			":now": timeAV(now), ":one": num(1)}
	case state == store.MonitorActive:
		in.UpdateExpression = aws.String("SET #state = :state, #consecutive_failures = :zero, #updated_at = :now " +
			"REMOVE #paused_reason, #paused_message ADD #version :one")
		in.ExpressionAttributeNames = names("state", "consecutive_failures", "updated_at", "paused_reason", "paused_message", "version")
		in.ExpressionAttributeValues = vals{":state": str(state), ":zero": num(0), ":now": timeAV(now), ":one": num(1)}
	default:
		return store.Monitor{}, store.ErrInvalid
	}
	for attempt := 0; ; attempt++ {
		out, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			it, err := decode[monitorItem](out.Attributes)
			if err != nil || it == nil {
				return store.Monitor{}, fmt.Errorf("dynamostore: set monitor state: no item returned (%v)", err)
			}
			return it.monitor(), nil
		}
		if bad, _ := condFailed(err); bad {
			return store.Monitor{}, store.ErrNotFound
		}
		if !conflict(err) {
			return store.Monitor{}, fmt.Errorf("dynamostore: set monitor state: %w", err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Monitor{}, err
		}
	}
}

// DeleteMonitor deletes the monitor and uncounts it on the account item
// in one transaction. Its runs stay until their TTL.
func (s *Store) DeleteMonitor(ctx context.Context, accountID, id string) error {
	pk := accountPK(accountID)
	items := []types.TransactWriteItem{
		{Delete: &types.Delete{
			TableName:           s.table,
			Key:                 itemKey(pk, pfxMonitor+id),
			ConditionExpression: aws.String("attribute_exists(pk)"),
		}},
		update(s, pk, skAccount, "attribute_exists(pk)", "ADD #monitors :minus", names(attrMonitors), vals{":minus": num(-1)}),
	}
	for attempt := 0; ; attempt++ {
		c, err := s.transact(ctx, items)
		if err != nil {
			return err
		}
		if c == nil {
			return nil
		}
		if bad, _ := c.failed(0); bad {
			return store.ErrNotFound
		}
		if bad, _ := c.failed(1); bad {
			return fmt.Errorf("dynamostore: monitor %s of a missing account %s", id, accountID)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

func runSK(monitorID, runID string) string    { return pfxRun + monitorID + "#" + runID }
func runExtSK(monitorID, runID string) string { return pfxRunExt + monitorID + "#" + runID }

// run is the item as a store.MonitorRun; changes kept in the run changes
// item are read from it.
func (s *Store) run(ctx context.Context, it *runItem) (store.MonitorRun, error) {
	var ext []byte
	if it.ChangesExt {
		monitorID, runID, _ := strings.Cut(strings.TrimPrefix(it.SK, pfxRun), "#")
		x, err := get[runExtItem](ctx, s, it.PK, runExtSK(monitorID, runID))
		if err != nil {
			return store.MonitorRun{}, err
		}
		if x == nil {
			return store.MonitorRun{}, fmt.Errorf("dynamostore: run %s %s: its changes item is missing", it.PK, it.SK)
		}
		ext = x.Changes
	}
	return it.decoded(ext)
}

// decoded is the item as a store.MonitorRun, with ext as its changes when
// they are kept apart.
func (it *runItem) decoded(ext []byte) (store.MonitorRun, error) {
	monitorID, runID, _ := strings.Cut(strings.TrimPrefix(it.SK, pfxRun), "#")
	changes := it.Changes
	if it.ChangesExt {
		changes = ext
	}
	data, err := unpack(it.Data)
	if err != nil {
		return store.MonitorRun{}, err
	}
	if changes, err = unpack(changes); err != nil {
		return store.MonitorRun{}, err
	}
	return store.MonitorRun{
		ID: runID, MonitorID: monitorID, AccountID: strings.TrimPrefix(it.PK, pfxAccount), ScheduledAt: it.ScheduledAt,
		Claim: it.Claim, Attempt: it.Attempt, Status: it.Status, HTTPStatus: it.HTTPStatus, RequestID: it.RequestID,
		CreditsUsed: it.CreditsUsed, ErrorType: it.ErrorType, ErrorMessage: it.ErrorMessage, Data: data, Changes: changes,
		StartedAt: it.StartedAt, FinishedAt: it.FinishedAt, LeaseUntil: fromNS(it.LeaseUntilNS), ExpiresAt: fromNS(it.ExpiresAtNS),
	}, nil
}

// ClaimRun is a conditional PutItem (attribute_not_exists): the first
// claim stores the run. A refusal carries the stored run (ALL_OLD); when
// it is running under a lease that ended, one conditional UpdateItem
// (the old claim, still running, lease ended) takes it over, keeping its
// StartedAt and ExpiresAt.
func (s *Store) ClaimRun(ctx context.Context, r store.MonitorRun, now time.Time) (store.MonitorRun, bool, error) {
	if r.ID != store.RunID(r.ScheduledAt) || store.BadID(r.MonitorID) || store.BadID(r.AccountID) || r.Claim == "" || r.StartedAt.IsZero() ||
		!r.LeaseUntil.After(now) {
		return store.MonitorRun{}, false, store.ErrInvalid
	}
	expires := r.StartedAt.Add(store.MonitorRunTTL)
	it := runItem{
		PK: accountPK(r.AccountID), SK: runSK(r.MonitorID, r.ID), ScheduledAt: r.ScheduledAt, Claim: r.Claim, Attempt: 1,
		Status: store.RunRunning, RequestID: r.RequestID, StartedAt: r.StartedAt, LeaseUntilNS: ns(r.LeaseUntil),
		ExpiresAtNS: ns(expires), ExpiresAt: ttl(expires),
	}
	av, err := marshal(it)
	if err != nil {
		return store.MonitorRun{}, false, err
	}
	for attempt := 0; ; attempt++ {
		_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: s.table, Item: av, ConditionExpression: aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			run, err := it.decoded(nil)
			return run, true, err
		}
		bad, old := condFailed(err)
		if !bad {
			if !conflict(err) && !throttled(err) {
				return store.MonitorRun{}, false, fmt.Errorf("dynamostore: claim run: %w", err)
			}
			if err := backoff(ctx, attempt); err != nil {
				return store.MonitorRun{}, false, err
			}
			continue
		}
		held, err := decode[runItem](old)
		if err == nil && held == nil {
			held, err = get[runItem](ctx, s, it.PK, it.SK) // the refusal carried no item
		}
		if err != nil {
			return store.MonitorRun{}, false, err
		}
		if held == nil {
			continue // gone meanwhile (TTL): claim it afresh
		}
		if held.Status != store.RunRunning || held.LeaseUntilNS > now.UnixNano() {
			run, err := s.run(ctx, held)
			return run, false, err
		}
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           s.table,
			Key:                 itemKey(it.PK, it.SK),
			ConditionExpression: aws.String("#claim = :old AND #status = :running AND #lease_until_ns <= :now"),
			UpdateExpression: aws.String("SET #claim = :claim, #request_id = :rid, #lease_until_ns = :lease " +
				"ADD #attempt :one"),
			ExpressionAttributeNames: names("claim", "status", "lease_until_ns", "request_id", "attempt"),
			ExpressionAttributeValues: vals{":old": str(held.Claim), ":running": str(store.RunRunning),
				":now": num(now.UnixNano()), ":claim": str(r.Claim), ":rid": str(r.RequestID),
				":lease": num(ns(r.LeaseUntil)), ":one": num(1)},
			ReturnValues: types.ReturnValueAllNew,
		})
		if err == nil {
			taken, err := decode[runItem](out.Attributes)
			if err != nil || taken == nil {
				return store.MonitorRun{}, false, fmt.Errorf("dynamostore: claim run: no item returned (%v)", err)
			}
			run, err := s.run(ctx, taken)
			return run, true, err
		}
		if bad, _ := condFailed(err); !bad && !conflict(err) && !throttled(err) {
			return store.MonitorRun{}, false, fmt.Errorf("dynamostore: take over run: %w", err)
		}
		// Another attempt took it over first, or it finished: look again.
		if err := backoff(ctx, attempt); err != nil {
			return store.MonitorRun{}, false, err
		}
	}
}

// runWrites are the writes that finish run r: an UpdateItem of the run
// conditioned on r.Claim still holding it while it runs, and, when its
// compressed changes do not fit beside its data, a PutItem of the run
// changes item.
func (s *Store) runWrites(r store.MonitorRun, finished time.Time) ([]types.TransactWriteItem, error) {
	data, err := pack(r.Data)
	if err != nil {
		return nil, err
	}
	changes, err := pack(r.Changes)
	if err != nil {
		return nil, err
	}
	pk, sk := accountPK(r.AccountID), runSK(r.MonitorID, r.ID)
	set := []string{"#status = :status", "#finished_at = :finished"}
	n := names("claim", "status", "finished_at")
	v := vals{":claim": str(r.Claim), ":running": str(store.RunRunning), ":status": str(r.Status), ":finished": timeAV(finished)}
	add := func(attr string, av types.AttributeValue) {
		set = append(set, "#"+attr+" = :"+attr)
		n["#"+attr], v[":"+attr] = attr, av
	}
	if r.RequestID != "" {
		add("request_id", str(r.RequestID)) // the call's, known once it ran
	}
	if r.HTTPStatus != 0 {
		add("http_status", num(int64(r.HTTPStatus)))
	}
	if r.CreditsUsed != nil {
		add("credits_used", num(*r.CreditsUsed))
	}
	if r.ErrorType != "" {
		add("error_type", str(r.ErrorType))
	}
	if r.ErrorMessage != "" {
		add("error_message", str(r.ErrorMessage))
	}
	if data != nil {
		add("data", binary(data))
	}
	var ext *types.TransactWriteItem
	if changes != nil {
		if len(data)+len(changes) <= runDocBudget {
			add("changes", binary(changes))
		} else {
			add("changes_ext", &types.AttributeValueMemberBOOL{Value: true})
			item, err := marshal(runExtItem{PK: pk, SK: runExtSK(r.MonitorID, r.ID), Changes: changes,
				ExpiresAt: ttl(finished.Add(store.MonitorRunTTL))})
			if err != nil {
				return nil, err
			}
			ext = &types.TransactWriteItem{Put: &types.Put{TableName: s.table, Item: item}}
		}
	}
	items := []types.TransactWriteItem{
		update(s, pk, sk, "#claim = :claim AND #status = :running", "SET "+strings.Join(set, ", "), n, v),
	}
	if ext != nil {
		items = append(items, *ext)
	}
	return items, nil
}

// CompleteRun reads the monitor, then writes the finished run and the
// monitor as it follows from it in one TransactWriteItems: the run
// conditioned on its claim (see runWrites), the monitor put whole,
// conditioned on the version read. A monitor changed meanwhile is read
// again from the cancellation (ALL_OLD) and the transaction retried; a
// monitor gone has the run written alone and ErrNotFound returned.
func (s *Store) CompleteRun(ctx context.Context, r store.MonitorRun, pauseAfter int, pauseReason, pauseMessage string) (store.Monitor, error) {
	if !store.RunFinished(r.Status) || r.Claim == "" || r.ID == "" || store.BadID(r.MonitorID) || store.BadID(r.AccountID) {
		return store.Monitor{}, store.ErrInvalid
	}
	if err := store.CheckDocuments(r.Data, r.Changes); err != nil {
		return store.Monitor{}, err
	}
	finished := s.now()
	if r.FinishedAt != nil {
		finished = *r.FinishedAt
	}
	writes, err := s.runWrites(r, finished)
	if err != nil {
		return store.Monitor{}, err
	}
	pk := accountPK(r.AccountID)
	mi, err := get[monitorItem](ctx, s, pk, pfxMonitor+r.MonitorID)
	if err != nil {
		return store.Monitor{}, err
	}
	for attempt := 0; mi != nil; attempt++ {
		m := mi.monitor().AfterRun(r, finished, pauseAfter, pauseReason, pauseMessage)
		av, err := marshal(newMonitorItem(m, mi.Version+1))
		if err != nil {
			return store.Monitor{}, err
		}
		put := types.TransactWriteItem{Put: &types.Put{
			TableName:                           s.table,
			Item:                                av,
			ConditionExpression:                 aws.String("#version = :version"),
			ExpressionAttributeNames:            names("version"),
			ExpressionAttributeValues:           vals{":version": num(mi.Version)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
		c, err := s.transact(ctx, append(append([]types.TransactWriteItem{}, writes...), put))
		if err != nil {
			return store.Monitor{}, err
		}
		if c == nil {
			return m, nil
		}
		if bad, _ := c.failed(0); bad {
			return store.Monitor{}, store.ErrNotClaimed
		}
		if bad, old := c.failed(len(writes)); bad {
			if mi, err = decode[monitorItem](old); err != nil {
				return store.Monitor{}, err
			}
			continue // changed meanwhile (or gone: mi is nil)
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Monitor{}, err
		}
	}
	// The monitor is gone: the run is still written, alone.
	for attempt := 0; ; attempt++ {
		c, err := s.transact(ctx, writes)
		if err != nil {
			return store.Monitor{}, err
		}
		if c == nil {
			return store.Monitor{}, store.ErrNotFound
		}
		if bad, _ := c.failed(0); bad {
			return store.Monitor{}, store.ErrNotClaimed
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Monitor{}, err
		}
	}
}

func (s *Store) Run(ctx context.Context, accountID, monitorID, runID string, now time.Time) (store.MonitorRun, error) {
	if store.BadID(monitorID) {
		return store.MonitorRun{}, store.ErrNotFound
	}
	it, err := get[runItem](ctx, s, accountPK(accountID), runSK(monitorID, runID))
	if err != nil {
		return store.MonitorRun{}, err
	}
	if it == nil || it.ExpiresAtNS <= now.UnixNano() {
		return store.MonitorRun{}, store.ErrNotFound
	}
	return s.run(ctx, it)
}

// The runs cursor is base64url("v1|<account id>|<sort key of the last run
// returned>"), bound to the account and monitor it was issued for.
func decodeRunCursor(accountID, monitorID, cursor string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return "", store.ErrBadCursor
	}
	sk, ok := strings.CutPrefix(string(raw), cursorVersion+accountID+"|")
	prefix := runSK(monitorID, "")
	if !ok || !strings.HasPrefix(sk, prefix) || len(sk) == len(prefix) || len(sk) > 1024 {
		return "", store.ErrBadCursor
	}
	return sk, nil
}

// Runs is a consistent Query of begins_with(sk, "run#<monitor id>#"),
// newest first, filtering out runs expired by now; the run changes items
// of the page, if any, come with one BatchGetItem.
func (s *Store) Runs(ctx context.Context, accountID, monitorID string, q store.RunQuery, now time.Time) (store.RunPage, error) {
	limit := q.Size()
	if store.BadID(monitorID) { // no such monitor can hold runs
		if q.Cursor != "" {
			return store.RunPage{}, store.ErrBadCursor
		}
		return store.RunPage{Runs: []store.MonitorRun{}}, nil
	}
	pk := accountPK(accountID)
	var start map[string]types.AttributeValue
	if q.Cursor != "" {
		sk, err := decodeRunCursor(accountID, monitorID, q.Cursor)
		if err != nil {
			return store.RunPage{}, err
		}
		start = itemKey(pk, sk)
	}
	// One run more than the page tells whether another page follows.
	var items []runItem
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                s.table,
			KeyConditionExpression:   aws.String("pk = :pk AND begins_with(sk, :prefix)"),
			FilterExpression:         aws.String("#expires_at_ns > :now"),
			ExpressionAttributeNames: names("expires_at_ns"),
			ExpressionAttributeValues: vals{":pk": str(pk), ":prefix": str(runSK(monitorID, "")),
				":now": num(now.UnixNano())},
			ScanIndexForward:  aws.Bool(false),
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
			Limit:             aws.Int32(int32(limit + 1)),
		})
		if err != nil {
			return store.RunPage{}, fmt.Errorf("dynamostore: runs: %w", err)
		}
		var got []runItem
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &got); err != nil {
			return store.RunPage{}, fmt.Errorf("dynamostore: runs: %w", err)
		}
		items = append(items, got...)
		if len(items) > limit || len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	page := store.RunPage{Runs: make([]store.MonitorRun, 0, min(len(items), limit))}
	if len(items) > limit {
		items = items[:limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + accountID + "|" + items[limit-1].SK))
	}
	var refs [][2]string
	for _, it := range items {
		if it.ChangesExt {
			monitorID, runID, _ := strings.Cut(strings.TrimPrefix(it.SK, pfxRun), "#")
			refs = append(refs, ref(pk, runExtSK(monitorID, runID)))
		}
	}
	var ext map[string]map[string]types.AttributeValue
	for from := 0; from < len(refs); from += 100 {
		found, err := s.getMany(ctx, refs[from:min(from+100, len(refs))]...)
		if err != nil {
			return store.RunPage{}, err
		}
		if ext == nil {
			ext = found
		} else {
			for k, v := range found {
				ext[k] = v
			}
		}
	}
	for _, it := range items {
		var changes []byte
		if it.ChangesExt {
			monitorID, runID, _ := strings.Cut(strings.TrimPrefix(it.SK, pfxRun), "#")
			x, err := decode[runExtItem](ext[pk+"\x00"+runExtSK(monitorID, runID)])
			if err != nil {
				return store.RunPage{}, err
			}
			if x == nil {
				return store.RunPage{}, fmt.Errorf("dynamostore: run %s %s: its changes item is missing", it.PK, it.SK)
			}
			changes = x.Changes
		}
		run, err := it.decoded(changes)
		if err != nil {
			return store.RunPage{}, err
		}
		page.Runs = append(page.Runs, run)
	}
	return page, nil
}

var _ store.Monitors = (*Store)(nil)

// jobUpdate is an UpdateItem of a job that returns the job after it
// (ALL_NEW), or as it was when the condition failed (ALL_OLD).
func (s *Store) jobUpdate(ctx context.Context, accountID, id, cond, upd string, n map[string]string, v vals) (*jobItem, bool, error) {
	in := &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 itemKey(accountPK(accountID), pfxJob+id),
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(upd),
		ExpressionAttributeNames:            n,
		ExpressionAttributeValues:           v,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	for attempt := 0; ; attempt++ {
		out, err := s.db.UpdateItem(ctx, in)
		if err == nil {
			j, err := decode[jobItem](out.Attributes)
			if err == nil && j == nil {
				err = errors.New("no item returned")
			}
			if err != nil {
				return nil, false, fmt.Errorf("dynamostore: job %s: %w", id, err)
			}
			return j, true, nil
		}
		if bad, old := condFailed(err); bad {
			j, err := decode[jobItem](old)
			return j, false, err
		}
		if !conflict(err) && !throttled(err) {
			return nil, false, fmt.Errorf("dynamostore: job %s: %w", id, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, false, err
		}
	}
}

// CreateJob is a conditional PutItem (attribute_not_exists). A job
// without ExpiresAt keeps JobTTL from its CreatedAt.
func (s *Store) CreateJob(ctx context.Context, j store.Job) error {
	if err := store.PrepareJob(&j, s.now()); err != nil {
		return err
	}
	result, err := pack(j.Result)
	if err != nil {
		return err
	}
	item, err := marshal(jobItem{
		PK: accountPK(j.AccountID), SK: pfxJob + j.ID, KeyID: j.KeyID, KeyPrefix: j.KeyPrefix, KeyHash: j.KeyHash,
		RequestID: j.RequestID, Platform: j.Platform, Endpoint: j.Endpoint, Params: j.Params, Cost: j.Cost,
		State: store.JobQueued, ProgressDone: j.ProgressDone, ProgressTotal: j.ProgressTotal, HTTPStatus: j.Status,
		Result: result, CreatedAt: j.CreatedAt, LeaseUntilNS: ns(j.LeaseUntil), ExpiresAtNS: ns(j.ExpiresAt),
		ExpiresAt: ttl(j.ExpiresAt),
	})
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if bad, _ := condFailed(err); bad {
		return store.ErrJobExists
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create job: %w", err)
	}
	return nil
}

func (s *Store) Job(ctx context.Context, accountID, id string, now time.Time) (store.Job, error) {
	it, err := get[jobItem](ctx, s, accountPK(accountID), pfxJob+id)
	if err != nil {
		return store.Job{}, err
	}
	if it == nil || it.ExpiresAtNS <= now.UnixNano() {
		return store.Job{}, store.ErrNotFound
	}
	return it.job()
}

// StartJob is one conditional UpdateItem: live, and queued or running
// under a lease that ended.
func (s *Store) StartJob(ctx context.Context, accountID, id string, now, leaseUntil time.Time) (store.Job, bool, error) {
	it, started, err := s.jobUpdate(ctx, accountID, id,
		"attribute_exists(pk) AND #expires_at_ns > :now AND (#state = :queued OR (#state = :running AND #lease_until_ns <= :now))",
		"SET #state = :running, #lease_until_ns = :lease, #started_at = if_not_exists(#started_at, :at) ADD #attempts :one",
		names("expires_at_ns", "state", "lease_until_ns", "started_at", "attempts"),
		vals{":now": num(now.UnixNano()), ":queued": str(store.JobQueued), ":running": str(store.JobRunning),
			":lease": num(ns(leaseUntil)), ":at": timeAV(now), ":one": num(1)})
	if err != nil {
		return store.Job{}, false, err
	}
	if it == nil || it.ExpiresAtNS <= now.UnixNano() {
		return store.Job{}, false, store.ErrNotFound
	}
	j, err := it.job()
	return j, started, err
}

// JobProgress is one UpdateItem conditioned on the job running.
func (s *Store) JobProgress(ctx context.Context, accountID, id string, done, total int) error {
	it, _, err := s.jobUpdate(ctx, accountID, id, "#state = :running",
		"SET #progress_done = :done, #progress_total = :total", names("state", "progress_done", "progress_total"),
		vals{":running": str(store.JobRunning), ":done": num(int64(done)), ":total": num(int64(total))})
	if err != nil {
		return err
	}
	if it == nil || it.ExpiresAtNS <= s.now().UnixNano() {
		return store.ErrNotFound
	}
	return nil
}

// FinishJob is one UpdateItem conditioned on the job being live and not
// finished; a refusal carries the stored job (ALL_OLD), the first
// outcome.
func (s *Store) FinishJob(ctx context.Context, accountID, id, state string, status int, result []byte, now time.Time) (store.Job, error) {
	if !store.JobFinished(state) {
		return store.Job{}, store.ErrInvalid
	}
	if err := store.CheckDocuments(result); err != nil {
		return store.Job{}, err
	}
	packed, err := pack(result)
	if err != nil {
		return store.Job{}, err
	}
	upd := "SET #state = :state, #http_status = :status, #finished_at = :at"
	n := names("expires_at_ns", "state", "http_status", "finished_at")
	v := vals{":now": num(now.UnixNano()), ":queued": str(store.JobQueued), ":running": str(store.JobRunning),
		":state": str(state), ":status": num(int64(status)), ":at": timeAV(now)}
	if packed != nil {
		upd += ", #result = :result"
		n["#result"], v[":result"] = "result", binary(packed)
	} else {
		upd += " REMOVE #result"
		n["#result"] = "result"
	}
	it, _, err := s.jobUpdate(ctx, accountID, id,
		"attribute_exists(pk) AND #expires_at_ns > :now AND (#state = :queued OR #state = :running)", upd, n, v)
	if err != nil {
		return store.Job{}, err
	}
	if it == nil || it.ExpiresAtNS <= now.UnixNano() {
		return store.Job{}, store.ErrNotFound
	}
	return it.job()
}

// MarkJobBilled is one UpdateItem on the job.
func (s *Store) MarkJobBilled(ctx context.Context, accountID, id string, replaced *store.JobOutcome) error {
	upd := "SET #billed = :true"
	n := names("billed")
	v := vals{":true": &types.AttributeValueMemberBOOL{Value: true}, ":now": num(s.now().UnixNano())}
	if replaced != nil {
		if err := store.CheckOutcome(*replaced); err != nil {
			return err
		}
		upd += ", #state = :state, #http_status = :status"
		n["#state"], n["#http_status"] = "state", "http_status"
		v[":state"], v[":status"] = str(replaced.State), num(int64(replaced.Status))
		if replaced.Result != nil {
			packed, err := pack(replaced.Result)
			if err != nil {
				return err
			}
			upd += ", #result = :result"
			n["#result"], v[":result"] = "result", binary(packed)
		} else {
			upd += " REMOVE #result"
			n["#result"] = "result"
		}
	}
	n["#expires_at_ns"] = "expires_at_ns"
	_, ok, err := s.jobUpdate(ctx, accountID, id, "attribute_exists(pk) AND #expires_at_ns > :now", upd, n, v)
	if err != nil {
		return err
	}
	if !ok {
		return store.ErrNotFound // absent or expired
	}
	return nil
}

var _ store.Jobs = (*Store)(nil)
