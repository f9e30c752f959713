package dynamostore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamolocal"
	"github.com/meridian-data/meridian/shared/store/storetest"
)

// The tests run against DynamoDB Local: MERIDIAN_DYNAMODB_ENDPOINT when
// set, otherwise one started with scripts/dynamodb-local.sh (and stopped
// again after the tests if they started it). Each test gets its own table.

var (
	localOnce   sync.Once
	localClient *dynamodb.Client
	localErr    error
	tableSeq    atomic.Int64
	runID       = randomHex(4)
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// client returns the shared client for DynamoDB Local; it fails the test
// (never skips it) when there is none.
func client(t testing.TB) *dynamodb.Client {
	t.Helper()
	localOnce.Do(func() {
		var e string
		if e, localErr = dynamolocal.Endpoint(); localErr != nil {
			return
		}
		httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 512
		})
		localClient = dynamodb.New(dynamodb.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(e),
			Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
			HTTPClient:   httpClient,
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := localClient.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
			localErr = fmt.Errorf("DynamoDB Local at %s does not answer: %w", e, err)
		}
	})
	if localErr != nil {
		t.Fatal(localErr)
	}
	return localClient
}

// newStore returns a store on a fresh table, deleted after the test.
func newStore(t testing.TB) *Store {
	t.Helper()
	c := client(t)
	table := fmt.Sprintf("meridian-test-%s-%d", runID, tableSeq.Add(1))
	if err := CreateTable(context.Background(), c, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Errorf("delete table %s: %v", table, err)
		}
	})
	return New(c, table)
}

var ctx = context.Background()

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var uniq atomic.Int64

func unique(prefix string) string { return fmt.Sprintf("%s%d_%s", prefix, uniq.Add(1), runID) }

func ptr(v int64) *int64 { return &v }

func mustAccount(t *testing.T, s *Store, credits int64) store.Account {
	t.Helper()
	a, err := s.CreateAccount(ctx, credits, sha(unique("console")), unique("req_open"))
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}

func mustKey(t *testing.T, s *Store, accountID string, limit *int64) store.Key {
	t.Helper()
	k, err := s.CreateKey(ctx, store.Key{AccountID: accountID, Hash: sha(unique("key")), Prefix: "mn_abcd", Last4: "wxyz", Name: "k", CreditLimit: limit})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	return k
}

func chargeFor(k store.Key, cost int64) store.Charge {
	return store.Charge{RequestID: unique("req_"), AccountID: k.AccountID, KeyID: k.ID, KeyPrefix: k.Prefix, Endpoint: "/v1/company_registry/search", Cost: cost}
}

func rawItem(t *testing.T, s *Store, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: itemKey(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func attrN(t *testing.T, item map[string]types.AttributeValue, name string) string {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("%s is not a number in %v", name, item)
	}
	return v.Value
}

func attrS(t *testing.T, item map[string]types.AttributeValue, name string) string {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		t.Fatalf("%s is not a string in %v", name, item)
	}
	return v.Value
}

