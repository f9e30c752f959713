// Package awsscheduler is monitors.Scheduler on Amazon EventBridge
// Scheduler: one schedule per monitor, named by the monitor's id, in one
// schedule group, invoking the worker function with the monitor's run
// request every IntervalMinutes.
//
// Each schedule's input is the JSON of a monitors.Invocation whose
// scheduled_at is the context attribute <aws.scheduler.scheduled-time>,
// which EventBridge Scheduler replaces on every invocation with the time
// the invocation was scheduled for, in UTC to the second
// ("2022-03-22T18:59:43Z", RFC 3339). Inside the JSON string that is what
// time.Time's UnmarshalJSON reads, so the worker decodes the input as a
// monitors.Invocation as it is. A retried invocation carries the same
// scheduled time, which names the same run (store.RunID): a retry never
// runs or charges twice.
//
// The placeholder's angle brackets are written as they are: encoding/json
// would escape them (\u003c), and EventBridge Scheduler would then find no
// keyword to replace.
package awsscheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/store"
)

// API is the part of the EventBridge Scheduler client the Scheduler uses
// (*scheduler.Client implements it).
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

var _ API = (*scheduler.Client)(nil)

// Retry policy of every schedule's target. EventBridge Scheduler invokes
// a Lambda function asynchronously: its retries cover invocations Lambda
// did not accept (throttled, unavailable); a run that fails inside the
// worker is retried by Lambda's asynchronous invocation (twice, by
// default), not by the schedule. A run is idempotent by its scheduled
// time, so every retry is safe.
const (
	// MaxRetryAttempts bounds the retries of one invocation.
	MaxRetryAttempts = 3
	// MinEventAge and MaxEventAge bound how long EventBridge Scheduler
	// keeps retrying one invocation (its API accepts 60 to 86,400 s). The
	// age is one interval, so a retry never runs after the next scheduled
	// run has started.
	MinEventAge = 60
	MaxEventAge = 86400
)

// MaxNameLength is the longest schedule name EventBridge Scheduler accepts.
const MaxNameLength = 64

var namePattern = regexp.MustCompile(`^[0-9A-Za-z_.-]{1,64}$`)

// Scheduler keeps the monitors' schedules in one schedule group.
type Scheduler struct {
	client    API
	group     string
	roleARN   string
	targetARN string
}

var _ monitors.Scheduler = (*Scheduler)(nil)

// New returns a Scheduler that keeps schedules in group, each invoking
// targetARN (the worker function) with the role roleARN, which
// EventBridge Scheduler assumes.
func New(client API, group, roleARN, targetARN string) *Scheduler {
	return &Scheduler{client: client, group: group, roleARN: roleARN, targetARN: targetARN}
}

// NewFromEnv returns a Scheduler configured by MERIDIAN_SCHEDULER_GROUP,
// MERIDIAN_SCHEDULER_ROLE_ARN and MERIDIAN_SCHEDULER_TARGET_ARN, with a
// client configured the standard AWS way (environment, shared config,
// Lambda role; AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_SCHEDULER are
// honoured). It returns nil and no error when the group is unset:
// monitors are then not scheduled in AWS. A group without the role or
// the target is an error.
func NewFromEnv(ctx context.Context) (*Scheduler, error) {
	group := strings.TrimSpace(os.Getenv(monitors.EnvSchedulerGroup))
	if group == "" {
		return nil, nil
	}
	role := strings.TrimSpace(os.Getenv(monitors.EnvSchedulerRoleARN))
	target := strings.TrimSpace(os.Getenv(monitors.EnvSchedulerTargetARN))
	var missing []string
	if role == "" {
		missing = append(missing, monitors.EnvSchedulerRoleARN)
	}
	if target == "" {
		missing = append(missing, monitors.EnvSchedulerTargetARN)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("awsscheduler: %s is set but %s is not", monitors.EnvSchedulerGroup, strings.Join(missing, " and "))
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("awsscheduler: load AWS config: %w", err)
	}
	return New(scheduler.NewFromConfig(cfg), group, role, target), nil
}

// Group is the schedule group.
func (s *Scheduler) Group() string { return s.group }

// Schedule creates or replaces the monitor's schedule. It updates the
// schedule and creates it when there is none; a create that finds the
// schedule made meanwhile updates it again. Calling it twice with the
// same monitor leaves the same schedule.
func (s *Scheduler) Schedule(ctx context.Context, m store.Monitor) error {
	in, err := s.input(m)
	if err != nil {
		return err
	}
	if err := s.update(ctx, in); err == nil || !isNotFound(err) {
		return err
	}
	_, err = s.client.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:                  in.Name,
		GroupName:             in.GroupName,
		Description:           in.Description,
		ScheduleExpression:    in.ScheduleExpression,
		FlexibleTimeWindow:    in.FlexibleTimeWindow,
		State:                 in.State,
		Target:                in.Target,
		ActionAfterCompletion: in.ActionAfterCompletion,
	})
	var conflict *types.ConflictException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &conflict): // created meanwhile: replace it with ours
		return s.update(ctx, in)
	}
	return fmt.Errorf("awsscheduler: create schedule %s/%s: %w", s.group, m.ID, err)
}

