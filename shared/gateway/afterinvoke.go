package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ExtensionName names Meridian's internal Lambda extension.
const ExtensionName = "meridian-after-invoke"

// extensionsAPI is the Lambda Extensions API version path.
const extensionsAPI = "/2020-01-01/extension"

// AfterInvocation registers an internal Lambda extension (a goroutine of
// this process, registered through the Extensions API) for INVOKE events.
// Lambda hands an invocation's response to the caller as soon as the
// handler returns, and freezes the environment only once every extension
// has asked for its next event: so work, run after each handler returns and
// before the extension asks again, never delays a caller. It must be called
// before lambda.Start (registration closes when the runtime asks for its
// first event) and returns the wrapper that tells the extension when each
// invocation's handler is done.
func AfterInvocation(ctx context.Context, runtimeAPI string, work func(context.Context)) (func(EventHandler) EventHandler, error) {
	base := "http://" + runtimeAPI + extensionsAPI
	id, err := register(ctx, base)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{}, 1)
	go func() {
		client := &http.Client{} // next blocks until the following invocation: no timeout
		for {
			ev, err := next(ctx, client, base, id)
			if err != nil {
				return // the environment is shutting down, or ctx ended
			}
			if ev.EventType != "INVOKE" {
				continue
			}
			// Wait for this invocation's handler, then do the work while the
			// caller already has its answer, bounded by the invocation's deadline.
			<-done
			deadline := time.UnixMilli(ev.DeadlineMs)
			wctx, cancel := context.WithDeadline(ctx, deadline)
			work(wctx)
			cancel()
		}
	}()
	wrap := func(h EventHandler) EventHandler {
		return func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			defer func() { done <- struct{}{} }()
			return h(ctx, e)
		}
	}
	return wrap, nil
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
