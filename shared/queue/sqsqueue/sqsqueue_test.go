package sqsqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/queue/sqstest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// messages are messages with those ids; every other one carries only its
// Decoded value, which Send encodes.
func messages(ids ...string) []queue.Message {
	type decoded struct {
		N  int    `json:"n"`
		ID string `json:"id"`
	}
	msgs := make([]queue.Message, len(ids))
	for i, id := range ids {
		msgs[i] = queue.Message{ID: id, Body: []byte(fmt.Sprintf(`{"n":%d,"id":%q}`, i, id))}
		if i%2 == 1 {
			msgs[i] = queue.Message{ID: id, Decoded: decoded{N: i, ID: id}}
		}
	}
	return msgs
}

// received collects what a handler got: meridian-id → bodies.
type received struct {
	mu     sync.Mutex
	bodies map[string][]string
	counts map[string][]string // meridian-id → ApproximateReceiveCount of each delivery
}

func newReceived() *received {
	return &received{bodies: map[string][]string{}, counts: map[string][]string{}}
}

func (r *received) handler(fail func(id string) bool) sqstest.Handler {
	return func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var resp events.SQSEventResponse
		for _, m := range ev.Records {
			a, ok := m.MessageAttributes[sqsqueue.AttrID]
			if !ok || a.StringValue == nil || a.DataType != "String" {
				return resp, fmt.Errorf("message %s without a %s attribute: %+v", m.MessageId, sqsqueue.AttrID, m.MessageAttributes)
			}
			id := *a.StringValue
			r.bodies[id] = append(r.bodies[id], m.Body)
			r.counts[id] = append(r.counts[id], m.Attributes["ApproximateReceiveCount"])
			if fail != nil && fail(id) {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
		}
		return resp, nil
	}
}

func TestSendReceivesEachMessageOnce(t *testing.T) {
	t.Parallel()
	client, url, _ := sqstest.NewQueues(t, 3)
	var ids []string
	for i := range 25 {
		ids = append(ids, fmt.Sprintf("req_%02d:usage", i))
	}
	msgs := messages(ids...)
	if err := sqsqueue.New(client, url).Send(ctxT(t), msgs); err != nil {
		t.Fatal(err)
	}
	got := newReceived()
	if n := sqstest.Drain(t, client, url, got.handler(nil)); n != 25 {
		t.Errorf("handled %d messages, want 25", n)
	}
	for i, m := range msgs {
		if b := got.bodies[m.ID]; len(b) != 1 || b[0] != fmt.Sprintf(`{"n":%d,"id":%q}`, i, m.ID) {
			t.Errorf("%s: received %q, want it once", m.ID, b)
		}
	}
	if len(got.bodies) != 25 {
		t.Errorf("received %d distinct IDs, want 25", len(got.bodies))
	}
}

func TestFailedMessageIsRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	const maxReceives = 3
	client, url, dlq := sqstest.NewQueues(t, maxReceives)
	if err := sqsqueue.New(client, url).Send(ctxT(t), messages("good", "poison")); err != nil {
		t.Fatal(err)
	}
	got := newReceived()
	sqstest.Drain(t, client, url, got.handler(func(id string) bool { return id == "poison" }))

	if c := got.counts["good"]; len(c) != 1 {
		t.Errorf("good delivered %d times, want 1", len(c))
	}
	if c, want := got.counts["poison"], []string{"1", "2", "3"}; !slices.Equal(c, want) {
		t.Errorf("poison delivered with ApproximateReceiveCount %v, want %v", c, want)
	}
	dead := sqstest.ReceiveAll(t, client, dlq)
	if len(dead) != 1 {
		t.Fatalf("dead-letter queue holds %d messages, want 1", len(dead))
	}
	if id := aws.ToString(dead[0].MessageAttributes[sqsqueue.AttrID].StringValue); id != "poison" {
		t.Errorf("dead letter %s = %q, want poison", sqsqueue.AttrID, id)
	}
	if left, err := sqstest.Pending(ctxT(t), client, url); err != nil || left != 0 {
		t.Errorf("queue holds %d messages (%v), want 0", left, err)
	}
}

