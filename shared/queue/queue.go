// Package queue carries Meridian's asynchronous work (usage events and
// billing reconciliations) from the request path to the worker: SQS in AWS
// (package sqsqueue), an in-process queue for the local server.
package queue

import (
	"context"
	"fmt"
	"strings"
)

// Message is one queue message. ID is unique per message and stable
// across re-sends, so a consumer can tell a repeat from a new message.
type Message struct {
	ID   string
	Body []byte
	// Decoded is the value Body encodes, as its sender built it, or nil.
	// A queue in the same process may apply it without decoding Body;
	// every other queue carries Body alone.
	Decoded any
}

// Queue sends messages. Send is all-or-some: a *SendError names the
// messages that were not accepted (the others were); any other error
// means none may have been.
type Queue interface {
	Send(ctx context.Context, msgs []Message) error
}

// SendError lists the messages a queue did not accept.
type SendError struct {
	Failed []string // message IDs
	Cause  error
}

func (e *SendError) Error() string {
	return fmt.Sprintf("queue: %d messages not sent (%s): %v", len(e.Failed), strings.Join(first(e.Failed, 3), ", "), e.Cause)
}

func (e *SendError) Unwrap() error { return e.Cause }

func first(ids []string, n int) []string {
	if len(ids) > n {
		return ids[:n]
	}
	return ids
}
