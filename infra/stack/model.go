package stack

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/meridian-data/meridian/shared/gateway"
	"github.com/meridian-data/meridian/shared/registry"
)

// The AI-assist model's environment, read by shared/assist/model
// (ConfigFrom). The names are repeated here, not imported, so the stack
// does not link the model clients; a test compares them with the package's
// documented names.
const (
	EnvModelProvider = "MERIDIAN_MODEL_PROVIDER" // bedrock or openai; unset: no model, labels off
	EnvModelID       = "MERIDIAN_MODEL_ID"       // Bedrock model or inference profile id; OpenAI-compatible model name
	EnvModelURL      = "MERIDIAN_MODEL_URL"      // base URL (openai: required; bedrock: optional endpoint)
	EnvModelRegion   = "MERIDIAN_MODEL_REGION"   // Bedrock region
	EnvModelTimeout  = "MERIDIAN_MODEL_TIMEOUT"  // per attempt, a Go duration
	// EnvModelAPIKey is a credential: it lives in the upstream secret
	// (MERIDIAN_UPSTREAM_SECRET), never in the environment or the template.
	EnvModelAPIKey = "MERIDIAN_MODEL_API_KEY"
)

// Model providers (MERIDIAN_MODEL_PROVIDER).
const (
	ModelBedrock = "bedrock"
	ModelOpenAI  = "openai"
)

// ModelConfig is the AI-assist model the AI endpoints' functions call.
// The zero value is no model: AI labels are off and no function gets the
// MERIDIAN_MODEL_* variables or any Bedrock permission.
type ModelConfig struct {
	Provider string // ModelBedrock, ModelOpenAI or ""
	// ID is the Bedrock model id (amazon.nova-micro-v1:0) or cross-region
	// inference profile id (us.anthropic.claude-3-5-haiku-20241022-v1:0),
	// or the OpenAI-compatible server's model name.
	ID string
	// Region is where Bedrock is called (and the region of the model or
	// profile ARN the functions may invoke); empty means the stack's.
	Region string
	// URL is the model server's base URL: required for openai, an
	// optional endpoint override for bedrock. Always https.
	URL string
	// Timeout bounds one attempt; zero leaves the package's default.
	Timeout time.Duration
}

// Enabled says whether a model is configured.
func (c ModelConfig) Enabled() bool { return c.Provider != "" }

var (
	// A Bedrock model id: provider.model[:version...], optionally behind an
	// inference profile's geography (us., eu., apac., global., us-gov., ...).
	// No wildcard can pass: the id is written into an IAM resource.
	bedrockModelPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*){1,2}(:[a-z0-9-]+)*$`)
	// The geography of a cross-region inference profile id.
	profilePrefixPattern = regexp.MustCompile(`^[a-z]{2,6}(-[a-z]{2,4})?$`)
	regionPattern        = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	// An OpenAI-compatible model name: "gpt-4o-mini", "llama3.1:8b",
	// "Qwen/Qwen2.5-7B-Instruct"; no spaces or control characters.
	openAIModelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$`)
)

// Validate reports the first problem with the model configuration, in
// terms of the context keys that set it.
func (c ModelConfig) Validate() error {
	if c.Provider == "" {
		var set []string
		for key, v := range map[string]bool{CtxModelID: c.ID != "", CtxModelRegion: c.Region != "", CtxModelURL: c.URL != "", CtxModelTimeout: c.Timeout != 0} {
			if v {
				set = append(set, key)
			}
		}
		if len(set) > 0 {
			sort.Strings(set)
			return fmt.Errorf("%s is set but %s is not: use -c %s=%s or -c %s=%s (or leave every model key unset: no AI labels)",
				strings.Join(set, ", "), CtxModelProvider, CtxModelProvider, ModelBedrock, CtxModelProvider, ModelOpenAI)
		}
		return nil
	}
	switch c.Provider {
	case ModelBedrock:
		if c.ID == "" {
			return fmt.Errorf("%s=%s needs %s: a Bedrock model id (amazon.nova-micro-v1:0) or inference profile id (us.anthropic.claude-3-5-haiku-20241022-v1:0)",
				CtxModelProvider, ModelBedrock, CtxModelID)
		}
		if strings.HasPrefix(c.ID, "arn:") {
			return fmt.Errorf("%s=%q: give the model or inference profile id, not an ARN (the stack builds the ARNs it grants)", CtxModelID, c.ID)
		}
		if !bedrockModelPattern.MatchString(c.ID) || len(c.ID) > 200 {
			return fmt.Errorf("%s=%q is not a Bedrock model id (provider.model-version, e.g. amazon.nova-micro-v1:0, or an inference profile id such as us.amazon.nova-micro-v1:0)", CtxModelID, c.ID)
		}
		if prefix, _, profile := c.InferenceProfile(); profile && !profilePrefixPattern.MatchString(prefix) {
			return fmt.Errorf("%s=%q: %q is not an inference profile geography (us, eu, apac, global, ...)", CtxModelID, c.ID, prefix)
		}
		if c.Region != "" && !regionPattern.MatchString(c.Region) {
			return fmt.Errorf("%s=%q is not an AWS region (e.g. us-east-1)", CtxModelRegion, c.Region)
		}
	case ModelOpenAI:
		if c.URL == "" || c.ID == "" {
			return fmt.Errorf("%s=%s needs %s (the server's https base URL) and %s (the model name)", CtxModelProvider, ModelOpenAI, CtxModelURL, CtxModelID)
		}
		if !openAIModelPattern.MatchString(c.ID) {
			return fmt.Errorf("%s=%q is not a model name", CtxModelID, c.ID)
		}
		if c.Region != "" {
			return fmt.Errorf("%s applies to %s only", CtxModelRegion, ModelBedrock)
		}
	default:
		return fmt.Errorf("%s=%q: use %s or %s, or leave it unset for no model (no AI labels)", CtxModelProvider, c.Provider, ModelBedrock, ModelOpenAI)
	}
	if c.URL != "" {
		if err := checkModelURL(c.URL); err != nil {
			return fmt.Errorf("%s: %w", CtxModelURL, err)
		}
	}
	if c.Timeout < 0 || c.Timeout > gateway.APIGatewayBudget {
		return fmt.Errorf("%s=%s: use a duration above 0 and at most %s (a call through API Gateway ends then)", CtxModelTimeout, c.Timeout, gateway.APIGatewayBudget)
	}
	return nil
}

