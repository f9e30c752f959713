// Package dynamotest gives tests outside the store a DynamoDB store on a
// fresh table in DynamoDB Local.
package dynamotest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamolocal"
)

var tables atomic.Int64

// NewStore returns a store on a new table, deleted when the test ends. It
// fails the test, never skips it, when DynamoDB Local cannot be had.
func NewStore(t testing.TB) *dynamostore.Store {
	t.Helper()
	return NewStoreWith(t)
}

// NewStoreWith is NewStore with client options, such as the faults below.
func NewStoreWith(t testing.TB, options ...func(*dynamodb.Options)) *dynamostore.Store {
	t.Helper()
	endpoint, err := dynamolocal.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
		}),
	}, options...)
	table := fmt.Sprintf("meridian-t-%d-%d", time.Now().UnixNano(), tables.Add(1))
	if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return dynamostore.New(client, table)
}

// ThrottleWrites makes every nth PutItem or UpdateItem on an item whose
// partition key starts with prefix fail as DynamoDB does when an item is
// too hot (ProvisionedThroughputExceededException), as if the SDK's own
// retries had run out.
func ThrottleWrites(prefix string, every int64) func(*dynamodb.Options) {
	var n atomic.Int64
	throttle := middleware.InitializeMiddlewareFunc("meridian-throttle-writes", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		var pk types.AttributeValue
		switch w := in.Parameters.(type) {
		case *dynamodb.PutItemInput:
			pk = w.Item["pk"]
		case *dynamodb.UpdateItemInput:
			pk = w.Key["pk"]
		}
		if s, ok := pk.(*types.AttributeValueMemberS); ok && strings.HasPrefix(s.Value, prefix) && n.Add(1)%every == 0 {
			return middleware.InitializeOutput{}, middleware.Metadata{}, &types.ProvisionedThroughputExceededException{Message: aws.String("injected by the test")}
		}
		return next.HandleInitialize(ctx, in)
	})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(throttle, middleware.Before)
		})
	}
}
