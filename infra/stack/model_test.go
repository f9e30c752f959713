package stack_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/meridian-data/meridian/infra/stack"
	"github.com/meridian-data/meridian/shared/registry"
)

// The model configurations of the synthesized model stacks (synth_test.go).
const (
	testFoundationModel = "amazon.nova-micro-v1:0"
	testProfileModel    = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
	testModelRegion     = "us-west-2"
	testModelTimeout    = 15 * time.Second
	testOpenAIModel     = "llama3.1:8b"
	testOpenAIURL       = "https://llm.example.com/v1"
)

// aiFunctions run the endpoints marked AI (all of them social's today):
// social serves them, batch and mcp run every endpoint, and so does the
// worker (a monitor's run calls any data operation with the monitor's
// parameters, labels included). search and bundle run them only as
// composite legs, which never ask for labels. Written out, so a change to
// the rule shows up here.
var aiFunctions = []string{"social", "batch", "mcp", "worker"}

// The model's variables, as shared/assist/model reads them.
var modelVariables = []string{"MERIDIAN_MODEL_PROVIDER", "MERIDIAN_MODEL_ID", "MERIDIAN_MODEL_URL",
	"MERIDIAN_MODEL_REGION", "MERIDIAN_MODEL_TIMEOUT", "MERIDIAN_MODEL_API_KEY"}

func TestModelRunners(t *testing.T) {
	reg := registry.Default()
	runners := stack.ModelRunners(reg)
	var got []string
	for fn, why := range runners {
		got = append(got, fn)
		if len(why) == 0 {
			t.Errorf("%s runs the model without a reason", fn)
		}
		t.Logf("%s: %s", fn, strings.Join(why, "; "))
	}
	if !equalStrings(got, aiFunctions) {
		t.Errorf("model runners %v, want %v", got, aiFunctions)
	}
	ai := 0
	for _, e := range reg.Endpoints() {
		if e.AI {
			ai++
			if _, ok := runners[string(e.Family)]; !ok {
				t.Errorf("%s is marked AI, but its family %s does not run the model", e.Key(), e.Family)
			}
		}
	}
	if ai == 0 {
		t.Fatal("no endpoint is marked AI")
	}

	// Derived from the registry, not from family names: with the AI mark
	// moved to a places endpoint (a platform no search or bundle parameter
	// lists), the runners are places and the functions that run every
	// endpoint.
	var moved []registry.Endpoint
	var records *registry.AIRecords
	for _, e := range reg.Endpoints() {
		if e.AI && records == nil {
			records = e.Records
		}
	}
	for _, e := range reg.Endpoints() {
		c := *e
		c.AI, c.Records = false, nil
		if c.Key() == "travel_booking/search-attractions" {
			c.AI, c.Records = true, records
		}
		moved = append(moved, c)
	}
	other, err := registry.New(moved)
	if err != nil {
		t.Fatalf("registry with the AI mark moved: %v", err)
	}
	got = nil
	for fn := range stack.ModelRunners(other) {
		got = append(got, fn)
	}
	if want := []string{"places", "batch", "mcp", "worker"}; !equalStrings(got, want) {
		t.Errorf("model runners with the AI mark on places %v, want %v", got, want)
	}
}

// modelEnv returns a function's MERIDIAN_MODEL_* variables.
func modelEnv(t *testing.T, s *synthesized, fn string) map[string]any {
	t.Helper()
	p := s.template.Resources[s.functionID(t, fn)].Properties
	env, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
	out := map[string]any{}
	for k, v := range env {
		if strings.HasPrefix(k, "MERIDIAN_MODEL_") {
			out[k] = v
		}
	}
	return out
}

// bedrockGrants returns, per role logical id, the statements of every
// identity policy in the template that allow a Bedrock action (or any
// action at all).
func bedrockGrants(s *synthesized) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, typ := range []string{"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"} {
		for id, p := range s.ofType(typ) {
			for _, st := range statementsOf(p.Properties["PolicyDocument"].(map[string]any)) {
				if !slices.ContainsFunc(strs(st["Action"]), func(a string) bool { return strings.HasPrefix(a, "bedrock:") || a == "*" }) {
					continue
				}
				roles, _ := p.Properties["Roles"].([]any)
				if len(roles) == 0 {
					out["unattached "+id] = append(out["unattached "+id], st)
				}
				for _, r := range roles {
					out[ref(r)] = append(out[ref(r)], st)
				}
			}
		}
	}
	return out
}

