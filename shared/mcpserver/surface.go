package mcpserver

import (
	"log/slog"
	"net/http"
	"sync"

	"github.com/meridian-data/meridian/shared/openapi"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
)

// Surface serves /mcp beside the API, as a pipeline.Surface. The caller's
// key is checked first (Exchange.Authenticate), so a refusal is the spec's
// 401 envelope on the HTTP layer (Bearer accepted, spec 5.2); then the MCP
// server runs, each tool call a request run with the same key through the
// tools pipeline's Run. The /mcp request itself is not admitted against
// the rate limits: each tool call is, like each batch item.
type Surface struct {
	reg     *registry.Registry
	tools   func() pipeline.Runner
	schemas openapi.DataSchemas
	logger  *slog.Logger

	once    sync.Once
	handler http.Handler
}

var _ pipeline.Surface = (*Surface)(nil)

// NewSurface builds the /mcp surface. tools gives the pipeline tool calls
// run on: one serving every family, since a tool may be any family's
// endpoint; it is asked for on the first /mcp request.
func NewSurface(reg *registry.Registry, tools func() pipeline.Runner, schemas openapi.DataSchemas, logger *slog.Logger) pipeline.Surface {
	return &Surface{reg: reg, tools: tools, schemas: schemas, logger: logger}
}

// Owns implements pipeline.Surface.
func (s *Surface) Owns(path string) bool { return path == "/mcp" }

// Serve implements pipeline.Surface.
func (s *Surface) Serve(x *pipeline.Exchange) {
	if refusal := x.Authenticate(); refusal != nil {
		x.Fail(refusal)
		return
	}
	s.once.Do(func() {
		api := s.tools()
		run := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.Run(r, pipeline.RunAs{Live: w}) })
		s.handler = New(s.reg, run, Options{Schemas: s.schemas, ErrorsURL: api.ErrorsURL, Available: api.Available, Logger: s.logger})
	})
	s.handler.ServeHTTP(x.Writer(), x.Request())
}
