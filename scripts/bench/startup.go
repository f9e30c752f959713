package main

// Section 5: each function's bootstrap size and the time from process
// start to its first answered event.
//
// Sizes are those of make build's linux/arm64 bootstraps. Start-up is
// measured on host-architecture builds of the same mains with the same
// flags, run against a fake Lambda Runtime API served here: GET
// /2018-06-01/runtime/invocation/next hands out one API Gateway v2 event
// from testdata/events (an SQS event for the worker), POST .../response
// records the answer. Extensions API calls are refused at once. The API
// functions run without MERIDIAN_TABLE (no AWS needed); the worker, which
// exits without one, gets a fresh table in DynamoDB Local.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store/dynamostore"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamolocal"
	"github.com/meridian-data/meridian/shared/usage"
)

// buildFlags are make build's, without GOARCH (BUILD_ENV, BUILD_FLAGS).
var buildFlags = []string{"-trimpath", "-buildvcs=false", "-tags", "lambda.norpc", "-ldflags=-s -w -buildid="}

// StartupFunction is one function's result.
type StartupFunction struct {
	Function   string    `json:"function"`
	Arm64Bytes int64     `json:"arm64_bytes"`
	HostBytes  int64     `json:"host_bytes"`
	Event      string    `json:"event"`
	Status     int       `json:"status"` // the answer's statusCode (0 for the worker)
	Answer     string    `json:"answer"`
	InitMS     []float64 `json:"init_ms"`   // process start → first GET .../next
	AnswerMS   []float64 `json:"answer_ms"` // process start → POST .../response
	Note       string    `json:"note,omitempty"`
	// InitTrace is one more start-up with GODEBUG=inittrace=1: the clock
	// time of all package initialisers and the slowest ones.
	InitTraceMS  float64  `json:"init_trace_ms"`
	InitPackages int      `json:"init_packages"`
	InitSlowest  []string `json:"init_slowest"`
}

