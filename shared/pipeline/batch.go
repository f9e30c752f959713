package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
)

// Batch limits (spec 4.3, 8).
const (
	MaxBatchItems = 20
	// MaxBatchBody bounds the batch body: twenty items with generous
	// parameters fit well inside it.
	MaxBatchBody = 256 << 10
)

type batchItem struct {
	Platform string                     `json:"platform"`
	Endpoint string                     `json:"endpoint"`
	Params   map[string]json.RawMessage `json:"params"`
}

// batch runs up to 20 requests independently and concurrently, each
// through the whole pipeline (admission, validation, cache, billing) with
// its own request id; one item's failure touches only that item. Their
// admissions and reserves are written together, and their in-flight
// slots freed together after the batch's answer (batchGather). The
// wrapper (spec 2.3) costs nothing and has no request_id of its own.
// Idempotency-Key and Cache-Control are not forwarded to items.
func (p *Pipeline) batch(_ context.Context, c *Call) (any, *envelope.Error) {
	items, err := readBatch(c.Request)
	if err != nil {
		return nil, err
	}
	results := make([]json.RawMessage, len(items))
	statuses := make([]int, len(items))
	gather := newBatchGather(p, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ig := gather.item()
			defer ig.finish()
			statuses[i], results[i] = p.runItem(c.Request.Context(), ig, c.Request, i, it)
		}()
	}
	wg.Wait()
	if c.effect != nil {
		// The items' slots are free before the wrapper answers.
		c.effect(func(ctx context.Context) { gather.releaseHeld(ctx, p) })
	}
	return Raw{ContentType: "application/json", Body: batchWrapper(results, statuses)}, nil
}

