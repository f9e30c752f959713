// Package sqsqueue is queue.Queue on Amazon SQS (a standard queue).
//
// Send packs messages into SendMessageBatch calls of at most 10 entries
// and 256 KiB, several calls at a time, and reports what SQS did not
// accept as a *queue.SendError. Each message carries its queue.Message ID
// in the message attribute "meridian-id" (AttrID) so a consumer can tell
// a redelivery or a re-send from a new message: SQS delivers at least
// once, and a message whose send failed in transit may have arrived.
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/meridian-data/meridian/shared/queue"
)

// AttrID names the message attribute that holds queue.Message.ID.
const AttrID = "meridian-id"

// SQS limits for one SendMessageBatch call.
const (
	MaxBatchEntries = 10
	MaxBatchBytes   = 256 << 10 // bodies plus attribute names, types and values
)

// parallel bounds the SendMessageBatch calls one Send has in flight.
const parallel = 4

// Queue sends to one SQS queue.
type Queue struct {
	client   *sqs.Client
	queueURL string
}

var _ queue.Queue = (*Queue)(nil)

// New returns a Queue that sends to queueURL with client.
func New(client *sqs.Client, queueURL string) *Queue {
	return &Queue{client: client, queueURL: queueURL}
}

// NewClientFromEnv returns an SQS client configured the standard AWS way
// (environment, shared config, Lambda role). It honours AWS_ENDPOINT_URL
// and AWS_ENDPOINT_URL_SQS, so the same binary runs against an emulator.
func NewClientFromEnv(ctx context.Context) (*sqs.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: load AWS config: %w", err)
	}
	return sqs.NewFromConfig(cfg), nil
}

// Send sends msgs. It returns nil when SQS accepted every message and a
// *queue.SendError naming the rest otherwise: the entries SQS refused,
// and every message of a call that failed as a whole (connection, throttle,
// oversized batch) or was never made because ctx ended. A message named
// there may still have arrived (a call can fail after SQS took it).
func (q *Queue) Send(ctx context.Context, msgs []queue.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	chunks := Chunk(queue.WithBodies(msgs))
	results := make([]chunkResult, len(chunks))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, c := range chunks {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = failAll(c, ctx.Err())
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = q.sendChunk(ctx, c)
		}()
	}
	wg.Wait()

	var failed []string
	var cause error
	for _, r := range results {
		failed = append(failed, r.failed...)
		if cause == nil {
			cause = r.cause
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &queue.SendError{Failed: failed, Cause: cause}
}

type chunkResult struct {
	failed []string // message IDs
	cause  error
}

func failAll(c []queue.Message, err error) chunkResult {
	r := chunkResult{cause: err}
	for _, m := range c {
		r.failed = append(r.failed, m.ID)
	}
	return r
}

// sendChunk sends one batch. Entry ids are the messages' positions in
// the chunk ("0" to "9"): message IDs need not match SQS's entry id
// syntax ([A-Za-z0-9_-]{1,80}) nor be distinct.
func (q *Queue) sendChunk(ctx context.Context, c []queue.Message) chunkResult {
	entries := make([]types.SendMessageBatchRequestEntry, len(c))
	for i, m := range c {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i)),
			MessageBody: aws.String(string(m.Body)),
		}
		if m.ID != "" { // SQS refuses empty attribute values
			entries[i].MessageAttributes = map[string]types.MessageAttributeValue{
				AttrID: {DataType: aws.String("String"), StringValue: aws.String(m.ID)},
			}
		}
	}
	out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{
		QueueUrl: aws.String(q.queueURL),
		Entries:  entries,
	})
	if err != nil {
		return failAll(c, fmt.Errorf("sqsqueue: SendMessageBatch: %w", err))
	}
	ok := make([]bool, len(c))
	for _, e := range out.Successful {
		if i, valid := entryIndex(e.Id, len(c)); valid {
			ok[i] = true
		}
	}
	var r chunkResult
	for _, e := range out.Failed {
		i, valid := entryIndex(e.Id, len(c))
		if !valid || ok[i] {
			continue
		}
		if r.cause == nil {
			r.cause = fmt.Errorf("sqsqueue: message %q refused: %s: %s (sender fault: %t)",
				c[i].ID, aws.ToString(e.Code), aws.ToString(e.Message), e.SenderFault)
		}
	}
	for i, m := range c {
		if !ok[i] {
			r.failed = append(r.failed, m.ID)
		}
	}
	if len(r.failed) > 0 && r.cause == nil {
		r.cause = errors.New("sqsqueue: SendMessageBatch reported no result for some entries")
	}
	return r
}

func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

// Chunk splits msgs, in order, into batches of at most MaxBatchEntries
// messages and MaxBatchBytes. A message larger than MaxBatchBytes on its
// own travels alone, and SQS decides (a queue's MaximumMessageSize may
// be up to 1 MiB).
func Chunk(msgs []queue.Message) [][]queue.Message {
	if len(msgs) == 0 {
		return nil
	}
	var chunks [][]queue.Message
	start, size := 0, 0
	for i, m := range msgs {
		s := entrySize(m)
		if i > start && (i-start == MaxBatchEntries || size+s > MaxBatchBytes) {
			chunks = append(chunks, msgs[start:i:i])
			start, size = i, 0
		}
		size += s
	}
	return append(chunks, msgs[start:len(msgs):len(msgs)])
}

// entrySize is what SQS counts against the batch size: the body and each
// attribute's name, data type and value.
func entrySize(m queue.Message) int {
	n := len(m.Body)
	if m.ID != "" {
		n += len(AttrID) + len("String") + len(m.ID)
	}
	return n
}