// StartupResult is section 5.
type StartupResult struct {
	HostArch     string            `json:"host_arch"`
	Runs         int               `json:"runs"`
	BuildCommand string            `json:"build_command"`
	Functions    []StartupFunction `json:"functions"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// functionNames are make build's FUNCTIONS: every functions/* but local.
func functionNames() ([]string, error) {
	entries, err := os.ReadDir("functions")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "local" {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// eventFor picks a function's API Gateway event from testdata/events: an
// invalid key (a key lookup, then 401), else a missing key, else MCP's
// tools/list, else the first.
func eventFor(dir, fn string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, fn, "*.json"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no event for %s in %s", fn, dir)
	}
	sort.Strings(files)
	for _, want := range []string{"invalid-key", "missing-key", "tools-list"} {
		for _, f := range files {
			if strings.Contains(filepath.Base(f), want) {
				return f, nil
			}
		}
	}
	return files[0], nil
}

// workerEvent is an SQS batch of one usage event, as the queue delivers it.
func workerEvent() ([]byte, error) {
	m := usage.UsageMessage(usage.Event{
		RequestID: envelope.NewRequestID(), At: time.Now().UTC(), Method: "GET", Status: 200,
		Endpoint: "/v1/company_registry/search", Platform: "company_registry", LatencyMS: 12.5, Served: true,
	})
	return json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "bench-1", Body: string(m.Encoded()), EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:meridian-usage", AWSRegion: "us-east-1",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
	}}})
}

// fakeRuntime is a Lambda Runtime API that hands out one event.
type fakeRuntime struct {
	event []byte
	mu    sync.Mutex
	next  time.Time // first GET .../next
	resp  time.Time // POST .../response
	body  []byte
	fail  string
	done  chan struct{}
	calls int
}

func (f *fakeRuntime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	p := r.URL.Path
	switch {
	case r.Method == http.MethodGet && p == "/2018-06-01/runtime/invocation/next":
		f.mu.Lock()
		f.calls++
		first := f.calls == 1
		if first {
			f.next = now
		}
		f.mu.Unlock()
		if !first {
			<-r.Context().Done() // no second event: wait to be killed
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Lambda-Runtime-Aws-Request-Id", "8476a536-e9f4-11e8-9739-2dfe598c3fcd")
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(now.Add(60*time.Second).UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:meridian-bench")
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1")
		_, _ = w.Write(f.event)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/2018-06-01/runtime/invocation/") && strings.HasSuffix(p, "/response"):
		body, _ := io.ReadAll(r.Body)
		f.finish(time.Now(), body, "")
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/2018-06-01/runtime/"): // invocation or init error
		body, _ := io.ReadAll(r.Body)
		f.finish(time.Now(), nil, p+": "+string(body))
		w.WriteHeader(http.StatusAccepted)
	default: // the Extensions API and anything else: refused at once
		http.Error(w, `{"errorMessage":"not served by the benchmark","errorType":"Extension.Unsupported"}`, http.StatusForbidden)
	}
}

func (f *fakeRuntime) finish(at time.Time, body []byte, fail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.resp.IsZero() {
		return
	}
	f.resp, f.body, f.fail = at, body, fail
	close(f.done)
}

// startOnce runs bin until it answers the event (or fails, or 60 s pass).
func startOnce(bin string, env []string, event []byte) (initMS, answerMS float64, body []byte, err error) {
	initMS, answerMS, body, _, err = startTraced(bin, env, event)
	return initMS, answerMS, body, err
}

// startTraced is startOnce that also returns what the process wrote to stderr.
func startTraced(bin string, env []string, event []byte) (initMS, answerMS float64, body []byte, stderrText string, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, nil, "", err
	}
	f := &fakeRuntime{event: event, done: make(chan struct{})}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cmd := exec.Command(bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(slices.Clone(env), "AWS_LAMBDA_RUNTIME_API="+ln.Addr().String())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr // stdout: the JSON log lines
	exited := make(chan error, 1)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, nil, "", err
	}
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	select {
	case <-f.done:
	case werr := <-exited:
		exited <- werr
		return 0, 0, nil, stderr.String(), fmt.Errorf("%s exited before answering: %v %s", filepath.Base(filepath.Dir(bin)), werr, stderr.String())
	case <-time.After(60 * time.Second):
		return 0, 0, nil, stderr.String(), fmt.Errorf("%s did not answer in 60 s", bin)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != "" {
		return 0, 0, nil, stderr.String(), fmt.Errorf("runtime error report: %s", f.fail)
	}
	return float64(f.next.Sub(start).Microseconds()) / 1000, float64(f.resp.Sub(start).Microseconds()) / 1000, f.body, stderr.String(), nil
}

func runStartup(args []string) error {
	fs := flag.NewFlagSet("startup", flag.ExitOnError)
	out := fs.String("out", "build/bench/startup.json", "results file")
	buildDir := fs.String("build", "build", "make build's output (arm64 bootstraps)")
	work := fs.String("work", "build/bench/host", "host-architecture builds")
	runs := fs.Int("runs", 7, "start-ups per function")
	eventsDir := fs.String("events", "testdata/events", "API Gateway events")
	_ = fs.Parse(args)
	fns, err := functionNames()
	if err != nil {
		return err
	}
	res := StartupResult{HostArch: runtime.GOOS + "/" + runtime.GOARCH, Runs: *runs,
		BuildCommand: "CGO_ENABLED=0 GOFLAGS=-mod=readonly go build " + strings.Join(buildFlags[:4], " ") + " -ldflags='-s -w -buildid=' -o " + *work + "/FUNCTION/bootstrap ./functions/FUNCTION"}
	base := []string{
		"PATH=" + os.Getenv("PATH"), "TZ=:UTC", "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "_HANDLER=bootstrap",
		"AWS_LAMBDA_LOG_FORMAT=JSON", "MERIDIAN_LOG_LEVEL=info",
	}
	for _, fn := range fns {
		r := StartupFunction{Function: fn}
		if st, err := os.Stat(filepath.Join(*buildDir, fn, "bootstrap")); err == nil {
			r.Arm64Bytes = st.Size()
		} else {
			return fmt.Errorf("no %s/%s/bootstrap: run make build first", *buildDir, fn)
		}
		bin, err := filepath.Abs(filepath.Join(*work, fn, "bootstrap"))
		if err != nil {
			return err
		}
		logf("start-up: building %s for %s", fn, res.HostArch)
		build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", bin, "./functions/"+fn)...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", fn, err, out)
		}
		st, err := os.Stat(bin)
		if err != nil {
			return err
		}
		r.HostBytes = st.Size()
		env := append(slices.Clone(base), "AWS_LAMBDA_FUNCTION_NAME=meridian-"+fn, "LAMBDA_TASK_ROOT="+filepath.Dir(bin),
			"AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(lambdaMemoryMB(fn)))
		var event []byte
		if fn == "worker" || fn == "canary" {
			table, cleanup, endpoint, err := workerTable()
			if err != nil {
				return fmt.Errorf("%s: DynamoDB Local table: %w", fn, err)
			}
			defer cleanup()
			env = append(env, "MERIDIAN_TABLE="+table, "AWS_ENDPOINT_URL="+endpoint,
				"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
		}
		switch fn {
		case "worker":
			if event, err = workerEvent(); err != nil {
				return err
			}
			r.Event = "an SQS batch of one usage event"
			r.Note = "MERIDIAN_TABLE on DynamoDB Local: the answer includes two DynamoDB writes"
		case "canary":
			// One scheduled run of one API operation (sent through the
			// runner's client, which honours the proxy) with a budget of one
			// source request, to a proxy that is not there: nothing reaches
			// the internet.
			env = append(env, "MERIDIAN_CANARY_ONLY=app_store_a/app-info", "MERIDIAN_CANARY_BUDGET=1",
				"HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1", "NO_PROXY=")
			event = []byte("{}")
			r.Event = "a scheduled run ({}) of app_store_a/app-info, 1 source request, refused by an absent proxy"
			r.Note = "MERIDIAN_TABLE on DynamoDB Local: the answer includes the run's record and its fair-use count"
		default:
			path, err := eventFor(*eventsDir, fn)
			if err != nil {
				return err
			}
			if event, err = os.ReadFile(path); err != nil {
				return err
			}
			r.Event = filepath.ToSlash(path)
		}
		for i := 0; i < *runs; i++ {
			if fn == "worker" {
				if event, err = workerEvent(); err != nil { // a new request id: counted each time
					return err
				}
			}
			initMS, answerMS, body, err := startOnce(bin, env, event)
			if err != nil {
				return err
			}
			r.InitMS, r.AnswerMS = append(r.InitMS, initMS), append(r.AnswerMS, answerMS)
			if i == 0 {
				var answer struct {
					StatusCode int `json:"statusCode"`
				}
				_ = json.Unmarshal(body, &answer)
				r.Status = answer.StatusCode
				r.Answer = string(body)
				if len(r.Answer) > 160 {
					r.Answer = r.Answer[:160] + "…"
				}
			}
		}
		_, _, _, trace, err := startTraced(bin, append(slices.Clone(env), "GODEBUG=inittrace=1"), event)
		if err != nil {
			return err
		}
		r.InitTraceMS, r.InitPackages, r.InitSlowest = parseInitTrace(trace, 3)
		logf("start-up: %s answered in %.1f ms (median of %d)", fn, median(r.AnswerMS), *runs)
		res.Functions = append(res.Functions, r)
	}
	return writeJSON(*out, res)
}

// workerTable creates a fresh table in DynamoDB Local for the worker.
func workerTable() (table string, cleanup func(), endpoint string, err error) {
	endpoint, err = dynamolocal.Endpoint()
	if err != nil {
		return "", nil, "", err
	}
	client := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
	table = fmt.Sprintf("meridian-bench-worker-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		return "", nil, "", err
	}
	return table, func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	}, endpoint, nil
}

// parseInitTrace sums GODEBUG=inittrace=1 lines ("init PKG @T ms, C ms
// clock, B bytes, A allocs") and names the n slowest packages.
func parseInitTrace(text string, n int) (total float64, packages int, slowest []string) {
	type pkg struct {
		name  string
		clock float64
	}
	var all []pkg
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		clock, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			continue
		}
		all = append(all, pkg{f[1], clock})
		total += clock
	}
	sort.Slice(all, func(i, j int) bool { return all[i].clock > all[j].clock })
	for i := 0; i < n && i < len(all); i++ {
		slowest = append(slowest, fmt.Sprintf("%s %s ms", all[i].name, fmtFloat(all[i].clock)))
	}
	return total, len(all), slowest
}
