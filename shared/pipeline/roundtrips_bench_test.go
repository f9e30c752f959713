package pipeline_test

// Store round trips per request kind on DynamoDB Local (BENCHMARKS.md,
// section 3). An aws-sdk-go-v2 middleware on the store's client counts
// every operation, times it, asks for ReturnConsumedCapacity=TOTAL and
// sums the capacity units the answers report. Runs only with -bench:
//
//	go test ./shared/pipeline -run '^$' -bench '^BenchmarkStoreRoundTrips$' -benchtime 20x
//
// Metrics per request: crit-steps (sequential store round trips before
// the last byte of the response is written: what the caller waits for,
// the answer's own writes included), crit-calls (operations before it),
// handler-steps and handler-calls (everything until ServeHTTP returns: in
// Lambda the adapter sends the response only then), RRU and
// WRU (request units by AWS's published rules, from the sizes of the items
// touched), worker-calls and worker-WRU (applying the request's usage
// events later, per request, as the worker does in SQS batches of ten
// consecutive requests' events), and ms (the request's wall time on
// DynamoDB Local). DynamoDB Local's own ConsumedCapacity figures are kept
// too (local-RCU, local-WCU), but the emulator's accounting of
// transactions does not follow AWS's (it reports the same units for a
// transaction of one item as of four). With MERIDIAN_BENCH_OUT set, the
// results and the operations on each path are also written there as JSON.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/meridian-data/meridian/scripts/bench/roundtrip"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamolocal"
	"github.com/meridian-data/meridian/shared/usage"
)

// EnvBenchOut names the JSON file BenchmarkStoreRoundTrips writes.
const EnvBenchOut = "MERIDIAN_BENCH_OUT"

// storeCall is one DynamoDB operation as the middleware saw it.
type storeCall struct {
	Op         string
	Target     string // which items: pk prefixes (and sk kinds under acct#)
	Start, End time.Time
	Goroutine  uint64
	Attempts   int
	Err        bool // a refused condition, a cancelled transaction or another error
	// LocalRCU and LocalWCU are what DynamoDB Local reported.
	LocalRCU, LocalWCU float64
	// RRU and WRU follow AWS's rules (estimateUnits); writes whose item
	// size is known only after the request wait in resize.
	RRU, WRU float64
	resize   []resize
}

// resize is a written item whose size decides its write units: one unit
// per KB, times factor (2 in a transaction).
type resize struct {
	key    map[string]types.AttributeValue
	factor float64
}

// callLog records the calls of the client it is installed on.
type callLog struct {
	mu    sync.Mutex
	on    bool
	calls []storeCall
}

func (l *callLog) start() {
	l.mu.Lock()
	l.on, l.calls = true, nil
	l.mu.Unlock()
}

func (l *callLog) stop() []storeCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.on, l.calls = false, nil
	return out
}

type attemptsKey struct{}

// install adds the counting middleware to a client's stack: at Initialize
// (once per operation, around the SDK's retries) it sets
// ReturnConsumedCapacity, times the operation and prices it; at the end of
// Finalize (once per HTTP attempt) it counts attempts.
func (l *callLog) install(stack *middleware.Stack) error {
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("benchCallLog",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			l.mu.Lock()
			on := l.on
			l.mu.Unlock()
			if !on {
				return next.HandleInitialize(ctx, in)
			}
			target := askCapacity(in.Parameters)
			attempts := new(int)
			c := storeCall{Op: awsmiddleware.GetOperationName(ctx), Target: target, Goroutine: goroutineID(), Start: time.Now()}
			out, md, err := next.HandleInitialize(context.WithValue(ctx, attemptsKey{}, attempts), in)
			c.End, c.Attempts, c.Err = time.Now(), *attempts, err != nil
			if err == nil {
				c.LocalRCU, c.LocalWCU = capacity(out.Result)
			}
			estimateUnits(&c, in.Parameters, out.Result, err)
			l.mu.Lock()
			l.calls = append(l.calls, c)
			l.mu.Unlock()
			return out, md, err
		}), middleware.Before)
	if err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("benchAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if n, ok := ctx.Value(attemptsKey{}).(*int); ok {
				*n++
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// goroutineID is the current goroutine's number ("goroutine N [...").
func goroutineID() uint64 {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _ := strconv.ParseUint(s[:max(strings.IndexByte(s, ' '), 0)], 10, 64)
	return id
}

// itemKind names an item by its key: the pk prefix, or under acct# the
// kind of sort key (account, key, ledger, reservation).
func itemKind(key map[string]types.AttributeValue) string {
	pk, _ := key[dynamostore.AttrPK].(*types.AttributeValueMemberS)
	sk, _ := key[dynamostore.AttrSK].(*types.AttributeValueMemberS)
	if pk == nil {
		return "?"
	}
	kind, _, _ := strings.Cut(pk.Value, "#")
	if kind == "acct" && sk != nil {
		switch s, _, _ := strings.Cut(sk.Value, "#"); s {
		case "account":
			return "account"
		case "req":
			return "reservation"
		default:
			return s
		}
	}
	return kind
}

func kinds(keys []map[string]types.AttributeValue) string {
	var out []string
	for _, k := range keys {
		out = append(out, itemKind(k))
	}
	return strings.Join(out, "+")
}

// keyOf keeps only the key attributes of an item.
func keyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.AttrPK: item[dynamostore.AttrPK], dynamostore.AttrSK: item[dynamostore.AttrSK]}
}

