package sqsqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/queue/sqsqueue"
	"github.com/meridian-data/meridian/shared/queue/sqstest"
)

// jobsReceived decodes each delivery as the worker does.
type jobsReceived struct {
	mu   sync.Mutex
	jobs []queue.JobMessage
	ids  []string // the meridian-id attribute of each
}

func (r *jobsReceived) handler(t *testing.T) sqstest.Handler {
	return func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, rec := range ev.Records {
			var m queue.JobMessage
			dec := json.NewDecoder(strings.NewReader(rec.Body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&m); err != nil {
				t.Errorf("body %q: %v", rec.Body, err)
			}
			r.jobs = append(r.jobs, m)
			if a, ok := rec.MessageAttributes[sqsqueue.AttrID]; ok && a.StringValue != nil {
				r.ids = append(r.ids, *a.StringValue)
			}
		}
		return events.SQSEventResponse{}, nil
	}
}

func TestEnqueueJob(t *testing.T) {
	t.Parallel()
	client, url, _ := sqstest.NewQueues(t, 3)
	q := sqsqueue.NewJobQueue(client, url)
	want := map[string]string{}
	for i := range 3 {
		m := queue.JobMessage{AccountID: fmt.Sprintf("acct_%d", i), JobID: fmt.Sprintf("job_01jb%02d", i)}
		want[m.JobID] = m.AccountID
		if err := q.EnqueueJob(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	got := &jobsReceived{}
	if n := sqstest.Drain(t, client, url, got.handler(t)); n != 3 {
		t.Errorf("handled %d messages, want 3", n)
	}
	for i, m := range got.jobs {
		if want[m.JobID] != m.AccountID || got.ids[i] != m.JobID {
			t.Errorf("received %+v with %s %q", m, sqsqueue.AttrID, got.ids[i])
		}
		delete(want, m.JobID)
	}
	if len(want) != 0 {
		t.Errorf("not received: %v", want)
	}
}

func TestEnqueueJobRefusesAnIncompleteMessage(t *testing.T) {
	t.Parallel()
	q := sqsqueue.NewJobQueue(sqstest.NewClient("http://127.0.0.1:1"), "http://127.0.0.1:1/1/jobs")
	for _, m := range []queue.JobMessage{{}, {AccountID: "acct_1"}, {JobID: "job_1"}} {
		if err := q.EnqueueJob(context.Background(), m); err == nil {
			t.Errorf("%+v sent", m)
		}
	}
}

func TestJobQueueFromEnv(t *testing.T) {
	t.Setenv(queue.EnvJobsQueueURL, "")
	if q, err := sqsqueue.NewJobQueueFromEnv(ctxT(t)); q != nil || err != nil {
		t.Fatalf("unset: %v, %v; want nil, nil", q, err)
	}
	client, url, _ := sqstest.NewQueues(t, 3)
	t.Setenv(queue.EnvJobsQueueURL, url)
	t.Setenv("AWS_ENDPOINT_URL", sqstest.Endpoint(t))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDJOBSTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "jobs-secret-never-shown")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	q, err := sqsqueue.NewJobQueueFromEnv(ctxT(t))
	if err != nil || q == nil {
		t.Fatalf("NewJobQueueFromEnv: %v", err)
	}
	if err := q.EnqueueJob(ctxT(t), queue.JobMessage{AccountID: "acct_env", JobID: "job_env"}); err != nil {
		t.Fatal(err)
	}
	got := &jobsReceived{}
	sqstest.Drain(t, client, url, got.handler(t))
	if len(got.jobs) != 1 || got.jobs[0] != (queue.JobMessage{AccountID: "acct_env", JobID: "job_env"}) {
		t.Errorf("received %+v", got.jobs)
	}

	// A queue that does not answer: the error names the job, never the
	// credentials.
	dead := httptest.NewServer(nil)
	dead.Close()
	t.Setenv("AWS_ENDPOINT_URL", dead.URL)
	t.Setenv(queue.EnvJobsQueueURL, dead.URL+"/1/jobs")
	q, err = sqsqueue.NewJobQueueFromEnv(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	err = q.EnqueueJob(ctxT(t), queue.JobMessage{AccountID: "acct_env", JobID: "job_lost"})
	if err == nil {
		t.Fatal("no error from a closed endpoint")
	}
	if msg := err.Error(); !strings.Contains(msg, "job_lost") || strings.Contains(msg, "jobs-secret-never-shown") || strings.Contains(msg, "AKIDJOBSTEST") {
		t.Errorf("error %q", msg)
	}
}