// arnText renders an ARN (a string or an Fn::Join) with its references as
// <LogicalId>: arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/...
func arnText(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		return s
	}
	j, _ := v.(map[string]any)["Fn::Join"].([]any)
	if len(j) != 2 || j[0] != "" {
		t.Fatalf("resource %s is not a join", canonical(t, v))
	}
	var b strings.Builder
	for _, part := range j[1].([]any) {
		if s, ok := part.(string); ok {
			b.WriteString(s)
		} else if id := ref(part); id != "" {
			b.WriteString("<" + id + ">")
		} else {
			t.Fatalf("resource part %s", canonical(t, part))
		}
	}
	return b.String()
}

// By default there is no model: no function has a MERIDIAN_MODEL_*
// variable, no policy allows a Bedrock action, and the template never
// names either.
func TestModelOffByDefault(t *testing.T) {
	for name, s := range map[string]*synthesized{"dev": dev, "prod": prod, "imported-secret": imported, "streaming": streaming} {
		t.Run(name, func(t *testing.T) {
			if s.m.Config.Model.Enabled() {
				t.Fatalf("model %+v configured by default", s.m.Config.Model)
			}
			for _, fn := range stack.Functions() {
				if env := modelEnv(t, s, fn); len(env) != 0 {
					t.Errorf("%s: %v", fn, env)
				}
			}
			if g := bedrockGrants(s); len(g) != 0 {
				t.Errorf("Bedrock statements without a model: %v", g)
			}
			raw := canonical(t, s.raw)
			for _, text := range []string{"MERIDIAN_MODEL_", "bedrock", stack.SidModel} {
				if strings.Contains(raw, text) {
					t.Errorf("the template names %q", text)
				}
			}
		})
	}
}

// checkModelEnv: the AI functions have exactly want, every other function
// none of the model's variables.
func checkModelEnv(t *testing.T, s *synthesized, want map[string]any) {
	t.Helper()
	for _, fn := range stack.Functions() {
		got := modelEnv(t, s, fn)
		if !slices.Contains(aiFunctions, fn) {
			if len(got) != 0 {
				t.Errorf("%s runs no AI endpoint but has %v", fn, got)
			}
			continue
		}
		if canonical(t, got) != canonical(t, want) {
			t.Errorf("%s: model environment %s, want %s", fn, canonical(t, got), canonical(t, want))
		}
	}
}

// checkModelGrant: each AI function's role has one statement allowing
// exactly bedrock:InvokeModel on exactly resources (rendered by arnText);
// no other role or policy allows any Bedrock action.
func checkModelGrant(t *testing.T, s *synthesized, resources []string) {
	t.Helper()
	grants := bedrockGrants(s)
	roles := map[string]string{}
	for _, fn := range aiFunctions {
		roleID, _ := s.byPath(t, fnConstruct(fn)+"Role/Resource")
		roles[roleID] = fn
		assertNoPanic(t, fn+" "+stack.SidModel, func() {
			s.assertion.HasResourceProperties(jsii.String("AWS::IAM::Policy"), &map[string]any{
				"Roles": []any{map[string]any{"Ref": roleID}},
				"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{
					"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Sid": stack.SidModel, "Effect": "Allow", "Action": "bedrock:InvokeModel",
					})}),
				}),
			})
		})
		sts := grants[roleID]
		if len(sts) != 1 {
			t.Errorf("%s: %d Bedrock statements, want 1: %s", fn, len(sts), canonical(t, sts))
			continue
		}
		st := sts[0]
		if st["Sid"] != stack.SidModel || st["Effect"] != "Allow" || st["Condition"] != nil || st["NotResource"] != nil ||
			!equalStrings(strs(st["Action"]), []string{"bedrock:InvokeModel"}) {
			t.Errorf("%s: Bedrock statement %s", fn, canonical(t, st))
		}
		res, ok := st["Resource"].([]any)
		if !ok {
			res = []any{st["Resource"]}
		}
		var got []string
		for _, r := range res {
			got = append(got, arnText(t, r))
		}
		if !equalStrings(got, resources) {
			t.Errorf("%s: may invoke %v, want %v", fn, got, resources)
		}
	}
	for roleID, sts := range grants {
		if _, ok := roles[roleID]; !ok {
			t.Errorf("%s runs no AI endpoint but may use Bedrock: %s", roleID, canonical(t, sts))
		}
	}
}