// transactKeys lists the items of a TransactWriteItems.
func transactKeys(in *dynamodb.TransactWriteItemsInput) []map[string]types.AttributeValue {
	var keys []map[string]types.AttributeValue
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			keys = append(keys, keyOf(it.Put.Item))
		case it.Update != nil:
			keys = append(keys, it.Update.Key)
		case it.Delete != nil:
			keys = append(keys, it.Delete.Key)
		case it.ConditionCheck != nil:
			keys = append(keys, it.ConditionCheck.Key)
		}
	}
	return keys
}

// askCapacity sets ReturnConsumedCapacity=TOTAL on inputs that take it
// and names the items the operation touches.
func askCapacity(params any) string {
	total := types.ReturnConsumedCapacityTotal
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = total
		return itemKind(in.Key)
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = total
		return itemKind(in.Item)
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = total
		return itemKind(in.Key)
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = total
		return itemKind(in.Key)
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = total
		return aws.ToString(in.IndexName)
	case *dynamodb.BatchGetItemInput:
		in.ReturnConsumedCapacity = total
		var keys []map[string]types.AttributeValue
		for _, ka := range in.RequestItems {
			keys = append(keys, ka.Keys...)
		}
		return kinds(keys)
	case *dynamodb.BatchWriteItemInput:
		in.ReturnConsumedCapacity = total
		var keys []map[string]types.AttributeValue
		for _, reqs := range in.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					keys = append(keys, r.PutRequest.Item)
				} else if r.DeleteRequest != nil {
					keys = append(keys, r.DeleteRequest.Key)
				}
			}
		}
		return kinds(keys)
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = total
		return kinds(transactKeys(in))
	case *dynamodb.TransactGetItemsInput:
		in.ReturnConsumedCapacity = total
		var keys []map[string]types.AttributeValue
		for _, it := range in.TransactItems {
			if it.Get != nil {
				keys = append(keys, it.Get.Key)
			}
		}
		return kinds(keys)
	}
	return ""
}

// capacity sums the read and write units DynamoDB Local reports.
func capacity(result any) (rcu, wcu float64) {
	add := func(c *types.ConsumedCapacity, write bool) {
		if c == nil {
			return
		}
		r, w := aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.WriteCapacityUnits)
		if r == 0 && w == 0 {
			if write {
				w = aws.ToFloat64(c.CapacityUnits)
			} else {
				r = aws.ToFloat64(c.CapacityUnits)
			}
		}
		rcu, wcu = rcu+r, wcu+w
	}
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		add(out.ConsumedCapacity, false)
	case *dynamodb.QueryOutput:
		add(out.ConsumedCapacity, false)
	case *dynamodb.PutItemOutput:
		add(out.ConsumedCapacity, true)
	case *dynamodb.UpdateItemOutput:
		add(out.ConsumedCapacity, true)
	case *dynamodb.DeleteItemOutput:
		add(out.ConsumedCapacity, true)
	case *dynamodb.BatchGetItemOutput:
		for i := range out.ConsumedCapacity {
			add(&out.ConsumedCapacity[i], false)
		}
	case *dynamodb.BatchWriteItemOutput:
		for i := range out.ConsumedCapacity {
			add(&out.ConsumedCapacity[i], true)
		}
	case *dynamodb.TransactWriteItemsOutput:
		for i := range out.ConsumedCapacity {
			add(&out.ConsumedCapacity[i], true)
		}
	case *dynamodb.TransactGetItemsOutput:
		for i := range out.ConsumedCapacity {
			add(&out.ConsumedCapacity[i], false)
		}
	}
	return rcu, wcu
}

