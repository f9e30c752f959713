package main

// Section 4: the cost model. US dollars per million calls from the unit
// prices below and the measured figures of sections 3 (store request
// units, usage events, durations, log bytes).

import (
	"math"

	"github.com/meridian-data/meridian/shared/registry"
)

// PricesTaken is when the unit prices below were entered. They are AWS's
// public on-demand list prices for us-east-1 (N. Virginia), first tier,
// without free tier, Savings Plans or taxes, as published on the pages
// named beside each (the Lambda Arm and DynamoDB on-demand figures were
// cross-checked against copies of those pages; nothing is fetched at run
// time). Prices change: check each against its page before relying on
// the figures.
const PricesTaken = "2026-11-22"

// Unit prices in US dollars (see PricesTaken).
const (
	// APIGatewayHTTPPerMillion: HTTP APIs, per million requests (first 300
	// million a month; each 512 KB of request or response is one request).
	// https://aws.amazon.com/api-gateway/pricing/
	APIGatewayHTTPPerMillion = 1.00
	// LambdaArmPerGBSecond: Arm (Graviton) duration, first 7.5 billion
	// GB-seconds a month, billed per 1 ms.
	// https://aws.amazon.com/lambda/pricing/
	LambdaArmPerGBSecond = 0.0000133334
	// LambdaPerMillionRequests: invocations, either architecture.
	// https://aws.amazon.com/lambda/pricing/
	LambdaPerMillionRequests = 0.20
	// DynamoDBPerMillionWRU and DynamoDBPerMillionRRU: on-demand write and
	// read request units, standard table class (the prices since the
	// 2024-11-01 reduction).
	// https://aws.amazon.com/dynamodb/pricing/on-demand/
	DynamoDBPerMillionWRU = 0.625
	DynamoDBPerMillionRRU = 0.125
	// SQSPerMillionRequests: standard queues, after the first million a
	// month; every 64 KB chunk of a request is one request.
	// https://aws.amazon.com/sqs/pricing/
	SQSPerMillionRequests = 0.40
	// CloudWatchLogsPerGB: log ingestion, standard class (not in the
	// issue's list; shown apart).
	// https://aws.amazon.com/cloudwatch/pricing/
	CloudWatchLogsPerGB = 0.50
)

// SQSBatch is the most entries one SendMessageBatch (and one
// ReceiveMessage) carries.
const SQSBatch = 10

// lambdaMemoryMB is each function's configured memory, as
// infra/stack/sizing.go (Memory) sets it: 1,024 MB for the fan-out
// families (batch, search, mcp), 256 MB for the sandbox and the worker,
// 512 MB for every other API function. The infra module is apart from
// this one, so the figures are repeated here.
func lambdaMemoryMB(function string) int {
	switch registry.Family(function) {
	case registry.Batch, registry.Search, registry.MCP:
		return 1024
	case registry.Sandbox:
		return 256
	}
	if function == "worker" {
		return 256
	}
	return 512
}

// CostLine is one priced item per call, and per million calls.
type CostLine struct {
	Item       string
	Units      float64 // per call
	Unit       string
	PerMillion float64 // US dollars per million calls
	Note       string
}

// CostInput is what one request kind consumes per call (section 3).
type CostInput struct {
	Function   string  // the Lambda function that serves it
	HandlerMS  float64 // measured duration per invocation
	Calls      float64 // calls per invocation (20 for a batch of 20)
	RRU, WRU   float64 // per invocation
	Events     float64 // usage messages per invocation
	WorkerMS   float64 // worker time for all of those messages (median)
	WorkerRRU  float64
	WorkerWRU  float64
	SweepRRU   float64 // the reconciliation sweep reading the invocation's reservations
	SweepWRU   float64
	LogBytes   float64 // request log lines per invocation
	SendsOfTen bool    // count SQS sends as full batches of ten (the assumption)
}

// Cost prices one invocation's consumption, per million calls: per
// invocation figures are divided by the calls it serves.
func Cost(in CostInput) (lines []CostLine, total, logs float64) {
	per := 1 / in.Calls // invocations per call
	memGB := float64(lambdaMemoryMB(in.Function)) / 1024
	billedMS := math.Ceil(in.HandlerMS)
	add := func(item string, units float64, unit string, pricePerMillionUnits float64, note string) {
		l := CostLine{Item: item, Units: units, Unit: unit, PerMillion: units * pricePerMillionUnits, Note: note}
		lines = append(lines, l)
		total += l.PerMillion
	}
	add("API Gateway HTTP API requests", per, "requests", APIGatewayHTTPPerMillion, "")
	add("Lambda requests (API function)", per, "invocations", LambdaPerMillionRequests, in.Function)
	add("Lambda duration (API function)", per*billedMS/1000*memGB, "GB-s", LambdaArmPerGBSecond*1e6,
		in.Function+": "+fmtFloat(billedMS)+" ms billed × "+fmtFloat(float64(lambdaMemoryMB(in.Function)))+" MB")
	add("DynamoDB reads (request path)", per*in.RRU, "RRU", DynamoDBPerMillionRRU, "")
	add("DynamoDB writes (request path)", per*in.WRU, "WRU", DynamoDBPerMillionWRU, "")
	sends := math.Ceil(in.Events / SQSBatch) // one flush per invocation, up to ten entries a call
	note := "one SendMessageBatch per invocation (the emitter flushes after each response)"
	if in.SendsOfTen {
		sends, note = in.Events/SQSBatch, "full batches of ten"
	}
	add("SQS SendMessageBatch", per*sends, "requests", SQSPerMillionRequests, note)
	add("SQS ReceiveMessage + DeleteMessageBatch", per*2*in.Events/SQSBatch, "requests", SQSPerMillionRequests,
		"the worker's event source, batches of ten")
	workerInvocations := per * in.Events / SQSBatch
	add("Lambda requests (worker)", workerInvocations, "invocations", LambdaPerMillionRequests, "one per batch of ten events")
	perEvent := 0.0
	if in.Events > 0 {
		perEvent = in.WorkerMS / in.Events
	}
	workerBilled := math.Ceil(perEvent * SQSBatch) // one invocation applies ten events
	add("Lambda duration (worker)", workerInvocations*workerBilled/1000*float64(lambdaMemoryMB("worker"))/1024, "GB-s",
		LambdaArmPerGBSecond*1e6, fmtFloat(workerBilled)+" ms per batch of ten × 256 MB")
	add("DynamoDB reads (worker)", per*in.WorkerRRU, "RRU", DynamoDBPerMillionRRU, "")
	add("DynamoDB writes (worker)", per*in.WorkerWRU, "WRU", DynamoDBPerMillionWRU, "")
	add("DynamoDB reads (reconciliation sweep)", per*in.SweepRRU, "RRU", DynamoDBPerMillionRRU,
		"each reservation read once, by the sweep that moves its shard's mark past it")
	add("DynamoDB writes (reconciliation sweep)", per*in.SweepWRU, "WRU", DynamoDBPerMillionWRU, "")
	logs = per * in.LogBytes / (1 << 30) * CloudWatchLogsPerGB * 1e6
	return lines, total, logs
}

// perExtraMS is the cost of 10 more ms of an API function's duration,
// per million calls.
func perExtraMS(function string, ms float64) float64 {
	return ms / 1000 * float64(lambdaMemoryMB(function)) / 1024 * LambdaArmPerGBSecond * 1e6
}