func TestSchemaAndCreateTable(t *testing.T) {
	in := Schema("x")
	if in.BillingMode != types.BillingModePayPerRequest || len(in.KeySchema) != 2 || len(in.AttributeDefinitions) != 4 ||
		aws.ToString(in.KeySchema[0].AttributeName) != "pk" || in.KeySchema[0].KeyType != types.KeyTypeHash ||
		aws.ToString(in.KeySchema[1].AttributeName) != "sk" || in.KeySchema[1].KeyType != types.KeyTypeRange {
		t.Errorf("schema %+v", in)
	}
	for i, name := range []string{"pk", "sk", "lease_pk", "lease_sk"} {
		if d := in.AttributeDefinitions[i]; aws.ToString(d.AttributeName) != name || d.AttributeType != types.ScalarAttributeTypeS {
			t.Errorf("attribute %d: %s %s", i, aws.ToString(d.AttributeName), d.AttributeType)
		}
	}
	if len(in.GlobalSecondaryIndexes) != 1 || len(in.LocalSecondaryIndexes) != 0 {
		t.Fatalf("indexes %+v %+v", in.GlobalSecondaryIndexes, in.LocalSecondaryIndexes)
	}
	gsi := in.GlobalSecondaryIndexes[0]
	if aws.ToString(gsi.IndexName) != "leases" || len(gsi.KeySchema) != 2 ||
		aws.ToString(gsi.KeySchema[0].AttributeName) != "lease_pk" || gsi.KeySchema[0].KeyType != types.KeyTypeHash ||
		aws.ToString(gsi.KeySchema[1].AttributeName) != "lease_sk" || gsi.KeySchema[1].KeyType != types.KeyTypeRange ||
		gsi.Projection == nil || gsi.Projection.ProjectionType != types.ProjectionTypeKeysOnly || gsi.ProvisionedThroughput != nil {
		t.Errorf("lease index %+v", gsi)
	}
	s := newStore(t)
	desc, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table})
	if err != nil {
		t.Fatal(err)
	}
	if g := desc.Table.GlobalSecondaryIndexes; len(g) != 1 || aws.ToString(g[0].IndexName) != LeaseIndex || g[0].IndexStatus != types.IndexStatusActive {
		t.Errorf("created indexes %+v", g)
	}
	if err := CreateTable(ctx, s.db, *s.table); err != nil {
		t.Errorf("a second CreateTable: %v", err)
	}
	ttl, err := s.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: s.table})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != AttrExpiresAt ||
		(d.TimeToLiveStatus != types.TimeToLiveStatusEnabled && d.TimeToLiveStatus != types.TimeToLiveStatusEnabling) {
		t.Errorf("TTL %+v", d)
	}
}

func TestNewClientFromEnv(t *testing.T) {
	e, err := dynamolocal.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	client(t) // share the start-up
	t.Setenv("AWS_ENDPOINT_URL", e)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	c, err := NewClientFromEnv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("AWS_ENDPOINT_URL is honoured: %v", err)
	}
}

// The store learns why a transaction failed from the cancellation
// reasons; this proves the emulator returns the old item there.
func TestCancellationReasonsCarryTheOldItem(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 10)
	c, err := s.transact(ctx, []types.TransactWriteItem{
		update(s, accountPK(a.ID), skAccount, "balance = :expected", "SET balance = :after", nil,
			vals{":expected": num(99), ":after": num(1)}),
		update(s, accountPK(a.ID), "nothing", "attribute_exists(pk)", "SET x = :x", nil, vals{":x": num(1)}),
	})
	if err != nil || c == nil {
		t.Fatalf("cancelled: %v %v", c, err)
	}
	bad, old := c.failed(0)
	acct, err := decode[accountItem](old)
	if !bad || err != nil || acct == nil || acct.Balance != 10 {
		t.Errorf("first reason: %v %+v %v", bad, acct, err)
	}
	if bad, old := c.failed(1); !bad || old != nil {
		t.Errorf("second reason: %v %v", bad, old)
	}
}

