// Command worker is the worker function: usage events and billing
// reconciliations from SQS, and the scheduled sweep of expired
// reservations and the outbox.
package main

import "github.com/meridian-data/meridian/shared/app"

func main() { app.StartWorker() }
