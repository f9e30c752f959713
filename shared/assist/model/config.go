package model

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The variables ConfigFrom reads.
const (
	EnvProvider = "MERIDIAN_MODEL_PROVIDER" // bedrock | openai | unset (no model)
	EnvModelID  = "MERIDIAN_MODEL_ID"
	EnvURL      = "MERIDIAN_MODEL_URL"
	EnvAPIKey   = "MERIDIAN_MODEL_API_KEY" // also the upstream Secret the runner redacts
	EnvRegion   = "MERIDIAN_MODEL_REGION"
	EnvTimeout  = "MERIDIAN_MODEL_TIMEOUT"
)

// DefaultAttemptTimeout bounds one model attempt unless configured: a
// labelling answer of a few hundred tokens takes seconds, not the 10 s a
// data source gets.
const DefaultAttemptTimeout = 20 * time.Second

// defaultRegion is the Bedrock region when neither MERIDIAN_MODEL_REGION nor
// AWS_REGION is set.
const defaultRegion = "us-east-1"

// Config chooses the deployment's model route.
type Config struct {
	Provider string // "bedrock" | "openai" | "" (no model: labels off)
	// ModelID is a Bedrock model id or inference profile id, or an
	// OpenAI-compatible server's model name.
	ModelID string
	// URL is the base URL: required for openai (with or without a trailing
	// /v1); optional for bedrock (default
	// https://bedrock-runtime.<region>.amazonaws.com).
	URL string
	// APIKey is the optional bearer key of an OpenAI-compatible server, as
	// ConfigFrom read it. The adapter reads the same variable through the
	// runner (upstream Secret EnvAPIKey), which redacts it from reasons and
	// never sends it to the replay upstream.
	APIKey string
	// Region is the Bedrock region (it signs the requests).
	Region string
	// AttemptTimeout bounds one attempt; DefaultAttemptTimeout when zero.
	AttemptTimeout time.Duration
	// Replay is replay mode (the runner's Settings.ReplayURL is set):
	// Bedrock signs with static placeholder credentials, never the real
	// chain. ConfigFrom leaves it false; whoever builds the runner sets it.
	Replay bool
}

// ConfigFrom reads the model configuration. No provider means no model
// (labels off) and no error. Errors name the variable, never its value:
// variables may come from the Secrets Manager secret.
func ConfigFrom(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) string {
		if lookup == nil {
			return ""
		}
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	c := Config{AttemptTimeout: DefaultAttemptTimeout}
	switch p := strings.ToLower(get(EnvProvider)); p {
	case "":
		return Config{}, nil
	case "bedrock", "openai":
		c.Provider = p
	default:
		return Config{}, fmt.Errorf("%s: want bedrock or openai (or unset for no model)", EnvProvider)
	}
	c.ModelID, c.URL, c.APIKey = get(EnvModelID), get(EnvURL), get(EnvAPIKey)
	if c.ModelID == "" {
		return Config{}, fmt.Errorf("%s is required with %s=%s", EnvModelID, EnvProvider, c.Provider)
	}
	if c.URL == "" && c.Provider == "openai" {
		return Config{}, fmt.Errorf("%s is required with %s=openai: the server's base URL", EnvURL, EnvProvider)
	}
	if c.URL != "" {
		if err := checkBaseURL(c.URL); err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvURL, err)
		}
	}
	c.Region = get(EnvRegion)
	if c.Region == "" {
		c.Region = get("AWS_REGION")
	}
	if c.Region == "" {
		c.Region = defaultRegion
	}
	if v := get(EnvTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%s: want a positive Go duration such as 20s", EnvTimeout)
		}
		c.AttemptTimeout = d
	}
	return c, nil
}

// checkBaseURL accepts an absolute http(s) URL without credentials (a key
// in the URL would reach logs; it belongs in MERIDIAN_MODEL_API_KEY).
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("want an absolute http or https URL")
	case u.User != nil:
		return fmt.Errorf("must not carry credentials; set %s instead", EnvAPIKey)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("want a base URL without a query or fragment")
	}
	return nil
}

// Enabled reports whether a model route is configured.
func (c Config) Enabled() bool { return c.Name() != "" }

// Name is the provider name (Bedrock or OpenAI), or "" without a model.
func (c Config) Name() string {
	switch c.Provider {
	case "bedrock":
		return Bedrock
	case "openai":
		return OpenAI
	}
	return ""
}

// attemptTimeout is the configured per-attempt bound, defaulted.
func (c Config) attemptTimeout() time.Duration {
	if c.AttemptTimeout > 0 {
		return c.AttemptTimeout
	}
	return DefaultAttemptTimeout
}
