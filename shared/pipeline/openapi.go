package pipeline

import (
	"encoding/json"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/openapi"
)

// serveOpenAPI answers GET /openapi.json and /openapi.yaml: the OpenAPI 3.1
// description generated from the registry, public like any API reference.
func (p *Pipeline) serveOpenAPI(x *exchange, asYAML bool) {
	schemas := p.cfg.DataSchemas
	if schemas == nil {
		schemas = func(string) (json.RawMessage, bool) { return nil, false }
	}
	doc := openapi.Document(p.cfg.Registry, p.baseURL(x.r), schemas)
	body, err := json.MarshalIndent(doc, "", "  ")
	contentType := "application/json"
	if err == nil && asYAML {
		body, err = yaml.JSONToYAML(body)
		contentType = "application/yaml"
	}
	if err != nil {
		p.cfg.Logger.Error("openapi", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	x.w.Header().Set("content-type", contentType)
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(body)
}
