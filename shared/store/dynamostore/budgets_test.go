package dynamostore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// budgetOf is the raw budget attribute of keyID on the account item.
func budgetOf(t *testing.T, s *Store, accountID, keyID string) map[string]types.AttributeValue {
	t.Helper()
	m, _ := rawItem(t, s, accountPK(accountID), skAccount)[pfxBudget+keyID].(*types.AttributeValueMemberM)
	if m == nil {
		return nil
	}
	return m.Value
}

// A reservation and its refund write the account item (balance and the
// key's budget) and never the key item; the budget leaves the account with
// the key's active state and comes back with it.
func TestBudgetLivesOnTheAccount(t *testing.T) {
	s := newStore(t)
	a := mustAccount(t, s, 50)
	k := mustKey(t, s, a.ID, ptr(9))
	if b := budgetOf(t, s, a.ID, k.ID); attrN(t, b, "u") != "0" || attrN(t, b, "l") != "9" {
		t.Fatalf("a new key's budget %v", b)
	}
	keyItem := rawItem(t, s, accountPK(a.ID), pfxKey+k.ID)
	c := chargeFor(k, 4)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	if b := budgetOf(t, s, a.ID, k.ID); attrN(t, b, "u") != "4" || attrN(t, b, "l") != "9" {
		t.Errorf("budget after a reservation of 4: %v", b)
	}
	if got := rawItem(t, s, accountPK(a.ID), pfxKey+k.ID); !reflect.DeepEqual(got, keyItem) {
		t.Errorf("the reservation wrote the key item:\n%v\nwas\n%v", got, keyItem)
	}
	if got, err := s.Key(ctx, a.ID, k.ID); err != nil || got.CreditsUsed != 4 || got.CreditLimit == nil || *got.CreditLimit != 9 {
		t.Errorf("Key: %+v %v", got, err)
	}
	if _, err := s.Reserve(ctx, chargeFor(k, 6)); !errors.As(err, new(*store.KeyLimitError)) {
		t.Errorf("6 more over a cap of 9 with 4 used: %v", err)
	}
	if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
		t.Fatal(err)
	}
	if b := budgetOf(t, s, a.ID, k.ID); attrN(t, b, "u") != "0" {
		t.Errorf("budget after the refund: %v", b)
	}
	if got := rawItem(t, s, accountPK(a.ID), pfxKey+k.ID); !reflect.DeepEqual(got, keyItem) {
		t.Error("the refund wrote the key item")
	}

	// Revoked: the figures move to the key item, and a refund of a charge
	// made while active goes there.
	c = chargeFor(k, 3)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	ki := rawItem(t, s, accountPK(a.ID), pfxKey+k.ID)
	if budgetOf(t, s, a.ID, k.ID) != nil || attrN(t, ki, "credits_used") != "3" || attrN(t, ki, "credit_limit") != "9" {
		t.Errorf("revoked: budget %v, key item %v", budgetOf(t, s, a.ID, k.ID), ki)
	}
	if _, err := s.Reserve(ctx, chargeFor(k, 1)); !errors.Is(err, store.ErrKeyInactive) {
		t.Errorf("a revoked key's charge: %v", err)
	}
	if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 {
		t.Errorf("revoked key after the refund: credits_used %d", got.CreditsUsed)
	}
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr(5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyActive); err != nil {
		t.Fatal(err)
	}
	if b := budgetOf(t, s, a.ID, k.ID); attrN(t, b, "u") != "0" || attrN(t, b, "l") != "5" {
		t.Errorf("reactivated: budget %v", b)
	}
	if acct := rawItem(t, s, accountPK(a.ID), skAccount); attrN(t, acct, "balance") != "50" || attrN(t, acct, "active_keys") != "1" {
		t.Errorf("account %v", acct)
	}
}

// A key stored before budgets moved to the account (active, its figures on
// its key item, none on the account) is charged from its key item's
// figures, and its first reservation writes its budget; a refund of a
// charge counted on the key item goes back there.
func TestBudgetOfAKeyFromBefore(t *testing.T) {
	s := newStore(t)
	a := mustAccount(t, s, 100)
	k := mustKey(t, s, a.ID, nil)
	old := chargeFor(k, 5)
	if _, err := s.Reserve(ctx, old); err != nil {
		t.Fatal(err)
	}
	// As the earlier layout had it: the spend (5, the reservation above)
	// and the cap on the key item.
	if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: itemKey(accountPK(a.ID), skAccount),
		UpdateExpression:         aws.String("REMOVE #b"),
		ExpressionAttributeNames: map[string]string{"#b": pfxBudget + k.ID},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: itemKey(accountPK(a.ID), pfxKey+k.ID),
		UpdateExpression:          aws.String("SET credits_used = :u, credit_limit = :l"),
		ExpressionAttributeValues: vals{":u": num(5), ":l": num(12)},
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Key(ctx, a.ID, k.ID); err != nil || got.CreditsUsed != 5 || got.CreditLimit == nil || *got.CreditLimit != 12 {
		t.Fatalf("Key of an earlier key: %+v %v", got, err)
	}
	name := "renamed"
	if got, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name}); err != nil || got.CreditsUsed != 5 || got.CreditLimit == nil || *got.CreditLimit != 12 {
		t.Errorf("renaming an earlier key: %+v %v", got, err)
	}
	if _, err := s.Refund(ctx, a.ID, old.RequestID); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 || budgetOf(t, s, a.ID, k.ID) != nil {
		t.Errorf("after the refund: credits_used %d, budget %v", got.CreditsUsed, budgetOf(t, s, a.ID, k.ID))
	}
	if _, err := s.Reserve(ctx, chargeFor(k, 10)); err != nil {
		t.Fatal(err)
	}
	if b := budgetOf(t, s, a.ID, k.ID); attrN(t, b, "u") != "10" || attrN(t, b, "l") != "12" {
		t.Errorf("budget written by the first reservation: %v", b)
	}
	var limit *store.KeyLimitError
	if _, err := s.Reserve(ctx, chargeFor(k, 3)); !errors.As(err, &limit) || limit.CreditLimit != 12 || limit.CreditsUsed != 10 {
		t.Errorf("3 more over a cap of 12 with 10 used: %v", err)
	}
	if acct, _ := s.Account(ctx, a.ID); acct.CreditsRemaining != 90 {
		t.Errorf("balance %d, want 90", acct.CreditsRemaining)
	}
}
