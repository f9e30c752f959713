package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ExtensionName names Meridian's internal Lambda extension.
const ExtensionName = "meridian-after-invoke"

// extensionsAPI is the Lambda Extensions API version path.
const extensionsAPI = "/2020-01-01/extension"

// Bounds of the work after an invocation: it ends well before the
// invocation's deadline (a flush that ran into it would count as a
// timeout and reset the environment) and never takes long.
const (
	workMargin = 500 * time.Millisecond
	maxWork    = 3 * time.Second
)

// AfterInvocation registers an internal Lambda extension (a goroutine of
// this process, registered through the Extensions API) for INVOKE events.
// Lambda hands an invocation's response to the caller as soon as the
// handler returns, and freezes the environment only once every extension
// has asked for its next event: so work, run after each handler returns and
// before the extension asks again, never delays a caller. It must be called
// before lambda.Start (registration closes when the runtime asks for its
// first event) and returns the wrapper that tells the extension when each
// invocation's handler is done (for a streamed response, when the handler
// writing the stream is: holdInvocation). If the extension later loses
// the Extensions API, it calls fallback and stops; the wrapper never
// blocks.
// With concurrent invocations per environment (AWS_LAMBDA_MAX_CONCURRENCY
// above 1) an INVOKE event cannot be paired with its handler, so it
// refuses to register.
func AfterInvocation(ctx context.Context, runtimeAPI string, work func(context.Context), fallback func()) (func(EventHandler) EventHandler, error) {
	if n, _ := strconv.Atoi(os.Getenv("AWS_LAMBDA_MAX_CONCURRENCY")); n > 1 {
		return nil, errors.New("concurrent invocations: work cannot follow each one")
	}
	base := "http://" + runtimeAPI + extensionsAPI
	id, err := register(ctx, base)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{}, 1)
	go func() {
		client := &http.Client{} // next blocks until the following invocation: no timeout
		for {
			ev, err := nextWithRetry(ctx, client, base, id)
			if err != nil {
				if ctx.Err() == nil {
					fallback()
				}
				return
			}
			if ev.EventType != "INVOKE" {
				continue
			}
			// Wait for this invocation's handler (or, if the runtime never
			// ran it, for the deadline's margin), then work while the caller
			// already has its answer.
			deadline := time.UnixMilli(ev.DeadlineMs).Add(-workMargin)
			select {
			case <-done:
			case <-time.After(time.Until(deadline)):
			}
			wctx, cancel := context.WithDeadline(ctx, minTime(deadline, time.Now().Add(maxWork)))
			work(wctx)
			cancel()
		}
	}()
	over := func() {
		select {
		case done <- struct{}{}:
		default: // the extension is gone or has its signal already
		}
	}
	wrap := func(h EventHandler) EventHandler {
		return func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			inv := &invocation{over: over}
			inv.pending.Store(1)
			defer inv.release()
			return h(context.WithValue(ctx, invocationKey{}, inv), e)
		}
	}
	return wrap, nil
}

type invocationKey struct{}

// invocation is one run of a wrapped handler: it is over once the handler
// has returned and every hold taken during it is released.
type invocation struct {
	pending atomic.Int32
	over    func()
}

func (inv *invocation) release() {
	if inv.pending.Add(-1) == 0 {
		inv.over()
	}
}

// holdInvocation keeps the invocation running ctx (when AfterInvocation
// wraps its handler) from being over until release is called: a streamed
// response's handler runs on after the Lambda handler has returned, and
// the work after the invocation must see what it did (its usage event).
func holdInvocation(ctx context.Context) (release func()) {
	inv, _ := ctx.Value(invocationKey{}).(*invocation)
	if inv == nil {
		return func() {}
	}
	inv.pending.Add(1)
	return sync.OnceFunc(inv.release)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// nextWithRetry asks for the next event, retrying a failed request a few
// times before giving up on the Extensions API.
func nextWithRetry(ctx context.Context, client *http.Client, base, id string) (extensionEvent, error) {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		var ev extensionEvent
		if ev, err = next(ctx, client, base, id); err == nil {
			return ev, nil
		}
		select {
		case <-ctx.Done():
			return ev, ctx.Err()
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
	return extensionEvent{}, err
}

func register(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/register", strings.NewReader(`{"events":["INVOKE"]}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Lambda-Extension-Name", ExtensionName)
	res, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", fmt.Errorf("register the extension: %w", err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	id := res.Header.Get("Lambda-Extension-Identifier")
	if res.StatusCode != http.StatusOK || id == "" {
		return "", fmt.Errorf("register the extension: HTTP %d", res.StatusCode)
	}
	return id, nil
}

// extensionEvent is what /event/next returns.
type extensionEvent struct {
	EventType  string `json:"eventType"`
	DeadlineMs int64  `json:"deadlineMs"`
	RequestID  string `json:"requestId"`
}

func next(ctx context.Context, client *http.Client, base, id string) (extensionEvent, error) {
	var ev extensionEvent
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/event/next", nil)
	if err != nil {
		return ev, err
	}
	req.Header.Set("Lambda-Extension-Identifier", id)
	res, err := client.Do(req)
	if err != nil {
		return ev, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return ev, fmt.Errorf("next event: HTTP %d", res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&ev); err != nil {
		return ev, errors.Join(errors.New("next event: unreadable"), err)
	}
	return ev, nil
}
