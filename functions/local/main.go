// Command local runs every family in one process on MERIDIAN_ADDR
// (default 127.0.0.1:8080), through the same API Gateway v2 event
// adaptation as Lambda.
package main

import (
	"github.com/meridian-data/meridian/shared/apidocs"
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/mcpserver"
)

func main() { app.RunLocal(app.WithReference(apidocs.Page{}), app.WithMCP(mcpserver.NewSurface)) }
