package sqstest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/meridian-data/meridian/shared/queue/sqstest"
)

func send(t *testing.T, client *sqs.Client, url string, bodies ...string) {
	t.Helper()
	var entries []types.SendMessageBatchRequestEntry
	for i, b := range bodies {
		entries = append(entries, types.SendMessageBatchRequestEntry{
			Id: aws.String(string(rune('a' + i))), MessageBody: aws.String(b),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"kind": {DataType: aws.String("String"), StringValue: aws.String("k-" + b)},
			},
		})
	}
	out, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	// GoawsCompat: goaws's answer reaches the SDK as Successful.
	if len(out.Successful) != len(bodies) || len(out.Failed) != 0 {
		t.Fatalf("SendMessageBatch: %d successful, %d failed, want %d successful", len(out.Successful), len(out.Failed), len(bodies))
	}
}

func TestPollBuildsLambdaEvents(t *testing.T) {
	t.Parallel()
	client, url, _ := sqstest.NewQueues(t, 2)
	send(t, client, url, "one", "two")
	arn, err := sqstest.QueueARN(context.Background(), client, url)
	if err != nil || !strings.HasPrefix(arn, "arn:aws:sqs:us-east-1:") {
		t.Fatalf("QueueARN = %q, %v", arn, err)
	}
	var got []events.SQSMessage
	n, err := sqstest.Poll(context.Background(), client, url, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		got = append(got, ev.Records...)
		return events.SQSEventResponse{}, nil
	})
	if err != nil || n != 2 || len(got) != 2 {
		t.Fatalf("Poll = %d, %v; records %d", n, err, len(got))
	}
	for _, r := range got {
		if r.MessageId == "" || r.ReceiptHandle == "" || r.EventSource != "aws:sqs" || r.EventSourceARN != arn ||
			r.AWSRegion != "us-east-1" || r.Attributes["ApproximateReceiveCount"] != "1" || r.Attributes["SentTimestamp"] == "" {
			t.Errorf("record %+v", r)
		}
		if a := r.MessageAttributes["kind"]; a.DataType != "String" || aws.ToString(a.StringValue) != "k-"+r.Body {
			t.Errorf("record %s attributes %+v", r.Body, r.MessageAttributes)
		}
	}
	if left, err := sqstest.Pending(context.Background(), client, url); err != nil || left != 0 {
		t.Errorf("Pending = %d, %v after a successful batch", left, err)
	}
}

// A BatchItemFailures entry naming no message of the batch fails the
// whole batch, as with Lambda.
func TestPollUnknownItemKeepsTheBatch(t *testing.T) {
	t.Parallel()
	client, url, dlq := sqstest.NewQueues(t, 5)
	send(t, client, url, "x", "y")
	n, err := sqstest.Poll(context.Background(), client, url, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "no-such-message"}}}, nil
	})
	if err != nil || n != 2 {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	if left, err := sqstest.Pending(context.Background(), client, url); err != nil || left != 2 {
		t.Fatalf("Pending = %d, %v; want both kept", left, err)
	}
	counts := map[string][]string{}
	sqstest.Drain(t, client, url, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, r := range ev.Records {
			counts[r.Body] = append(counts[r.Body], r.Attributes["ApproximateReceiveCount"])
		}
		return events.SQSEventResponse{}, nil
	})
	if len(counts["x"]) != 1 || counts["x"][0] != "2" || len(counts["y"]) != 1 || counts["y"][0] != "2" {
		t.Errorf("redeliveries %v, want one each with ApproximateReceiveCount 2", counts)
	}
	if dead := sqstest.ReceiveAll(t, client, dlq); len(dead) != 0 {
		t.Errorf("dead-letter queue holds %d", len(dead))
	}
}

func TestHandlerErrorIsReported(t *testing.T) {
	t.Parallel()
	client, url, _ := sqstest.NewQueuesVisibility(t, 0, 2*time.Second)
	send(t, client, url, "z")
	boom := errors.New("boom")
	_, err := sqstest.Poll(context.Background(), client, url, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, boom
	})
	var herr *sqstest.HandlerError
	if !errors.As(err, &herr) || !errors.Is(err, boom) {
		t.Fatalf("Poll = %v, want a *HandlerError wrapping boom", err)
	}
	start := time.Now()
	if n := sqstest.Drain(t, client, url, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}); n != 1 {
		t.Errorf("Drain handled %d, want 1", n)
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("redelivered after %v, before the 2 s visibility timeout", d)
	}
}