// itemSize is an item's size by DynamoDB's rules: attribute names plus
// values (strings and binaries their bytes, numbers about one byte per
// two digits plus one, booleans and nulls one byte, lists and maps three
// bytes plus one per element plus their contents).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(strings.TrimLeft(v.Value, "-0."))+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}

// readUnits: 4 KB per unit, at least one; an eventually consistent read
// costs half.
func readUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// writeUnits: 1 KB per unit, at least one.
func writeUnits(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// estimateUnits prices a call by AWS's published rules for on-demand
// tables (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html):
// reads per 4 KB (half for eventually consistent ones, a missing item
// still one unit), writes per 1 KB of the larger of the item before and
// after, transactions twice that per item, and a write refused by its
// condition still charged. The sizes of updated items are read after the
// request (resize); a put is priced by the item written, a delete and a
// refused write by the minimum.
func estimateUnits(c *storeCall, params, result any, err error) {
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		size := 0
		if out, ok := result.(*dynamodb.GetItemOutput); ok && err == nil {
			size = itemSize(out.Item)
		}
		c.RRU = readUnits(size, aws.ToBool(in.ConsistentRead))
	case *dynamodb.BatchGetItemInput:
		out, _ := result.(*dynamodb.BatchGetItemOutput)
		for table, ka := range in.RequestItems {
			consistent := aws.ToBool(ka.ConsistentRead)
			asked := len(ka.Keys)
			if out != nil {
				asked -= len(out.UnprocessedKeys[table].Keys)
				for _, item := range out.Responses[table] {
					c.RRU += readUnits(itemSize(item), consistent)
					asked--
				}
			}
			c.RRU += float64(max(asked, 0)) * readUnits(0, consistent) // missing items
		}
	case *dynamodb.QueryInput:
		if out, ok := result.(*dynamodb.QueryOutput); ok {
			size := 0
			for _, item := range out.Items {
				size += itemSize(item)
			}
			c.RRU = readUnits(size, aws.ToBool(in.ConsistentRead))
		} else {
			c.RRU = readUnits(0, aws.ToBool(in.ConsistentRead))
		}
	case *dynamodb.PutItemInput:
		c.WRU = writeUnits(itemSize(in.Item))
		if err == nil {
			c.WRU += indexWrites(in.Item, nil)
		}
	case *dynamodb.UpdateItemInput:
		if err != nil {
			c.WRU = writeUnits(0)
		} else {
			c.resize = append(c.resize, resize{in.Key, 1})
			c.WRU += indexWrites(nil, in.UpdateExpression)
		}
	case *dynamodb.DeleteItemInput:
		c.WRU = writeUnits(0)
	case *dynamodb.TransactWriteItemsInput:
		for i, it := range in.TransactItems {
			switch {
			case err != nil:
				c.WRU += 2 * writeUnits(0) // cancelled: priced at the minimum
			case it.Put != nil:
				c.WRU += 2*writeUnits(itemSize(it.Put.Item)) + indexWrites(it.Put.Item, nil)
			default:
				c.resize = append(c.resize, resize{transactKeys(in)[i], 2})
				if it.Update != nil {
					c.WRU += indexWrites(nil, it.Update.UpdateExpression)
				}
			}
		}
	}
}

