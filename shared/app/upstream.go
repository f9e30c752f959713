package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/meridian-data/meridian/shared/assist"
	"github.com/meridian-data/meridian/shared/assist/model"
	"github.com/meridian-data/meridian/shared/composite"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/upstream/pages"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// Upstream configuration (README, "Upstream sources", which also lists
// each provider's own variables: base URL override and credentials).
const (
	EnvUpstream         = "MERIDIAN_UPSTREAM"          // "replay": every wired route answers from fixtures (local server only)
	EnvUpstreamFixtures = "MERIDIAN_UPSTREAM_FIXTURES" // replay fixtures folder (default testdata/upstream)
	EnvUpstreamSecret   = "MERIDIAN_UPSTREAM_SECRET"   // Secrets Manager secret (name or ARN) holding upstream variables as a JSON object
	EnvAdminSecret      = "MERIDIAN_ADMIN_SECRET"      // Secrets Manager secret (name or ARN) whose value is the operator token
)

// UpstreamReplay is the value of MERIDIAN_UPSTREAM that turns replay on.
const UpstreamReplay = "replay"

// SecretsAPI is the part of the Secrets Manager client Meridian uses.
type SecretsAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// secretValues reads a secret whose string is a JSON object of variable
// names and values, e.g. {"MERIDIAN_GITHUB_TOKEN": "..."}.
func secretValues(ctx context.Context, client SecretsAPI, id string) (map[string]string, error) {
	out, err := client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return nil, fmt.Errorf("read upstream secret: %w", err)
	}
	values := map[string]string{}
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &values); err != nil {
		// The error would quote the secret; say only what is wrong.
		return nil, errors.New("upstream secret is not a JSON object of string values")
	}
	return values, nil
}

// AdminToken is the operator token: the value of the secret named by
// MERIDIAN_ADMIN_SECRET (AWS: only the service function may read it), or
// else MERIDIAN_ADMIN_TOKEN.
func AdminToken(ctx context.Context, secrets SecretsAPI) (string, error) {
	id := strings.TrimSpace(os.Getenv(EnvAdminSecret))
	if id == "" {
		return os.Getenv(EnvAdminToken), nil
	}
	if secrets == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return "", err
		}
		secrets = secretsmanager.NewFromConfig(cfg)
	}
	out, err := secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return "", fmt.Errorf("read the operator secret: %w", err)
	}
	token := strings.TrimSpace(aws.ToString(out.SecretString))
	if token == "" {
		return "", errors.New("the operator secret is empty")
	}
	return token, nil
}

// lookupWith reads a variable from values first, then the environment.
func lookupWith(values map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := values[name]; ok {
			return v, true
		}
		return os.LookupEnv(name)
	}
}

// UpstreamLookup is where upstream variables come from: the environment,
// overlaid by the Secrets Manager secret MERIDIAN_UPSTREAM_SECRET names.
func UpstreamLookup(ctx context.Context, secrets SecretsAPI) (func(string) (string, bool), error) {
	id := strings.TrimSpace(os.Getenv(EnvUpstreamSecret))
	if id == "" {
		return os.LookupEnv, nil
	}
	if secrets == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, err
		}
		secrets = secretsmanager.NewFromConfig(cfg)
	}
	values, err := secretValues(ctx, secrets, id)
	if err != nil {
		return nil, err
	}
	return lookupWith(values), nil
}

// NewUpstream builds the route table from the shipped providers. With a
// replayURL every network provider points at the replay upstream.
func NewUpstream(logger *slog.Logger, lookup func(string) (string, bool), replayURL string) *upstream.Runner {
	return NewUpstreamClient(logger, lookup, replayURL, nil)
}

// NewUpstreamClient is NewUpstream whose routes make their requests with
// client (nil: upstream.NewAPIClient's); the canary's -record passes one
// whose transport records each answer.
func NewUpstreamClient(logger *slog.Logger, lookup func(string) (string, bool), replayURL string, client *http.Client) *upstream.Runner {
	providers := adapters.All()
	for _, p := range providers {
		if v, ok := lookup(p.BaseURLVar()); ok && strings.HasPrefix(v, "http://") && len(p.Secrets) > 0 && replayURL == "" {
			logger.Warn("an upstream base URL is plain http: its credentials travel unencrypted", "variable", p.BaseURLVar())
		}
		if limit, limited, err := upstream.AllowanceOf(p, lookup); err != nil {
			logger.Warn("ignoring a malformed upstream allowance", "variable", p.AllowanceVar(), "error", err.Error())
		} else if limited {
			logger.Info("upstream monthly allowance", "provider", p.Name, "attempts", limit)
		}
	}
	r := upstream.NewRunner(providers, upstream.Settings{Lookup: lookup, ReplayURL: replayURL, Client: client})
	wired := r.Endpoints()
	sort.Strings(wired)
	logger.Info("upstream routes", "endpoints_with_a_route", wired, "replay", replayURL != "")
	return r
}

