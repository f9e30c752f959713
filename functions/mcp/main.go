// Command mcp is the Lambda function of the mcp family.
package main

import (
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/mcpserver"
	"github.com/meridian-data/meridian/shared/registry"
)

func main() { app.StartLambda(registry.MCP, app.WithMCP(mcpserver.NewSurface)) }