func readBatch(r *http.Request) ([]batchItem, *envelope.Error) {
	if r.Body == nil {
		return nil, malformedBatch("The body is empty.")
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBatchBody+1))
	if err != nil {
		return nil, malformedBatch("The body could not be read.")
	}
	if len(raw) > MaxBatchBody {
		return nil, envelope.New(envelope.InvalidParameters, http.StatusRequestEntityTooLarge,
			"The batch body is larger than "+strconv.Itoa(MaxBatchBody)+" bytes.",
			map[string]any{"reason": "body_too_large", "max_bytes": MaxBatchBody})
	}
	var body struct {
		Requests []json.RawMessage `json:"requests"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&body); err != nil || dec.Decode(&struct{}{}) != io.EOF || body.Requests == nil {
		return nil, malformedBatch(`The body must be a JSON object {"requests": [{"platform", "endpoint", "params"}]}.`)
	}
	if len(body.Requests) > MaxBatchItems {
		return nil, envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"A batch holds at most "+strconv.Itoa(MaxBatchItems)+" requests.",
			map[string]any{"reason": "too_many_requests", "max": MaxBatchItems, "count": len(body.Requests)})
	}
	if len(body.Requests) == 0 {
		return nil, malformedBatch("requests lists no request.")
	}
	items := make([]batchItem, len(body.Requests))
	for i, rawItem := range body.Requests {
		d := json.NewDecoder(bytes.NewReader(rawItem))
		d.DisallowUnknownFields()
		if err := d.Decode(&items[i]); err != nil || items[i].Platform == "" {
			e := malformedBatch("requests[" + strconv.Itoa(i) + "] must be {\"platform\", \"endpoint\", \"params\"}.")
			e.Details["index"] = i
			return nil, e
		}
		for name, v := range items[i].Params {
			if _, ok := params.Scalar(v); !ok {
				e := malformedBatch("requests[" + strconv.Itoa(i) + "].params." + name + " must be a string, number or boolean.")
				e.Details["index"] = i
				return nil, e
			}
		}
	}
	return items, nil
}

func malformedBatch(message string) *envelope.Error {
	return envelope.New(envelope.InvalidParameters, http.StatusBadRequest, message, map[string]any{"reason": "malformed_body"})
}

// runItem runs one item as the GET it stands for, with the batch's key and
// client, and returns its status and result entry (index and status, then
// the item's own envelope).
func (p *Pipeline) runItem(ctx context.Context, ig *itemGather, parent *http.Request, index int, it batchItem) (int, json.RawMessage) {
	path := "/v1/" + url.PathEscape(it.Platform)
	for _, seg := range strings.Split(it.Endpoint, "/") {
		if seg != "" {
			path += "/" + url.PathEscape(seg)
		}
	}
	q := url.Values{}
	for name, v := range it.Params {
		s, _ := params.Scalar(v)
		q.Set(name, s)
	}
	if streams(q.Get("stream")) {
		// An event stream has no envelope to put in the wrapper: refused
		// before it runs (and is charged).
		return itemFailure(index, p.ErrorsURL(parent), envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"stream=1 is not available in a batch; leave stream out to get the envelope.",
			map[string]any{"reason": "not_batchable", "field": "stream"}))
	}
	req, err := innerGet(ctx, parent, path+"?"+q.Encode(), "x-api-key")
	if err != nil {
		return itemFailure(index, p.ErrorsURL(parent), envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"This item cannot be made into a request.", map[string]any{"reason": "malformed_item"}))
	}
	a := p.Run(req, RunAs{gather: ig})
	body := bytes.TrimSpace(a.Body)
	if !strings.HasPrefix(a.Header.Get("content-type"), "application/json") || !json.Valid(body) {
		// A document (utility/llms markdown) has no envelope to return.
		return itemFailure(index, p.ErrorsURL(parent), envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"This item answers a document, not JSON; ask for JSON (e.g. format=json) in a batch.",
			map[string]any{"reason": "not_batchable"}))
	}
	return a.Status, entry(index, a.Status, body)
}

// streams reports a truthy stream value, as parameter validation reads flags.
func streams(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// innerGet is a GET that the pipeline serves within parent (a batch item,
// a composite's leg): same host, client and forwarding headers, plus the
// parent's headers named in also.
func innerGet(ctx context.Context, parent *http.Request, target string, also ...string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Host, req.RemoteAddr = parent.Host, parent.RemoteAddr
	for _, h := range append([]string{"x-forwarded-proto", "x-forwarded-for"}, also...) {
		if v := parent.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	return req, nil
}

// failureJSON is the error envelope of a failure answered without a call
// of its own (a fresh request id, credits_used 0).
func failureJSON(e *envelope.Error, docBase string) json.RawMessage {
	body, _ := envelope.Marshal(envelope.NewFailure(e, envelope.NewRequestID(), docBase))
	return bytes.TrimSpace(body)
}

// itemFailure is an item refused by the batch itself, in the error envelope.
func itemFailure(index int, docBase string, e *envelope.Error) (int, json.RawMessage) {
	return e.Status, entry(index, e.Status, failureJSON(e, docBase))
}

// entry prefixes an item's envelope with its index and status.
func entry(index, status int, envelopeJSON []byte) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"index":` + strconv.Itoa(index) + `,"status":` + strconv.Itoa(status))
	if len(envelopeJSON) > 2 && envelopeJSON[0] == '{' {
		b.WriteByte(',')
		b.Write(envelopeJSON[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes()
}

// batchWrapper is spec 2.3: counts, the sum of credits used, the lowest
// balance any item observed, and the results in order.
func batchWrapper(results []json.RawMessage, statuses []int) []byte {
	type itemCredits struct {
		CreditsUsed      *int64 `json:"credits_used"`
		CreditsRemaining *int64 `json:"credits_remaining"`
	}
	var used int64
	var lowest *int64
	succeeded := 0
	for i, r := range results {
		if statuses[i] >= 200 && statuses[i] < 300 {
			succeeded++
		}
		var ic itemCredits
		if json.Unmarshal(r, &ic) != nil {
			continue
		}
		if ic.CreditsUsed != nil {
			used += *ic.CreditsUsed
		}
		if ic.CreditsRemaining != nil && (lowest == nil || *ic.CreditsRemaining < *lowest) {
			lowest = ic.CreditsRemaining
		}
	}
	wrapper := struct {
		Success          bool              `json:"success"`
		Count            int               `json:"count"`
		Succeeded        int               `json:"succeeded"`
		Failed           int               `json:"failed"`
		CreditsUsed      int64             `json:"credits_used"`
		CreditsRemaining *int64            `json:"credits_remaining,omitempty"`
		Results          []json.RawMessage `json:"results"`
	}{true, len(results), succeeded, len(results) - succeeded, used, lowest, results}
	// Every entry is valid JSON (runItem checks), so this cannot fail.
	body, _ := envelope.Marshal(wrapper)
	return body
}
