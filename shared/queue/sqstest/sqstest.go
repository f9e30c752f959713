// Package sqstest gives tests a real SQS API: goaws, the SQS emulator
// that scripts/goaws.sh builds from the module cache and runs, with
// queues, a dead-letter queue, and a poller that plays Lambda's SQS event
// source mapping (batches of up to 10, partial batch failures).
//
// The endpoint is MERIDIAN_SQS_ENDPOINT when set (make test sets it and
// stops the emulator afterwards), otherwise the one scripts/goaws.sh runs,
// started if needed and left running for the other test packages (stop it
// with scripts/goaws.sh stop). When there is none, tests fail under CI
// (CI set and not "false" or "0") and skip elsewhere.
//
// goaws v0.5.4 differs from SQS in ways this package makes up for:
//   - it crashes when a queue is created or deleted while other requests
//     run, so NewQueues takes a queue pair from the pool scripts/goaws.sh
//     makes at start-up and never creates or deletes a queue (it falls
//     back to CreateQueue only against a goaws without the pool);
//   - its JSON SendMessageBatch answer names the lists
//     SendMessageBatchResultEntry and BatchResultErrorEntry, not Successful
//     and Failed, so an SDK client sees neither; clients made here
//     (Client, NewClient, NewQueues) rename them (GoawsCompat);
//   - ApproximateReceiveCount is always 1; Poll counts receives itself;
//   - visibility timeouts are whole seconds and end on a 1 s tick, so a
//     message comes back 1 to 2 s after its timeout of 1 s; a message
//     goes to the dead-letter queue on that tick after its maxReceives-th
//     receive was not deleted;
//   - SetQueueAttributes resets VisibilityTimeout, DelaySeconds and
//     MaximumMessageSize when not given (NewQueues gives them all).
package sqstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/internal/devscripts"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// EnvEndpoint names the endpoint make test passes to go test.
const EnvEndpoint = "MERIDIAN_SQS_ENDPOINT"

// Region is the region of the clients made here and of goaws's ARNs.
const Region = "us-east-1"

// Visibility is the visibility timeout NewQueues gives its queues.
const Visibility = time.Second

// poolQueue holds the numbers of the free queue pairs (scripts/goaws.sh).
const poolQueue = "meridian-pool"

var (
	endpointMu sync.Mutex
	endpoint   string
)

// Endpoint returns the SQS endpoint URL, starting goaws if needed.
func Endpoint(t testing.TB) string {
	t.Helper()
	e, err := lookupEndpoint()
	if err != nil {
		unavailable(t, err)
	}
	return e
}

func lookupEndpoint() (string, error) {
	endpointMu.Lock()
	defer endpointMu.Unlock()
	if endpoint != "" {
		return endpoint, nil
	}
	e := os.Getenv(EnvEndpoint)
	if e == "" {
		var err error
		if e, err = runScript("endpoint"); err != nil || e == "" {
			if e, err = runScript("start"); err != nil {
				return "", fmt.Errorf("no %s and goaws did not start: %w", EnvEndpoint, err)
			}
		}
	}
	if err := answers(e); err != nil {
		return "", err
	}
	endpoint = e
	return e, nil
}

// answers checks that something answers HTTP at the endpoint (goaws's
// health check, or any answer from another SQS API).
func answers(endpoint string) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(endpoint, "/") + "/health")
	if err != nil {
		return fmt.Errorf("SQS endpoint %s does not answer: %w", endpoint, err)
	}
	resp.Body.Close()
	return nil
}

// unavailable fails the test under CI and skips it elsewhere.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatalf("sqstest: no SQS emulator (CI=%s, so this fails): %v", ci, err)
	}
	t.Skipf("sqstest: no SQS emulator: %v", err)
}

// runScript runs scripts/goaws.sh and returns the last line it printed.
func runScript(arg string) (string, error) { return devscripts.Run("goaws.sh", arg) }

// NewClient returns an SQS client for endpoint with static test
// credentials and GoawsCompat.
func NewClient(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient: GoawsCompat(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 64, 64
		})),
	})
}

// Client returns NewClient(Endpoint(t)).
func Client(t testing.TB) *sqs.Client {
	t.Helper()
	return NewClient(Endpoint(t))
}

