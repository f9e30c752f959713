package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// Recalls are owner-bound and live 24 hours on both stores: another
// account, an unknown id and an expired recall all read as not found.
func TestRecallsOnBothStores(t *testing.T) {
	emb, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	for name, recalls := range map[string]store.Recalls{"embedded": emb, "dynamodb": dynamotest.NewStore(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
			r := store.Recall{
				ID: "rcl_" + strings.ReplaceAll(name, "embedded", "emb") + "0001", AccountID: "acct_a", RequestID: "req_1",
				Endpoint: "/v1/microblog_a/search", Data: []byte(`{"items":[{"id":"p1"}]}`),
				CreatedAt: now, ExpiresAt: now.Add(store.RecallTTL),
			}
			if err := recalls.PutRecall(ctx, r); err != nil {
				t.Fatal(err)
			}
			got, err := recalls.GetRecall(ctx, r.ID, "acct_a", now.Add(23*time.Hour+59*time.Minute))
			if err != nil || string(got.Data) != string(r.Data) || got.RequestID != "req_1" || got.Endpoint != r.Endpoint ||
				!got.ExpiresAt.Equal(r.ExpiresAt) {
				t.Fatalf("the owner recalls it within 24 hours: %+v %v", got, err)
			}
			for _, c := range []struct {
				id, account string
				at          time.Time
			}{
				{r.ID, "acct_b", now.Add(time.Minute)},
				{r.ID, "", now.Add(time.Minute)},
				{"rcl_unknown", "acct_a", now.Add(time.Minute)},
				{r.ID, "acct_a", now.Add(store.RecallTTL)},
			} {
				if _, err := recalls.GetRecall(ctx, c.id, c.account, c.at); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("GetRecall(%s, %q, %s) = %v, want not found", c.id, c.account, c.at, err)
				}
			}
			if err := recalls.PutRecall(ctx, store.Recall{ID: r.ID, AccountID: "acct_b", Data: []byte("{}"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); !errors.Is(err, store.ErrRecallExists) {
				t.Errorf("a taken id is refused, never overwritten: %v", err)
			}
			if got, _ := recalls.GetRecall(ctx, r.ID, "acct_a", now); got.AccountID != "acct_a" {
				t.Error("the first owner keeps the recall")
			}
			for _, bad := range []store.Recall{
				{AccountID: "a", Data: []byte("{}"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
				{ID: "rcl_x1", Data: []byte("{}"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
				{ID: "rcl_x2", AccountID: "a", Data: make([]byte, store.MaxRecallBytes+1), CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
				{ID: "rcl_x3", AccountID: "a", Data: []byte("{}"), CreatedAt: now, ExpiresAt: now},
			} {
				if err := recalls.PutRecall(ctx, bad); !errors.Is(err, store.ErrInvalid) {
					t.Errorf("PutRecall(%.40v) = %v, want invalid", bad, err)
				}
			}
			// Many calls store their recalls at once; each reads back its own.
			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := fmt.Sprintf("rcl_%s_many_%02d", name, i)
					rec := store.Recall{ID: id, AccountID: fmt.Sprintf("acct_%d", i%3), Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
					if err := recalls.PutRecall(ctx, rec); err != nil {
						errs <- err
						return
					}
					got, err := recalls.GetRecall(ctx, id, rec.AccountID, now)
					if err != nil || string(got.Data) != string(rec.Data) {
						errs <- fmt.Errorf("%s: %q %v", id, got.Data, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
