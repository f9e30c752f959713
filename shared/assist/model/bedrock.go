package model

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/meridian-data/meridian/shared/upstream"
)

// bedrockProvider is Amazon Bedrock Runtime's Converse operation
// (POST /model/{modelId}/converse), signed with SigV4 by the AWS SDK.
func bedrockProvider(c Config) *upstream.Provider {
	base := c.URL
	if base == "" {
		base = "https://bedrock-runtime." + c.Region + ".amazonaws.com"
	}
	route := &bedrockRoute{cfg: c}
	return &upstream.Provider{
		Name:           Bedrock,
		Protocol:       "Amazon Bedrock Runtime Converse API (JSON over HTTPS, AWS SigV4)",
		Docs:           "https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html",
		BaseURL:        base,
		AttemptTimeout: c.attemptTimeout(),
		Label:          label,
		Endpoints:      map[string]upstream.Adapter{Key: route.converse},
	}
}

// replayCredentials sign requests to the replay upstream: placeholders,
// so that no real credential is ever looked up or sent in replay mode.
var replayCredentials = credentials.NewStaticCredentialsProvider(upstream.ReplaySecret, upstream.ReplaySecret, "")

// bedrockRoute keeps what outlives an attempt: the default credential
// chain, loaded once (its cache refreshes the credentials as they expire).
type bedrockRoute struct {
	cfg   Config
	mu    sync.Mutex
	chain aws.CredentialsProvider
}

// credentials are the placeholders in replay mode, else the default chain
// (environment, shared files, SSO, web identity, container or instance
// role), loaded on first use.
func (b *bedrockRoute) credentials(ctx context.Context) (aws.CredentialsProvider, error) {
	if b.cfg.Replay {
		return replayCredentials, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.chain == nil {
		cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(b.cfg.Region))
		if err != nil {
			return nil, err
		}
		b.chain = cfg.Credentials
	}
	return b.chain, nil
}

// client is an attempt's Bedrock Runtime client: cheap to build, sending
// through the attempt's gated client, never retrying (the runner retries).
func (b *bedrockRoute) client(c *upstream.Call, creds aws.CredentialsProvider) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:       b.cfg.Region,
		Credentials:  creds,
		BaseEndpoint: aws.String(c.BaseURL),
		HTTPClient:   c.Doer(),
		Retryer:      aws.NopRetryer{},
	}, func(o *bedrockruntime.Options) {
		// SigV4 only. With AWS_BEARER_TOKEN_BEDROCK in the environment the
		// SDK would send that key instead: a credential the runner does not
		// redact, and one replay mode must never send.
		o.BearerAuthTokenProvider = nil
		o.AuthSchemePreference = []string{"sigv4"}
	})
}

// converse is the adapter: one Converse call. The schema parameter is not
// sent: Converse's structured output (outputConfig.textFormat) serves only
// some models, so the system prompt carries the answer's shape.
func (b *bedrockRoute) converse(ctx context.Context, c *upstream.Call) (any, error) {
	q, f := questionOf(c)
	if f != nil {
		return nil, f
	}
	creds, err := b.credentials(ctx)
	if err == nil {
		_, err = creds.Retrieve(ctx) // cached after the first success
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, &upstream.Fault{Kind: upstream.Timeout, Reason: "no AWS credentials before the deadline"}
		}
		// Every call would fail the same way, as a 401 does: the status
		// makes the route rest (upstream's cooldown counts 401/403 refusals)
		// instead of searching the chain again on every call.
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusUnauthorized,
			Reason: "no usable AWS credentials: " + clip(err.Error())}
	}
	in := &bedrockruntime.ConverseInput{
		ModelId: aws.String(b.cfg.ModelID),
		Messages: []types.Message{{
			Role:    types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: q.prompt}},
		}},
		InferenceConfig: &types.InferenceConfiguration{
			MaxTokens:   aws.Int32(int32(min(q.maxTokens, math.MaxInt32))),
			Temperature: aws.Float32(0),
		},
	}
	if q.system != "" {
		in.System = []types.SystemContentBlock{&types.SystemContentBlockMemberText{Value: q.system}}
	}
	out, err := b.client(c, creds).Converse(ctx, in)
	if err != nil {
		return nil, bedrockFault(ctx, err)
	}
	return converseReply(out)
}