func TestItemLayout(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	console := sha(unique("console"))
	a, err := s.CreateAccount(ctx, 50, console, "req_open")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.ID, "acct_") || len(a.ID) != len("acct_")+24 || a.ID != strings.ToLower(a.ID) {
		t.Errorf("account id %q", a.ID)
	}
	pk := "acct#" + a.ID
	acct := rawItem(t, s, pk, "account")
	if attrN(t, acct, "balance") != "50" || attrN(t, acct, "lifetime") != "50" || attrN(t, acct, "active_keys") != "0" || attrS(t, acct, "console_hash") != console {
		t.Errorf("account item %v", acct)
	}
	if ts, err := time.Parse(time.RFC3339Nano, attrS(t, acct, "balance_changed_at")); err != nil || ts.Location() != time.UTC {
		t.Errorf("balance_changed_at: %v %v", ts, err)
	}
	if attrS(t, rawItem(t, s, "console#"+console, "console"), "account_id") != a.ID {
		t.Error("console lookup")
	}
	uncapped := mustKey(t, s, a.ID, nil)
	if !strings.HasPrefix(uncapped.ID, "key_") {
		t.Errorf("key id %q", uncapped.ID)
	}
	ki := rawItem(t, s, pk, "key#"+uncapped.ID)
	if _, has := ki["credit_limit"]; has || attrS(t, ki, "status") != "active" || attrN(t, ki, "credits_used") != "0" || attrS(t, ki, "hash") != uncapped.Hash {
		t.Errorf("uncapped key item %v", ki)
	}
	if lk := rawItem(t, s, "keyhash#"+uncapped.Hash, "keyhash"); attrS(t, lk, "account_id") != a.ID || attrS(t, lk, "key_id") != uncapped.ID {
		t.Errorf("key lookup %v", lk)
	}
	capped := mustKey(t, s, a.ID, ptr(9))
	if attrN(t, rawItem(t, s, pk, "key#"+capped.ID), "credit_limit") != "9" {
		t.Error("credit_limit")
	}
	c := chargeFor(capped, 4)
	r, err := s.Reserve(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	debit := rawItem(t, s, pk, "ledger#"+r.DebitEntryID)
	if attrS(t, debit, "type") != "debit" || attrN(t, debit, "amount") != "-4" || attrN(t, debit, "balance_after") != "46" ||
		attrS(t, debit, "request_id") != c.RequestID || attrS(t, debit, "key_id") != capped.ID || attrS(t, debit, "endpoint") != c.Endpoint {
		t.Errorf("debit item %v", debit)
	}
	res := rawItem(t, s, pk, "req#"+c.RequestID)
	if attrS(t, res, "status") != "reserved" || attrN(t, res, "cost") != "4" || attrS(t, res, "debit_entry") != r.DebitEntryID {
		t.Errorf("reservation item %v", res)
	}
	leaseSK := attrS(t, res, "lease_sk")
	secs, _, _ := strings.Cut(leaseSK, "#")
	if shard := attrS(t, res, "lease_pk"); len(shard) != len("lease#0") || shard < "lease#0" || shard > "lease#7" ||
		len(secs) != 12 || leaseSK != secs+"#"+a.ID+"#"+c.RequestID ||
		secs < fmt.Sprintf("%012d", time.Now().Add(store.ReservationLease-time.Minute).Unix()) ||
		secs > fmt.Sprintf("%012d", time.Now().Add(store.ReservationLease+time.Second).Unix()) {
		t.Errorf("lease keys of a reserved reservation %v", res)
	}
	if _, has := res[AttrExpiresAt]; has {
		t.Error("a reservation still reserved must not expire")
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
		t.Fatal(err)
	}
	res = rawItem(t, s, pk, "req#"+c.RequestID)
	exp := attrN(t, res, AttrExpiresAt)
	// Settling leaves the LeaseIndex entry (no index write); the sweep
	// reads past it from its shard's mark.
	if attrS(t, res, "status") != "settled" || exp <= fmt.Sprint(time.Now().Unix()) || attrS(t, res, "lease_sk") != leaseSK {
		t.Errorf("settled reservation %v", res)
	}
	c2 := chargeFor(capped, 3)
	if _, err := s.Reserve(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refund(ctx, a.ID, c2.RequestID); err != nil {
		t.Fatal(err)
	}
	refund, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: c2.RequestID, Limit: 1})
	if err != nil || len(refund.Entries) != 1 {
		t.Fatalf("refund entry %+v %v", refund, err)
	}
	res = rawItem(t, s, pk, "req#"+c2.RequestID)
	if attrS(t, res, "status") != "refunded" || attrS(t, res, "refund_entry") != refund.Entries[0].ID || attrN(t, res, AttrExpiresAt) <= fmt.Sprint(time.Now().Unix()) ||
		res["lease_pk"] != nil || res["lease_sk"] != nil {
		t.Errorf("refunded reservation %v", res)
	}
	if _, err := s.UpdateKey(ctx, a.ID, capped.ID, store.KeyChange{SetLimit: true}); err != nil {
		t.Fatal(err)
	}
	if _, has := rawItem(t, s, pk, "key#"+capped.ID)["credit_limit"]; has {
		t.Error("credit_limit attribute left behind when the cap is removed")
	}
}