// indexWrites is what a successful write costs in LeaseIndex (KEYS_ONLY,
// so each entry is well under 1 KB): a put of an item with lease keys
// adds an entry, an update that removes them drops one, and one that
// sets lease_sk moves the entry (a delete and a put); each is one
// standard write unit. An update touching neither (a settle) writes
// nothing there. (Whether AWS doubles the index write of a transaction is
// not documented; this counts it once.)
func indexWrites(put map[string]types.AttributeValue, update *string) float64 {
	if _, ok := put[dynamostore.AttrLeasePK]; ok {
		return 1
	}
	switch {
	case update == nil:
	case strings.Contains(*update, "REMOVE "+dynamostore.AttrLeasePK):
		return 1
	case strings.Contains(*update, "SET "+dynamostore.AttrLeaseSK):
		return 2
	}
	return 0
}

// resolveSizes reads the items whose write units depend on their size
// (with the log off) and prices them; a deleted item costs the minimum.
func resolveSizes(ctx context.Context, client *dynamodb.Client, table string, calls []storeCall) error {
	for i := range calls {
		for _, r := range calls[i].resize {
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: r.key, ConsistentRead: aws.Bool(true)})
			if err != nil {
				return err
			}
			calls[i].WRU += r.factor * writeUnits(itemSize(out.Item))
		}
		calls[i].resize = nil
	}
	return nil
}

// countedStore is a DynamoDB store on a fresh DynamoDB Local table whose
// client reports to log.
func countedStore(b *testing.B, log *callLog) (*dynamostore.Store, *dynamodb.Client, string) {
	endpoint, err := dynamolocal.Endpoint()
	if err != nil {
		b.Fatal(err)
	}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
		}),
		APIOptions: []func(*middleware.Stack) error{log.install},
	})
	table := fmt.Sprintf("meridian-bench-%d", time.Now().UnixNano())
	ctx := context.Background()
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return dynamostore.New(client, table), client, table
}

// captureSink keeps the request's usage messages for the worker step.
type captureSink struct {
	mu   sync.Mutex
	msgs []queue.Message
}

func (c *captureSink) Emit(m queue.Message) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

func (c *captureSink) take() []queue.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.msgs
	c.msgs = nil
	return out
}

// countingWriter counts the bytes of the request log lines.
type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return len(b), nil
}

// lastWriteRecorder timestamps the last byte (or header) written: what
// lands before it is what the caller waits for.
type lastWriteRecorder struct {
	*httptest.ResponseRecorder
	last time.Time
}

func (w *lastWriteRecorder) mark() { w.last = time.Now() }

func (w *lastWriteRecorder) WriteHeader(code int) {
	w.mark()
	w.ResponseRecorder.WriteHeader(code)
}

func (w *lastWriteRecorder) Write(b []byte) (int, error) {
	w.mark()
	return w.ResponseRecorder.Write(b)
}

// chain is the longest sequence of calls that ran one after another on
// the request's critical path: each starts after the previous ended, on
// the same goroutine or following one of the request's own goroutine
// (root), so calls that concurrent batch items make side by side are one
// step. For one request it is every call, in order.
func chain(calls []storeCall, root uint64) []storeCall {
	sort.Slice(calls, func(i, j int) bool { return calls[i].Start.Before(calls[j].Start) })
	depth, prev := make([]int, len(calls)), make([]int, len(calls))
	best := -1
	for i := range calls {
		depth[i], prev[i] = 1, -1
		for j := 0; j < i; j++ {
			follows := !calls[j].End.After(calls[i].Start) &&
				(calls[j].Goroutine == calls[i].Goroutine || calls[j].Goroutine == root)
			if follows && depth[j]+1 > depth[i] {
				depth[i], prev[i] = depth[j]+1, j
			}
		}
		if best < 0 || depth[i] > depth[best] {
			best = i
		}
	}
	var out []storeCall
	for i := best; i >= 0; i = prev[i] {
		out = append([]storeCall{calls[i]}, out...)
	}
	return out
}

