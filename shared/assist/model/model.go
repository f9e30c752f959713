// Package model is the AI-assist model route: one language-model provider,
// chosen by configuration, served as an upstream route so that it has the
// same per-attempt timeout, retries, cooldown and fault mapping as a data
// source. Providers(cfg) is zero or one *upstream.Provider with a single
// adapter under Key; an upstream.Runner built over it serves the questions.
//
// Two protocols: Amazon Bedrock Runtime's Converse (through the AWS SDK,
// whose requests go through the attempt's upstream.Call.Doer) and the
// OpenAI Chat Completions API as OpenAI and OpenAI-compatible servers
// (Ollama, llama.cpp server, vLLM) serve it. An adapter returns a Reply
// or a classified *upstream.Fault; it does not check the answer's text:
// whether it is JSON that follows the schema is the caller's question.
package model

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Key is the runner key both providers serve.
const Key = "assist/label"

// Parameters the runner passes to the adapter.
const (
	ParamSystem    = "system"     // system prompt text
	ParamPrompt    = "prompt"     // user message text
	ParamSchema    = "schema"     // JSON Schema (JSON text) the answer must follow
	ParamMaxTokens = "max_tokens" // decimal; output token cap
)

// Provider names: fixture folders, served_by in traces and
// MERIDIAN_UPSTREAM_<NAME>_URL.
const (
	Bedrock = "bedrock_runtime"
	OpenAI  = "openai_chat"
)

// Reply is a model route's answer (the runner's Outcome.Data).
type Reply struct {
	Text         string // the answer's text, expected to be JSON (not validated here)
	InputTokens  int64
	OutputTokens int64
	StopReason   string // "end_turn"/"stop", "max_tokens"/"length", ... as the provider says
}

// label is the routes' neutral name in public answers: a model is a
// third-party service, never named.
const label = "language_model"

// defaultMaxTokens caps an answer when the caller sets no cap (or 0).
const defaultMaxTokens = 1024

// Providers is the configured model route: none without a provider, else
// one provider with one adapter under Key.
func Providers(c Config) []*upstream.Provider {
	switch c.Name() {
	case OpenAI:
		return []*upstream.Provider{openAIProvider(c)}
	case Bedrock:
		return []*upstream.Provider{bedrockProvider(c)}
	}
	return nil
}

// question is what an adapter asks, read from the runner's parameters.
type question struct {
	system, prompt, schema string
	maxTokens              int
}

// questionOf reads and checks the parameters. A bad one is Meridian's own
// mistake, refused before anything is sent (Rejected, neither retried nor
// counted against the route's health).
func questionOf(c *upstream.Call) (question, *upstream.Fault) {
	q := question{system: c.Param(ParamSystem), prompt: c.Param(ParamPrompt), schema: strings.TrimSpace(c.Param(ParamSchema))}
	if strings.TrimSpace(q.prompt) == "" {
		return q, refused("the question has no prompt")
	}
	q.maxTokens = defaultMaxTokens
	if v := strings.TrimSpace(c.Param(ParamMaxTokens)); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil || n < 0:
			return q, refused("max_tokens is not a whole number")
		case n > 0:
			q.maxTokens = n
		}
	}
	return q, nil
}

func refused(reason string) *upstream.Fault {
	return &upstream.Fault{Kind: upstream.Rejected, Reason: reason}
}

// maxReason bounds an upstream message quoted in a fault reason.
const maxReason = 300

// clip shortens an upstream message for a log line.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) { // never split a character
		cut--
	}
	return s[:cut] + "…"
}
