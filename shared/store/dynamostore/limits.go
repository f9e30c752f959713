package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// Per-key limits live on the key's hash record (keyhash#<hash>), the item
// that authenticates the key, as counters that one UpdateItem changes
// without reading first:
//
//	r_<second, base 36>  N            requests admitted in that Unix second
//	s_<slot token>       lease (ms)   an in-flight slot, until its lease ends
//
// Admission adds the request (ADD r_…, SET s_…) and reads the whole record
// back (ALL_NEW): the request is admitted when the record, this request
// included, is within the rules, exactly as store.LimitState decides. A
// refused request takes its entries back at once (a second write, only on
// refusal), so it records nothing. Until that lands it still counts: a
// request arriving in between may be refused though a place was about to
// free, never admitted beyond the rules. A counter is never read-then-put,
// so writers do not refuse each other's conditions.
//
// Seconds that left the window are removed by later writes: each admission
// removes the three seconds just past the window, and a slot's release
// removes every expired entry its admission saw (Admission.Stale).
//
// Fair use keeps a small JSON state (fairuse#<account id>#<endpoint>,
// store.FairUseState) with version N and expires_at; its writes are
// optimistic on version, and a lost race retries with the item the
// condition returned.
const skFairUse = "fairuse"

type stateItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	State     string `dynamodbav:"state"`
	Version   int64  `dynamodbav:"version"`
	ExpiresAt int64  `dynamodbav:"expires_at"`
}

const (
	attrSecond = "r_"
	attrSlot   = "s_"
)

func secondAttr(sec int64) string { return attrSecond + strconv.FormatInt(sec, 36) }

// slotAttr names requestID's slot: a short digest of the request id, so a
// release finds it from the request id alone and the record stays small.
func slotAttr(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return attrSlot + base64.RawURLEncoding.EncodeToString(sum[:6])
}

// Enter authenticates the key by its hash record and admits the request in
// one UpdateItem, conditioned on the key being active.
func (s *Store) Enter(ctx context.Context, hash, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Key, store.Admission, error) {
	k, as, err := s.EnterMany(ctx, hash, []string{requestID}, now, rules, slot)
	if err != nil {
		return k, store.Admission{}, err
	}
	return k, as[0], nil
}

// EnterMany is Enter for several requests of one key in the same
// UpdateItem: a batch's items are admitted with one write.
func (s *Store) EnterMany(ctx context.Context, hash string, requestIDs []string, now time.Time, rules store.LimitRules, slot bool) (store.Key, []store.Admission, error) {
	for attempt := 0; ; attempt++ {
		k, as, err := s.admit(ctx, hash, requestIDs, now, rules, true, slot, true)
		if !errors.Is(err, errUnmirrored) || attempt > 0 {
			return k, as, err
		}
		// A record written before it carried the key's status: copy it
		// from the key, then try again.
		if err := s.mirrorStatus(ctx, hash); err != nil {
			return store.Key{}, nil, err
		}
	}
}

func (s *Store) Admit(ctx context.Context, id, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Admission, error) {
	_, as, err := s.admit(ctx, id, []string{requestID}, now, rules, true, slot, false)
	if err != nil {
		return store.Admission{}, err
	}
	return as[0], nil
}

func (s *Store) TakeSlot(ctx context.Context, id, requestID string, now time.Time, rules store.LimitRules) (store.Admission, error) {
	_, as, err := s.admit(ctx, id, []string{requestID}, now, rules, false, true, false)
	if err != nil {
		return store.Admission{}, err
	}
	return as[0], nil
}

var _ store.GroupGate = (*Store)(nil)

// errUnmirrored: a key hash record without the key's status.
var errUnmirrored = errors.New("dynamostore: key hash record without status")

