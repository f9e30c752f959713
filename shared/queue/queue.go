// Package queue carries Meridian's asynchronous work (usage events,
// billing reconciliations and accepted web jobs) from the request path to
// the worker: SQS in AWS (package sqsqueue), in-process queues for the
// local server.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Message is one queue message. ID is unique per message and stable
// across re-sends, so a consumer can tell a repeat from a new message.
type Message struct {
	ID   string
	Body []byte
	// Decoded is the value the body encodes, as its sender built it, or
	// nil. A queue in the same process applies it without any encoding;
	// a sender may then leave Body nil, and whatever takes the message
	// out of the process reads Encoded.
	Decoded any
}

// Encoded is the message's body: Body, or else Decoded as JSON.
func (m Message) Encoded() []byte {
	if m.Body != nil || m.Decoded == nil {
		return m.Body
	}
	b, err := json.Marshal(m.Decoded)
	if err != nil {
		return nil // an empty body, which the worker refuses as poison
	}
	return b
}

// WithBodies is msgs with every Body filled in from Encoded; msgs itself
// is not changed.
func WithBodies(msgs []Message) []Message {
	var out []Message
	for i, m := range msgs {
		if m.Body == nil && m.Decoded != nil {
			if out == nil {
				out = slices.Clone(msgs)
			}
			out[i].Body = m.Encoded()
		}
	}
	if out == nil {
		return msgs
	}
	return out
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