// converseReply maps a Converse answer: the text blocks of the output
// message, or a toolUse block's input as JSON text (the structured answer
// when the model answered through a tool), the token counts and the stop
// reason.
func converseReply(out *bedrockruntime.ConverseOutput) (Reply, error) {
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return Reply{}, upstream.MalformedFault("the answer has no output.message")
	}
	var text strings.Builder
	var toolInput []byte
	found := false
	for _, block := range msg.Value.Content {
		switch b := block.(type) {
		case *types.ContentBlockMemberText:
			text.WriteString(b.Value)
			found = true
		case *types.ContentBlockMemberToolUse:
			if toolInput != nil || b.Value.Input == nil {
				continue
			}
			raw, err := b.Value.Input.MarshalSmithyDocument()
			if err != nil {
				return Reply{}, upstream.MalformedFault("the toolUse input is not JSON: %v", err)
			}
			toolInput, found = raw, true
		}
	}
	if !found {
		return Reply{}, upstream.MalformedFault("the answer has no text or toolUse block")
	}
	reply := Reply{Text: text.String(), StopReason: string(out.StopReason)}
	if toolInput != nil {
		// Text beside a tool call is the model's preamble, not the answer.
		reply.Text = string(toolInput)
	}
	if u := out.Usage; u != nil {
		reply.InputTokens, reply.OutputTokens = int64(aws.ToInt32(u.InputTokens)), int64(aws.ToInt32(u.OutputTokens))
	}
	return reply, nil
}

// bedrockFault classifies a Converse failure as the upstream layer
// classifies a data source's: by Bedrock's error type when one came, else
// by HTTP status, else by what failed on the way.
func bedrockFault(ctx context.Context, err error) *upstream.Fault {
	var f *upstream.Fault
	if errors.As(err, &f) {
		return f // the attempt's admission gate refused the request
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return &upstream.Fault{Kind: upstream.Timeout, Reason: "no answer before the deadline"}
	}
	status, header := 0, http.Header{}
	var answered interface{ HTTPResponse() *smithyhttp.Response }
	if errors.As(err, &answered) {
		if r := answered.HTTPResponse(); r != nil && r.Response != nil {
			status, header = r.StatusCode, r.Header
		}
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		reason := apiErr.ErrorCode()
		if msg := apiErr.ErrorMessage(); msg != "" && msg != reason {
			reason += ": " + clip(msg)
		}
		fault := func(kind upstream.FaultKind) *upstream.Fault {
			return &upstream.Fault{Kind: kind, Status: status, Reason: reason}
		}
		switch apiErr.ErrorCode() {
		case "ThrottlingException", "ServiceQuotaExceededException":
			f := fault(upstream.RateLimited)
			f.RetryAfter = retryAfter(header)
			return f
		case "ModelTimeoutException":
			return fault(upstream.Timeout)
		case "InternalServerException", "ServiceUnavailableException", "ModelNotReadyException", "ModelErrorException":
			f := fault(upstream.ServerError)
			f.RetryAfter = retryAfter(header)
			return f
		case "ValidationException", "AccessDeniedException", "ResourceNotFoundException", "ConflictException":
			// Status stays: a 403 refuses Meridian itself and rests the route.
			return fault(upstream.Rejected)
		}
		if status >= 400 {
			f := statusFault(status, header)
			f.Reason = reason
			return f
		}
		return fault(upstream.Rejected)
	}
	if status >= 300 {
		// An error status whose body is not Bedrock's (a proxy's page, say).
		f := statusFault(status, header)
		f.Reason += " (the error body is not Bedrock's)"
		return f
	}
	var invalid *smithy.InvalidParamsError
	if errors.As(err, &invalid) {
		return refused("the SDK refused the request: " + clip(invalid.Error()))
	}
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		return &upstream.Fault{Kind: upstream.Timeout, Reason: "no answer before the deadline"}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		// Cut short while the SDK read the body.
		return &upstream.Fault{Kind: upstream.Transport, Reason: transportReason(err)}
	}
	var undecodable *smithy.DeserializationError
	if errors.As(err, &undecodable) {
		return upstream.MalformedFault("the answer is not Converse JSON: %s", clip(undecodable.Err.Error()))
	}
	return &upstream.Fault{Kind: upstream.Transport, Reason: transportReason(err)}
}

// statusFault is the upstream layer's classification of a status, except
// that 404 (an unknown model) refuses Meridian's request: it is no answer
// about a record, and another route could serve it.
func statusFault(status int, header http.Header) *upstream.Fault {
	f := upstream.StatusFault(status, header)
	if f.Kind == upstream.NotFound {
		f.Kind = upstream.Rejected
	}
	return f
}

// retryAfter reads a Retry-After header as the upstream layer does.
func retryAfter(header http.Header) time.Duration {
	return upstream.StatusFault(http.StatusTooManyRequests, header).RetryAfter
}

// transportReason keeps a transport error's cause without the request URL.
func transportReason(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		return clip(u.Op + ": " + u.Err.Error())
	}
	return clip(err.Error())
}
