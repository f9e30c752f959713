// Package monitors is the monitors feature: the account's monitors API
// (/v1/monitors…, Service), the runs their schedules deliver (each one
// call through the pipeline's Runner, pipeline.Run, with the monitor's
// key), the scheduler that keeps one schedule per monitor (EventBridge
// Scheduler in AWS, package awsscheduler; an in-process one locally) and
// the changes between two runs' data. It may touch the monitors' records
// and read keys; calls, billing and the cache are the pipeline's.
package monitors

import (
	"context"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// Environment variables of the functions that schedule monitors and queue
// web jobs (README, "Configuration"; infra sets them).
const (
	// EnvSchedulerGroup is the EventBridge Scheduler schedule group the
	// monitors' schedules live in; unset, monitors are not scheduled in AWS.
	EnvSchedulerGroup = "MERIDIAN_SCHEDULER_GROUP"
	// EnvSchedulerRoleARN is the role EventBridge Scheduler assumes to
	// invoke the target (it may invoke the worker and nothing else).
	EnvSchedulerRoleARN = "MERIDIAN_SCHEDULER_ROLE_ARN"
	// EnvSchedulerTargetARN is the function each schedule invokes (the worker).
	EnvSchedulerTargetARN = "MERIDIAN_SCHEDULER_TARGET_ARN"
)

// Scheduler keeps one schedule per monitor.
type Scheduler interface {
	// Schedule creates or replaces the monitor's schedule: a RunRequest
	// every IntervalMinutes, enabled while the monitor is active and
	// disabled while it is paused.
	Schedule(ctx context.Context, m store.Monitor) error
	// Unschedule deletes the monitor's schedule; one already gone is not
	// an error.
	Unschedule(ctx context.Context, m store.Monitor) error
}

// RunRequest is what a schedule delivers: the monitor and the time its run
// was scheduled for (the run's idempotency key).
type RunRequest struct {
	AccountID   string    `json:"account_id"`
	MonitorID   string    `json:"monitor_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
}

// Invocation is the worker function's input from a schedule. EventBridge
// Scheduler fills ScheduledAt from <aws.scheduler.scheduled-time>.
type Invocation struct {
	MonitorRun *RunRequest `json:"monitor_run"`
}

// ScheduledTimePlaceholder is the EventBridge Scheduler context attribute
// that the schedule's input carries as scheduled_at.
const ScheduledTimePlaceholder = "<aws.scheduler.scheduled-time>"
