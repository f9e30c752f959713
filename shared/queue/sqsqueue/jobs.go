package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/meridian-data/meridian/shared/queue"
)

// JobQueue is queue.JobQueue on the SQS jobs queue: one message per
// accepted web job, its body the JSON of the queue.JobMessage, the job
// id also in the message attribute AttrID (as the usage queue's messages
// carry theirs). The worker consumes the queue one message at a time.
type JobQueue struct {
	client   *sqs.Client
	queueURL string
}

var _ queue.JobQueue = (*JobQueue)(nil)

// NewJobQueue returns a JobQueue that sends to queueURL with client.
func NewJobQueue(client *sqs.Client, queueURL string) *JobQueue {
	return &JobQueue{client: client, queueURL: queueURL}
}

// NewJobQueueFromEnv returns the JobQueue of MERIDIAN_JOBS_QUEUE_URL with
// a client configured the standard AWS way (NewClientFromEnv), or nil and
// no error when the variable is unset (the function then queues no jobs).
func NewJobQueueFromEnv(ctx context.Context) (*JobQueue, error) {
	url := strings.TrimSpace(os.Getenv(queue.EnvJobsQueueURL))
	if url == "" {
		return nil, nil
	}
	client, err := NewClientFromEnv(ctx)
	if err != nil {
		return nil, err
	}
	return NewJobQueue(client, url), nil
}

// EnqueueJob sends m. An error means the job may not be queued; SQS may
// still have taken a message whose call failed in transit, and the worker
// starts a job once (store.Jobs.StartJob), so sending again is safe.
func (q *JobQueue) EnqueueJob(ctx context.Context, m queue.JobMessage) error {
	if m.AccountID == "" || m.JobID == "" {
		return errors.New("sqsqueue: a job message needs an account id and a job id")
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("sqsqueue: job %s: %w", m.JobID, err)
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(q.queueURL),
		MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrID: {DataType: aws.String("String"), StringValue: aws.String(m.JobID)},
		},
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: send job %s: %w", m.JobID, err)
	}
	return nil
}
