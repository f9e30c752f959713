package pipeline

import (
	"encoding/json"
	"net/http"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/openapi"
)

// openAPIDocs holds the OpenAPI document per base URL, each built once: the
// registry and what this deployment serves do not change while the process
// runs. The document names the deployment's own address (its servers entry
// and every code sample), so it is built per base URL; a deployment has
// one (MERIDIAN_ERRORS_URL's, or its API Gateway host), so the few kept
// are bounded and any beyond them are built and not kept.
type openAPIDocs struct {
	mu     sync.Mutex
	byBase map[string]*openAPIDoc
}

type openAPIDoc struct {
	once       sync.Once
	json, yaml []byte
	err        error
}

// openAPIKept bounds the documents kept (a Host header is the caller's to
// choose on a local server).
const openAPIKept = 8

func (p *Pipeline) openAPI(base string) (*openAPIDoc, error) {
	docs := &p.openapi
	docs.mu.Lock()
	d := docs.byBase[base]
	if d == nil {
		d = &openAPIDoc{}
		if docs.byBase == nil {
			docs.byBase = map[string]*openAPIDoc{}
		}
		if len(docs.byBase) < openAPIKept {
			docs.byBase[base] = d
		}
	}
	docs.mu.Unlock()
	d.once.Do(func() {
		served, _ := p.firstCalls("")
		batchItem := quickstart(served, "") // the batch example's item, as the catalogue's
		doc := openapi.Document(p.cfg.Registry, openapi.Options{BaseURL: base, Schemas: p.cfg.DataSchemas, Contact: p.cfg.Contact,
			Available: p.available, BatchItem: batchItem})
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
	docs, err := p.openAPI(p.baseURL(x.r))
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
