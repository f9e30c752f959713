package assist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// LabelSet names the label vocabulary below; it changes when the set does.
const LabelSet = "meridian-labels/1"

// Categories is the bounded label set: every classified record gets
// exactly one. The descriptions are what the model is told and what
// /docs and the data schemas publish.
var Categories = []struct{ Name, Meaning string }{
	{"informative", "facts, news, how-to or announcements of substance"},
	{"opinion", "views, commentary, reviews or arguments"},
	{"promotional", "selling, advertising, self-promotion or affiliate offers"},
	{"engagement_bait", "written mainly to provoke likes, replies, reposts or follows (like-to-win, comment-YES prompts, rage bait, vague teasers)"},
	{"personal", "personal updates, greetings or small talk"},
	{"other", "none of these, or too little text to tell"},
}

// Goal fits, with fit=goal.
const (
	FitRelevant   = "relevant"
	FitIrrelevant = "irrelevant"
	FitUncertain  = "uncertain"
	fitNotAsked   = "not_asked"
)

// ConfidentAt is the confidence from which a label is acted on: only a
// record labelled engagement_bait at or above it is excluded, and only
// one labelled irrelevant at or above it is replaced with a stub.
const ConfidentAt = 0.8

// MaxEvidence bounds the sentences quoted per label.
const MaxEvidence = 3

// Reasons an eligible record stays unclassified (ai_label.reason).
const (
	ReasonNoText        = "no_text"        // no text to judge
	ReasonOverLimit     = "over_limit"     // beyond the records labelled per call
	ReasonModelFailed   = "model_failed"   // its batch's model call failed
	ReasonInvalidAnswer = "invalid_answer" // its batch's answer did not validate
	ReasonNotReturned   = "not_returned"   // the answer had no (or an ambiguous) label for it
)

// answerSchema is the JSON Schema a model answer must follow. It is sent
// to the model (structured output where the provider supports it) and
// checked here: an answer that does not validate labels nothing.
func answerSchema() map[string]any {
	names := make([]any, len(Categories))
	for i, c := range Categories {
		names[i] = c.Name
	}
	unit := map[string]any{"type": "number", "minimum": 0, "maximum": 1}
	return map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"labels"},
		"properties": map[string]any{"labels": map[string]any{
			"type": "array",
			"items": map[string]any{
				"type": "object", "additionalProperties": false,
				"required": []any{"ref", "category", "confidence", "goal_fit", "goal_fit_confidence", "evidence"},
				"properties": map[string]any{
					"ref":                 map[string]any{"type": "integer", "minimum": 1},
					"category":            map[string]any{"type": "string", "enum": names},
					"confidence":          unit,
					"goal_fit":            map[string]any{"type": "string", "enum": []any{FitRelevant, FitIrrelevant, FitUncertain, fitNotAsked}},
					"goal_fit_confidence": unit,
					"evidence": map[string]any{
						"type": "array", "maxItems": MaxEvidence,
						"items": map[string]any{
							"type": "object", "additionalProperties": false, "required": []any{"index", "sentence"},
							"properties": map[string]any{
								"index":    map[string]any{"type": "integer", "minimum": 0},
								"sentence": map[string]any{"type": "string"},
							},
						},
					},
				},
			},
		}},
	}
}

var (
	schemaText string
	schema     *jsonschema.Schema
)

func init() {
	raw, err := json.Marshal(answerSchema())
	if err != nil {
		panic(err)
	}
	schemaText = string(raw)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("answer.json", answerSchema()); err != nil {
		panic(err)
	}
	if schema, err = c.Compile("answer.json"); err != nil {
		panic(err)
	}
}

// modelLabel is one label of a validated answer.
type modelLabel struct {
	Ref               int        `json:"ref"`
	Category          string     `json:"category"`
	Confidence        float64    `json:"confidence"`
	GoalFit           string     `json:"goal_fit"`
	GoalFitConfidence float64    `json:"goal_fit_confidence"`
	Evidence          []evidence `json:"evidence"`
}

type evidence struct {
	Index    int    `json:"index"`
	Sentence string `json:"sentence"`
}

// parseAnswer reads a model's text: JSON (a Markdown code fence around it
// is tolerated) that validates against the answer schema. Labels come
// back by ref; a ref given twice is ambiguous and dropped.
func parseAnswer(text string) (map[int]modelLabel, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "```") {
		text = strings.TrimPrefix(text, "```json")
		text = strings.TrimPrefix(text, "```")
		text = strings.TrimSuffix(strings.TrimSpace(text), "```")
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	if err := schema.Validate(doc); err != nil {
		return nil, fmt.Errorf("the answer does not follow the schema: %w", err)
	}
	var answer struct {
		Labels []modelLabel `json:"labels"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	if err := dec.Decode(&answer); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	labels := map[int]modelLabel{}
	twice := map[int]bool{}
	for _, l := range answer.Labels {
		if _, seen := labels[l.Ref]; seen {
			twice[l.Ref] = true
		}
		labels[l.Ref] = l
	}
	for ref := range twice {
		delete(labels, ref)
	}
	return labels, nil
}
