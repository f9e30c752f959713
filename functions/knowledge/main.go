// Command knowledge is the Lambda function of the knowledge family.
package main

import (
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/registry"
)

func main() { app.StartLambda(registry.Knowledge) }
