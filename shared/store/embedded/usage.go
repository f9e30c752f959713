package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
)

var (
	bOutcomes = []byte("outcomes") // zero-padded Unix minute \x00 platform -> minute stats
	// A request counted: request id -> zero-padded Unix nanos when the
	// mark expires, and the same ordered by expiry (expiry \x00 request id
	// -> empty) so expired marks are dropped from the front.
	bOutcomeMarks  = []byte("outcomemarks")
	bOutcomeExpiry = []byte("outcomeexpiry")
	// Account usage: account id \x00 YYYY-MM-DD \x00 endpoint -> counts,
	// and the same ordered by day (YYYY-MM-DD \x00 account id \x00
	// endpoint -> empty) so days past the retention are dropped from the
	// front. Both are created by the first RecordUsage that needs them.
	bAccountUsage     = []byte("accountusage")
	bAccountUsageDays = []byte("accountusagedays")
)

// dropPerWrite bounds the expired marks, and separately the old usage
// days, one RecordUsage drops, so a write after a long pause stays small;
// the next writes drop the rest.
const dropPerWrite = 1000

func firstKey(c *bolt.Cursor) []byte {
	k, _ := c.First()
	return k
}

func minuteKey(minute int64, platform string) []byte {
	return []byte(fmt.Sprintf("%012d\x00%s", minute, platform))
}

// minuteID and usageID name a batch's counters in memory; their keys in
// the file (minuteKey, usageKey) are built once per counter, when it is
// read and written, not once per record.
type minuteID struct {
	minute   int64
	platform string
}

type usageID struct{ account, date, endpoint string }

// dayNames gives a record's UTC date (store.UsageDate), formatting each
// day once: a batch's records nearly all share one.
type dayNames struct {
	start time.Time
	name  string
}

func (d *dayNames) date(t time.Time) string {
	if start := store.UsageDayStart(t); d.name == "" || !start.Equal(d.start) {
		d.start, d.name = start, store.UsageDate(t)
	}
	return d.name
}

func usageKey(accountID, date, endpoint string) []byte {
	return []byte(accountID + "\x00" + date + "\x00" + endpoint)
}

// usageCounts is one account-usage row as stored.
type usageCounts struct {
	Calls   int64 `json:"calls"`
	Credits int64 `json:"credits"`
	Errors  int64 `json:"errors"`
}