// GoawsCompat wraps an SDK HTTP client so that goaws's JSON
// SendMessageBatch answers carry the lists the SDK reads (Successful,
// Failed). Answers that have them already (real SQS) pass unchanged.
func GoawsCompat(next sqs.HTTPClient) sqs.HTTPClient {
	return goawsCompat{next}
}

type goawsCompat struct{ next sqs.HTTPClient }

func (c goawsCompat) Do(req *http.Request) (*http.Response, error) {
	resp, err := c.next.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK ||
		req.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil && fields["Successful"] == nil && fields["Failed"] == nil {
		fields["Successful"] = fields["SendMessageBatchResultEntry"]
		fields["Failed"] = fields["BatchResultErrorEntry"]
		delete(fields, "SendMessageBatchResultEntry")
		delete(fields, "BatchResultErrorEntry")
		if b, err := json.Marshal(fields); err == nil {
			body = b
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return resp, nil
}

// NewQueues returns a client and a fresh queue whose messages move to the
// dead-letter queue dlqURL after maxReceives receives (no redrive policy
// when maxReceives <= 0), with a visibility timeout of 1 s.
func NewQueues(t testing.TB, maxReceives int) (client *sqs.Client, queueURL, dlqURL string) {
	t.Helper()
	return NewQueuesVisibility(t, maxReceives, Visibility)
}

// NewQueuesVisibility is NewQueues with another visibility timeout (whole
// seconds in goaws, rounded up; at least 1 s): for handlers that may take
// longer than 1 s, whose messages would otherwise come back while they
// run.
func NewQueuesVisibility(t testing.TB, maxReceives int, visibility time.Duration) (client *sqs.Client, queueURL, dlqURL string) {
	t.Helper()
	client = Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queueURL, dlqURL, err := takePair(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if queueURL == "" {
		queueURL, dlqURL = createPair(t, ctx, client)
	}
	dlqARN, err := QueueARN(ctx, client, dlqURL)
	if err != nil {
		t.Fatal(err)
	}
	secs := int((visibility + time.Second - 1) / time.Second)
	secs = max(secs, 1)
	attrs := func() map[string]string {
		return map[string]string{
			"VisibilityTimeout":  strconv.Itoa(secs),
			"DelaySeconds":       "0",
			"MaximumMessageSize": "262144",
		}
	}
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(dlqURL), Attributes: attrs()}); err != nil {
		t.Fatalf("sqstest: configure %s: %v", dlqURL, err)
	}
	a := attrs()
	if maxReceives > 0 {
		policy, _ := json.Marshal(map[string]string{
			"maxReceiveCount":     strconv.Itoa(maxReceives),
			"deadLetterTargetArn": dlqARN,
		})
		a["RedrivePolicy"] = string(policy)
	}
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(queueURL), Attributes: a}); err != nil {
		t.Fatalf("sqstest: configure %s: %v", queueURL, err)
	}
	return client, queueURL, dlqURL
}

// takePair takes a queue pair from the pool; empty URLs when the
// endpoint has no pool or it is used up.
func takePair(ctx context.Context, client *sqs.Client) (queueURL, dlqURL string, err error) {
	pool, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(poolQueue)})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return "", "", nil // no pool: not a goaws started by scripts/goaws.sh
	}
	if err != nil {
		return "", "", fmt.Errorf("sqstest: look for the queue pool: %w", err)
	}
	poolURL := aws.ToString(pool.QueueUrl)
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(poolURL),
		MaxNumberOfMessages: 1,
		VisibilityTimeout:   43200,
	})
	if err != nil {
		return "", "", fmt.Errorf("sqstest: take a queue pair: %w", err)
	}
	if len(out.Messages) == 0 {
		return "", "", nil
	}
	m := out.Messages[0]
	n, err := strconv.Atoi(aws.ToString(m.Body))
	if err != nil {
		return "", "", fmt.Errorf("sqstest: pool message %q", aws.ToString(m.Body))
	}
	_, _ = client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(poolURL), ReceiptHandle: m.ReceiptHandle})
	base := strings.TrimSuffix(poolURL, poolQueue)
	return fmt.Sprintf("%s%s-%d", base, poolQueue, n), fmt.Sprintf("%s%s-%d-dlq", base, poolQueue, n), nil
}

var queues atomic.Int64

