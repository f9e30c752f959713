package dynamostore

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The counter is one item on the table's own key schema, carrying the TTL
// attribute; an item TTL has not deleted yet reads as expired.
func TestAllowanceItem(t *testing.T) {
	s := newStore(t)
	now := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	name := unique("provider")
	if _, ok, err := s.TakeAllowance(ctx, name, "2026-11", 5, now); err != nil || !ok {
		t.Fatalf("take: %v %v", ok, err)
	}
	item := rawItem(t, s, "allowance#"+name+"#2026-11", "allowance")
	if got := attrN(t, item, "n"); got != "1" {
		t.Errorf("n = %s", got)
	}
	want := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	if got := attrN(t, item, AttrExpiresAt); got != strconv.FormatInt(want, 10) {
		t.Errorf("expires_at = %s, want %d (the end of the following month)", got, want)
	}
	// An item whose expiry passed but that TTL has not deleted.
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: itemKey("allowance#"+name+"#2026-11", "allowance"),
		UpdateExpression:          aws.String("SET expires_at = :past"),
		ExpressionAttributeValues: vals{":past": num(now.Add(-time.Hour).Unix())},
	})
	if err != nil {
		t.Fatal(err)
	}
	if used, err := s.AllowanceUsed(ctx, name, "2026-11", now); err != nil || used != 0 {
		t.Errorf("an expired counter reads %d %v, want 0", used, err)
	}
}
