// Package dynamolocal gives tests a DynamoDB Local endpoint:
// MERIDIAN_DYNAMODB_ENDPOINT when set (make test sets it and stops the
// emulator afterwards), otherwise the one scripts/dynamodb-local.sh runs,
// started if needed and left running for the other test packages (stop it
// with scripts/dynamodb-local.sh stop). Tests that need it fail, never
// skip, when there is none.
package dynamolocal

import (
	"fmt"
	"os"
	"sync"

	"github.com/meridian-data/meridian/shared/internal/devscripts"
)

// EnvEndpoint names the endpoint make test passes to go test.
const EnvEndpoint = "MERIDIAN_DYNAMODB_ENDPOINT"

var mu sync.Mutex

// Endpoint returns a DynamoDB Local URL, starting the emulator if needed.
func Endpoint() (string, error) {
	if e := os.Getenv(EnvEndpoint); e != "" {
		return e, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if e, err := run("endpoint"); err == nil && e != "" {
		return e, nil // already running: leave it running
	}
	e, err := run("start")
	if err != nil {
		return "", fmt.Errorf("no %s and DynamoDB Local did not start: %w", EnvEndpoint, err)
	}
	return e, nil
}

// run runs scripts/dynamodb-local.sh and returns the last line it printed.
func run(arg string) (string, error) { return devscripts.Run("dynamodb-local.sh", arg) }
