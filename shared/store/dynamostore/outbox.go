package dynamostore

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Outbox items:
//
//	message   outbox#<n>       <CreatedAt Unix nanos, 20 digits>#<id>  id S, body B, created_at S, expires_at N
//	id guard  outboxid#<id>    outboxid                                msg_pk S, msg_sk S, expires_at N
//
// n is FNV-1a of the id mod outboxShards; expires_at is CreatedAt +
// store.OutboxRetention on both. A shard is read oldest first by its sort
// key; OutboxBatch merges the shards.
//
// The guard makes a message's id unique: PutOutbox writes guard and
// message in one transaction, on the condition that no live guard exists.
// A sort key derived from the message alone cannot do that, since the
// same id may come back with another CreatedAt (the emitter stamps the time
// it gave up sending) and would sort under a second key; and DeleteOutbox
// gets only ids, so it needs the guard to find the message anyway. Outbox
// writes happen only while the queue refuses messages, so the transaction's
// double write costs little.
const (
	outboxShards     = 4
	pfxOutbox        = "outbox#"
	pfxOutboxID      = "outboxid#"
	skOutboxID       = "outboxid"
	outboxPerTx      = 50      // 2 items each: TransactWriteItems takes 100
	outboxTxMaxBytes = 2 << 20 // of bodies per transaction (its limit is 4 MB)
	batchWriteMax    = 25      // BatchWriteItem takes 25 requests
	batchGetMax      = 100     // BatchGetItem takes 100 keys
)

type outboxItem struct {
	PK        string    `dynamodbav:"pk"`
	SK        string    `dynamodbav:"sk"`
	ID        string    `dynamodbav:"id"`
	Body      []byte    `dynamodbav:"body"`
	CreatedAt time.Time `dynamodbav:"created_at"`
	ExpiresAt int64     `dynamodbav:"expires_at"`
}

type outboxGuard struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	MsgPK     string `dynamodbav:"msg_pk"`
	MsgSK     string `dynamodbav:"msg_sk"`
	ExpiresAt int64  `dynamodbav:"expires_at"`
}

func outboxShard(n uint32) string { return fmt.Sprintf("%s%d", pfxOutbox, n) }

func outboxKey(m store.OutboxMessage) (pk, sk string) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(m.ID))
	return outboxShard(h.Sum32() % outboxShards), fmt.Sprintf("%020d#%s", m.CreatedAt.UnixNano(), m.ID)
}

// PutOutbox stores the messages whose id is not stored yet (a message
// without CreatedAt is created now; one already past retention is not
// stored), in transactions of up to outboxPerTx messages.
func (s *Store) PutOutbox(ctx context.Context, msgs []store.OutboxMessage) error {
	now := s.now()
	seen := map[string]bool{}
	todo := make([]store.OutboxMessage, 0, len(msgs))
	for _, m := range msgs {
		if m.ID == "" {
			return store.ErrInvalid
		}
		if seen[m.ID] { // one transaction cannot write an item twice
			continue
		}
		seen[m.ID] = true
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		m.CreatedAt = m.CreatedAt.UTC()
		if m.CreatedAt.Add(store.OutboxRetention).After(now) {
			todo = append(todo, m)
		}
	}
	for len(todo) > 0 {
		n, size := 1, len(todo[0].Body)
		for ; n < len(todo) && n < outboxPerTx && size+len(todo[n].Body) <= outboxTxMaxBytes; n++ {
			size += len(todo[n].Body)
		}
		if err := s.putOutbox(ctx, todo[:n], now); err != nil {
			return err
		}
		todo = todo[n:]
	}
	return nil
}