// admit adds the requests to the record (to this second's count when
// second, a slot each when slot) and decides from the record it gets back,
// one request after the other in order. gate conditions the write on an
// active key. Refused requests are taken back with one more write.
func (s *Store) admit(ctx context.Context, id string, requestIDs []string, now time.Time, rules store.LimitRules, second, slot, gate bool) (store.Key, []store.Admission, error) {
	if len(requestIDs) == 0 {
		return store.Key{}, nil, store.ErrInvalid
	}
	sec := now.Unix()
	secName := expression.Name(secondAttr(sec))
	// The seconds just past the window go: steady traffic never leaves any.
	window := int64(rules.Window / time.Second)
	upd := expression.Remove(expression.Name(secondAttr(sec - window - 2))).
		Remove(expression.Name(secondAttr(sec - window - 3))).
		Remove(expression.Name(secondAttr(sec - window - 4)))
	if second {
		upd = upd.Add(secName, expression.Value(len(requestIDs)))
	}
	slotNames := make([]string, len(requestIDs))
	for i, rid := range requestIDs {
		slotNames[i] = slotAttr(rid)
		if slot {
			upd = upd.Set(expression.Name(slotNames[i]), expression.Value(now.Add(rules.Lease).UnixMilli()))
		}
	}
	if gate {
		// The write happens anyway: it also says when the key was last used.
		upd = upd.Set(expression.Name(attrLastUsed), expression.Value(now.UnixMilli()))
	}
	b := expression.NewBuilder().WithUpdate(upd)
	if gate {
		b = b.WithCondition(expression.Name("status").Equal(expression.Value(string(store.KeyActive))))
	}
	ex, err := b.Build()
	if err != nil {
		return store.Key{}, nil, err
	}
	key := itemKey(pfxKeyHash+id, skKeyHash)
	in := &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key, ReturnValues: types.ReturnValueAllNew,
		UpdateExpression: ex.Update(), ConditionExpression: ex.Condition(),
		ExpressionAttributeNames: ex.Names(), ExpressionAttributeValues: ex.Values(),
	}
	if gate {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	out, err := s.db.UpdateItem(ctx, in)
	if failed, old := condFailed(err); failed {
		ref, derr := decode[keyHashItem](old)
		switch {
		case derr != nil:
			return store.Key{}, nil, derr
		case ref == nil || ref.AccountID == "":
			return store.Key{}, nil, store.ErrNotFound
		case ref.Status == "":
			return store.Key{}, nil, errUnmirrored
		}
		return store.Key{}, nil, store.ErrKeyInactive
	}
	if err != nil {
		if throttled(err) { // a hot record, not an outage
			return store.Key{}, nil, fmt.Errorf("%w: limits of %s throttled: %v", store.ErrContended, hashHint(id), err)
		}
		return store.Key{}, nil, fmt.Errorf("dynamostore: admit: %w", err)
	}
	// Decide on the record without these requests, as LimitState does.
	st, stale := limitState(out.Attributes, now, rules)
	for i := range st.Seconds {
		if second && st.Seconds[i].Second == sec {
			st.Seconds[i].Count -= len(requestIDs)
		}
	}
	for _, name := range slotNames {
		st.Release(name)
	}
	as := make([]store.Admission, len(requestIDs))
	// A refusal takes back what the admission added (undo).
	var undo expression.UpdateBuilder
	refused := 0
	for i, name := range slotNames {
		if second {
			as[i] = st.Admit(name, now, rules, slot)
		} else {
			as[i] = st.Take(name, now, rules)
		}
		as[i].Stale = stale
		if !as[i].Admitted {
			refused++
			if slot {
				undo = undo.Remove(expression.Name(name))
			}
		}
	}
	var k store.Key
	if ref, err := decode[keyHashItem](out.Attributes); err == nil && ref != nil {
		k = store.Key{ID: ref.KeyID, AccountID: ref.AccountID, Hash: id, Prefix: ref.Prefix, Status: store.KeyStatus(ref.Status)}
	}
	if refused > 0 {
		if second {
			undo = undo.Add(secName, expression.Value(-refused))
		}
		ux, err := expression.NewBuilder().WithUpdate(undo).Build()
		if err != nil {
			return k, as, nil
		}
		// If this fails the refusals still stand: their entries count until
		// the second leaves the window and the slots' leases end, which
		// can only refuse more, never admit beyond the rules.
		_ = s.retryThrottled(context.WithoutCancel(ctx), &dynamodb.UpdateItemInput{
			TableName: s.table, Key: key, UpdateExpression: ux.Update(),
			ExpressionAttributeNames: ux.Names(), ExpressionAttributeValues: ux.Values(),
		})
	}
	return k, as, nil
}