// checkModelURL accepts an https base URL that carries no credential: no
// user information and no query (where some servers take keys). The URL
// is written into the template and the functions' environment.
func checkModelURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("not an absolute URL")
	}
	if u.Scheme != "https" {
		return fmt.Errorf("scheme %q: the model is called over the internet, use https", u.Scheme)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("give the base URL only (no user, query or fragment): a key belongs in the upstream secret as %s", EnvModelAPIKey)
	}
	return nil
}

// InferenceProfile splits a Bedrock cross-region inference profile id
// ("us.anthropic.claude-3-5-haiku-20241022-v1:0") into its geography
// ("us") and the foundation model it routes to. A foundation model id
// names its provider before the only dot of its name; a profile puts one
// more label in front.
func (c ModelConfig) InferenceProfile() (prefix, foundation string, ok bool) {
	name, _, _ := strings.Cut(c.ID, ":")
	if strings.Count(name, ".") < 2 {
		return "", c.ID, false
	}
	prefix, foundation, _ = strings.Cut(c.ID, ".")
	return prefix, foundation, true
}

// ModelRunners returns the functions that run AI endpoints, each with its
// reasons: the family serving each endpoint marked AI, and the fan-out
// families that run it in their own process as an answer (batch, mcp), by
// the rule SecretReaders uses (FanOuts) less the families that run it only
// as a composite's legs. Only these get the MERIDIAN_MODEL_* variables and, with
// Bedrock, the permission to invoke the model.
func ModelRunners(reg *registry.Registry) map[string][]string {
	var keys []string
	for _, e := range reg.Endpoints() {
		if e.AI {
			keys = append(keys, e.Key())
		}
	}
	sort.Strings(keys)
	// Composite legs never ask for labels: the search and bundle families
	// run AI endpoints without a model.
	return endpointRunners(reg, keys, false, func(key string) string {
		return "serves " + key + ", an AI-assist endpoint (spec 4.5)"
	})
}

// ModelSecretReason is why a model runner reads the upstream secret when
// the model is an OpenAI-compatible server: its optional API key is
// MERIDIAN_MODEL_API_KEY there.
const ModelSecretReason = "calls the openai model, whose API key (" + EnvModelAPIKey + ") is in the upstream secret"

// ModelActions are the Bedrock actions of a model runner. Converse is
// authorized as bedrock:InvokeModel; the labels are not streamed, so no
// InvokeModelWithResponseStream.
var ModelActions = []string{"bedrock:InvokeModel"}

// modelRegion is the region Bedrock is called in: the configured one, or
// the stack's.
func (m *Meridian) modelRegion() *string {
	if r := m.Config.Model.Region; r != "" {
		return jsii.String(r)
	}
	return m.Stack.Region()
}

// modelEnv adds the MERIDIAN_MODEL_* variables of a model runner.
func (m *Meridian) modelEnv(env map[string]*string) {
	c := m.Config.Model
	env[EnvModelProvider] = jsii.String(c.Provider)
	env[EnvModelID] = jsii.String(c.ID)
	if c.Provider == ModelBedrock {
		env[EnvModelRegion] = m.modelRegion()
	}
	if c.URL != "" {
		env[EnvModelURL] = jsii.String(c.URL)
	}
	if c.Timeout > 0 {
		env[EnvModelTimeout] = jsii.String(c.Timeout.String())
	}
}

// ModelResources are the ARNs a model runner may invoke: the foundation
// model in the model's region; for a cross-region inference profile, the
// profile in that region (this account) and its foundation model in every
// region, since Bedrock routes each request to a destination region of the
// profile and authorizes the model there (and a global profile's model ARN
// names no region, which "*" matches too).
func (m *Meridian) ModelResources() []*string {
	st, c := m.Stack, m.Config.Model
	arn := func(parts ...*string) *string { return awscdk.Fn_Join(jsii.String(""), &parts) }
	_, foundation, profile := c.InferenceProfile()
	if !profile {
		return []*string{arn(jsii.String("arn:"), st.Partition(), jsii.String(":bedrock:"), m.modelRegion(),
			jsii.String("::foundation-model/"+c.ID))}
	}
	return []*string{
		arn(jsii.String("arn:"), st.Partition(), jsii.String(":bedrock:"), m.modelRegion(), jsii.String(":"), st.Account(),
			jsii.String(":inference-profile/"+c.ID)),
		arn(jsii.String("arn:"), st.Partition(), jsii.String(":bedrock:*::foundation-model/"+foundation)),
	}
}
