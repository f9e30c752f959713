// Command commerce is the Lambda function of the commerce family.
package main

import (
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/registry"
)

func main() { app.StartLambda(registry.Commerce) }
