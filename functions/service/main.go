// Command service is the Lambda function of the service family.
package main

import (
	"github.com/meridian-data/meridian/shared/apidocs"
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/registry"
)

// The service function serves the API reference page: only it embeds it.
func main() { app.StartLambda(registry.Service, app.WithReference(apidocs.Page{})) }
