// Command canary is the canary function: on its EventBridge Scheduler
// schedule it checks every available operation on each configured route
// (shared/canary) and records the run.
package main

import "github.com/meridian-data/meridian/shared/app"

func main() { app.StartCanary() }
