// Package dynamolocal gives tests a DynamoDB Local endpoint:
// MERIDIAN_DYNAMODB_ENDPOINT when set (make test sets it and stops the
// emulator afterwards), otherwise the one scripts/dynamodb-local.sh runs,
// started if needed and left running for the other test packages (stop it
// with scripts/dynamodb-local.sh stop). Tests that need it fail, never
// skip, when there is none.
package dynamolocal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// run calls the script and returns the last line it printed.
func run(arg string) (string, error) {
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script, arg)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", script, arg, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// scriptPath finds scripts/dynamodb-local.sh above the working directory.
func scriptPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "dynamodb-local.sh"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("dynamolocal: no go.mod above the working directory")
		}
		dir = parent
	}
}