func (s *Scheduler) update(ctx context.Context, in *scheduler.UpdateScheduleInput) error {
	if _, err := s.client.UpdateSchedule(ctx, in); err != nil {
		return fmt.Errorf("awsscheduler: update schedule %s/%s: %w", s.group, aws.ToString(in.Name), err)
	}
	return nil
}

// Unschedule deletes the monitor's schedule; one already gone is not an
// error.
func (s *Scheduler) Unschedule(ctx context.Context, m store.Monitor) error {
	if err := checkName(m.ID); err != nil {
		return err
	}
	_, err := s.client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{
		Name:      aws.String(m.ID),
		GroupName: aws.String(s.group),
	})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("awsscheduler: delete schedule %s/%s: %w", s.group, m.ID, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var nf *types.ResourceNotFoundException
	return errors.As(err, &nf)
}

// input is the complete schedule of m (UpdateSchedule replaces every
// field, so it carries all of them, as CreateSchedule does).
func (s *Scheduler) input(m store.Monitor) (*scheduler.UpdateScheduleInput, error) {
	if err := checkName(m.ID); err != nil {
		return nil, err
	}
	if m.AccountID == "" {
		return nil, fmt.Errorf("awsscheduler: monitor %s has no account", m.ID)
	}
	expr, err := Expression(m.IntervalMinutes)
	if err != nil {
		return nil, fmt.Errorf("awsscheduler: monitor %s: %w", m.ID, err)
	}
	var state types.ScheduleState
	switch m.State {
	case store.MonitorActive:
		state = types.ScheduleStateEnabled
	case store.MonitorPaused:
		state = types.ScheduleStateDisabled
	default:
		return nil, fmt.Errorf("awsscheduler: monitor %s has state %q", m.ID, m.State)
	}
	input, err := Input(m)
	if err != nil {
		return nil, err
	}
	return &scheduler.UpdateScheduleInput{
		Name:               aws.String(m.ID),
		GroupName:          aws.String(s.group),
		Description:        aws.String(description(m)),
		ScheduleExpression: aws.String(expr),
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		State:              state,
		Target: &types.Target{
			Arn:     aws.String(s.targetARN),
			RoleArn: aws.String(s.roleARN),
			Input:   aws.String(input),
			RetryPolicy: &types.RetryPolicy{
				MaximumRetryAttempts:     aws.Int32(MaxRetryAttempts),
				MaximumEventAgeInSeconds: aws.Int32(EventAge(m.IntervalMinutes)),
			},
		},
		ActionAfterCompletion: types.ActionAfterCompletionNone,
	}, nil
}

// description names the monitor's account and operation (never its name
// or parameters, which the caller wrote).
func description(m store.Monitor) string {
	d := "Meridian monitor " + m.ID + " of " + m.AccountID
	if m.Platform != "" {
		d += ": " + m.Platform + "/" + m.Endpoint
	}
	if len(d) > 512 {
		d = d[:512]
	}
	return d
}

func checkName(id string) error {
	if !namePattern.MatchString(id) {
		return fmt.Errorf("awsscheduler: monitor id %q is not a schedule name (1-%d of 0-9 A-Z a-z - _ .)", id, MaxNameLength)
	}
	return nil
}

// Expression is the rate expression of an interval in minutes: whole
// days and hours in those units, otherwise minutes, with the singular
// unit for 1 ("rate(1 minute)"), which EventBridge Scheduler requires.
func Expression(minutes int) (string, error) {
	if minutes < 1 {
		return "", fmt.Errorf("interval of %d minutes", minutes)
	}
	n, unit := minutes, "minute"
	switch {
	case minutes%(24*60) == 0:
		n, unit = minutes/(24*60), "day"
	case minutes%60 == 0:
		n, unit = minutes/60, "hour"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("rate(%d %s)", n, unit), nil
}

// EventAge is MaximumEventAgeInSeconds for an interval: one interval,
// within what the API accepts.
func EventAge(minutes int) int32 {
	return int32(min(max(minutes*60, MinEventAge), MaxEventAge))
}

// invocation is monitors.Invocation with scheduled_at as a string, so it
// can carry the placeholder.
type invocation struct {
	MonitorRun runRequest `json:"monitor_run"`
}

type runRequest struct {
	AccountID   string `json:"account_id"`
	MonitorID   string `json:"monitor_id"`
	ScheduledAt string `json:"scheduled_at"`
}

// Input is the schedule's input for m: the JSON of a monitors.Invocation
// whose scheduled_at is monitors.ScheduledTimePlaceholder, unescaped.
func Input(m store.Monitor) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep <aws.scheduler.scheduled-time> literal
	err := enc.Encode(invocation{MonitorRun: runRequest{
		AccountID: m.AccountID, MonitorID: m.ID, ScheduledAt: monitors.ScheduledTimePlaceholder,
	}})
	if err != nil {
		return "", fmt.Errorf("awsscheduler: input of monitor %s: %w", m.ID, err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
