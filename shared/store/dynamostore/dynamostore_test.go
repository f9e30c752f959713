package dynamostore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
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

func TestMain(m *testing.M) {
	code := m.Run()
	dynamolocal.StopIfStarted()
	os.Exit(code)
}

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
	a, err := s.CreateAccount(ctx, credits, sha(unique("console")))
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

func mustAccountState(t *testing.T, s *Store, id string) store.Account {
	t.Helper()
	a, err := s.Account(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return a
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

// books reads the whole ledger and proves it: newest first by id, every
// balance_after follows from the entry before it, the amounts sum to the
// balance, nothing is negative, every non-grant entry names its request.
func books(t *testing.T, s *Store, accountID string) []store.Entry {
	t.Helper()
	var all []store.Entry
	q := store.LedgerQuery{Limit: 100}
	for {
		page, err := s.Ledger(ctx, accountID, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Entries...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	a := mustAccountState(t, s, accountID)
	var sum int64
	for i, e := range all {
		sum += e.Amount
		if e.BalanceAfter < 0 {
			t.Errorf("entry %s: balance_after %d", e.ID, e.BalanceAfter)
		}
		if e.Type != store.EntryGrant && e.RequestID == "" {
			t.Errorf("entry %s names no request", e.ID)
		}
		if i+1 < len(all) {
			if all[i+1].ID >= e.ID {
				t.Errorf("not newest first: %s then %s", e.ID, all[i+1].ID)
			}
			if e.BalanceAfter-e.Amount != all[i+1].BalanceAfter {
				t.Errorf("chain broken at %d: %+v after %+v", i, e, all[i+1])
			}
		} else if e.BalanceAfter != e.Amount {
			t.Errorf("the oldest entry does not start from 0: %+v", e)
		}
	}
	if sum != a.CreditsRemaining || a.CreditsRemaining < 0 {
		t.Errorf("ledger sums to %d, balance %d", sum, a.CreditsRemaining)
	}
	if len(all) > 0 && all[0].BalanceAfter != a.CreditsRemaining {
		t.Errorf("newest balance_after %d, balance %d", all[0].BalanceAfter, a.CreditsRemaining)
	}
	return all
}

func TestSchemaAndCreateTable(t *testing.T) {
	in := Schema("x")
	if in.BillingMode != types.BillingModePayPerRequest || len(in.KeySchema) != 2 || len(in.AttributeDefinitions) != 2 ||
		aws.ToString(in.KeySchema[0].AttributeName) != "pk" || in.KeySchema[0].KeyType != types.KeyTypeHash ||
		aws.ToString(in.KeySchema[1].AttributeName) != "sk" || in.KeySchema[1].KeyType != types.KeyTypeRange ||
		in.AttributeDefinitions[0].AttributeType != types.ScalarAttributeTypeS || in.AttributeDefinitions[1].AttributeType != types.ScalarAttributeTypeS {
		t.Errorf("schema %+v", in)
	}
	s := newStore(t)
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
	a, err := s.CreateAccount(ctx, 50, console)
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
	if _, has := res[AttrExpiresAt]; has {
		t.Error("a reservation still reserved must not expire")
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); err != nil {
		t.Fatal(err)
	}
	res = rawItem(t, s, pk, "req#"+c.RequestID)
	exp := attrN(t, res, AttrExpiresAt)
	if attrS(t, res, "status") != "settled" || exp <= fmt.Sprint(time.Now().Unix()) {
		t.Errorf("settled reservation %v", res)
	}
}

func TestAccountsAndGrants(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	token := sha(unique("console"))
	a, err := s.CreateAccount(ctx, 0, token)
	if err != nil {
		t.Fatal(err)
	}
	if len(books(t, s, a.ID)) != 0 {
		t.Error("an empty account has no entries")
	}
	if _, err := s.CreateAccount(ctx, 5, token); !errors.Is(err, ErrConsoleTokenInUse) {
		t.Errorf("a console token opens one account: %v", err)
	}
	if _, err := s.CreateAccount(ctx, -1, sha(unique("c"))); err == nil {
		t.Error("negative opening credits")
	}
	for _, amount := range []int64{0, -5} {
		if _, err := s.Grant(ctx, a.ID, amount, "", "req_g"); err == nil {
			t.Errorf("grant of %d", amount)
		}
	}
	got, err := s.Grant(ctx, a.ID, 40, "welcome", "req_g1")
	if err != nil || got.CreditsRemaining != 40 || got.CreditsLifetime != 40 || got.ID != a.ID {
		t.Fatalf("grant %+v %v", got, err)
	}
	e := books(t, s, a.ID)[0]
	if e.Type != store.EntryGrant || e.Amount != 40 || e.RequestID != "req_g1" || e.Note != "welcome" || e.AccountID != a.ID {
		t.Errorf("grant entry %+v", e)
	}
	if by, err := s.AccountByConsoleToken(ctx, token); err != nil || by.CreditsRemaining != 40 {
		t.Errorf("by token %+v %v", by, err)
	}
	if _, err := s.Grant(ctx, "acct_none", 1, "", "r"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("grant to nobody: %v", err)
	}
}

// Concurrent grants and debits: every grant returns the exact account
// after it, and the books balance.
func TestConcurrentGrantsAndReserves(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 0)
	k := mustKey(t, s, a.ID, nil)
	const grants, reserves = 40, 80
	var wg sync.WaitGroup
	lifetimes := make(chan int64, grants)
	var spent atomic.Int64
	for i := 0; i < grants+reserves; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i%3 == 0 && i/3 < grants {
				got, err := s.Grant(ctx, a.ID, 5, "", unique("req_g"))
				if err != nil {
					t.Error(err)
					return
				}
				lifetimes <- got.CreditsLifetime
				return
			}
			var short *store.InsufficientCreditsError
			_, err := s.Reserve(ctx, chargeFor(k, 2))
			switch {
			case err == nil:
				spent.Add(2)
			case !errors.As(err, &short):
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	close(lifetimes)
	seen := map[int64]bool{}
	for l := range lifetimes {
		seen[l] = true
	}
	for i := int64(1); i <= grants; i++ {
		if !seen[5*i] {
			t.Errorf("no grant returned lifetime %d: %v", 5*i, seen)
		}
	}
	acct := mustAccountState(t, s, a.ID)
	if acct.CreditsLifetime != 5*grants || acct.CreditsRemaining != 5*grants-spent.Load() {
		t.Errorf("account %+v, spent %d", acct, spent.Load())
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != spent.Load() {
		t.Errorf("credits_used %d, spent %d", got.CreditsUsed, spent.Load())
	}
	books(t, s, a.ID)
}

// reserveMany runs n concurrent reservations of cost and counts outcomes.
func reserveMany(t *testing.T, s *Store, k store.Key, n int, cost int64) (ok, limited, short int64) {
	var okN, limitN, shortN atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var le *store.KeyLimitError
			var ie *store.InsufficientCreditsError
			r, err := s.Reserve(ctx, chargeFor(k, cost))
			switch {
			case err == nil:
				okN.Add(1)
				if r.CreditsRemaining < 0 || r.DebitEntryID == "" {
					t.Errorf("reservation %+v", r)
				}
			case errors.As(err, &le):
				limitN.Add(1)
			case errors.As(err, &ie):
				shortN.Add(1)
				if ie.Required != cost || ie.Remaining >= cost || ie.Remaining < 0 {
					t.Errorf("insufficient %+v", ie)
				}
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	return okN.Load(), limitN.Load(), shortN.Load()
}

func TestConcurrentReserveKeyLimit(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 1000)
	k := mustKey(t, s, a.ID, ptr(30))
	ok, limited, short := reserveMany(t, s, k, 200, 3)
	if ok != 10 || limited != 190 || short != 0 {
		t.Fatalf("%d ok, %d key limit, %d insufficient; want 10/190/0", ok, limited, short)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 30 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	if entries := books(t, s, a.ID); len(entries) != 11 || entries[0].BalanceAfter != 970 {
		t.Errorf("%d entries", len(entries))
	}
}

func TestConcurrentReserveWallet(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 30)
	k := mustKey(t, s, a.ID, nil)
	ok, limited, short := reserveMany(t, s, k, 200, 3)
	if ok != 10 || short != 190 || limited != 0 {
		t.Fatalf("%d ok, %d insufficient, %d key limit; want 10/190/0", ok, short, limited)
	}
	if acct := mustAccountState(t, s, a.ID); acct.CreditsRemaining != 0 || acct.CreditsLifetime != 30 {
		t.Errorf("account %+v", acct)
	}
	books(t, s, a.ID)
}

// Limits changing under concurrent reservations: every reservation that
// went through is counted once, whatever the limit was.
func TestReserveWhileTheLimitChanges(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 1000)
	k := mustKey(t, s, a.ID, ptr(1000))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 30; i++ {
			limit := []*int64{ptr(1000), nil, ptr(999)}[i%3]
			if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: limit}); err != nil {
				t.Error(err)
			}
		}
	}()
	ok, limited, short := reserveMany(t, s, k, 40, 1)
	<-done
	if ok != 40 || limited != 0 || short != 0 {
		t.Errorf("%d ok, %d limited, %d short", ok, limited, short)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 40 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	books(t, s, a.ID)
}

func TestReserveRefusals(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 10)
	k := mustKey(t, s, a.ID, ptr(6))
	if _, err := s.Reserve(ctx, chargeFor(k, 0)); err == nil {
		t.Error("a reservation of 0")
	}
	missing := k
	missing.ID = "key_missing"
	if _, err := s.Reserve(ctx, chargeFor(missing, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	other := mustAccount(t, s, 10)
	foreign := k
	foreign.AccountID = other.ID
	if _, err := s.Reserve(ctx, chargeFor(foreign, 1)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key of another account: %v", err)
	}
	// Over both the key's limit and the wallet: the key's limit is reported.
	var limit *store.KeyLimitError
	if _, err := s.Reserve(ctx, chargeFor(k, 11)); !errors.As(err, &limit) || limit.CreditLimit != 6 || limit.CreditsUsed != 0 {
		t.Errorf("key limit first: %v", err)
	}
	c := chargeFor(k, 6)
	if _, err := s.Reserve(ctx, c); err != nil {
		t.Fatalf("exactly the limit: %v", err)
	}
	if _, err := s.Reserve(ctx, c); !errors.Is(err, store.ErrDuplicateRequest) {
		t.Errorf("the same request twice: %v", err)
	}
	// A limit lowered below what is used: allowed, and refuses charges.
	if got, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr(2)}); err != nil || *got.CreditLimit != 2 || got.CreditsUsed != 6 {
		t.Fatalf("lower the limit: %+v %v", got, err)
	}
	if _, err := s.Reserve(ctx, chargeFor(k, 1)); !errors.As(err, &limit) || limit.CreditLimit != 2 || limit.CreditsUsed != 6 {
		t.Errorf("limit below used: %v", err)
	}
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true}); err != nil {
		t.Fatal(err)
	}
	var short *store.InsufficientCreditsError
	if _, err := s.Reserve(ctx, chargeFor(k, 5)); !errors.As(err, &short) || short.Required != 5 || short.Remaining != 4 {
		t.Errorf("uncapped, insufficient: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, chargeFor(k, 1)); !errors.Is(err, store.ErrKeyInactive) {
		t.Errorf("revoked key: %v", err)
	}
	if acct := mustAccountState(t, s, a.ID); acct.CreditsRemaining != 4 {
		t.Errorf("refusals charged: %+v", acct)
	}
	books(t, s, a.ID)
}

