package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table layout: one table, string partition key "pk" and string sort key
// "sk", on-demand billing, and DynamoDB TTL on the attribute "expires_at"
// (a Number, Unix seconds). TTL is not part of CreateTableInput: it is
// enabled by a separate UpdateTimeToLive call (CreateTable does both; infra
// must declare it next to the table definition, e.g. timeToLiveAttribute).
const (
	AttrPK = "pk"
	AttrSK = "sk"
	// AttrExpiresAt is the TTL attribute. DynamoDB deletes lazily (days
	// late in AWS, never in DynamoDB Local), so every read checks it too.
	AttrExpiresAt = "expires_at"
)

// The lease index: a sparse global secondary index over the reservations
// not refunded (only they carry AttrLeasePK and AttrLeaseSK), so the
// reconciliation sweep is a Query per shard from the shard's mark, never
// a Scan (sweep.go).
//
//	lease_pk  "lease#<n>", n = FNV-1a of the request id mod LeaseShards
//	          (spreads the writes: no hot partition)
//	lease_sk  <lease end, Unix seconds, 12 digits>#<account id>#<request id>
//
// Projection KEYS_ONLY: the index keys plus the table's pk and sk, which
// name the account and the request.
const (
	LeaseIndex  = "leases"
	AttrLeasePK = "lease_pk"
	AttrLeaseSK = "lease_sk"
	LeaseShards = 8
)

// Schema is the exact table definition infra declares: the table and its
// one global secondary index, LeaseIndex (on-demand, like the table).
func Schema(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrLeasePK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrLeaseSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(LeaseIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrLeasePK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrLeaseSK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	}
}

// CreateTable creates the table from Schema (an existing table is fine),
// waits until it is ACTIVE and enables TTL on AttrExpiresAt.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	out, err := client.CreateTable(ctx, Schema(table))
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse): // already there (or being created)
	case err != nil:
		return fmt.Errorf("dynamostore: create table %s: %w", table, err)
	}
	if out == nil || out.TableDescription == nil || out.TableDescription.TableStatus != types.TableStatusActive {
		w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
			o.MinDelay, o.MaxDelay = time.Second, 5*time.Second
		})
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute); err != nil {
			return fmt.Errorf("dynamostore: wait for table %s: %w", table, err)
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrExpiresAt),
			Enabled:       aws.Bool(true),
		},
	})
	// Tolerated: TTL already enabled (a second CreateTable), and emulators
	// that do not implement the call. Reads check expiry themselves anyway.
	var apiErr interface{ ErrorCode() string }
	if err != nil && errors.As(err, &apiErr) {
		msg := strings.ToLower(err.Error())
		if strings.Contains(msg, "already enabled") || strings.Contains(msg, "not supported") ||
			strings.Contains(msg, "unknownoperation") || apiErr.ErrorCode() == "UnknownOperationException" {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: enable TTL on %s: %w", table, err)
	}
	return nil
}

// NewClientFromEnv returns a DynamoDB client configured the standard AWS
// way (environment, shared config, Lambda role). It honours
// AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_DYNAMODB, so the same binary runs
// against DynamoDB Local or LocalStack.
func NewClientFromEnv(ctx context.Context) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: load AWS config: %w", err)
	}
	return dynamodb.NewFromConfig(cfg), nil
}
