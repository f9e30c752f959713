// Package dynamotest gives tests outside the store a DynamoDB store on a
// fresh table in DynamoDB Local.
package dynamotest

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamolocal"
)

var tables atomic.Int64

// NewStore returns a store on a new table, deleted when the test ends. It
// fails the test, never skips it, when DynamoDB Local cannot be had.
func NewStore(t testing.TB) *dynamostore.Store {
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
	})
	table := fmt.Sprintf("meridian-t-%d-%d", time.Now().UnixNano(), tables.Add(1))
	if err := dynamostore.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return dynamostore.New(client, table)
}