func TestRefundAndSettle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 20)
	k := mustKey(t, s, a.ID, ptr(15))
	c := chargeFor(k, 5)
	r, err := s.Reserve(ctx, c)
	if err != nil || r.CreditsRemaining != 15 {
		t.Fatalf("reserve %+v %v", r, err)
	}
	// The balance moves between reserve and refund; the refund builds on it.
	if _, err := s.Grant(ctx, a.ID, 100, "", "req_top"); err != nil {
		t.Fatal(err)
	}
	after, err := s.Refund(ctx, a.ID, c.RequestID)
	if err != nil || after != 120 {
		t.Fatalf("refund %d %v", after, err)
	}
	if again, err := s.Refund(ctx, a.ID, c.RequestID); err != nil || again != 120 {
		t.Errorf("second refund %d %v", again, err)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	var net int64
	n := 0
	for _, e := range books(t, s, a.ID) {
		if e.RequestID == c.RequestID {
			net += e.Amount
			n++
			if e.KeyID != k.ID || e.Endpoint != c.Endpoint || e.KeyPrefix != c.KeyPrefix {
				t.Errorf("entry %+v", e)
			}
		}
	}
	if n != 2 || net != 0 {
		t.Errorf("%d entries netting %d", n, net)
	}
	if err := s.Settle(ctx, a.ID, c.RequestID); !errors.Is(err, ErrRefunded) {
		t.Errorf("settle after refund: %v", err)
	}
	if res := rawItem(t, s, "acct#"+a.ID, "req#"+c.RequestID); attrS(t, res, "status") != "refunded" || attrS(t, res, "refund_entry") == "" {
		t.Errorf("refunded reservation %v", res)
	}

	c2 := chargeFor(k, 3)
	if _, err := s.Reserve(ctx, c2); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := s.Settle(ctx, a.ID, c2.RequestID); err != nil {
			t.Errorf("settle %d: %v", i, err)
		}
	}
	if _, err := s.Refund(ctx, a.ID, c2.RequestID); !errors.Is(err, store.ErrSettled) {
		t.Errorf("refund after settle: %v", err)
	}
	if err := s.Settle(ctx, a.ID, "req_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("settle nothing: %v", err)
	}
	if _, err := s.Refund(ctx, a.ID, "req_none"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refund nothing: %v", err)
	}
	if _, err := s.Refund(ctx, "acct_none", c2.RequestID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("refund in another account: %v", err)
	}
	if acct := mustAccountState(t, s, a.ID); acct.CreditsRemaining != 117 {
		t.Errorf("balance %d", acct.CreditsRemaining)
	}
}