// A handler error keeps the whole batch (Lambda without a partial
// response); the next delivery succeeds.
func TestHandlerErrorKeepsTheBatch(t *testing.T) {
	t.Parallel()
	client, url, dlq := sqstest.NewQueues(t, 3)
	if err := sqsqueue.New(client, url).Send(ctxT(t), messages("a", "b")); err != nil {
		t.Fatal(err)
	}
	got := newReceived()
	calls := 0
	h := got.handler(nil)
	n := sqstest.Drain(t, client, url, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		calls++
		resp, err := h(ctx, ev)
		if calls == 1 {
			return resp, errors.New("boom")
		}
		return resp, err
	})
	if n != 4 || len(got.counts["a"]) != 2 || len(got.counts["b"]) != 2 {
		t.Errorf("handled %d, deliveries %v, want each message twice", n, got.counts)
	}
	if dead := sqstest.ReceiveAll(t, client, dlq); len(dead) != 0 {
		t.Errorf("dead-letter queue holds %d messages", len(dead))
	}
}

// Message IDs need not be SQS batch entry ids ([A-Za-z0-9_-]{1,80}) nor
// distinct.
func TestOddMessageIDs(t *testing.T) {
	t.Parallel()
	client, url, _ := sqstest.NewQueues(t, 3)
	ids := []string{"req_01ab:usage", "with space", "slash/and.dot#hash", "ünïcödé", strings.Repeat("x", 200), "dup", "dup", "-", "1"}
	if err := sqsqueue.New(client, url).Send(ctxT(t), messages(ids...)); err != nil {
		t.Fatal(err)
	}
	got := newReceived()
	sqstest.Drain(t, client, url, got.handler(nil))
	want := map[string]int{}
	for _, id := range ids {
		want[id]++
	}
	have := map[string]int{}
	for id, b := range got.bodies {
		have[id] = len(b)
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("received IDs %v, want %v", have, want)
	}
}

func TestSendToRefusingEndpointNamesEveryMessage(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // connections are refused from now on
	var ids []string
	for i := range 25 {
		ids = append(ids, fmt.Sprintf("m%d", i))
	}
	q := sqsqueue.New(sqstest.NewClient(endpoint), endpoint+"/100010001000/nowhere")
	err = q.Send(ctxT(t), messages(ids...))
	var se *queue.SendError
	if !errors.As(err, &se) {
		t.Fatalf("Send = %v, want a *queue.SendError", err)
	}
	if !slices.Equal(se.Failed, ids) {
		t.Errorf("failed %v, want %v", se.Failed, ids)
	}
	if se.Cause == nil || !strings.Contains(se.Error(), "refused") {
		t.Errorf("error %q does not say the connection was refused", se)
	}
}

