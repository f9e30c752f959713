package service

import (
	"encoding/json"
	"sync"

	"sigs.k8s.io/yaml"

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

func (s *Service) openAPI() (*openAPIDocs, error) {
	d := &s.openapi
	d.once.Do(func() {
		doc := openapi.Document(s.cfg.Registry, openapi.Options{BaseURL: "/", Schemas: s.cfg.DataSchemas, Contact: s.cfg.Contact})
		d.json, d.err = json.MarshalIndent(doc, "", "  ")
		if d.err == nil {
			d.yaml, d.err = yaml.JSONToYAML(d.json)
		}
	})
	return d, d.err
}

// OpenAPI is the body and content type of GET /openapi.json (or, asYAML,
// /openapi.yaml): the OpenAPI 3.1 description generated from the
// registry, public like any API reference.
func (s *Service) OpenAPI(asYAML bool) (body []byte, contentType string, err error) {
	docs, err := s.openAPI()
	if err != nil {
		return nil, "", err
	}
	if asYAML {
		return docs.yaml, "application/yaml", nil
	}
	return docs.json, "application/json", nil
}