func TestConcurrentDoubleRefunds(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 100)
	k := mustKey(t, s, a.ID, ptr(100))
	var charges []store.Charge
	for i := 0; i < 10; i++ {
		c := chargeFor(k, int64(i+1))
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
		charges = append(charges, c)
	}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func(c store.Charge) {
			defer wg.Done()
			if _, err := s.Refund(ctx, a.ID, c.RequestID); err != nil {
				t.Error(err)
			}
		}(charges[i%10])
	}
	wg.Wait()
	if acct := mustAccountState(t, s, a.ID); acct.CreditsRemaining != 100 {
		t.Errorf("balance %d", acct.CreditsRemaining)
	}
	if got, _ := s.Key(ctx, a.ID, k.ID); got.CreditsUsed != 0 {
		t.Errorf("credits_used %d", got.CreditsUsed)
	}
	if entries := books(t, s, a.ID); len(entries) != 1+10+10 {
		t.Errorf("%d entries, want 21", len(entries))
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
	books(t, s, a.ID)
}

func TestKeyStatusTransitions(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 0)
	active := func(want int) {
		t.Helper()
		if got := mustAccountState(t, s, a.ID).ActiveKeys; got != want {
			t.Fatalf("active_keys %d, want %d", got, want)
		}
	}
	var keys []store.Key
	for i := 0; i < store.MaxActiveKeys; i++ {
		keys = append(keys, mustKey(t, s, a.ID, nil))
	}
	active(5)
	if _, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: sha(unique("k"))}); !errors.Is(err, store.ErrTooManyKeys) {
		t.Fatalf("sixth key: %v", err)
	}
	if _, err := s.CreateKey(ctx, store.Key{AccountID: "acct_none", Hash: sha(unique("k"))}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("key for nobody: %v", err)
	}
	if _, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: keys[0].Hash}); err == nil {
		t.Error("a hash is stored once")
	}
	set := func(k store.Key, to store.KeyStatus) (store.Key, error) { return s.SetKeyStatus(ctx, a.ID, k.ID, to) }
	if got, err := set(keys[0], store.KeyRevoked); err != nil || got.Status != store.KeyRevoked || !got.UpdatedAt.After(keys[0].UpdatedAt) {
		t.Fatalf("revoke %+v %v", got, err)
	}
	active(4)
	if byHash, _ := s.KeyByHash(ctx, keys[0].Hash); byHash.Status != store.KeyRevoked {
		t.Errorf("the next lookup sees %s", byHash.Status)
	}
	if got, err := set(keys[0], store.KeyRevoked); err != nil || got.Status != store.KeyRevoked {
		t.Errorf("revoke again is a no-op: %+v %v", got, err)
	}
	active(4)
	sixth := mustKey(t, s, a.ID, nil)
	if _, err := set(keys[0], store.KeyActive); !errors.Is(err, store.ErrTooManyKeys) {
		t.Errorf("reactivate past the cap: %v", err)
	}
	active(5)
	if _, err := set(sixth, store.KeyDeleted); err != nil {
		t.Fatal(err)
	}
	active(4)
	if got, err := set(keys[0], store.KeyActive); err != nil || got.Status != store.KeyActive {
		t.Fatalf("reactivate %+v %v", got, err)
	}
	active(5)
	if _, err := set(keys[1], store.KeyRevoked); err != nil {
		t.Fatal(err)
	}
	if _, err := set(keys[1], store.KeyDeleted); err != nil {
		t.Fatal(err)
	}
	active(4) // deleting a revoked key frees nothing twice
	for _, to := range []store.KeyStatus{store.KeyActive, store.KeyRevoked, store.KeyDeleted} {
		if _, err := set(keys[1], to); !errors.Is(err, store.ErrKeyDeleted) {
			t.Errorf("deleted -> %s: %v", to, err)
		}
	}
	if _, err := set(keys[1], "paused"); err == nil {
		t.Error("unknown status")
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, "key_none", store.KeyRevoked); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if kept, err := s.KeyByHash(ctx, keys[1].Hash); err != nil || kept.Status != store.KeyDeleted {
		t.Errorf("the deleted row is kept: %+v %v", kept, err)
	}
	list, err := s.Keys(ctx, a.ID)
	if err != nil || len(list) != 4 {
		t.Fatalf("keys %d %v", len(list), err)
	}
	for i := range list {
		if list[i].Status == store.KeyDeleted || i > 0 && list[i].CreatedAt.Before(list[i-1].CreatedAt) {
			t.Errorf("list %+v", list)
		}
	}
}

func TestUpdateKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 0)
	k := mustKey(t, s, a.ID, nil)
	name := "renamed"
	got, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name, SetLimit: true, CreditLimit: ptr(7)})
	if err != nil || got.Name != name || got.CreditLimit == nil || *got.CreditLimit != 7 || got.Status != store.KeyActive || got.Hash != k.Hash {
		t.Fatalf("update %+v %v", got, err)
	}
	if got, err = s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true}); err != nil || got.CreditLimit != nil || got.Name != name {
		t.Errorf("remove the cap %+v %v", got, err)
	}
	if _, has := rawItem(t, s, "acct#"+a.ID, "key#"+k.ID)["credit_limit"]; has {
		t.Error("credit_limit attribute left behind")
	}
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{SetLimit: true, CreditLimit: ptr(-1)}); err == nil {
		t.Error("negative limit")
	}
	if _, err := s.UpdateKey(ctx, a.ID, "key_none", store.KeyChange{Name: &name}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := s.SetKeyStatus(ctx, a.ID, k.ID, store.KeyDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateKey(ctx, a.ID, k.ID, store.KeyChange{Name: &name}); !errors.Is(err, store.ErrKeyDeleted) {
		t.Errorf("deleted key: %v", err)
	}
}

func TestConcurrentCreateKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 0)
	var ok, capped atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Hash: sha(unique("k"))})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrTooManyKeys):
				capped.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 5 || capped.Load() != 5 {
		t.Errorf("%d created, %d capped", ok.Load(), capped.Load())
	}
	if list, _ := s.Keys(ctx, a.ID); len(list) != 5 || mustAccountState(t, s, a.ID).ActiveKeys != 5 {
		t.Errorf("%d keys", len(list))
	}
}

