package app_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/usage"
)

// replayAndStore is what MERIDIAN_UPSTREAM=replay make run starts before
// it serves: the replay upstream over testdata/upstream (its base URL is
// returned) and an embedded store, both closed when the test ends.
func replayAndStore(t *testing.T, logger *slog.Logger) (string, *embedded.Store) {
	t.Helper()
	t.Setenv(app.EnvUpstreamFixtures, filepath.Join(repoRoot(t), "testdata", "upstream"))
	base, stop, err := app.StartReplay(logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	s, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return base, s
}

// newAccount creates an account with credits and one key (capped at
// creditLimit when not nil) and returns both.
func newAccount(t testing.TB, s store.Store, credits int64, creditLimit *int64) (store.Account, string) {
	t.Helper()
	acct, _, err := auth.CreateAccount(context.Background(), s, credits, envelope.NewRequestID())
	if err != nil {
		t.Fatal(err)
	}
	return acct, newLimitedKey(t, s, acct.ID, creditLimit)
}

func newKey(t testing.TB, s store.Store, accountID string) string {
	t.Helper()
	return newLimitedKey(t, s, accountID, nil)
}

func newLimitedKey(t testing.TB, s store.Store, accountID string, creditLimit *int64) string {
	t.Helper()
	full, k := auth.NewKey(accountID, "test", creditLimit)
	if _, err := s.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return full
}

// localEvents applies usage events in process, as make run does, until
// the test ends (before the store closes: cleanups run last first).
func localEvents(t *testing.T, s store.Store, logger *slog.Logger) *usage.Emitter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return app.LocalEvents(ctx, s, logger)
}
