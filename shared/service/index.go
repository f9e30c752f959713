package service

import (
	"context"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// index serves GET /v1 (the API index) and /v1/{platform} (a platform's
// endpoints), both from the registry; a platform's entries say which of
// them this deployment can serve.
func (s *Service) index(ctx context.Context, c *Call) (any, *envelope.Error) {
	if c.Endpoint.Platform != "" {
		return s.platformIndex(ctx, c.Endpoint.Platform), nil
	}
	return apiIndex(s.cfg.Registry), nil
}

func (s *Service) platformIndex(ctx context.Context, platform string) map[string]any {
	entries := []registry.Entry{}
	for _, e := range s.cfg.Registry.Live() {
		if e.Platform == platform && e.Kind == registry.Data {
			entries = append(entries, s.entry(ctx, e))
		}
	}
	return map[string]any{"platform": platform, "count": len(entries), "items": entries}
}

func apiIndex(reg *registry.Registry) map[string]any {
	type platformSummary struct {
		Platform  string `json:"platform"`
		Path      string `json:"path"`
		Endpoints int    `json:"endpoints"`
	}
	counts := map[string]int{}
	for _, e := range reg.Live() {
		if e.Kind == registry.Data {
			counts[e.Platform]++
		}
	}
	platforms := []platformSummary{}
	for _, name := range reg.Platforms() {
		if counts[name] > 0 {
			platforms = append(platforms, platformSummary{name, "/v1/" + name, counts[name]})
		}
	}
	return map[string]any{
		"name":        "Meridian",
		"version":     "v1",
		"description": "Public data from many platforms in one JSON envelope. Successful data calls spend credits; failures cost 0.",
		"auth": map[string]any{
			"header": "x-api-key",
			"bearer": "Authorization: Bearer is accepted on GET requests under /v1 and /sandbox and on /mcp; POST /v1/batch takes x-api-key only.",
		},
		"platforms": platforms,
		"links": map[string]string{
			"catalogue":        "/v1/utility/endpoints",
			"errors_reference": "/docs/errors",
			"ai_labels":        "/docs/ai-labels",
			"openapi":          "/openapi.json",
			"sandbox":          "/sandbox",
		},
	}
}