// createPair creates a queue pair (goaws without the pool: see the
// package comment for the risk) and deletes it when the test ends.
func createPair(t testing.TB, ctx context.Context, client *sqs.Client) (queueURL, dlqURL string) {
	t.Helper()
	t.Log("sqstest: the emulator has no free pooled queues; creating queues, which can crash goaws under load (restart it: scripts/goaws.sh stop)")
	name := fmt.Sprintf("meridian-t-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), queues.Add(1))
	var urls [2]string
	for i, n := range []string{name + "-dlq", name} {
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(n)})
		if err != nil {
			t.Fatalf("sqstest: create queue %s: %v", n, err)
		}
		urls[i] = aws.ToString(out.QueueUrl)
	}
	t.Cleanup(func() {
		for _, u := range urls {
			_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	})
	return urls[1], urls[0]
}

var arns sync.Map // queue URL → ARN

// QueueARN returns the ARN of the queue at queueURL.
func QueueARN(ctx context.Context, client *sqs.Client, queueURL string) (string, error) {
	if a, ok := arns.Load(queueURL); ok {
		return a.(string), nil
	}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("sqstest: ARN of %s: %w", queueURL, err)
	}
	a := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if a == "" {
		return "", fmt.Errorf("sqstest: no QueueArn for %s", queueURL)
	}
	arns.Store(queueURL, a)
	return a, nil
}

// Handler is a Lambda function's handler for SQS events with partial
// batch responses (ReportBatchItemFailures).
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// HandlerError is how Poll reports that the handler returned an error
// (the whole batch then stays on the queue, as with Lambda).
type HandlerError struct{ Err error }

func (e *HandlerError) Error() string { return "sqstest: handler failed: " + e.Err.Error() }
func (e *HandlerError) Unwrap() error { return e.Err }

// receives counts receives per queue URL and message ID: goaws always
// says ApproximateReceiveCount 1.
var (
	receivesMu sync.Mutex
	receives   = map[[2]string]int{}
)

func countReceive(queueURL, messageID string, reported int) int {
	receivesMu.Lock()
	defer receivesMu.Unlock()
	k := [2]string{queueURL, messageID}
	n := max(receives[k]+1, reported)
	receives[k] = n
	return n
}

// Poll is one round of Lambda's SQS event source mapping: it receives up
// to 10 messages (waiting up to 1 s for the first), calls handler with
// them as an events.SQSEvent, and deletes those the handler did not name
// in BatchItemFailures. As with Lambda, none is deleted when the handler
// returns an error (Poll then returns a *HandlerError) or names an item
// that is not in the batch. It returns how many messages the handler got
// and errors: a *HandlerError, a *NotDeletedError, or an SQS call's.
func Poll(ctx context.Context, client *sqs.Client, queueURL string, handler Handler) (handled int, err error) {
	arn, err := QueueARN(ctx, client, queueURL)
	if err != nil {
		return 0, err
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             1,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return 0, fmt.Errorf("sqstest: ReceiveMessage: %w", err)
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(out.Messages))}
	for i, m := range out.Messages {
		ev.Records[i] = record(queueURL, arn, m)
	}
	resp, herr := handler(ctx, ev)
	if herr != nil {
		return len(ev.Records), &HandlerError{herr}
	}
	keep := map[string]bool{}
	inBatch := map[string]bool{}
	for _, r := range ev.Records {
		inBatch[r.MessageId] = true
	}
	for _, f := range resp.BatchItemFailures {
		if !inBatch[f.ItemIdentifier] {
			return len(ev.Records), nil // Lambda: the whole batch failed
		}
		keep[f.ItemIdentifier] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for i, r := range ev.Records {
		if !keep[r.MessageId] {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{
				Id:            aws.String(strconv.Itoa(i)),
				ReceiptHandle: aws.String(r.ReceiptHandle),
			})
		}
	}
	if len(entries) == 0 {
		return len(ev.Records), nil
	}
	del, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err != nil {
		return len(ev.Records), fmt.Errorf("sqstest: DeleteMessageBatch: %w", err)
	}
	if len(del.Failed) > 0 {
		e := &NotDeletedError{}
		for _, f := range del.Failed {
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(ev.Records) {
				e.MessageIDs = append(e.MessageIDs, ev.Records[i].MessageId)
			}
			if e.Reason == "" {
				e.Reason = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
			}
		}
		return len(ev.Records), e
	}
	return len(ev.Records), nil
}

