package assist

import (
	"context"
	"errors"
	"strconv"

	"github.com/meridian-data/meridian/shared/assist/model"
	"github.com/meridian-data/meridian/shared/upstream"
)

// Model answers one structured question. Routes, over the model routes
// of the upstream layer, is the real one; tests may script their own.
type Model interface {
	Ask(ctx context.Context, q Question) Answer
}

// Question is one batch of records to label.
type Question struct {
	System    string
	Prompt    string
	Schema    string // JSON Schema of the answer
	MaxTokens int
}

// Answer is the model's text and what it cost; Err is the route's final
// fault when no answer came.
type Answer struct {
	Text                      string
	InputTokens, OutputTokens int64
	Trace                     upstream.Trace
	Err                       error
}

// Routes asks the deployment's model through an upstream runner serving
// model.Key: the same timeouts, retries, cooldown and fault mapping as a
// data source.
type Routes struct{ Runner *upstream.Runner }

func (r Routes) Ask(ctx context.Context, q Question) Answer {
	out := r.Runner.Serve(ctx, model.Key, map[string]string{
		model.ParamSystem: q.System, model.ParamPrompt: q.Prompt, model.ParamSchema: q.Schema,
		model.ParamMaxTokens: strconv.Itoa(q.MaxTokens),
	})
	a := Answer{Trace: out.Trace}
	reply, ok := out.Data.(model.Reply)
	switch {
	case ok:
		a.Text, a.InputTokens, a.OutputTokens = reply.Text, reply.InputTokens, reply.OutputTokens
	case out.Fault != nil:
		a.Err = out.Fault
	default:
		a.Err = errors.New("no model route was called (cooling down)")
	}
	return a
}