// RecordUsage counts the batch in one write transaction: each record's
// mark and its counters change together, so a record counts exactly when
// its mark is written, and a record whose id is marked (by an earlier
// batch, or earlier in this one) changes nothing. Platform minutes older
// than a day, and account-usage days past store.AccountUsageRetention,
// before the batch's newest record are dropped as it writes.
func (s *Store) RecordUsage(ctx context.Context, records []store.UsageRecord, now time.Time) (int, error) {
	for _, r := range records {
		if err := r.Check(); err != nil {
			return 0, err
		}
	}
	recorded := 0
	err := s.update(ctx, func(tx *bolt.Tx) error {
		recorded = 0
		marks, byExpiry := tx.Bucket(bOutcomeMarks), tx.Bucket(bOutcomeExpiry)
		end := nanos(now)
		// Marks that expired are no one's any more.
		c := byExpiry.Cursor()
		for n, k := 0, firstKey(c); k != nil && n < dropPerWrite; n, k = n+1, firstKey(c) {
			exp, id, _ := strings.Cut(string(k), "\x00")
			if exp > end {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
			if err := marks.Delete([]byte(id)); err != nil {
				return err
			}
		}
		minutes := map[minuteID]*store.MinuteStats{}
		accounts := map[usageID]*usageCounts{}
		var dayOf dayNames
		var newest time.Time
		exp := nanos(now.Add(store.OutcomeDedupWindow))
		for _, r := range records {
			if !r.Counts() {
				continue
			}
			if old := marks.Get([]byte(r.RequestID)); old != nil {
				if string(old) > end {
					continue // counted already
				}
				if err := byExpiry.Delete([]byte(string(old) + "\x00" + r.RequestID)); err != nil {
					return err
				}
			}
			if err := marks.Put([]byte(r.RequestID), []byte(exp)); err != nil {
				return err
			}
			if err := byExpiry.Put([]byte(exp+"\x00"+r.RequestID), []byte{}); err != nil {
				return err
			}
			recorded++
			if r.At.After(newest) {
				newest = r.At
			}
			if o := r.Outcome; o != nil {
				minute := r.At.Unix() / 60
				k := minuteID{minute, o.Platform}
				m := minutes[k]
				if m == nil {
					got, err := get[store.MinuteStats](tx.Bucket(bOutcomes), minuteKey(minute, o.Platform))
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					if len(got.Histogram) == 0 {
						got = store.MinuteStats{Minute: minute, Histogram: make([]int64, len(store.LatencyBucketsMS)+1)}
					}
					m = &got
					minutes[k] = m
				}
				m.Requests++
				if o.Error() {
					m.Errors++
				}
				m.Histogram[store.Bucket(o.Latency)]++
			}
			if r.AccountUsage() {
				k := usageID{r.AccountID, dayOf.date(r.At), r.Endpoint}
				u := accounts[k]
				if u == nil {
					u = &usageCounts{}
					if b := tx.Bucket(bAccountUsage); b != nil {
						got, err := get[usageCounts](b, usageKey(k.account, k.date, k.endpoint))
						if err != nil && !errors.Is(err, store.ErrNotFound) {
							return err
						}
						*u = got
					}
					accounts[k] = u
				}
				u.Calls++
				u.Credits += r.Credits
				if r.Failed {
					u.Errors++
				}
			}
		}
		if recorded == 0 {
			return nil
		}
		if err := writeMinutes(tx.Bucket(bOutcomes), minutes, newest); err != nil {
			return err
		}
		if len(accounts) == 0 {
			return nil
		}
		return writeAccountUsage(tx, accounts, newest)
	})
	if err != nil {
		return 0, err
	}
	return recorded, nil
}

// writeMinutes stores the batch's minutes and drops the minutes older
// than a day before the newest record: no one's status any more.
func writeMinutes(b *bolt.Bucket, minutes map[minuteID]*store.MinuteStats, newest time.Time) error {
	for k, m := range minutes {
		if err := put(b, minuteKey(k.minute, k.platform), m); err != nil {
			return err
		}
	}
	cutoff := minuteKey(newest.Unix()/60-24*60, "")
	c := b.Cursor()
	for k := firstKey(c); k != nil && bytes.Compare(k, cutoff) < 0; k = firstKey(c) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// writeAccountUsage stores the batch's account-usage rows and drops the
// days past the retention before the newest record's day.
func writeAccountUsage(tx *bolt.Tx, rows map[usageID]*usageCounts, newest time.Time) error {
	b, err := tx.CreateBucketIfNotExists(bAccountUsage)
	if err != nil {
		return err
	}
	days, err := tx.CreateBucketIfNotExists(bAccountUsageDays)
	if err != nil {
		return err
	}
	for k, u := range rows {
		if err := put(b, usageKey(k.account, k.date, k.endpoint), u); err != nil {
			return err
		}
		if err := days.Put([]byte(k.date+"\x00"+k.account+"\x00"+k.endpoint), []byte{}); err != nil {
			return err
		}
	}
	cutoff := store.UsageDate(store.UsageDayStart(newest).Add(-store.AccountUsageRetention))
	c := days.Cursor()
	for n, k := 0, firstKey(c); k != nil && n < dropPerWrite; n, k = n+1, firstKey(c) {
		date, rest, _ := strings.Cut(string(k), "\x00")
		if date >= cutoff {
			break
		}
		account, endpoint, _ := strings.Cut(rest, "\x00")
		if err := c.Delete(); err != nil {
			return err
		}
		if err := b.Delete(usageKey(account, date, endpoint)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) OutcomesSince(ctx context.Context, since, now time.Time) (map[string][]store.MinuteStats, error) {
	out := map[string][]store.MinuteStats{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bOutcomes).Cursor()
		end := minuteKey(now.Unix()/60+1, "")
		for k, v := c.Seek(minuteKey(since.Unix()/60+1, "")); k != nil && string(k) < string(end); k, v = c.Next() { // 15 buckets
			var m store.MinuteStats
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			_, platform, _ := strings.Cut(string(k), "\x00")
			out[platform] = append(out[platform], m)
		}
		return nil
	})
	return out, err
}

// AccountUsage reads the account's rows from the first day to the last,
// in key order: by date, then endpoint.
func (s *Store) AccountUsage(ctx context.Context, accountID string, from, to time.Time) ([]store.UsageDay, error) {
	var out []store.UsageDay
	first, last := store.UsageDate(from), store.UsageDate(to)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bAccountUsage)
		if b == nil || accountID == "" || first > last {
			return nil
		}
		prefix := []byte(accountID + "\x00")
		c := b.Cursor()
		for k, v := c.Seek(append(prefix, first...)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			date, endpoint, _ := strings.Cut(string(k[len(prefix):]), "\x00")
			if date > last {
				break
			}
			var u usageCounts
			if err := json.Unmarshal(v, &u); err != nil {
				return err
			}
			out = append(out, store.UsageDay{Date: date, Endpoint: endpoint, Calls: u.Calls, Credits: u.Credits, Errors: u.Errors})
		}
		return nil
	})
	return out, err
}

var _ store.Outcomes = (*Store)(nil)
