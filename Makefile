# Meridian: make run starts the API locally; make test runs every test.
SHELL := /bin/bash
GO ?= go
FUNCTIONS := $(filter-out local,$(notdir $(wildcard functions/*)))
BUILD_DIR := build
# Reproducible, stripped linux/arm64 binaries for provided.al2023.
BUILD_ENV := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 GOFLAGS=-mod=readonly
BUILD_FLAGS := -trimpath -buildvcs=false -tags lambda.norpc -ldflags='-s -w -buildid='

.PHONY: run test unit infra-test lint build check-build fuzz clean docs-assets
# One target at a time, even under make -j: unit and infra-test share
# DynamoDB Local's state directory (.tools/dynamodb-local), and each stops
# the emulator when it finishes.
.NOTPARALLEL:

run: docs-assets ## start the API locally on MERIDIAN_ADDR (default 127.0.0.1:8080)
	$(GO) run ./functions/local

test: docs-assets lint check-build unit infra-test ## every test: vet, gofmt, reproducible builds, unit, DynamoDB Local and SQS (goaws) tests with fuzz seed corpora, CDK synth and cdk-nag

# DynamoDB Local runs for the DynamoDB store's tests (scripts/dynamodb-local.sh
# installs Java and the emulator when missing) and goaws for the SQS tests
# (scripts/goaws.sh builds it from the module cache); both stop afterwards.
# The go test lines come last. CI=true makes every test that needs a local
# service (emulators, the npm-installed MCP client) fail rather than skip.
unit:
	@endpoint=$$(scripts/dynamodb-local.sh start | tail -n1) || exit 1; \
	  sqs=$$(scripts/goaws.sh start | tail -n1) || { scripts/dynamodb-local.sh stop >/dev/null 2>&1; exit 1; }; \
	  CI=$${CI:-true} MERIDIAN_DYNAMODB_ENDPOINT=$$endpoint MERIDIAN_SQS_ENDPOINT=$$sqs $(GO) test -count=1 ./...; rc=$$?; \
	  scripts/goaws.sh stop >/dev/null 2>&1 || true; \
	  scripts/dynamodb-local.sh stop >/dev/null 2>&1 || true; exit $$rc

# infra/ is its own Go module (the CDK stays out of the Lambda binaries'
# module); infra/go.work puts the root module beside it. Its tests
# synthesize the stacks offline (the CDK runs in Node: scripts/node.sh
# installs it when missing), check the templates and cdk-nag, and replay
# every function's calls on DynamoDB Local against its IAM policy.
infra-test:
	@scripts/node.sh >/dev/null
	@endpoint=$$(scripts/dynamodb-local.sh start | tail -n1) || exit 1; \
	  (cd infra && CI=$${CI:-true} MERIDIAN_DYNAMODB_ENDPOINT=$$endpoint JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1 \
	    $(GO) test -count=1 ./...); rc=$$?; \
	  scripts/dynamodb-local.sh stop >/dev/null 2>&1 || true; exit $$rc

lint:
	$(GO) vet ./...
	cd infra && $(GO) vet ./...
	@out=$$(find . -name '*.go' -not -path './build/*' -not -path './.git/*' | xargs gofmt -l); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# The API reference's renderer (Redoc's bundle, pinned in the script) is
# fetched from npm into shared/apidocs/redoc/ (gitignored) before anything
# builds, so every binary embeds it; a no-op once it is there.
docs-assets:
	@scripts/docs-assets.sh >/dev/null

build: docs-assets ## one bootstrap per function under build/<function>/bootstrap
	@for fn in $(FUNCTIONS); do \
	  mkdir -p $(BUILD_DIR)/$$fn; \
	  $(BUILD_ENV) $(GO) build $(BUILD_FLAGS) -o $(BUILD_DIR)/$$fn/bootstrap ./functions/$$fn || exit 1; \
	done
	@ls -l $(BUILD_DIR)/*/bootstrap

check-build: build ## the build is complete and byte-for-byte reproducible
	@$(MAKE) --no-print-directory build BUILD_DIR=$(BUILD_DIR)/.rebuild >/dev/null
	@scripts/check-build.sh $(BUILD_DIR) $(BUILD_DIR)/.rebuild $(FUNCTIONS)

fuzz: ## every fuzz target of shared/, functions/ and scripts/ (scripts/fuzz.sh --list), each alone for FUZZTIME (default 30s); stops at the first failure
	GO="$(GO)" scripts/fuzz.sh

clean:
	rm -rf $(BUILD_DIR)

.PHONY: canary-baseline
canary-baseline: ## rewrite shared/canary/baseline.json: each operation's fill rate on each route, from the replay fixtures (review the diff)
	scripts/canary.sh -replay -write-baseline shared/canary/baseline.json -json >/dev/null

.PHONY: bench
bench: ## every benchmark of BENCHMARKS.md (scripts/bench.sh; installs wrk, starts DynamoDB Local); not part of make test
	scripts/bench.sh

.PHONY: soak
# The soak's full profile on both stores (DynamoDB Local and goaws started
# as for make test, then stopped), then the fuzz budget: every fuzz target
# for FUZZTIME. make test runs the short profile.
soak: ## 10,000 mixed calls with faults on each store and the audit of every credit (shared/soak), then make fuzz; not part of make test
	@endpoint=$$(scripts/dynamodb-local.sh start | tail -n1) || exit 1; \
	  sqs=$$(scripts/goaws.sh start | tail -n1) || { scripts/dynamodb-local.sh stop >/dev/null 2>&1; exit 1; }; \
	  CI=$${CI:-true} MERIDIAN_SOAK=full MERIDIAN_DYNAMODB_ENDPOINT=$$endpoint MERIDIAN_SQS_ENDPOINT=$$sqs \
	    $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 40m ./shared/soak; rc=$$?; \
	  scripts/goaws.sh stop >/dev/null 2>&1 || true; \
	  scripts/dynamodb-local.sh stop >/dev/null 2>&1 || true; exit $$rc
	@$(MAKE) --no-print-directory fuzz