// fakeSQS answers SendMessageBatch like SQS: entries whose body contains
// "refuse" fail, entries whose body contains "lost" get no result, and a
// batch with a body containing "reject" fails as a whole.
func fakeSQS(t *testing.T) (url string, batches *[][]string) {
	var mu sync.Mutex
	batches = new([][]string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Entries []struct {
				Id, MessageBody   string
				MessageAttributes map[string]struct{ DataType, StringValue string }
			}
		}
		if r.Header.Get("X-Amz-Target") != "AmazonSQS.SendMessageBatch" || json.NewDecoder(r.Body).Decode(&in) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		type ok struct{ Id, MessageId string }
		type failed struct {
			Id, Code, Message string
			SenderFault       bool
		}
		out := struct {
			Successful []ok     `json:"Successful"`
			Failed     []failed `json:"Failed"`
		}{Successful: []ok{}, Failed: []failed{}}
		var ids []string
		reject := false
		for _, e := range in.Entries {
			ids = append(ids, e.MessageAttributes[sqsqueue.AttrID].StringValue)
			switch {
			case strings.Contains(e.MessageBody, "reject"):
				reject = true
			case strings.Contains(e.MessageBody, "refuse"):
				out.Failed = append(out.Failed, failed{Id: e.Id, Code: "InternalError", Message: "try again"})
			case strings.Contains(e.MessageBody, "lost"):
			default:
				out.Successful = append(out.Successful, ok{Id: e.Id, MessageId: "sqs-" + e.Id})
			}
		}
		mu.Lock()
		*batches = append(*batches, ids)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if reject {
			w.Header().Set("X-Amzn-Query-Error", "AWS.SimpleQueueService.BatchRequestTooLong;Sender")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": "com.amazonaws.sqs#BatchRequestTooLong", "message": "too long"})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, batches
}

func TestPartialFailureNamesTheFailedMessages(t *testing.T) {
	t.Parallel()
	endpoint, batches := fakeSQS(t)
	var msgs []queue.Message
	var wantFailed []string
	for i := range 23 {
		id := fmt.Sprintf("req:%d", i)
		body := "fine"
		switch {
		case i == 3 || i == 14:
			body = "refuse"
		case i == 7:
			body = "lost"
		case i == 21: // fails its batch (entries 20-22) as a whole
			body = "reject"
		}
		if i == 3 || i == 7 || i == 14 || i >= 20 {
			wantFailed = append(wantFailed, id)
		}
		msgs = append(msgs, queue.Message{ID: id, Body: []byte(body)})
	}
	err := sqsqueue.New(sqstest.NewClient(endpoint), endpoint+"/1/q").Send(ctxT(t), msgs)
	var se *queue.SendError
	if !errors.As(err, &se) {
		t.Fatalf("Send = %v, want a *queue.SendError", err)
	}
	if !slices.Equal(se.Failed, wantFailed) {
		t.Errorf("failed %v, want %v", se.Failed, wantFailed)
	}
	sent := 0
	for _, b := range *batches {
		if len(b) > sqsqueue.MaxBatchEntries {
			t.Errorf("a batch of %d entries", len(b))
		}
		sent += len(b)
	}
	if sent != len(msgs) || len(*batches) != 3 {
		t.Errorf("%d batches with %d messages, want 3 with %d", len(*batches), sent, len(msgs))
	}

	if err := sqsqueue.New(sqstest.NewClient(endpoint), endpoint+"/1/q").Send(ctxT(t), msgs[:3]); err != nil {
		t.Errorf("Send of accepted messages = %v", err)
	}
	if err := sqsqueue.New(sqstest.NewClient(endpoint), endpoint+"/1/q").Send(ctxT(t), nil); err != nil {
		t.Errorf("Send(nil) = %v", err)
	}
}

func TestChunk(t *testing.T) {
	t.Parallel()
	sized := func(sizes ...int) []queue.Message {
		var msgs []queue.Message
		for i, s := range sizes {
			msgs = append(msgs, queue.Message{ID: fmt.Sprint(i), Body: make([]byte, s)})
		}
		return msgs
	}
	lens := func(chunks [][]queue.Message) []int {
		var n []int
		for _, c := range chunks {
			n = append(n, len(c))
		}
		return n
	}
	const kib = 1 << 10
	for _, c := range []struct {
		name  string
		msgs  []queue.Message
		sizes []int
	}{
		{"none", nil, nil},
		{"25 small", sized(make([]int, 25)...), []int{10, 10, 5}},
		{"by bytes", sized(100*kib, 100*kib, 100*kib, 10), []int{2, 2}},
		{"exactly full", sized(128*kib-20, 128*kib-20, 1), []int{2, 1}},
		{"oversized alone", sized(1, 300*kib, 1), []int{1, 1, 1}},
	} {
		chunks := sqsqueue.Chunk(c.msgs)
		if got := lens(chunks); !slices.Equal(got, c.sizes) {
			t.Errorf("%s: chunks of %v, want %v", c.name, got, c.sizes)
		}
		var flat []queue.Message
		for _, ch := range chunks {
			flat = append(flat, ch...)
		}
		if len(flat) != len(c.msgs) || (len(flat) > 0 && !reflect.DeepEqual(flat, c.msgs)) {
			t.Errorf("%s: chunks do not hold the messages in order", c.name)
		}
	}
}

func TestNewClientFromEnv(t *testing.T) {
	client, url, _ := sqstest.NewQueues(t, 3)
	if err := sqsqueue.New(client, url).Send(ctxT(t), messages("env")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", sqstest.Endpoint(t))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	c, err := sqsqueue.NewClientFromEnv(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.ReceiveMessage(ctxT(t), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("AWS_ENDPOINT_URL is honoured: %v", err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].MessageAttributes[sqsqueue.AttrID].StringValue) != "env" {
		t.Errorf("received %+v", out.Messages)
	}
}
