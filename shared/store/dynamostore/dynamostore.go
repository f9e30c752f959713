// Package dynamostore is Meridian's production store.Store on one DynamoDB
// table (see Schema).
//
// Items (pk, sk; all other attributes as named):
//
//	account      acct#<id>             account        balance N, balance_version N, lifetime N,
//	                                                  balance_changed_at S, active_keys N, created_at S,
//	                                                  console_hash S, kb#<key id> M {u N, l N} per
//	                                                  active key: its credits_used and credit_limit
//	                                                  (budgets.go)
//	console      console#<sha256 hex>  console        account_id S
//	key          acct#<account id>     key#<key id>   hash, prefix, last4, name, status S,
//	                                                  credit_limit N (absent: uncapped), credits_used N
//	                                                  (while active, the account's kb# rules),
//	                                                  created_at S, updated_at S
//	key lookup   keyhash#<sha256 hex>  keyhash        account_id S, key_id S
//	ledger entry acct#<account id>     ledger#<entry> type, amount N (debit negative), balance_after N,
//	                                                  request_id, endpoint, key_id, key_prefix, note, created_at
//	reservation  acct#<account id>     req#<request>  status reserved|settled|refunded, cost N, key_id,
//	                                                  key_prefix, endpoint, debit_entry, refund_entry,
//	                                                  created_at, expires_at N (final states only),
//	                                                  lease_pk S, lease_sk S (reserved only: LeaseIndex),
//	                                                  held_until_ns N (a web job's extended lease)
//	usage mark   usage#<request id>    usage          expires_at N (a request counted: outcomes.go)
//	outcomes     outcomes#<minute>     <platform>     requests N, errors N, h0..hN N, expires_at N
//	acct usage   acctusage#<account>   <YYYY-MM-DD>#<endpoint>  calls N, credits N, errors N, expires_at N
//	outbox       outbox#<n>            <nanos>#<id>   id, body B, created_at, expires_at N (outbox.go)
//	outbox id    outboxid#<id>         outboxid       msg_pk, msg_sk, expires_at N
//	allowance    allowance#<provider>#<YYYY-MM>  allowance  n N, expires_at N (allowance.go)
//
// Times are RFC 3339 strings (nanoseconds, UTC). Ids come from the store
// package: account ids are "acct_" + 24 lowercase base32 characters (120
// random bits), key ids "key_" + 24 (unless the caller supplies one),
// ledger entry ids "txn_" + a UUIDv7 in hex, so entries sort by time and a
// Query with ScanIndexForward=false reads the ledger newest first.
//
// Every change of more than one item is one TransactWriteItems whose items
// carry conditions and ReturnValuesOnConditionCheckFailure=ALL_OLD: when a
// transaction is cancelled, the cancellation reasons name the failed
// condition and carry the item as it was, so the store learns why without
// a second read. Changes of the wallet (the balance and the active keys'
// budgets, both on the account item) are optimistic (condition:
// balance_version as read, walletWrite) and retried with a tiny jittered
// backoff until the context ends; refusals (key limit, insufficient
// credits, inactive key) are decided from the item state the condition
// saw, so they are definitive.
//
// Ledger order: balance_version rules out A-B-A (a balance that returns to
// the value read), so a balance change commits only if nothing else
// changed the balance since it was read, and its entry id is drawn after
// that read. Newest first by id is therefore commit order and the
// balance_after values chain: exactly within one process (UUIDv7 is
// monotonic there), and across processes as long as host clocks agree to
// better than one DynamoDB write plus read. Amounts and balances are
// exact regardless.
//
// Settled and refunded reservations expire after ReservationRetention (TTL
// on expires_at); a reservation still "reserved" never expires, so
// reconciliation can find it: it carries the keys of the sparse index
// LeaseIndex (table.go), which a refund removes and TTL deletes with the
// item, and ExpiredReservations reads that index from a mark per shard
// (sweep.go).
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/meridian-data/meridian/shared/store"
)

// ReservationRetention is how long a settled or refunded reservation is
// kept (its ledger entries are kept for ever).
const ReservationRetention = 30 * 24 * time.Hour

