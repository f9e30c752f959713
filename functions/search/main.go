// Command search is the Lambda function of the search family.
package main

import (
	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/registry"
)

func main() { app.StartLambda(registry.Search) }