func TestModelBedrockFoundationModel(t *testing.T) {
	s := bedrockModel
	checkModelEnv(t, s, map[string]any{
		"MERIDIAN_MODEL_PROVIDER": "bedrock",
		"MERIDIAN_MODEL_ID":       testFoundationModel,
		"MERIDIAN_MODEL_REGION":   map[string]any{"Ref": "AWS::Region"},
	})
	checkModelGrant(t, s, []string{"arn:<AWS::Partition>:bedrock:<AWS::Region>::foundation-model/" + testFoundationModel})
}

// A cross-region inference profile: the profile in the model's region and
// this account, and the model it routes to in any region.
func TestModelBedrockInferenceProfile(t *testing.T) {
	s := profileModel
	checkModelEnv(t, s, map[string]any{
		"MERIDIAN_MODEL_PROVIDER": "bedrock",
		"MERIDIAN_MODEL_ID":       testProfileModel,
		"MERIDIAN_MODEL_REGION":   testModelRegion,
		"MERIDIAN_MODEL_TIMEOUT":  "15s",
	})
	checkModelGrant(t, s, []string{
		"arn:<AWS::Partition>:bedrock:" + testModelRegion + ":<AWS::AccountId>:inference-profile/" + testProfileModel,
		"arn:<AWS::Partition>:bedrock:*::foundation-model/anthropic.claude-3-5-haiku-20241022-v1:0",
	})
	// The wildcard region is explained and suppressed for exactly that
	// model ARN, on the AI functions' policies only.
	if stack.WildcardReasons[stack.SidModel] == "" {
		t.Error("no reason for the wildcard region of the inference profile's model")
	}
	for _, fn := range stack.Functions() {
		_, policy := s.byPath(t, fnConstruct(fn)+"Role/DefaultPolicy/Resource")
		mentions := strings.Contains(canonical(t, policy.Metadata["cdk_nag"]), "foundation-model")
		if mentions != slices.Contains(aiFunctions, fn) {
			t.Errorf("%s: cdk-nag suppression of the model ARN present: %v", fn, mentions)
		}
	}
}

// An OpenAI-compatible server: the same functions get its variables (never
// its key), read the upstream secret where the key lives, and get no
// Bedrock permission.
func TestModelOpenAI(t *testing.T) {
	s := openaiModel
	checkModelEnv(t, s, map[string]any{
		"MERIDIAN_MODEL_PROVIDER": "openai",
		"MERIDIAN_MODEL_ID":       testOpenAIModel,
		"MERIDIAN_MODEL_URL":      testOpenAIURL,
	})
	if g := bedrockGrants(s); len(g) != 0 {
		t.Errorf("Bedrock statements with an openai model: %s", canonical(t, g))
	}
	if strings.Contains(canonical(t, s.raw), "MERIDIAN_MODEL_API_KEY") {
		t.Error("the template names MERIDIAN_MODEL_API_KEY: the key belongs in the upstream secret")
	}
	for _, fn := range aiFunctions {
		if !slices.Contains(s.m.SecretReaders[fn], stack.ModelSecretReason) {
			t.Errorf("%s calls the openai model but does not read its key: %v", fn, s.m.SecretReaders[fn])
		}
		if _, ok := modelEnv(t, s, fn)["MERIDIAN_MODEL_REGION"]; ok {
			t.Errorf("%s: MERIDIAN_MODEL_REGION with openai", fn)
		}
		env := s.template.Resources[s.functionID(t, fn)].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		if _, ok := env["MERIDIAN_UPSTREAM_SECRET"]; !ok {
			t.Errorf("%s: no MERIDIAN_UPSTREAM_SECRET", fn)
		}
	}
	for fn, why := range s.m.SecretReaders {
		if slices.Contains(why, stack.ModelSecretReason) && !slices.Contains(aiFunctions, fn) {
			t.Errorf("%s reads the model's key but runs no AI endpoint", fn)
		}
	}
}