// ErrRefunded: Settle of a reservation that was already refunded (the
// same error as store.ErrRefunded).
var ErrRefunded = store.ErrRefunded

// Store is the DynamoDB store. It is safe for concurrent use.
type Store struct {
	db    *dynamodb.Client
	table *string
	now   func() time.Time
}

// New returns the store on table, which must exist (see CreateTable).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{db: client, table: aws.String(table), now: func() time.Time { return time.Now().UTC() }}
}

// At returns the store on the same client and table with its clock
// replaced: for tests and benchmarks that run it at another time.
func (s *Store) At(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

var _ store.Store = (*Store)(nil)

// Key prefixes and fixed sort keys.
const (
	pfxAccount = "acct#"
	pfxConsole = "console#"
	pfxKeyHash = "keyhash#"
	pfxKey     = "key#"
	pfxLedger  = "ledger#"
	pfxReq     = "req#"

	skAccount = "account"
	skConsole = "console"
	skKeyHash = "keyhash"
)

// Reservation states.
const (
	resReserved = "reserved"
	resSettled  = "settled"
	resRefunded = "refunded"
)

type accountItem struct {
	PK               string    `dynamodbav:"pk"`
	SK               string    `dynamodbav:"sk"`
	Balance          int64     `dynamodbav:"balance"`
	BalanceVersion   int64     `dynamodbav:"balance_version"` // +1 on every balance change
	Lifetime         int64     `dynamodbav:"lifetime"`
	BalanceChangedAt time.Time `dynamodbav:"balance_changed_at"`
	ActiveKeys       int       `dynamodbav:"active_keys"`
	KeysCreated      int       `dynamodbav:"keys_created"` // every key ever created
	CreatedAt        time.Time `dynamodbav:"created_at"`
	ConsoleHash      string    `dynamodbav:"console_hash"`
	// Budgets are the active keys' budgets (attributes kb#<key id>,
	// budgets.go), by key id.
	Budgets map[string]keyBudget `dynamodbav:"-"`
}

func (a accountItem) account() store.Account {
	return store.Account{
		ID:               strings.TrimPrefix(a.PK, pfxAccount),
		CreditsRemaining: a.Balance,
		CreditsLifetime:  a.Lifetime,
		BalanceChangedAt: a.BalanceChangedAt,
		ActiveKeys:       a.ActiveKeys,
		KeysCreated:      a.KeysCreated,
		CreatedAt:        a.CreatedAt,
	}
}

type consoleItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	AccountID string `dynamodbav:"account_id"`
}

type keyItem struct {
	PK          string    `dynamodbav:"pk"`
	SK          string    `dynamodbav:"sk"`
	Hash        string    `dynamodbav:"hash"`
	Prefix      string    `dynamodbav:"prefix"`
	Last4       string    `dynamodbav:"last4"`
	Name        string    `dynamodbav:"name"`
	Status      string    `dynamodbav:"status"`
	CreditLimit *int64    `dynamodbav:"credit_limit,omitempty"`
	CreditsUsed int64     `dynamodbav:"credits_used"`
	CreatedAt   time.Time `dynamodbav:"created_at"`
	UpdatedAt   time.Time `dynamodbav:"updated_at"`
}

func (k keyItem) key() store.Key {
	return store.Key{
		ID:          strings.TrimPrefix(k.SK, pfxKey),
		AccountID:   strings.TrimPrefix(k.PK, pfxAccount),
		Hash:        k.Hash,
		Prefix:      k.Prefix,
		Last4:       k.Last4,
		Name:        k.Name,
		Status:      store.KeyStatus(k.Status),
		CreditLimit: k.CreditLimit,
		CreditsUsed: k.CreditsUsed,
		CreatedAt:   k.CreatedAt,
		UpdatedAt:   k.UpdatedAt,
	}
}

// keyHashItem is a key's hash record: it finds the key, and carries the
// key's status and prefix (written with every status change) so that one
// read authenticates, and the key's limits (limits.go).
type keyHashItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	AccountID string `dynamodbav:"account_id"`
	KeyID     string `dynamodbav:"key_id"`
	Status    string `dynamodbav:"status,omitempty"`
	Prefix    string `dynamodbav:"prefix,omitempty"`
}

