package console

import (
	"testing"

	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
)

// The console's store-backed behaviour (keys, the first key, idempotent
// console and operator POSTs) proven again on DynamoDB Local.
func TestOnDynamoDB(t *testing.T) {
	onDynamo := func(t *testing.T, credits int64, limit *int64, mutate ...func(*Config)) *billed {
		return newBilledOn(t, dynamotest.NewStore(t), credits, limit, mutate...)
	}
	for name, test := range map[string]func(*testing.T, billedFactory){
		"ConsoleKeyLifecycle":                          testConsoleKeyLifecycle,
		"OperatorAndConsolePostsAreIdempotent":         testOperatorAndConsolePostsAreIdempotent,
		"ConsoleFiveKeyCapAndBadBodies":                testConsoleFiveKeyCapAndBadBodies,
		"ConsoleFirstKeyIsCreatedOnceUnderConcurrency": testConsoleFirstKeyIsCreatedOnceUnderConcurrency,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, onDynamo)
		})
	}
}