// Racing revocations, reactivations and deletions keep active_keys equal
// to the number of active keys.
func TestConcurrentStatusChanges(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 0)
	var keys []store.Key
	for i := 0; i < 4; i++ {
		keys = append(keys, mustKey(t, s, a.ID, nil))
	}
	var wg sync.WaitGroup
	for i := 0; i < 80; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			to := []store.KeyStatus{store.KeyRevoked, store.KeyActive, store.KeyRevoked, store.KeyActive, store.KeyDeleted}[i%5]
			_, err := s.SetKeyStatus(ctx, a.ID, keys[i%4].ID, to)
			if err != nil && !errors.Is(err, store.ErrKeyDeleted) && !errors.Is(err, store.ErrTooManyKeys) {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	n := 0
	for _, k := range keys {
		if got, _ := s.Key(ctx, a.ID, k.ID); got.Status == store.KeyActive {
			n++
		}
	}
	if got := mustAccountState(t, s, a.ID).ActiveKeys; got != n {
		t.Errorf("active_keys %d, %d keys active", got, n)
	}
}

func TestLedgerPages(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := mustAccount(t, s, 1000)
	k := mustKey(t, s, a.ID, nil)
	var target store.Charge
	for i := 0; i < 130; i++ {
		c := chargeFor(k, 1)
		if i == 3 {
			target = c // deep in the ledger: the filter has to page
		}
		if _, err := s.Reserve(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Refund(ctx, a.ID, target.RequestID); err != nil {
		t.Fatal(err)
	}
	page, err := s.Ledger(ctx, a.ID, store.LedgerQuery{})
	if err != nil || len(page.Entries) != DefaultLedgerLimit || page.NextCursor == "" {
		t.Errorf("default page: %d %q %v", len(page.Entries), page.NextCursor, err)
	}
	page, err = s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: 500})
	if err != nil || len(page.Entries) != MaxLedgerLimit {
		t.Errorf("limit capped: %d %v", len(page.Entries), err)
	}
	rest, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Limit: 100, Cursor: page.NextCursor})
	if err != nil || len(rest.Entries) != 132-100 || rest.NextCursor != "" {
		t.Errorf("last page: %d %q %v", len(rest.Entries), rest.NextCursor, err)
	}
	if rest.Entries[len(rest.Entries)-1].Type != store.EntryGrant || rest.Entries[0].ID >= page.Entries[99].ID {
		t.Error("pages do not continue each other")
	}
	if len(books(t, s, a.ID)) != 132 {
		t.Error("books")
	}
	byReq, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: target.RequestID})
	if err != nil || len(byReq.Entries) != 2 || byReq.NextCursor != "" || byReq.Entries[0].Type != store.EntryRefund || byReq.Entries[1].Type != store.EntryDebit {
		t.Errorf("by request: %+v %v", byReq, err)
	}
	first, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: target.RequestID, Limit: 1})
	if err != nil || len(first.Entries) != 1 || first.NextCursor == "" {
		t.Fatalf("by request, one per page: %+v %v", first, err)
	}
	second, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: target.RequestID, Limit: 1, Cursor: first.NextCursor})
	if err != nil || len(second.Entries) != 1 || second.Entries[0].Type != store.EntryDebit || second.NextCursor != "" {
		t.Errorf("by request, second page: %+v %v", second, err)
	}
	if none, err := s.Ledger(ctx, a.ID, store.LedgerQuery{RequestID: "req_none"}); err != nil || len(none.Entries) != 0 || none.NextCursor != "" {
		t.Errorf("no entries: %+v %v", none, err)
	}
	other := mustAccount(t, s, 1)
	bad := []string{"%%%", encodeCursor(a.ID, "key#x"), encodeCursor(a.ID, "ledger#"), encodeCursor(a.ID, "ledger#"+strings.Repeat("x", 2000))}
	for _, c := range bad {
		if _, err := s.Ledger(ctx, a.ID, store.LedgerQuery{Cursor: c}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
	if _, err := s.Ledger(ctx, other.ID, store.LedgerQuery{Cursor: page.NextCursor}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("another account's cursor: %v", err)
	}
	if empty, err := s.Ledger(ctx, "acct_none", store.LedgerQuery{}); err != nil || len(empty.Entries) != 0 {
		t.Errorf("unknown account: %+v %v", empty, err)
	}
}