type ledgerItem struct {
	PK           string    `dynamodbav:"pk"`
	SK           string    `dynamodbav:"sk"`
	Type         string    `dynamodbav:"type"`
	Amount       int64     `dynamodbav:"amount"`
	BalanceAfter int64     `dynamodbav:"balance_after"`
	RequestID    string    `dynamodbav:"request_id"`
	Endpoint     string    `dynamodbav:"endpoint"`
	KeyID        string    `dynamodbav:"key_id"`
	KeyPrefix    string    `dynamodbav:"key_prefix"`
	Note         string    `dynamodbav:"note"`
	CreatedAt    time.Time `dynamodbav:"created_at"`
}

func (e ledgerItem) entry() store.Entry {
	return store.Entry{
		ID:           strings.TrimPrefix(e.SK, pfxLedger),
		AccountID:    strings.TrimPrefix(e.PK, pfxAccount),
		Type:         store.EntryType(e.Type),
		Amount:       e.Amount,
		BalanceAfter: e.BalanceAfter,
		RequestID:    e.RequestID,
		Endpoint:     e.Endpoint,
		KeyID:        e.KeyID,
		KeyPrefix:    e.KeyPrefix,
		Note:         e.Note,
		CreatedAt:    e.CreatedAt,
	}
}

type reservationItem struct {
	PK          string    `dynamodbav:"pk"`
	SK          string    `dynamodbav:"sk"`
	Status      string    `dynamodbav:"status"`
	Cost        int64     `dynamodbav:"cost"`
	KeyID       string    `dynamodbav:"key_id"`
	KeyPrefix   string    `dynamodbav:"key_prefix"`
	Endpoint    string    `dynamodbav:"endpoint"`
	DebitEntry  string    `dynamodbav:"debit_entry"`
	RefundEntry string    `dynamodbav:"refund_entry,omitempty"`
	CreatedAt   time.Time `dynamodbav:"created_at"`
	ExpiresAt   int64     `dynamodbav:"expires_at,omitempty"` // Unix seconds
	// Only while reserved: the keys of LeaseIndex (see leaseKeys).
	LeasePK string `dynamodbav:"lease_pk,omitempty"`
	LeaseSK string `dynamodbav:"lease_sk,omitempty"`
	// HeldUntilNS: the end of the lease a web job extended it to
	// (ExtendReservation), Unix nanoseconds; RefundExpired refuses before
	// it. 0: never extended.
	HeldUntilNS int64 `dynamodbav:"held_until_ns,omitempty"`
}

// expired: DynamoDB TTL would delete it; treat it as gone.
func (r reservationItem) expired(now time.Time) bool {
	return r.ExpiresAt != 0 && r.ExpiresAt <= now.Unix()
}

func accountPK(id string) string { return pfxAccount + id }

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: str(pk), AttrSK: str(sk)}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func timeAV(t time.Time) types.AttributeValue { return str(t.UTC().Format(time.RFC3339Nano)) }

func marshal(v any) (map[string]types.AttributeValue, error) {
	m, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: marshal: %w", err)
	}
	return m, nil
}

// decode unmarshals an item; a nil or empty item is (nil, nil).
func decode[T any](item map[string]types.AttributeValue) (*T, error) {
	if len(item) == 0 {
		return nil, nil
	}
	v := new(T)
	if err := attributevalue.UnmarshalMap(item, v); err != nil {
		return nil, fmt.Errorf("dynamostore: unmarshal: %w", err)
	}
	return v, nil
}

// get is a strongly consistent GetItem; a missing item is (nil, nil).
func get[T any](ctx context.Context, s *Store, pk, sk string) (*T, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: itemKey(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: get %s %s: %w", pk, sk, err)
	}
	return decode[T](out.Item)
}

// getMany reads items with one strongly consistent BatchGetItem (retrying
// unprocessed keys). Found items are returned by pk+"\x00"+sk.
func (s *Store) getMany(ctx context.Context, keys ...[2]string) (map[string]map[string]types.AttributeValue, error) {
	return s.batchGet(ctx, true, keys...)
}

