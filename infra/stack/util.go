package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"
)

// duration converts a Go duration to a CDK one (whole seconds).
func duration(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

type ddbKey struct {
	name string
	hash bool
}

func keySchema(elems []types.KeySchemaElement) []ddbKey {
	out := make([]ddbKey, len(elems))
	for i, e := range elems {
		out[i] = ddbKey{name: *e.AttributeName, hash: e.KeyType == types.KeyTypeHash}
	}
	return out
}

// CheckBuild reports the functions whose build/<name>/bootstrap is
// missing: the stack deploys what make build wrote.
func CheckBuild(dir string) error {
	var missing []string
	for _, name := range Functions() {
		fi, err := os.Stat(filepath.Join(dir, name, "bootstrap"))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no build/<function>/bootstrap for %s in %s: run make build first", strings.Join(missing, ", "), dir)
	}
	return nil
}
