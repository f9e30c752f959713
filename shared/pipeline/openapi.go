package pipeline

import (
	"encoding/json"
	"net/http"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/openapi"
)

// openAPIDocs holds the OpenAPI document, built once: the registry does
// not change while the process runs, and the document names its server
// relatively ("/"), so it is the same for every caller.
type openAPIDocs struct {
	once       sync.Once
	json, yaml []byte
	err        error
}

func (p *Pipeline) openAPI() (*openAPIDocs, error) {
	d := &p.openapi
	d.once.Do(func() {
		doc := openapi.Document(p.cfg.Registry, openapi.Options{BaseURL: "/", Schemas: p.cfg.DataSchemas, Contact: p.cfg.Contact})
		d.json, d.err = json.MarshalIndent(doc, "", "  ")
		if d.err == nil {
			d.yaml, d.err = yaml.JSONToYAML(d.json)
		}
	})
	return d, d.err
}

// serveOpenAPI answers GET /openapi.json and /openapi.yaml: the OpenAPI 3.1
// description generated from the registry, public like any API reference.
func (p *Pipeline) serveOpenAPI(x *exchange, asYAML bool) {
	docs, err := p.openAPI()
	if err != nil {
		p.cfg.Logger.Error("openapi", "request_id", x.requestID, "error", err.Error())
		x.fail(envelope.Internal())
		return
	}
	body, contentType := docs.json, "application/json"
	if asYAML {
		body, contentType = docs.yaml, "application/yaml"
	}
	x.w.Header().Set("Content-Type", contentType)
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(body)
}