// NotDeletedError is how Poll reports handled messages it could not
// delete: in goaws, messages whose visibility timeout ended while the
// handler ran (their receipt handle is then void). They will be delivered
// again, as SQS and Lambda would do.
type NotDeletedError struct {
	MessageIDs []string
	Reason     string
}

func (e *NotDeletedError) Error() string {
	return fmt.Sprintf("sqstest: %d handled messages not deleted, will come again (handler slower than the visibility timeout?): %s",
		len(e.MessageIDs), e.Reason)
}

// record converts a received message into a Lambda SQS event record.
func record(queueURL, arn string, m types.Message) events.SQSMessage {
	r := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             map[string]string{},
		MessageAttributes:      map[string]events.SQSMessageAttribute{},
		EventSourceARN:         arn,
		EventSource:            "aws:sqs",
		AWSRegion:              Region,
	}
	if parts := strings.Split(arn, ":"); len(parts) == 6 {
		r.AWSRegion = parts[3]
	}
	for k, v := range m.Attributes {
		r.Attributes[k] = v
	}
	reported, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
	r.Attributes["ApproximateReceiveCount"] = strconv.Itoa(countReceive(queueURL, r.MessageId, reported))
	for k, v := range m.MessageAttributes {
		r.MessageAttributes[k] = events.SQSMessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
	}
	return r
}

// DrainTimeout bounds Drain.
const DrainTimeout = 2 * time.Minute

// Drain polls (Poll) until the queue is empty: it holds no message,
// visible or in flight. Messages the
// handler fails come back after the visibility timeout until they go to
// the dead-letter queue, so Drain also waits for that. It returns how
// many messages the handler got in all (redeliveries included) and fails
// the test on an SQS error or when the queue is not empty after
// DrainTimeout; a *HandlerError or *NotDeletedError is logged (that is
// what happens with Lambda too).
func Drain(t testing.TB, client *sqs.Client, queueURL string, handler Handler) (handled int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	for {
		left, err := Pending(ctx, client, queueURL)
		if err != nil && ctx.Err() != nil {
			t.Fatalf("sqstest: queue %s not drained within %v (%d handled): %v", queueURL, DrainTimeout, handled, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return handled
		}
		n, err := Poll(ctx, client, queueURL, handler)
		handled += n
		var herr *HandlerError
		var nderr *NotDeletedError
		switch {
		case errors.As(err, &herr):
			t.Logf("sqstest: handler error (batch kept): %v", herr.Err)
		case errors.As(err, &nderr):
			t.Log(nderr)
		case err != nil && ctx.Err() != nil:
			t.Fatalf("sqstest: queue %s not drained within %v (%d handled): %v", queueURL, DrainTimeout, handled, err)
		case err != nil:
			t.Fatal(err)
		}
	}
}

// Pending returns how many messages the queue holds, visible or not.
func Pending(ctx context.Context, client *sqs.Client, queueURL string) (int, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameCreatedTimestamp, // tells goaws
		},
	})
	if err != nil {
		return 0, fmt.Errorf("sqstest: GetQueueAttributes %s: %w", queueURL, err)
	}
	visible, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	if isGoaws(out.Attributes) {
		return visible, nil // goaws counts hidden messages in both
	}
	return visible + hidden, nil
}

// isGoaws: goaws reports CreatedTimestamp as ten zeros.
func isGoaws(attrs map[string]string) bool {
	return attrs[string(types.QueueAttributeNameCreatedTimestamp)] == "0000000000"
}

// ReceiveAll receives and deletes every message visible in the queue now
// (until a receive returns nothing), e.g. to look into a dead-letter
// queue. Its messages carry all attributes.
func ReceiveAll(t testing.TB, client *sqs.Client, queueURL string) []types.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var all []types.Message
	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			MaxNumberOfMessages:         10,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("sqstest: ReceiveMessage %s: %v", queueURL, err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		all = append(all, out.Messages...)
		var entries []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries}); err != nil {
			t.Fatalf("sqstest: DeleteMessageBatch %s: %v", queueURL, err)
		}
	}
}