// putOutbox writes one transaction's messages. A failed guard condition
// is an id stored already: that message is left out and the rest written
// again; a conflict or throttling retries after a backoff.
func (s *Store) putOutbox(ctx context.Context, msgs []store.OutboxMessage, now time.Time) error {
	for attempt := 0; len(msgs) > 0; {
		items := make([]types.TransactWriteItem, 0, 2*len(msgs))
		for _, m := range msgs {
			pk, sk := outboxKey(m)
			exp := m.CreatedAt.Add(store.OutboxRetention).Unix()
			guard, err := marshal(outboxGuard{PK: pfxOutboxID + m.ID, SK: skOutboxID, MsgPK: pk, MsgSK: sk, ExpiresAt: exp})
			if err != nil {
				return err
			}
			msg, err := marshal(outboxItem{PK: pk, SK: sk, ID: m.ID, Body: m.Body, CreatedAt: m.CreatedAt, ExpiresAt: exp})
			if err != nil {
				return err
			}
			items = append(items,
				types.TransactWriteItem{Put: &types.Put{
					TableName:                 s.table,
					Item:                      guard,
					ConditionExpression:       aws.String("attribute_not_exists(pk) OR expires_at <= :now"),
					ExpressionAttributeValues: vals{":now": num(now.Unix())},
				}},
				types.TransactWriteItem{Put: &types.Put{TableName: s.table, Item: msg}})
		}
		cx, err := s.transact(ctx, items)
		if err != nil {
			return fmt.Errorf("dynamostore: put outbox: %w", err)
		}
		if cx == nil {
			return nil
		}
		rest := msgs[:0:0]
		for i, m := range msgs {
			if bad, _ := cx.failed(2 * i); !bad {
				rest = append(rest, m)
			}
		}
		if len(rest) == len(msgs) {
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
			attempt++
		}
		msgs = rest
	}
	return nil
}

// OutboxBatch reads the oldest limit messages of each shard (strongly
// consistent, skipping expired ones) and returns the oldest limit of
// them all, by CreatedAt then id.
func (s *Store) OutboxBatch(ctx context.Context, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	now := s.now()
	var found []outboxItem
	for shard := uint32(0); shard < outboxShards; shard++ {
		p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
			TableName:                 s.table,
			KeyConditionExpression:    aws.String("pk = :pk"),
			FilterExpression:          aws.String("expires_at > :now"),
			ExpressionAttributeValues: vals{":pk": str(outboxShard(shard)), ":now": num(now.Unix())},
			ConsistentRead:            aws.Bool(true),
			Limit:                     aws.Int32(int32(min(limit, 1000))),
		})
		for n := 0; n < limit && p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("dynamostore: read outbox: %w", err)
			}
			for _, item := range page.Items {
				m, err := decode[outboxItem](item)
				if err != nil {
					return nil, err
				}
				found = append(found, *m)
				if n++; n == limit {
					break
				}
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].SK < found[j].SK })
	out := make([]store.OutboxMessage, 0, min(limit, len(found)))
	for i := 0; i < len(found) && i < limit; i++ {
		out = append(out, store.OutboxMessage{ID: found[i].ID, Body: found[i].Body, CreatedAt: found[i].CreatedAt})
	}
	return out, nil
}

// DeleteOutbox reads the ids' guards, deletes the messages they point to,
// then the guards (a guard left by a crash between the two only keeps a
// sent id from being stored again until it expires). Unknown ids have no
// guard and are skipped.
func (s *Store) DeleteOutbox(ctx context.Context, ids []string) error {
	seen := map[string]bool{}
	var keys [][2]string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			keys = append(keys, ref(pfxOutboxID+id, skOutboxID))
		}
	}
	for len(keys) > 0 {
		chunk := keys[:min(batchGetMax, len(keys))]
		keys = keys[len(chunk):]
		found, err := s.getMany(ctx, chunk...)
		if err != nil {
			return err
		}
		var msgs, guards [][2]string
		for _, k := range chunk {
			g, err := pick[outboxGuard](found, k[0], k[1])
			if err != nil {
				return err
			}
			if g != nil {
				msgs, guards = append(msgs, ref(g.MsgPK, g.MsgSK)), append(guards, k)
			}
		}
		if err := s.deleteMany(ctx, msgs); err != nil {
			return err
		}
		if err := s.deleteMany(ctx, guards); err != nil {
			return err
		}
	}
	return nil
}

// deleteMany deletes items with BatchWriteItem, 25 at a time, retrying
// unprocessed ones.
func (s *Store) deleteMany(ctx context.Context, keys [][2]string) error {
	for len(keys) > 0 {
		chunk := keys[:min(batchWriteMax, len(keys))]
		keys = keys[len(chunk):]
		req := make([]types.WriteRequest, len(chunk))
		for i, k := range chunk {
			req[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: itemKey(k[0], k[1])}}
		}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 0 {
				if err := backoff(ctx, attempt); err != nil {
					return err
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{*s.table: req}})
			if err != nil {
				return fmt.Errorf("dynamostore: batch delete: %w", err)
			}
			req = out.UnprocessedItems[*s.table]
		}
	}
	return nil
}

var _ store.Outbox = (*Store)(nil)
