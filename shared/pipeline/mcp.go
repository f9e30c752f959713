package pipeline

import (
	"net/http"
	"sync"

	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/params"
)

// mcpSurface is the /mcp handler, built on first use.
type mcpSurface struct {
	once    sync.Once
	handler http.Handler
}

// serveMCP answers /mcp: the caller's key is checked here, so a refusal is
// the spec's 401 envelope on the HTTP layer (Bearer accepted, spec 5.2);
// then the MCP server runs, its tool calls going through the whole API
// with the same key. The /mcp request itself is not admitted against the
// rate limits: each tool call is, like each batch item.
func (p *Pipeline) serveMCP(x *exchange) {
	query, _ := params.Parse(x.r.URL.RawQuery)
	if _, refusal := p.authenticate(x, query, true, false); refusal != nil {
		x.fail(refusal)
		return
	}
	p.mcp.once.Do(func() {
		// Tool calls may reach any family's endpoints: they run on a
		// pipeline that serves them all, in this process.
		all := p.cfg
		all.Family = ""
		api := New(all)
		// Every tool call is a request run with the caller's key (Run).
		run := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { api.Run(r, RunAs{Live: w}) })
		p.mcp.handler = mcpserver.New(all.Registry, run, mcpserver.Options{
			Schemas: all.DataSchemas, ErrorsURL: p.ErrorsURL, Available: p.Available, Logger: p.cfg.Logger,
		})
	})
	p.mcp.handler.ServeHTTP(x.w, x.r)
}