// limitState reads the counters of a key's record into a LimitState, and
// names the entries that expired (seconds out of the window, slots past
// their lease).
func limitState(item map[string]types.AttributeValue, now time.Time, rules store.LimitRules) (store.LimitState, []string) {
	var st store.LimitState
	var stale []string
	oldest := now.Unix() - int64(rules.Window/time.Second) - 1
	for name, av := range item {
		switch {
		case strings.HasPrefix(name, attrSecond):
			sec, err := strconv.ParseInt(name[len(attrSecond):], 36, 64)
			if err != nil {
				continue
			}
			if sec <= oldest || number(av) <= 0 {
				stale = append(stale, name)
				continue
			}
			st.Seconds = append(st.Seconds, store.SecondCount{Second: sec, Count: int(number(av))})
		case strings.HasPrefix(name, attrSlot):
			lease := number(av)
			if lease <= now.UnixMilli() {
				stale = append(stale, name)
				continue
			}
			st.Slots = append(st.Slots, store.Slot{RequestID: name, LeaseUntil: lease})
		}
	}
	sort.Strings(stale)
	return st, stale
}

// ReleaseSlots removes the requests' slots and the stale entries named,
// in one write; releasing a slot that is not there is fine.
func (s *Store) ReleaseSlots(ctx context.Context, id string, requestIDs []string, now time.Time, rules store.LimitRules, stale ...string) error {
	if len(requestIDs) == 0 {
		return nil
	}
	names := map[string]string{}
	var remove []string
	seen := map[string]bool{}
	add := func(attr string) {
		if seen[attr] {
			return
		}
		seen[attr] = true
		p := "#x" + strconv.Itoa(len(remove))
		names[p] = attr
		remove = append(remove, p)
	}
	for _, rid := range requestIDs {
		add(slotAttr(rid))
	}
	for _, n := range stale {
		if strings.HasPrefix(n, attrSecond) || strings.HasPrefix(n, attrSlot) {
			add(n)
		}
	}
	err := s.retryThrottled(ctx, &dynamodb.UpdateItemInput{
		TableName:                s.table,
		Key:                      itemKey(pfxKeyHash+id, skKeyHash),
		UpdateExpression:         aws.String("REMOVE " + strings.Join(remove, ", ")),
		ConditionExpression:      aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames: names,
	})
	if failed, _ := condFailed(err); failed {
		return nil // no record: nothing to free
	}
	if err != nil {
		return fmt.Errorf("dynamostore: release slots: %w", err)
	}
	return nil
}

