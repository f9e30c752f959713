package dynamostore

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// The reconciliation sweep reads LeaseIndex shard by shard, oldest lease
// first. A reservation enters the index when it is reserved; a refund
// takes it out, but a settle leaves it there (saving the index write on
// every paid call) and TTL deletes it with the reservation, a month
// later. So that the sweep does not read a month of settled entries each
// minute, each shard has a mark:
//
//	leasemark#<n> / leasemark   after: a lease_sk of shard n
//
// Every entry of the shard at or before the mark has left "reserved"
// (settled, refunded or gone): the sweep queries only what follows it, and
// moves it forward over the entries it finds no longer reserved, up to the
// first that still is. Only those are listed.
//
// Two rules keep the mark from ever passing a reservation that is still to
// be refunded:
//   - It never passes an entry whose reservation may be younger than
//     markMargin (by the store's clock: its lease ends later than
//     ReservationLease - markMargin from now). markMargin is longer than
//     any reserve can take to land (a request's deadline is 90 seconds),
//     and by then the entry is in the index and its item answers
//     eventually consistent reads: an entry read as settled or missing is,
//     and nothing can be reserved behind the mark (a new reservation's
//     lease ends ReservationLease from now).
//   - It never stalls behind a reservation that stays reserved: one still
//     reserved relistAfter past its lease was listed by earlier sweeps
//     (they run every minute) and not refunded. Its entry moves forward by
//     relistAfter (a fresh lease, so it is listed again later) and the mark
//     passes its old place.
const (
	pfxLeaseMark = "leasemark#"
	skLeaseMark  = "leasemark"
	markMargin   = 5 * time.Minute
	relistAfter  = 5 * time.Minute
	// leasePage is how many index entries one query page reads.
	leasePage = 1000
)

type leaseMarkItem struct {
	PK    string `dynamodbav:"pk"`
	SK    string `dynamodbav:"sk"`
	After string `dynamodbav:"after"`
}

// leaseKeys are a reservation's keys in LeaseIndex: its lease ends
// store.ReservationLease after now, rounded up to the second (lease_sk
// holds seconds; a lease a fraction of a second longer is harmless, one
// ending before it was due is not).
func leaseKeys(now time.Time, accountID, requestID string) (pk, sk string) {
	return leaseShard(requestID), leaseSK(ceilSeconds(now.Add(store.ReservationLease)), accountID, requestID)
}

func leaseShard(requestID string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(requestID))
	return fmt.Sprintf("lease#%d", h.Sum32()%LeaseShards)
}

func leaseSK(secs int64, accountID, requestID string) string {
	return leaseSeconds(secs) + "#" + accountID + "#" + requestID
}

func ceilSeconds(t time.Time) int64 {
	secs := t.Unix()
	if t.After(time.Unix(secs, 0)) {
		secs++
	}
	return secs
}

func leaseSeconds(secs int64) string { return fmt.Sprintf("%012d", secs) }

// leaseEntry is one entry of LeaseIndex.
type leaseEntry struct {
	sk  string
	ref store.ReservationRef
}

// ExpiredReservations lists the reservations still reserved whose lease
// ended at or before now, oldest first: each shard from its mark (see
// above), the shards side by side, merged.
func (s *Store) ExpiredReservations(ctx context.Context, now time.Time, limit int) ([]store.ReservationRef, error) {
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	marks, err := s.leaseMarks(ctx)
	if err != nil {
		return nil, err
	}
	// Entries at or below passable may be passed by a mark.
	passable := leaseSeconds(s.now().Add(store.ReservationLease-markMargin).Unix()) + "$"
	found := make([][]leaseEntry, LeaseShards)
	errs := make([]error, LeaseShards)
	var wg sync.WaitGroup
	for shard := range LeaseShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[shard], errs[shard] = s.sweepShard(ctx, shard, marks[shard], now, passable, limit)
		}()
	}
	wg.Wait()
	var all []leaseEntry
	for shard := range LeaseShards {
		if errs[shard] != nil {
			return nil, errs[shard]
		}
		all = append(all, found[shard]...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].sk < all[j].sk })
	refs := make([]store.ReservationRef, 0, min(limit, len(all)))
	for i := 0; i < len(all) && i < limit; i++ {
		refs = append(refs, all[i].ref)
	}
	return refs, nil
}

// leaseMarks reads every shard's mark ("" for none), eventually
// consistently: a mark only moves forward, so an older one only makes the
// sweep read more.
func (s *Store) leaseMarks(ctx context.Context) ([]string, error) {
	refs := make([][2]string, LeaseShards)
	for shard := range LeaseShards {
		refs[shard] = ref(pfxLeaseMark+strconv.Itoa(shard), skLeaseMark)
	}
	found, err := s.batchGet(ctx, false, refs...)
	if err != nil {
		return nil, err
	}
	marks := make([]string, LeaseShards)
	for shard, r := range refs {
		m, err := pick[leaseMarkItem](found, r[0], r[1])
		if err != nil {
			return nil, err
		}
		if m != nil {
			marks[shard] = m.After
		}
	}
	return marks, nil
}

