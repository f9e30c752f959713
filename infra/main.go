// Command infra is Meridian's CDK app (cdk.json: go run -C infra .):
// cdk deploy -c stage=dev|prod after make build. See README, "Deploy to AWS".
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/meridian-data/meridian/infra/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	// The CDK CLI runs this from the repository root with relative paths
	// (CDK_OUTDIR=cdk.out); go run -C infra moved us into infra/.
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	build := filepath.Join(root, "build")
	if err := stack.CheckBuild(build); err != nil {
		return err
	}
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	cfg, err := stack.ConfigFromContext(app)
	if err != nil {
		return err
	}
	cfg.BuildDir = build
	stack.New(app, cfg, &awscdk.StackProps{Env: env()})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
	return nil
}

// repoRoot is the nearest directory at or above the working directory
// holding cdk.json.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "cdk.json")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no cdk.json at or above the working directory: run cdk from the repository root")
		}
		dir = parent
	}
}

// env pins the stack to the account and region of the CLI's credentials
// when there are any; without them the stack is environment-agnostic,
// which is enough to synthesize.
func env() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}
