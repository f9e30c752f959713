// Command social is the Lambda function of the social family.
package main

import (
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/registry"
)

func main() { app.StartLambda(registry.Social) }