func TestModelEnvironmentNames(t *testing.T) {
	got := []string{stack.EnvModelProvider, stack.EnvModelID, stack.EnvModelURL, stack.EnvModelRegion, stack.EnvModelTimeout, stack.EnvModelAPIKey}
	if !slices.Equal(got, modelVariables) {
		t.Errorf("model variables %v, want %v", got, modelVariables)
	}
}

func TestModelInferenceProfileIDs(t *testing.T) {
	for id, want := range map[string][2]string{ // geography, foundation model; none for a foundation model
		"amazon.nova-micro-v1:0":                           {},
		"anthropic.claude-3-haiku-20240307-v1:0:200k":      {},
		"meta.llama3-1-405b-instruct-v1:0":                 {},
		"us.anthropic.claude-3-5-haiku-20241022-v1:0":      {"us", "anthropic.claude-3-5-haiku-20241022-v1:0"},
		"eu.amazon.nova-lite-v1:0":                         {"eu", "amazon.nova-lite-v1:0"},
		"apac.amazon.nova-pro-v1:0":                        {"apac", "amazon.nova-pro-v1:0"},
		"global.anthropic.claude-sonnet-4-5-20250929-v1:0": {"global", "anthropic.claude-sonnet-4-5-20250929-v1:0"},
		"us-gov.anthropic.claude-3-haiku-20240307-v1:0":    {"us-gov", "anthropic.claude-3-haiku-20240307-v1:0"},
		"us.meta.llama3-2-11b-instruct-v1:0":               {"us", "meta.llama3-2-11b-instruct-v1:0"},
	} {
		c := stack.ModelConfig{Provider: stack.ModelBedrock, ID: id}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		prefix, foundation, profile := c.InferenceProfile()
		if profile != (want[0] != "") || prefix != want[0] || (profile && foundation != want[1]) {
			t.Errorf("%s: profile %v %q %q, want %q %q", id, profile, prefix, foundation, want[0], want[1])
		}
	}
}