// This store's own errors, where the conformance suite asks only for an error.
func TestErrors(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	console := sha(unique("console"))
	a, err := s.CreateAccount(ctx, 10, console, "req_open")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAccount(ctx, 5, console, "req_again"); !errors.Is(err, ErrConsoleTokenInUse) {
		t.Errorf("a console token opens one account: %v", err)
	}
	k := mustKey(t, s, a.ID, nil)
	if _, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: k.Hash}); !errors.Is(err, ErrKeyHashInUse) {
		t.Errorf("a hash is stored once: %v", err)
	}
	c := chargeFor(k, 2)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); !errors.Is(err, ErrRefunded) {
		t.Errorf("settle after refund: %v", err)
	}
}

// Page sizes and the cursor's form are this store's: DefaultLedgerLimit,
// MaxLedgerLimit, and a cursor naming a ledger sort key of its account.
func TestLedgerPageSizesAndCursors(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 0)
	for i := 0; i <= MaxLedgerLimit; i++ {
		if _, err := s.Grant(ctx, a.ID, 1, "", unique("req_g")); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Ledger(ctx, a.ID, store.LedgerQuery{})
	if err != nil || len(page.Entries) != DefaultLedgerLimit || page.NextCursor == "" {
		t.Errorf("default page: %d %q %v", len(page.Entries), page.NextCursor, err)
	}
	page, err = s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: 500})
	if err != nil || len(page.Entries) != MaxLedgerLimit {
		t.Fatalf("limit capped: %d %v", len(page.Entries), err)
	}
	if want := encodeCursor(a.ID, pfxLedger+page.Entries[MaxLedgerLimit-1].ID); page.NextCursor != want {
		t.Errorf("cursor %q, want %q", page.NextCursor, want)
	}
	bad := []string{encodeCursor(a.ID, "key#x"), encodeCursor(a.ID, pfxLedger), encodeCursor(a.ID, pfxLedger+strings.Repeat("x", 2000))}
	for _, c := range bad {
		if _, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Cursor: c}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
}

// An expired reservation that DynamoDB has not deleted yet counts as gone.
func TestExpiredReservation(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 10)
	k := mustKey(t, s, a.ID, nil)
	c := chargeFor(k, 2)
	item, err := marshal(reservationItem{PK: accountPK(a.ID), SK: pfxReq + c.RequestID, Status: resSettled, Cost: 2,
		KeyID: k.ID, CreatedAt: time.Now().UTC(), ExpiresAt: time.Now().Add(-time.Minute).Unix()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("settle: %v", err)
	}
	if _, err := s.Refund(ctx, a.ID, c.RequestID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refund: %v", err)
	}
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Errorf("the request id is free again: %v", err)
	}
	storetest.CheckLedger(t, s, a.ID)
}

