package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/meridian-data/meridian/infra/stack"
)

// The stacks are synthesized once per test binary (jsii starts a Node
// process; each synth takes seconds) and every test reads the result.
var (
	dev, prod, imported, streaming *synthesized
	// The AI-assist model configured (model_test.go): Bedrock with a
	// foundation model, Bedrock through a cross-region inference profile
	// in an explicit region, and an OpenAI-compatible server.
	bedrockModel, profileModel, openaiModel *synthesized
	// The canary's settings from the context (canary_test.go): every
	// CanaryTestInterval with its own budget and fill share, and off.
	canaryCustom, canaryOff *synthesized
	// canary holds cdk-nag's findings on a stack that breaks its rules.
	canary    []string
	synthTime time.Duration
)

// synthesized is one stack's template, its cdk-nag messages and the
// construct handles.
type synthesized struct {
	m         *stack.Meridian
	template  template
	raw       map[string]any
	messages  []*cxapi.SynthesisMessage
	assertion assertions.Template
}

type template struct {
	Resources map[string]resource `json:"Resources"`
	Outputs   map[string]any      `json:"Outputs"`
}

type resource struct {
	Type                string         `json:"Type"`
	Properties          map[string]any `json:"Properties"`
	DeletionPolicy      string         `json:"DeletionPolicy"`
	UpdateReplacePolicy string         `json:"UpdateReplacePolicy"`
	DependsOn           []string       `json:"DependsOn"`
	Metadata            map[string]any `json:"Metadata"`
}

func TestMain(m *testing.M) {
	code, err := synthAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "synth:", err)
		code = 1
	} else {
		code = m.Run()
	}
	jsii.Close()
	os.Exit(code)
}