// sweepShard reads shard's entries after mark whose lease ended by now,
// page by page, until it holds limit still reserved; it returns those and
// moves the shard's mark over what it read that is done with.
func (s *Store) sweepShard(ctx context.Context, shard int, mark string, now time.Time, passable string, limit int) ([]leaseEntry, error) {
	cond, values := "lease_pk = :pk AND lease_sk < :before", vals{
		":pk": str("lease#" + strconv.Itoa(shard)), ":before": str(leaseSeconds(now.Unix() + 1)),
	}
	if mark != "" {
		last := leaseSeconds(now.Unix()) + "$"
		if mark >= last {
			return nil, nil // nothing after the mark has ended yet
		}
		// BETWEEN includes the mark itself, which is skipped below.
		cond = "lease_pk = :pk AND lease_sk BETWEEN :mark AND :last"
		values = vals{":pk": values[":pk"], ":mark": str(mark), ":last": str(last)}
	}
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{
		TableName: s.table, IndexName: aws.String(LeaseIndex),
		KeyConditionExpression: aws.String(cond), ExpressionAttributeValues: values,
		Limit: aws.Int32(leasePage),
	})
	var listed []leaseEntry
	newMark, passing := mark, true
	for len(listed) < limit && p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: query %s: %w", LeaseIndex, err)
		}
		entries := make([]leaseEntry, 0, len(page.Items))
		refs := make([][2]string, 0, len(page.Items))
		for _, item := range page.Items {
			e, err := decodeLease(item)
			if err != nil {
				return nil, err
			}
			if e.sk == mark {
				continue
			}
			entries = append(entries, e)
			refs = append(refs, ref(accountPK(e.ref.AccountID), pfxReq+e.ref.RequestID))
		}
		// Eventually consistent: see the rules above.
		found, err := s.batchGet(ctx, false, refs...)
		if err != nil {
			return nil, err
		}
		for i, e := range entries {
			r, err := pick[reservationItem](found, refs[i][0], refs[i][1])
			if err != nil {
				return nil, err
			}
			reserved := r != nil && r.Status == resReserved
			if reserved && len(listed) < limit {
				listed = append(listed, e)
				if now.Sub(e.ref.LeaseUntil) >= relistAfter && s.relist(ctx, e, now, newMark) {
					reserved = false // its entry has moved on
				}
			}
			if passing = passing && !reserved && e.sk <= passable; passing {
				newMark = e.sk
			}
			if len(listed) == limit && !passing {
				break
			}
		}
	}
	if newMark != mark {
		if err := s.moveMark(ctx, shard, newMark); err != nil {
			return nil, err
		}
	}
	return listed, nil
}

func decodeLease(item map[string]types.AttributeValue) (leaseEntry, error) {
	l, err := decode[struct {
		PK      string `dynamodbav:"pk"`
		SK      string `dynamodbav:"sk"`
		LeaseSK string `dynamodbav:"lease_sk"`
	}](item)
	if err != nil {
		return leaseEntry{}, err
	}
	secs, perr := strconv.ParseInt(strings.SplitN(l.LeaseSK, "#", 2)[0], 10, 64)
	if perr != nil || !strings.HasPrefix(l.PK, pfxAccount) || !strings.HasPrefix(l.SK, pfxReq) {
		return leaseEntry{}, fmt.Errorf("dynamostore: bad %s entry %s %s %q", LeaseIndex, l.PK, l.SK, l.LeaseSK)
	}
	return leaseEntry{sk: l.LeaseSK, ref: store.ReservationRef{
		AccountID: strings.TrimPrefix(l.PK, pfxAccount), RequestID: strings.TrimPrefix(l.SK, pfxReq),
		LeaseUntil: time.Unix(secs, 0).UTC(),
	}}, nil
}

// relist gives a reservation still reserved long after its lease a fresh
// lease of relistAfter, past the shard's mark, so the mark can pass its old
// place. It reports whether the entry moved (a refund or another sweep
// may have changed it first).
func (s *Store) relist(ctx context.Context, e leaseEntry, now time.Time, mark string) bool {
	secs := max(now.Unix(), s.now().Unix()) + int64(relistAfter/time.Second)
	if m, err := strconv.ParseInt(strings.SplitN(mark, "#", 2)[0], 10, 64); err == nil && m >= secs {
		secs = m + 1
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      itemKey(accountPK(e.ref.AccountID), pfxReq+e.ref.RequestID),
		ConditionExpression:      aws.String("#status = :reserved AND lease_sk = :old"),
		UpdateExpression:         aws.String("SET lease_sk = :new"),
		ExpressionAttributeNames: statusName,
		ExpressionAttributeValues: vals{":reserved": str(resReserved), ":old": str(e.sk),
			":new": str(leaseSK(secs, e.ref.AccountID, e.ref.RequestID))},
	})
	return err == nil
}

// moveMark moves a shard's mark forward to after, never back.
func (s *Store) moveMark(ctx context.Context, shard int, after string) error {
	item, err := marshal(leaseMarkItem{PK: pfxLeaseMark + strconv.Itoa(shard), SK: skLeaseMark, After: after})
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: s.table, Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(pk) OR #after < :after"),
		ExpressionAttributeNames:  map[string]string{"#after": "after"},
		ExpressionAttributeValues: vals{":after": str(after)},
	})
	if failed, _ := condFailed(err); failed {
		return nil // another sweep moved it further
	}
	if err != nil {
		return fmt.Errorf("dynamostore: move %s mark: %w", LeaseIndex, err)
	}
	return nil
}
