package pipeline

import (
	"context"
	"html"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// index serves GET /v1 (the API index) and /v1/{platform} (a platform's
// endpoints), both from the registry; a platform's entries say which of
// them this deployment can serve.
func (p *Pipeline) index(ctx context.Context, c *Call) (any, *envelope.Error) {
	if c.Endpoint.Platform != "" {
		return p.platformIndex(ctx, c.Endpoint.Platform), nil
	}
	return apiIndex(p.cfg.Registry), nil
}

func (p *Pipeline) platformIndex(ctx context.Context, platform string) map[string]any {
	entries := []registry.Entry{}
	for _, e := range p.cfg.Registry.Live() {
		if e.Platform == platform && e.Kind == registry.Data {
			entries = append(entries, p.entry(ctx, e))
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

// serveErrorsReference renders the roster as the page doc_url anchors into.
func serveErrorsReference(w http.ResponseWriter) {
	var b strings.Builder
	b.WriteString("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Meridian error types</title></head><body>\n")
	b.WriteString("<h1>Meridian error types</h1>\n<p>Branch on <code>error.type</code>; <code>error.message</code> may be reworded. Every failure costs 0 credits.</p>\n")
	for _, t := range envelope.Roster {
		statuses := make([]string, 0, len(t.Statuses))
		for _, s := range t.Statuses {
			statuses = append(statuses, strconv.Itoa(s))
		}
		if len(statuses) == 0 {
			statuses = append(statuses, "never emitted")
		}
		b.WriteString("<h2 id=\"" + t.Type.Anchor() + "\">" + string(t.Type) + "</h2>\n")
		b.WriteString("<p>HTTP " + strings.Join(statuses, ", ") + ". " + html.EscapeString(t.Condition) + "</p>\n")
	}
	b.WriteString("<h2 id=\"billing-status\">error.details.billing_status</h2>\n<dl>\n")
	for _, v := range slices.Sorted(maps.Keys(BillingStatuses)) {
		b.WriteString("<dt><code>" + v + "</code></dt><dd>" + html.EscapeString(BillingStatuses[v]) + "</dd>\n")
	}
	b.WriteString("</dl>\n</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}
