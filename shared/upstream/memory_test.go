package upstream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type mapMemory struct {
	mu     sync.Mutex
	values map[string]string
	fail   bool
}

func (m *mapMemory) Recall(_ context.Context, key string, _ time.Time) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return "", false, errors.New("store down")
	}
	v, ok := m.values[key]
	return v, ok, nil
}

func (m *mapMemory) Keep(_ context.Context, key, value string, _, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New("store down")
	}
	m.values[key] = value
	return nil
}

// A resolution is made once and then recalled; keys are each provider's
// own; a failing memory resolves every time; a failed resolution is not kept.
func TestRemembered(t *testing.T) {
	mem := &mapMemory{values: map[string]string{}}
	calls := 0
	resolve := func(context.Context) (string, error) { calls++; return "REGION^123", nil }
	c := &Call{provider: "portal", memory: mem, Now: time.Now()}
	for i := 0; i < 2; i++ {
		if v, err := c.Remembered(t.Context(), "en-GB|bath", time.Hour, resolve); err != nil || v != "REGION^123" {
			t.Fatalf("%q %v", v, err)
		}
	}
	if calls != 1 {
		t.Fatalf("resolved %d times", calls)
	}
	other := &Call{provider: "another", memory: mem, Now: time.Now()}
	_, _ = other.Remembered(t.Context(), "en-GB|bath", time.Hour, resolve)
	if calls != 2 {
		t.Error("another provider's key is its own")
	}
	if _, err := c.Remembered(t.Context(), "en-GB|nowhere", time.Hour, func(context.Context) (string, error) { return "", NotFoundFault("no such place") }); err == nil {
		t.Fatal("a failed resolution is an error")
	}
	if len(mem.values) != 2 {
		t.Errorf("a failed resolution is not kept: %v", mem.values)
	}
	mem.fail = true
	if v, err := c.Remembered(t.Context(), "en-GB|bath", time.Hour, resolve); err != nil || v != "REGION^123" || calls != 3 {
		t.Errorf("a failing memory is passed over: %q %v %d", v, err, calls)
	}
}