// The context keys: defaults off, each provider's requirements, and clear
// refusals of what would deploy a broken or over-broad model.
func TestModelConfigFromContext(t *testing.T) {
	read := func(ctx map[string]any) (stack.Config, error) {
		return stack.ConfigFromContext(awscdk.NewApp(&awscdk.AppProps{Context: &ctx}))
	}
	cfg, err := read(map[string]any{})
	if err != nil || cfg.Model.Enabled() || cfg.Model != (stack.ModelConfig{}) {
		t.Errorf("default model %+v, %v", cfg.Model, err)
	}
	for _, c := range []struct {
		ctx  map[string]any
		want stack.ModelConfig
	}{
		{map[string]any{"modelProvider": "Bedrock", "modelId": "amazon.nova-micro-v1:0"},
			stack.ModelConfig{Provider: "bedrock", ID: "amazon.nova-micro-v1:0"}},
		{map[string]any{"modelProvider": "bedrock", "modelId": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
			"modelRegion": "eu-west-1", "modelTimeout": "12s", "modelUrl": "https://bedrock-runtime-fips.us-east-1.amazonaws.com"},
			stack.ModelConfig{Provider: "bedrock", ID: "global.anthropic.claude-sonnet-4-5-20250929-v1:0", Region: "eu-west-1",
				Timeout: 12 * time.Second, URL: "https://bedrock-runtime-fips.us-east-1.amazonaws.com"}},
		{map[string]any{"modelProvider": "openai", "modelId": "Qwen/Qwen2.5-7B-Instruct", "modelUrl": "https://llm.example.com"},
			stack.ModelConfig{Provider: "openai", ID: "Qwen/Qwen2.5-7B-Instruct", URL: "https://llm.example.com"}},
	} {
		cfg, err := read(c.ctx)
		if err != nil || cfg.Model != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.ctx, cfg.Model, err, c.want)
		}
	}
	for _, c := range []struct {
		ctx  map[string]any
		says string // in the error
	}{
		{map[string]any{"modelProvider": "bedrock"}, "modelId"},
		{map[string]any{"modelProvider": "openai", "modelId": "gpt-4o-mini"}, "modelUrl"},
		{map[string]any{"modelProvider": "openai", "modelUrl": "https://llm.example.com"}, "modelId"},
		{map[string]any{"modelProvider": "anthropic", "modelId": "claude"}, `modelProvider="anthropic": use bedrock or openai`},
		{map[string]any{"modelId": "amazon.nova-micro-v1:0"}, "modelProvider is not"},
		{map[string]any{"modelTimeout": "10s"}, "modelProvider is not"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "amazon.nova-micro-v1:0", "modelTimeout": "15"}, "Go duration"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "amazon.nova-micro-v1:0", "modelTimeout": "0s"}, "Go duration"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "amazon.nova-micro-v1:0", "modelTimeout": "-1s"}, "Go duration"},
		// Longer than a call through API Gateway can last.
		{map[string]any{"modelProvider": "bedrock", "modelId": "amazon.nova-micro-v1:0", "modelTimeout": "1m"}, "at most 28s"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-micro-v1:0"}, "not an ARN"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "amazon.*"}, "not a Bedrock model id"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "anthropic.claude-3-5-haiku-*"}, "not a Bedrock model id"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "us.anthropic.claude?"}, "not a Bedrock model id"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "Amazon.Nova-Micro-v1:0"}, "not a Bedrock model id"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "nova-micro"}, "not a Bedrock model id"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "a.b.c.d:0"}, "not a Bedrock model id"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "northamerica.anthropic.claude-v2:1"}, "not an inference profile geography"},
		{map[string]any{"modelProvider": "bedrock", "modelId": "amazon.nova-micro-v1:0", "modelRegion": "mars-1"}, "not an AWS region"},
		{map[string]any{"modelProvider": "openai", "modelId": "m", "modelUrl": "https://llm.example.com", "modelRegion": "us-east-1"}, "bedrock only"},
		{map[string]any{"modelProvider": "openai", "modelId": "m", "modelUrl": "http://llm.example.com"}, "use https"},
		{map[string]any{"modelProvider": "openai", "modelId": "m", "modelUrl": "llm.example.com"}, "not an absolute URL"},
		{map[string]any{"modelProvider": "openai", "modelId": "m", "modelUrl": "https://user:pw@llm.example.com"}, "MERIDIAN_MODEL_API_KEY"},
		{map[string]any{"modelProvider": "openai", "modelId": "m", "modelUrl": "https://llm.example.com/v1?api-key=x"}, "MERIDIAN_MODEL_API_KEY"},
		{map[string]any{"modelProvider": "openai", "modelId": "two words", "modelUrl": "https://llm.example.com"}, "not a model name"},
	} {
		_, err := read(c.ctx)
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%v: error %v, want one saying %q", c.ctx, err, c.says)
		}
	}
	// A key in the context is refused without repeating it.
	const key = "sk-not-a-real-key-0123456789"
	_, err = read(map[string]any{"modelProvider": "openai", "modelId": "m", "modelUrl": "https://llm.example.com", "modelApiKey": key})
	if err == nil || !strings.Contains(err.Error(), "upstream secret") || strings.Contains(err.Error(), key) {
		t.Errorf("modelApiKey: %v", err)
	}
}

// New refuses a model configuration ConfigFromContext would refuse.
func TestModelNewRefusesInvalidConfig(t *testing.T) {
	cfg, err := stack.Preset(stack.StageDev)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = stack.ModelConfig{Provider: stack.ModelBedrock, ID: "amazon.*"}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmtAny(r), "modelId") {
			t.Errorf("New with %+v: %v", cfg.Model, r)
		}
	}()
	stack.New(awscdk.NewApp(nil), cfg, nil)
}

func fmtAny(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if err, ok := v.(error); ok {
		return err.Error()
	}
	return ""
}