// The outbox writes in transactions of up to outboxPerTx messages and
// outboxTxMaxBytes of bodies, and deletes in batches: many large messages
// go in and out in one call each.
func TestOutboxChunks(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	base := time.Now().UTC().Add(-time.Minute)
	var msgs []store.OutboxMessage
	var ids []string
	for i := 0; i < 3*outboxPerTx; i++ {
		body := []byte(strings.Repeat(fmt.Sprint(i%10), 50_000))
		if i%2 == 0 {
			body = body[:10]
		}
		m := store.OutboxMessage{ID: fmt.Sprintf("m%03d", i), Body: body, CreatedAt: base.Add(time.Duration(i) * time.Millisecond)}
		msgs, ids = append(msgs, m), append(ids, m.ID)
	}
	if err := s.PutOutbox(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := s.PutOutbox(ctx, msgs); err != nil {
		t.Fatalf("putting them all again: %v", err)
	}
	got, err := s.OutboxBatch(ctx, 1000)
	if err != nil || len(got) != len(msgs) {
		t.Fatalf("%d messages, want %d: %v", len(got), len(msgs), err)
	}
	for i, m := range got {
		if m.ID != msgs[i].ID || string(m.Body) != string(msgs[i].Body) || !m.CreatedAt.Equal(msgs[i].CreatedAt) {
			t.Fatalf("message %d: %s, want %s", i, m.ID, msgs[i].ID)
		}
	}
	guard := rawItem(t, s, "outboxid#m000", "outboxid")
	if attrN(t, guard, AttrExpiresAt) != fmt.Sprint(msgs[0].CreatedAt.Add(store.OutboxRetention).Unix()) {
		t.Errorf("guard %v", guard)
	}
	if err := s.DeleteOutbox(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if got, err := s.OutboxBatch(ctx, 1000); err != nil || len(got) != 0 {
		t.Errorf("after deleting all: %d %v", len(got), err)
	}
	if guard := rawItem(t, s, "outboxid#m000", "outboxid"); guard != nil {
		t.Errorf("guard left behind: %v", guard)
	}
}

// A key hash record written before records carried the key's status (an
// older deployment's) is completed from the key on its first Enter, and a
// revoked legacy key stays refused.
func TestEnterCompletesALegacyHashRecord(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	a, err := s.CreateAccount(ctx, 10, "console-legacy", "req_open_legacy")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[store.KeyStatus]store.Key{}
	for _, status := range []store.KeyStatus{store.KeyActive, store.KeyRevoked} {
		k, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: "hash-legacy-" + string(status), Prefix: "mn_lega", Last4: "abcd"})
		if err != nil {
			t.Fatal(err)
		}
		if status != store.KeyActive {
			if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, status); err != nil {
				t.Fatal(err)
			}
		}
		// As an older version wrote it: no status, no prefix.
		if _, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: s.table, Key: itemKey(pfxKeyHash+k.Hash, skKeyHash),
			UpdateExpression: aws.String("REMOVE #status, prefix"), ExpressionAttributeNames: statusName,
		}); err != nil {
			t.Fatal(err)
		}
		keys[status] = k
	}
	now := time.Now()
	got, adm, err := s.Enter(ctx, keys[store.KeyActive].Hash, "req_legacy_1", now, store.DefaultLimits, true)
	if err != nil || !adm.Admitted || got.ID != keys[store.KeyActive].ID || got.Prefix != "mn_lega" {
		t.Fatalf("legacy active key: %+v %+v %v", got, adm, err)
	}
	if _, _, err := s.Enter(ctx, keys[store.KeyRevoked].Hash, "req_legacy_2", now, store.DefaultLimits, true); !errors.Is(err, store.ErrKeyInactive) {
		t.Errorf("legacy revoked key: %v", err)
	}
}

// A cache entry of JSON is stored gzipped: DynamoDB bills its writes per
// started kilobyte of the item. Data gzip cannot shrink is stored as it is.
func TestCacheEntriesAreStoredCompressed(t *testing.T) {
	s := newStore(t)
	now := time.Now()
	data := []byte(`{"items":[`)
	for i := 0; i < 40; i++ {
		data = fmt.Appendf(data, `{"company_number":"%08d","name":"ACME HOLDINGS %d LIMITED","status":"active"},`, i, i)
	}
	data = append(data[:len(data)-1], "]}"...)
	key := unique("gz")
	if err := s.CachePut(ctx, key, data, now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	item := rawItem(t, s, pfxCache+key, skCache)
	gz, ok := item["data_gz"].(*types.AttributeValueMemberB)
	if _, plain := item["data"]; !ok || plain || len(gz.Value) >= len(data)/3 {
		t.Fatalf("a %d-byte JSON entry is not stored gzipped: %v", len(data), item)
	}
	tiny := unique("tiny")
	if err := s.CachePut(ctx, tiny, []byte(`{}`), now, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if item := rawItem(t, s, pfxCache+tiny, skCache); item["data"] == nil || item["data_gz"] != nil {
		t.Errorf("two bytes gzip would grow are stored as they are: %v", item)
	}
}
