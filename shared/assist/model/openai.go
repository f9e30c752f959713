package model

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
)

// openAIProvider is an OpenAI-compatible Chat Completions server. OpenAI,
// Ollama (/v1), llama.cpp's llama-server and vLLM all take the request
// below, json_schema response_format included, and answer in the same
// envelope.
func openAIProvider(c Config) *upstream.Provider {
	return &upstream.Provider{
		Name: OpenAI,
		Protocol: "OpenAI Chat Completions API (JSON over HTTP(S), optional bearer key), as OpenAI and " +
			"compatible servers (Ollama, llama.cpp server, vLLM) serve it",
		Docs:    "https://platform.openai.com/docs/api-reference/chat/create",
		BaseURL: c.URL,
		Secrets: []upstream.Secret{{
			Name: EnvAPIKey,
			Doc:  "bearer key of the OpenAI-compatible server; local servers usually need none",
		}},
		AttemptTimeout: c.attemptTimeout(),
		Label:          label,
		Endpoints:      map[string]upstream.Adapter{Key: openAIAdapter(c.ModelID)},
	}
}

// chatRequest is the Chat Completions request Meridian sends.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	// Temperature is always sent: 0 asks for the most likely answer, where
	// the servers' defaults (1, or the model's own) would sample.
	Temperature    float64         `json:"temperature"`
	MaxTokens      int             `json:"max_tokens"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// responseFormat asks for structured output: {"type": "json_schema",
// "json_schema": {"name", "strict", "schema"}}.
type responseFormat struct {
	Type       string           `json:"type"`
	JSONSchema jsonSchemaFormat `json:"json_schema"`
}

type jsonSchemaFormat struct {
	Name   string          `json:"name"`
	Strict bool            `json:"strict"`
	Schema json.RawMessage `json:"schema"`
}

// schemaName names the response format (a-z, A-Z, 0-9, _ and -).
const schemaName = "labels"

// chatResponse holds what is read of a chat completion.
type chatResponse struct {
	Choices []struct {
		Message struct {
			// Content is a string, or null when the model refused.
			Content json.RawMessage `json:"content"`
			Refusal *string         `json:"refusal"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

func openAIAdapter(modelID string) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		q, f := questionOf(c)
		if f != nil {
			return nil, f
		}
		req := chatRequest{Model: modelID, Temperature: 0, MaxTokens: q.maxTokens}
		if q.system != "" {
			req.Messages = append(req.Messages, chatMessage{Role: "system", Content: q.system})
		}
		req.Messages = append(req.Messages, chatMessage{Role: "user", Content: q.prompt})
		if q.schema != "" {
			if !json.Valid([]byte(q.schema)) || q.schema[0] != '{' {
				return nil, refused("the schema is not a JSON object")
			}
			req.ResponseFormat = &responseFormat{Type: "json_schema",
				JSONSchema: jsonSchemaFormat{Name: schemaName, Strict: true, Schema: json.RawMessage(q.schema)}}
		}
		header := http.Header{}
		// Read through the runner, which redacts it from reasons and gives
		// optional secrets nothing in replay mode.
		if key := c.Secret(EnvAPIKey); key != "" {
			header.Set("authorization", "Bearer "+key)
		}
		resp, err := c.Post(ctx, chatPath(c.BaseURL), header, req)
		if err != nil {
			return nil, openAIFault(resp, err)
		}
		return chatReply(resp.Body)
	}
}

// chatPath is the Chat Completions path under base, which may already end
// in /v1 (as OpenAI's and Ollama's documented base URLs do).
func chatPath(base string) string {
	if strings.HasSuffix(strings.TrimRight(base, "/"), "/v1") {
		return "/chat/completions"
	}
	return "/v1/chat/completions"
}

// openAIFault refines Post's classification: a 404 means an unknown model
// or a wrong base URL, a refusal of Meridian's request rather than the
// caller's "no such record"; the server's error message goes to the log.
func openAIFault(resp *upstream.Response, err error) error {
	var f *upstream.Fault
	if !errors.As(err, &f) {
		return err
	}
	if f.Kind == upstream.NotFound {
		f.Kind = upstream.Rejected
	}
	if resp != nil {
		if msg := errorMessage(resp.Body); msg != "" {
			f.Reason += ": " + clip(msg)
		}
	}
	return f
}

// errorMessage reads an error body: {"error": {"message": ...}} (OpenAI,
// Ollama, llama.cpp, current vLLM), {"error": "..."} or {"message": ...}
// (older vLLM).
func errorMessage(body []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	var inner struct {
		Message string `json:"message"`
	}
	var text string
	switch {
	case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
		return inner.Message
	case json.Unmarshal(e.Error, &text) == nil && text != "":
		return text
	}
	return e.Message
}

// chatReply maps a chat completion: the first choice's text, the token
// counts and the finish reason.
func chatReply(body []byte) (Reply, error) {
	var r chatResponse
	if err := upstream.DecodeJSON(body, &r); err != nil {
		return Reply{}, err
	}
	if len(r.Choices) == 0 {
		if msg := errorMessage(body); msg != "" {
			return Reply{}, upstream.MalformedFault("the answer has no choices: %s", clip(msg))
		}
		return Reply{}, upstream.MalformedFault("the answer has no choices")
	}
	choice := r.Choices[0]
	if choice.Message.Refusal != nil && *choice.Message.Refusal != "" {
		// Its text may quote the records asked about: not logged.
		return Reply{}, upstream.MalformedFault("the model refused to answer (message.refusal)")
	}
	var text string
	switch raw := strings.TrimSpace(string(choice.Message.Content)); {
	case raw == "" || raw == "null":
		return Reply{}, upstream.MalformedFault("the answer has no message.content")
	case json.Unmarshal(choice.Message.Content, &text) != nil:
		return Reply{}, upstream.MalformedFault("message.content is not a string")
	}
	reply := Reply{Text: text}
	if choice.FinishReason != nil {
		reply.StopReason = *choice.FinishReason
	}
	if r.Usage != nil {
		reply.InputTokens, reply.OutputTokens = r.Usage.PromptTokens, r.Usage.CompletionTokens
	}
	return reply, nil
}