// names describes calls with their units; repeats in a row are counted.
func names(calls []storeCall) []string {
	var out []string
	for _, c := range calls {
		s := c.Op + "(" + c.Target + ")"
		switch {
		case c.Err:
			s += " failed condition"
		case c.RRU > 0 && c.WRU > 0:
			s += fmt.Sprintf(" %gR %gW", c.RRU, c.WRU)
		case c.RRU > 0:
			s += fmt.Sprintf(" %gR", c.RRU)
		case c.WRU > 0:
			s += fmt.Sprintf(" %gW", c.WRU)
		}
		if n := len(out); n > 0 {
			last, times, _ := strings.Cut(out[n-1], " ×")
			if last == s {
				count, _ := strconv.Atoi(times)
				out[n-1] = s + " ×" + strconv.Itoa(max(count, 1)+1)
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// medianOf is the median of v (0 for none).
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

var (
	roundTripMu      sync.Mutex
	roundTripResults = map[string]roundtrip.Result{}
)

// writeRoundTrips writes every result so far to MERIDIAN_BENCH_OUT.
func writeRoundTrips(b *testing.B) {
	path := os.Getenv(EnvBenchOut)
	if path == "" {
		return
	}
	roundTripMu.Lock()
	defer roundTripMu.Unlock()
	var all []roundtrip.Result
	for _, r := range roundTripResults {
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Kind < all[j].Kind })
	raw, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStoreRoundTrips: per request kind, what the store is asked on
// DynamoDB Local. Use a fixed -benchtime (e.g. 20x): each iteration is one
// request, and the per-request figures do not depend on how many run.
// sqsBatch is the worker's SQS batch size (infra: the event source's BatchSize).
const sqsBatch = 10

func BenchmarkStoreRoundTrips(b *testing.B) {
	log := &callLog{}
	s, client, table := countedStore(b, log)
	sink := &captureSink{}
	logs := &countingWriter{}
	env := newBenchEnv(b, s, sink, logs)
	worker := &usage.Worker{Store: s, Outcomes: s, Outbox: s}
	ctx := context.Background()
	// The reconciliation sweep, run as it would run once every lease has
	// ended: its store's clock far enough ahead that the marks may pass
	// every entry. It finds nothing to refund: every request settled or
	// refunded its reservation.
	sweeper := s.At(func() time.Time { return time.Now().Add(2 * store.ReservationLease) })
	sweep := func() {
		refs, err := sweeper.ExpiredReservations(ctx, time.Now().Add(store.ReservationLease+time.Minute), 100)
		if err != nil {
			b.Fatal(err)
		}
		if len(refs) > 0 {
			b.Fatalf("reservations left reserved: %+v", refs)
		}
	}
	unique := func(prefix string, i int) string {
		return prefix + strconv.Itoa(i) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	get := func(target string, idem bool) func(int) *http.Request {
		return func(i int) *http.Request {
			r := env.request(strings.ReplaceAll(target, "{i}", unique("", i)), true)
			if idem {
				r.Header.Set("idempotency-key", unique("bench-", i))
			}
			return r
		}
	}
	batch := func(i int) *http.Request {
		var items []string
		for n := 0; n < 20; n++ {
			items = append(items, `{"platform":"company_registry","endpoint":"search","params":{"query":"`+unique("batch-"+strconv.Itoa(n)+"-", i)+`"}}`)
		}
		r := httptest.NewRequest(http.MethodPost, "/v1/batch", strings.NewReader(`{"requests":[`+strings.Join(items, ",")+`]}`))
		r.Header.Set("x-api-key", env.key)
		r.Header.Set("content-type", "application/json")
		r.RemoteAddr = "203.0.113.7:40000"
		return r
	}
	// Warm DynamoDB Local (a JVM) and the pipeline before measuring: the
	// cache entry the hits read, then a few requests of every kind.
	if status, cache, _ := env.serve(env.request(benchPath+"?query=acme", true)); status != http.StatusOK || cache != "MISS" {
		b.Fatalf("warm-up: %d %s", status, cache)
	}
	for i := 0; i < 10; i++ {
		env.serve(get(benchPath+"?query={i}", i%2 == 0)(i))
		env.serve(get(benchPath+"?query=acme", false)(i))
		env.serve(get(benchPath+"?query=sample+server+error", false)(i))
	}
	for _, m := range sink.take() {
		_ = worker.Handle(ctx, m.Encoded())
	}
	var replayKey string
	replay := func(int) *http.Request {
		r := env.request(benchPath+"?query=replayed", true)
		r.Header.Set("idempotency-key", replayKey)
		return r
	}
	const failing = benchPath + "?query=sample+server+error" // the fixture answers 500: 502 after retries, refunded
	cases := []struct {
		kind   string
		req    func(int) *http.Request
		status int
		setup  func()
	}{
		{"cache_hit", get(benchPath+"?query=acme", false), http.StatusOK, nil},
		{"cache_hit_idempotency_key", get(benchPath+"?query=acme", true), http.StatusOK, nil},
		{"paid_uncached", get(benchPath+"?query={i}", false), http.StatusOK, nil},
		{"paid_uncached_idempotency_key", get(benchPath+"?query={i}", true), http.StatusOK, nil},
		{"paid_failure_refund", get(failing, false), http.StatusBadGateway, nil},
		{"paid_failure_refund_idempotency_key", get(failing, true), http.StatusBadGateway, nil},
		{"idempotent_replay", replay, http.StatusOK, func() {
			replayKey = unique("replay-", 0)
			r := env.request(benchPath+"?query=replayed", true)
			r.Header.Set("idempotency-key", replayKey)
			if status, _, _ := env.serve(r); status != http.StatusOK {
				b.Fatalf("replay setup: %d", status)
			}
		}},
		{"batch_20_paid_uncached", batch, http.StatusOK, nil},
	}
	for _, c := range cases {
		b.Run(c.kind, func(b *testing.B) {
			if c.setup != nil {
				c.setup()
			}
			sink.take()
			var sum roundtrip.Result
			var handlerTimes, billedTimes, perEventTimes []float64
			var pending [][]byte
			applyBatch := func(bodies [][]byte) {
				log.start()
				start := time.Now()
				for _, err := range worker.HandleBatch(ctx, bodies) {
					if err != nil {
						b.Fatal(err)
					}
				}
				took := float64(time.Since(start).Microseconds()) / 1000
				wcalls := log.stop()
				if err := resolveSizes(ctx, client, table, wcalls); err != nil {
					b.Fatal(err)
				}
				sum.WorkerMS += took
				perEventTimes = append(perEventTimes, took/float64(len(bodies)))
				sum.WorkerCalls += float64(len(wcalls))
				for _, call := range wcalls {
					sum.WorkerRRU += call.RRU
					sum.WorkerWRU += call.WRU
				}
				if sum.WorkerPath == nil {
					sum.WorkerPath = names(wcalls)
				}
			}
			// The marks pass every earlier entry; this kind's entries come
			// in a later second (a lease_sk of the same second could sort
			// before the mark).
			sweep()
			time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := c.req(i)
				w := &lastWriteRecorder{ResponseRecorder: httptest.NewRecorder()}
				root := goroutineID()
				logs.n.Store(0)
				log.start()
				start := time.Now()
				env.handler.ServeHTTP(w, req)
				end := time.Now()
				billed := time.Since(start)
				calls := log.stop()
				if w.Code != c.status {
					b.Fatalf("%s: %d, want %d: %.300s", c.kind, w.Code, c.status, w.Body.String())
				}
				if c.kind == "batch_20_paid_uncached" && !bytes.Contains(w.Body.Bytes(), []byte(`"succeeded":20`)) {
					b.Fatalf("batch: %.300s", w.Body.String())
				}
				if err := resolveSizes(ctx, client, table, calls); err != nil {
					b.Fatal(err)
				}
				var crit, after, handler []storeCall
				for _, call := range calls {
					if call.End.After(w.last) {
						after = append(after, call)
					} else {
						crit = append(crit, call)
					}
					if !call.End.After(end) {
						handler = append(handler, call)
					}
					sum.Attempts += float64(call.Attempts)
					if call.Err {
						sum.FailedConditions++
					}
					sum.RRU += call.RRU
					sum.WRU += call.WRU
					sum.LocalRCU += call.LocalRCU
					sum.LocalWCU += call.LocalWCU
				}
				critChain, handlerChain := chain(crit, root), chain(handler, root)
				sum.CritSteps += float64(len(critChain))
				sum.CritCalls += float64(len(crit))
				sum.HandlerSteps += float64(len(handlerChain))
				sum.HandlerCalls += float64(len(handler))
				sum.AllCalls += float64(len(calls))
				sum.HandlerMS += float64(end.Sub(start).Microseconds()) / 1000
				handlerTimes = append(handlerTimes, float64(end.Sub(start).Microseconds())/1000)
				billedTimes = append(billedTimes, float64(billed.Microseconds())/1000)
				sum.CritMS += float64(w.last.Sub(start).Microseconds()) / 1000
				sum.ResponseBytes += float64(w.Body.Len())
				sum.LogBytes += float64(logs.n.Load())
				// The worker applies the request's usage events later, as SQS
				// delivers them at steady load: in batches of ten, here the
				// events of consecutive requests of this kind (one key, one
				// endpoint), each batch applied with one HandleBatch.
				msgs := sink.take()
				sum.Events += float64(len(msgs))
				for _, m := range msgs {
					pending = append(pending, m.Encoded())
				}
				for len(pending) >= sqsBatch || (i == b.N-1 && len(pending) > 0) {
					n := min(sqsBatch, len(pending))
					applyBatch(pending[:n])
					pending = pending[n:]
				}
				if i == 0 {
					sum.CritPath, sum.AfterPath = names(critChain), names(chain(after, root))
				}
			}
			b.StopTimer()
			log.start()
			sweep()
			scalls := log.stop()
			if err := resolveSizes(ctx, client, table, scalls); err != nil {
				b.Fatal(err)
			}
			for _, call := range scalls {
				if call.Op == "BatchGetItem" && strings.Trim(strings.ReplaceAll(call.Target, "reservation", ""), "+") == "" {
					sum.SweepRRU += call.RRU
					sum.SweepWRU += call.WRU
				} else {
					sum.SweepFixedRRU += call.RRU
					sum.SweepFixedWRU += call.WRU
				}
			}
			n := float64(b.N)
			r := roundtrip.Result{
				Kind: c.kind, Requests: b.N, Status: c.status,
				CritSteps: sum.CritSteps / n, CritCalls: sum.CritCalls / n,
				HandlerSteps: sum.HandlerSteps / n, HandlerCalls: sum.HandlerCalls / n, AllCalls: sum.AllCalls / n,
				Attempts: sum.Attempts / n, FailedConditions: sum.FailedConditions / n,
				RRU: sum.RRU / n, WRU: sum.WRU / n, LocalRCU: sum.LocalRCU / n, LocalWCU: sum.LocalWCU / n,
				Events: sum.Events / n, WorkerCalls: sum.WorkerCalls / n, WorkerRRU: sum.WorkerRRU / n, WorkerWRU: sum.WorkerWRU / n,
				WorkerMS: sum.WorkerMS / n, LogBytes: sum.LogBytes / n,
				SweepRRU: sum.SweepRRU / n, SweepWRU: sum.SweepWRU / n, SweepFixedRRU: sum.SweepFixedRRU, SweepFixedWRU: sum.SweepFixedWRU,
				HandlerMS: sum.HandlerMS / n, CritMS: sum.CritMS / n, ResponseBytes: sum.ResponseBytes / n,
				HandlerP50MS: medianOf(handlerTimes), BilledP50MS: medianOf(billedTimes), WorkerP50MS: medianOf(perEventTimes) * sum.Events / n,
				CritPath: sum.CritPath, AfterPath: sum.AfterPath, WorkerPath: sum.WorkerPath,
			}
			b.ReportMetric(r.CritSteps, "crit-steps")
			b.ReportMetric(r.CritCalls, "crit-calls")
			b.ReportMetric(r.HandlerSteps, "handler-steps")
			b.ReportMetric(r.HandlerCalls, "handler-calls")
			b.ReportMetric(r.RRU, "RRU")
			b.ReportMetric(r.WRU, "WRU")
			b.ReportMetric(r.LocalRCU, "local-RCU")
			b.ReportMetric(r.LocalWCU, "local-WCU")
			b.ReportMetric(r.WorkerCalls, "worker-calls")
			b.ReportMetric(r.WorkerWRU, "worker-WRU")
			b.ReportMetric(r.SweepRRU, "sweep-RRU")
			b.ReportMetric(r.HandlerMS, "ms")
			roundTripMu.Lock()
			roundTripResults[c.kind] = r
			roundTripMu.Unlock()
			writeRoundTrips(b)
			b.Logf("%s before the last byte: %s", c.kind, strings.Join(r.CritPath, " → "))
			if len(r.AfterPath) > 0 {
				b.Logf("%s after it: %s", c.kind, strings.Join(r.AfterPath, " → "))
			}
		})
	}
}
