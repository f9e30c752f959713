package service

import (
	"encoding/json"
	"net/http"
	"sync"

	"sigs.k8s.io/yaml"

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

func (s *Service) openAPI(base string) (*openAPIDoc, error) {
	docs := &s.openapi
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
		served, _ := s.firstCalls("")
		batchItem := quickstart(served, "") // the batch example's item, as the catalogue's
		doc := openapi.Document(s.cfg.Registry, openapi.Options{BaseURL: base, Schemas: s.cfg.DataSchemas, Contact: s.cfg.Contact,
			Available: s.available, BatchItem: batchItem})
		d.json, d.err = json.MarshalIndent(doc, "", "  ")
		if d.err == nil {
			d.yaml, d.err = yaml.JSONToYAML(d.json)
		}
	})
	return d, d.err
}

// OpenAPI is the body and content type of GET /openapi.json (or, asYAML,
// /openapi.yaml) for the request r: the OpenAPI 3.1 description generated
// from the registry, public like any API reference, naming this
// deployment's base URL as r reached it.
func (s *Service) OpenAPI(r *http.Request, asYAML bool) (body []byte, contentType string, err error) {
	docs, err := s.openAPI(s.baseURL(r))
	if err != nil {
		return nil, "", err
	}
	if asYAML {
		return docs.yaml, "application/yaml", nil
	}
	return docs.json, "application/json", nil
}