// StartReplay serves the replay fixtures on loopback for the local server
// and returns the base URL and a stop function.
func StartReplay(logger *slog.Logger) (string, func() error, error) {
	dir := strings.TrimSpace(os.Getenv(EnvUpstreamFixtures))
	if dir == "" {
		dir = replay.DefaultDir
	}
	srv, err := replay.Load(dir)
	if err != nil {
		return "", nil, fmt.Errorf("load replay fixtures from %s: %w", dir, err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	logger.Warn("UPSTREAM REPLAY MODE: data comes from recorded fixtures, not the live sources",
		"fixtures", dir, "replay_url", base, "providers", srv.Providers())
	return base, stop, nil
}

// localSources are the local server's route table, page fetcher and
// model: live sources, or the replay upstream when MERIDIAN_UPSTREAM=replay
// (which also replays recorded model answers). stop ends the replay.
func localSources(ctx context.Context, logger *slog.Logger) (Deps, func(), error) {
	lookup, err := UpstreamLookup(ctx, nil)
	if err != nil {
		return Deps{}, nil, err
	}
	replayURL, stop := "", func() {}
	switch mode := strings.TrimSpace(os.Getenv(EnvUpstream)); mode {
	case "", "live":
	case UpstreamReplay:
		base, stopReplay, err := StartReplay(logger)
		if err != nil {
			return Deps{}, nil, err
		}
		replayURL, stop = base, func() { _ = stopReplay() }
	default:
		return Deps{}, nil, fmt.Errorf("%s=%q: use replay, live or leave it unset", EnvUpstream, mode)
	}
	m, err := NewModel(logger, lookup, replayURL)
	if err != nil {
		stop()
		return Deps{}, nil, err
	}
	runner := NewUpstream(logger, lookup, replayURL)
	return Deps{Upstream: runner, Pages: PublicPages(runner, lookup, replayURL), Model: m}, stop, nil
}

// ReplayModel is the model name the replay upstream's recorded answers
// are kept under (testdata/upstream/openai_chat).
const ReplayModel = "meridian-replay"

// NewModel is the deployment's AI-assist model (MERIDIAN_MODEL_*), served
// as an upstream route; nil when none is configured. In replay mode with
// no model configured, recorded answers of an OpenAI-compatible server
// stand in, so labels, exclusion and fitting can be seen offline.
func NewModel(logger *slog.Logger, lookup func(string) (string, bool), replayURL string) (assist.Model, error) {
	cfg, err := model.ConfigFrom(lookup)
	if err != nil {
		return nil, err
	}
	if replayURL != "" {
		if !cfg.Enabled() {
			cfg = model.Config{Provider: "openai", ModelID: ReplayModel, URL: replayURL}
		}
		cfg.Replay = true
	}
	if !cfg.Enabled() {
		logger.Info("AI-assist model: none configured; AI labels are off")
		return nil, nil
	}
	// A question's whole budget (retries included) is AI-assist's: labels
	// must not keep an answer waiting much longer than its data did.
	runner := upstream.NewRunner(model.Providers(cfg), upstream.Settings{Lookup: lookup, ReplayURL: replayURL,
		Options: upstream.Options{Timeout: assist.DefaultBudget}})
	logger.Info("AI-assist model", "provider", cfg.Name(), "model", cfg.ModelID, "replay", replayURL != "")
	return assist.Routes{Runner: runner}, nil
}

// PublicPages is web/social-profiles' page fetcher: the runner's URL
// policy, the web-unblocking services' keys (for FetchUnblocking of
// link-in-bio pages a site blocks; probes use the direct Fetch), the base
// URL variables of the sites it reads (composite.SocialFetchTargets), and
// in replay mode the replay upstream's zyte_api fixtures.
func PublicPages(runner *upstream.Runner, lookup func(string) (string, bool), replayURL string) composite.PageFetcher {
	var policy *upstream.URLPolicy
	if runner != nil {
		policy = runner.URLPolicy()
	}
	return pages.NewPublicFetcher(pages.PublicFetchSettings{
		Policy: policy, Lookup: lookup, ReplayURL: replayURL, Unblock: composite.LinkInBioPage,
		Targets: composite.SocialFetchTargets(),
	})
}
