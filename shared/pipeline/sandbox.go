package pipeline

import (
	"net/http"

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
	data, err := sandbox.Generate(schema, e.Key()+"?"+c.Params.CacheKey(), e.Platform)
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
