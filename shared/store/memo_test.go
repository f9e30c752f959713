package store_test

import (
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/store/embedded"
)

// Remembered resolutions live in both stores, shared by every instance
// (a second Memo on the same store recalls them), until they expire.
func TestMemoOnBothStores(t *testing.T) {
	emb, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emb.Close() })
	for name, cache := range map[string]store.Cache{"embedded": emb, "dynamodb": dynamotest.NewStore(t)} {
		t.Run(name, func(t *testing.T) {
			now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
			writer, reader := store.Memo{Cache: cache}, store.Memo{Cache: cache}
			if _, ok, err := reader.Recall(t.Context(), "memo#portal#bath", now); ok || err != nil {
				t.Fatalf("nothing kept yet: %v %v", ok, err)
			}
			if err := writer.Keep(t.Context(), "memo#portal#bath", "REGION^116", now, now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := reader.Recall(t.Context(), "memo#portal#bath", now.Add(time.Minute)); !ok || err != nil || v != "REGION^116" {
				t.Fatalf("another instance recalls it: %q %v %v", v, ok, err)
			}
			if _, ok, _ := reader.Recall(t.Context(), "memo#portal#bath", now.Add(time.Hour)); ok {
				t.Error("an expired value is not recalled")
			}
		})
	}
}