// fakeBuild writes placeholder bootstraps, so synthesis does not need make
// build (the assets are only hashed and copied).
func fakeBuild(dir string) error {
	for _, name := range stack.Functions() {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name, "bootstrap"), []byte("placeholder "+name), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func synthAll() (int, error) {
	tmp, err := os.MkdirTemp("", "meridian-infra-test-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(tmp)
	build := filepath.Join(tmp, "build")
	if err := fakeBuild(build); err != nil {
		return 1, err
	}
	start := time.Now()
	newApp := func(out string) awscdk.App {
		return awscdk.NewApp(&awscdk.AppProps{
			Outdir:  jsii.String(filepath.Join(tmp, out)),
			Context: &map[string]any{"aws:cdk:enable-path-metadata": true},
		})
	}
	nag := func(app awscdk.App) {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	preset := func(stage string) stack.Config {
		cfg, err := stack.Preset(stage)
		if err != nil {
			panic(err)
		}
		cfg.BuildDir = build
		return cfg
	}

	// dev and prod in one app: one synthesis.
	app := newApp("main")
	devM := stack.New(app, preset(stack.StageDev), nil)
	prodCfg := preset(stack.StageProd)
	prodCfg.AlarmEmail = "ops@example.com"
	prodM := stack.New(app, prodCfg, nil)
	nag(app)
	asm := app.Synth(nil)
	if dev, err = read(asm, devM); err != nil {
		return 1, err
	}
	if prod, err = read(asm, prodM); err != nil {
		return 1, err
	}

	// An existing secret, imported by name.
	app2 := newApp("imported")
	impCfg := preset(stack.StageDev)
	impCfg.UpstreamSecretName = "meridian/dev/upstream"
	impM := stack.New(app2, impCfg, nil)
	nag(app2)
	if imported, err = read(app2.Synth(nil), impM); err != nil {
		return 1, err
	}
	// dev with -c streamingUrls=true.
	app4 := newApp("streaming")
	strCfg := preset(stack.StageDev)
	strCfg.StreamingURLs = true
	strM := stack.New(app4, strCfg, nil)
	nag(app4)
	if streaming, err = read(app4.Synth(nil), strM); err != nil {
		return 1, err
	}
	// The model configurations, each in its own app (one stack name per stage).
	for i, c := range []struct {
		into  **synthesized
		model stack.ModelConfig
	}{
		{&bedrockModel, stack.ModelConfig{Provider: stack.ModelBedrock, ID: testFoundationModel}},
		{&profileModel, stack.ModelConfig{Provider: stack.ModelBedrock, ID: testProfileModel, Region: testModelRegion, Timeout: testModelTimeout}},
		{&openaiModel, stack.ModelConfig{Provider: stack.ModelOpenAI, ID: testOpenAIModel, URL: testOpenAIURL}},
	} {
		modelApp := newApp(fmt.Sprintf("model-%d", i))
		cfg := preset(stack.StageDev)
		cfg.Model = c.model
		m := stack.New(modelApp, cfg, nil)
		nag(modelApp)
		if *c.into, err = read(modelApp.Synth(nil), m); err != nil {
			return 1, err
		}
	}
	// The canary every 30 minutes with its own budget and fill share, and
	// off, each in its own app.
	for i, c := range []struct {
		into     **synthesized
		interval time.Duration
	}{{&canaryCustom, canaryTestInterval}, {&canaryOff, 0}} {
		canaryApp := newApp(fmt.Sprintf("canary-%d", i))
		cfg := preset(stack.StageDev)
		cfg.CanaryInterval, cfg.CanaryBudget, cfg.CanaryFillShare = c.interval, canaryTestBudget, canaryTestFillShare
		m := stack.New(canaryApp, cfg, nil)
		nag(canaryApp)
		if *c.into, err = read(canaryApp.Synth(nil), m); err != nil {
			return 1, err
		}
	}
	// A queue without encryption, SSL policy or DLQ: cdk-nag must object.
	app3 := newApp("canary")
	awssqs.NewQueue(awscdk.NewStack(app3, jsii.String("Canary"), nil), jsii.String("Queue"), nil)
	nag(app3)
	if msgs := app3.Synth(nil).GetStackByName(jsii.String("Canary")).Messages(); msgs != nil {
		canary = nagFindings(*msgs)
	}
	synthTime = time.Since(start)
	fmt.Fprintf(os.Stderr, "infra: synthesized the dev, prod, imported-secret, streaming-URL, three model, two canary-setting and nag canary stacks in %s\n", synthTime.Round(time.Millisecond))
	return 0, nil
}

func read(asm cxapi.CloudAssembly, m *stack.Meridian) (*synthesized, error) {
	art := asm.GetStackByName(m.Stack.StackName())
	body, err := os.ReadFile(*art.TemplateFullPath())
	if err != nil {
		return nil, err
	}
	s := &synthesized{m: m}
	if err := json.Unmarshal(body, &s.template); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &s.raw); err != nil {
		return nil, err
	}
	if msgs := art.Messages(); msgs != nil {
		s.messages = *msgs
	}
	s.assertion = assertions.Template_FromJSON(&s.raw, nil)
	return s, nil
}

// --- template helpers ---

// byPath finds the resource whose aws:cdk:path is path (relative to the stack).
func (s *synthesized) byPath(t *testing.T, path string) (string, resource) {
	t.Helper()
	full := s.m.Stack.StackName()
	want := *full + "/" + path
	for id, r := range s.template.Resources {
		if p, _ := r.Metadata["aws:cdk:path"].(string); p == want {
			return id, r
		}
	}
	t.Fatalf("no resource at %s", want)
	return "", resource{}
}

func (s *synthesized) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.template.Resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

func (s *synthesized) functionID(t *testing.T, name string) string {
	id, _ := s.byPath(t, fnConstruct(name)+"Function/Resource")
	return id
}

func fnConstruct(name string) string {
	parts := strings.Split(name, "_")
	for i, p := range parts {
		parts[i] = strings.ToUpper(p[:1]) + p[1:]
	}
	return strings.Join(parts, "")
}

// getAtt returns the logical id of {"Fn::GetAtt": [id, attr]}.
func getAtt(v any, attr string) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	ga, ok := m["Fn::GetAtt"].([]any)
	if !ok || len(ga) != 2 || ga[1] != attr {
		return ""
	}
	id, _ := ga[0].(string)
	return id
}

// ref returns the logical id of {"Ref": id}.
func ref(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	id, _ := m["Ref"].(string)
	return id
}

// strs reads a string or a list of strings.
func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// literals collects every string literal inside v (Fn::Join parts included).
func literals(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				if k == "Ref" || k == "Fn::GetAtt" {
					continue // logical ids and attribute names are not patterns
				}
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func equalStrings(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// assertNoPanic runs an assertions call, which panics (a jsii error) on a mismatch.
func assertNoPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

func TestSynthTime(t *testing.T) {
	t.Logf("dev, prod, imported-secret, streaming-URL, three model, two canary-setting and nag canary stacks synthesized (with cdk-nag) in %s", synthTime.Round(time.Millisecond))
}