// retryThrottled writes an entry's removal, retrying a few times while the
// record is throttled: a removal that never lands holds a place until its
// second leaves the window or its lease ends.
func (s *Store) retryThrottled(ctx context.Context, in *dynamodb.UpdateItemInput) error {
	for attempt := 0; ; attempt++ {
		_, err := s.db.UpdateItem(ctx, in)
		if err == nil || !throttled(err) || attempt == 4 {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

// mirrorStatus copies a key's status and prefix onto its hash record,
// unless a status change wrote them first.
func (s *Store) mirrorStatus(ctx context.Context, hash string) error {
	ref, err := get[keyHashItem](ctx, s, pfxKeyHash+hash, skKeyHash)
	if err != nil || ref == nil || ref.Status != "" {
		return err
	}
	k, err := get[keyItem](ctx, s, accountPK(ref.AccountID), pfxKey+ref.KeyID)
	if err != nil {
		return err
	}
	if k == nil {
		return store.ErrNotFound
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       itemKey(pfxKeyHash+hash, skKeyHash),
		UpdateExpression:          aws.String("SET #status = :status, prefix = :prefix"),
		ConditionExpression:       aws.String("attribute_exists(pk) AND attribute_not_exists(#status)"),
		ExpressionAttributeNames:  statusName,
		ExpressionAttributeValues: vals{":status": str(k.Status), ":prefix": str(k.Prefix)},
	})
	if failed, _ := condFailed(err); failed {
		return nil // a status change wrote it meanwhile
	}
	return err
}

// hashHint is what an error may say about a key hash: its first characters.
func hashHint(hash string) string {
	if len(hash) > 8 {
		return hash[:8] + "…"
	}
	return hash
}

func (s *Store) FairUseUsed(ctx context.Context, accountID, endpoint string, now time.Time) (int64, error) {
	item, err := get[stateItem](ctx, s, "fairuse#"+accountID+"#"+endpoint, skFairUse)
	if err != nil || item == nil {
		return 0, err
	}
	var st store.FairUseState
	if err := json.Unmarshal([]byte(item.State), &st); err != nil {
		return 0, err
	}
	return st.Used(now), nil
}

func (s *Store) AddFairUse(ctx context.Context, accountID, endpoint string, attempts int64, now time.Time) (int64, error) {
	var total int64
	err := changeState(ctx, s, "fairuse#"+accountID+"#"+endpoint, skFairUse, func(st *store.FairUseState) (bool, time.Time) {
		total = st.Add(attempts, now)
		return true, now.Add(store.FairUseWindow)
	})
	return total, err
}

// changeState reads a counter's state, lets change edit it (returning
// whether to write and when the state expires), and writes it back if
// nobody wrote in between.
func changeState[T any](ctx context.Context, s *Store, pk, sk string, change func(*T) (bool, time.Time)) (err error) {
	defer func() {
		if throttled(err) { // a hot item, not an outage
			err = fmt.Errorf("%w: %s throttled: %v", store.ErrContended, pk, err)
		}
	}()
	item, err := get[stateItem](ctx, s, pk, sk)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		st := new(T)
		version := int64(0)
		if item != nil {
			if err := json.Unmarshal([]byte(item.State), st); err != nil {
				return err
			}
			version = item.Version
		}
		write, expires := change(st)
		if !write {
			return nil
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		av, err := marshal(stateItem{PK: pk, SK: sk, State: string(raw), Version: version + 1, ExpiresAt: expires.Unix() + 1})
		if err != nil {
			return err
		}
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: s.table, Item: av,
			ConditionExpression:                 aws.String("attribute_not_exists(pk) OR version = :v"),
			ExpressionAttributeValues:           vals{":v": num(version)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		failed, old := condFailed(err)
		if !failed {
			return err
		}
		if attempt >= maxStateAttempts {
			return fmt.Errorf("%w: %s lost %d races", store.ErrContended, pk, attempt+1)
		}
		// The failure hands back the winner's item: retry on it at once,
		// while it is fresh. Past a few losses, back off first and read it
		// again after the wait (an item kept through a sleep is stale by
		// the time it is written, and loses again).
		if old != nil && attempt < immediateStateRetries {
			if item, err = decode[stateItem](old); err != nil {
				return err
			}
			continue
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
		if item, err = get[stateItem](ctx, s, pk, sk); err != nil {
			return err
		}
	}
}

// maxStateAttempts bounds the optimistic retries on one counter; past it
// the record is contended (store.ErrContended), which callers refuse on.
const maxStateAttempts = 64

// immediateStateRetries are the retries made at once on the item a lost
// race returned, before backing off.
const immediateStateRetries = 2

var (
	_ store.Limits  = (*Store)(nil)
	_ store.Gate    = (*Store)(nil)
	_ store.FairUse = (*Store)(nil)
)
