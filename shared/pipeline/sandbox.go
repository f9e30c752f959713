package pipeline

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/sandbox"
)

// serveSandbox answers /sandbox: the same parameters and validation as
// /v1, free, with synthetic data shaped by the endpoint's data schema
// (synthetic: true). /v1 never falls back to it.
func (p *Pipeline) serveSandbox(x *exchange, c *Call) {
	e := c.Endpoint
	switch {
	case e.Platform == "" && e.ID == "":
		p.succeedAs(x, c, sandboxIndex(p.cfg.Registry), 0, nil, "")
		return
	case e.Kind != registry.Data:
		x.fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound,
			"The sandbox serves data endpoints only; call "+e.Path()+" itself.",
			map[string]any{"platform": e.Platform, "endpoint": e.ID, "reason": "not_in_sandbox"}))
		return
	}
	var schema []byte
	if p.cfg.DataSchemas != nil {
		schema, _ = p.cfg.DataSchemas(e.Key())
	}
	if schema == nil {
		x.fail(notAvailable(e, true))
		return
	}
	data, err := p.sandboxData.get(e.Key()+"?"+c.Params.CacheKey(), func(seed string) (json.RawMessage, error) {
		data, err := sandbox.Generate(schema, seed, e.Platform)
		if err != nil {
			return nil, err
		}
		raw, err := envelope.Marshal(data)
		return bytes.TrimSuffix(raw, []byte("\n")), err
	})
	if err != nil {
		p.cfg.Logger.Error("sandbox", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	s := p.success(x, c, data, 0, nil)
	notDegraded := false
	s.Synthetic, s.Degraded = true, &notDegraded
	body, err := envelope.Marshal(s)
	if err != nil {
		x.fail(envelope.Internal())
		return
	}
	p.write(x, s, body, "")
}

func sandboxIndex(reg *registry.Registry) map[string]any {
	paths := []string{}
	for _, e := range reg.Live() {
		if e.Kind == registry.Data {
			paths = append(paths, e.SandboxPath())
		}
	}
	return map[string]any{
		"description": "Free synthetic data for every data endpoint: same parameters and validation as /v1, credits_used 0, synthetic true. Values are labelled and use example.com; nothing is real.",
		"count":       len(paths),
		"items":       paths,
	}
}

// maxSandboxMemo bounds the remembered sandbox answers; past it the memo
// starts again empty.
const maxSandboxMemo = 1024

// sandboxMemo remembers the encoded synthetic data of recent sandbox
// calls. The data is a function of its seed (the endpoint and the
// canonical query), and generating and encoding it was most of a sandbox
// call's work. Callers only read what it returns.
type sandboxMemo struct {
	mu sync.RWMutex
	m  map[string]json.RawMessage
}

// get is the data of seed, made by generate unless remembered.
func (s *sandboxMemo) get(seed string, generate func(seed string) (json.RawMessage, error)) (json.RawMessage, error) {
	s.mu.RLock()
	data, ok := s.m[seed]
	s.mu.RUnlock()
	if ok {
		return data, nil
	}
	data, err := generate(seed)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.m == nil || len(s.m) >= maxSandboxMemo {
		s.m = map[string]json.RawMessage{}
	}
	s.m[seed] = data
	s.mu.Unlock()
	return data, nil
}