// batchGet reads items by key, up to a hundred a request (BatchGetItem's
// most), retrying what DynamoDB leaves unprocessed; eventually consistent
// unless consistent.
func (s *Store) batchGet(ctx context.Context, consistent bool, keys ...[2]string) (map[string]map[string]types.AttributeValue, error) {
	found := map[string]map[string]types.AttributeValue{}
	for len(keys) > 0 {
		part := keys[:min(len(keys), 100)]
		keys = keys[len(part):]
		req := make([]map[string]types.AttributeValue, len(part))
		for i, k := range part {
			req[i] = itemKey(k[0], k[1])
		}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return nil, err
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				*s.table: {Keys: req, ConsistentRead: aws.Bool(consistent)},
			}})
			if err != nil {
				return nil, fmt.Errorf("dynamostore: batch get: %w", err)
			}
			for _, item := range out.Responses[*s.table] {
				pk, _ := item[AttrPK].(*types.AttributeValueMemberS)
				sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
				if pk != nil && sk != nil {
					found[pk.Value+"\x00"+sk.Value] = item
				}
			}
			req = out.UnprocessedKeys[*s.table].Keys
		}
	}
	return found, nil
}

// backoff sleeps a small random time that grows slowly with attempt
// (up to 5ms at first, at most 50ms), or returns the context's error.
func backoff(ctx context.Context, attempt int) error {
	limit := min(5*time.Millisecond+time.Duration(attempt)*time.Millisecond, 50*time.Millisecond)
	t := time.NewTimer(rand.N(limit) + 100*time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cancelled is a cancelled transaction: one reason per item, in order.
type cancelled struct{ reasons []types.CancellationReason }

func (c *cancelled) code(i int) string {
	if i < len(c.reasons) {
		return aws.ToString(c.reasons[i].Code)
	}
	return ""
}

// failed reports whether item i's condition failed, with the item as the
// condition saw it (nil when there was no item).
func (c *cancelled) failed(i int) (bool, map[string]types.AttributeValue) {
	if c.code(i) != "ConditionalCheckFailed" {
		return false, nil
	}
	return true, c.reasons[i].Item
}

// transact runs one TransactWriteItems. It returns (nil, nil) when the
// transaction committed and (c, nil) when it was cancelled only for
// conditions, conflicts or throttling (the caller decides from c); other
// failures are errors.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem) (*cancelled, error) {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil, nil
	}
	var tce *types.TransactionCanceledException
	var inProgress *types.TransactionInProgressException
	switch {
	case errors.As(err, &tce):
		for _, r := range tce.CancellationReasons {
			switch code := aws.ToString(r.Code); code {
			case "", "None", "ConditionalCheckFailed", "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			default:
				return nil, fmt.Errorf("dynamostore: transaction cancelled: %s: %s", code, aws.ToString(r.Message))
			}
		}
		return &cancelled{reasons: tce.CancellationReasons}, nil
	case errors.As(err, &inProgress):
		return &cancelled{}, nil
	}
	return nil, fmt.Errorf("dynamostore: transaction: %w", err)
}

// conflict reports whether a single-item write met a transaction in flight
// on the same item (worth retrying).
func conflict(err error) bool {
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}

// condFailed returns the old item of a failed single-item condition.
func condFailed(err error) (bool, map[string]types.AttributeValue) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true, ccf.Item
	}
	return false, nil
}

// vals are the values of a hand-written expression.
type vals = map[string]types.AttributeValue

func update(s *Store, pk, sk, cond, upd string, names map[string]string, values vals) types.TransactWriteItem {
	u := &types.Update{
		TableName:                           s.table,
		Key:                                 itemKey(pk, sk),
		UpdateExpression:                    aws.String(upd),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if cond != "" {
		u.ConditionExpression = aws.String(cond)
	}
	if len(names) > 0 {
		u.ExpressionAttributeNames = names
	}
	if len(values) > 0 {
		u.ExpressionAttributeValues = values
	}
	return types.TransactWriteItem{Update: u}
}

func putNew(s *Store, item map[string]types.AttributeValue) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName:                           s.table,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// throttled reports whether DynamoDB refused a request for throughput (a
// hot item or partition), after the SDK's own retries.
func throttled(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return false
}
