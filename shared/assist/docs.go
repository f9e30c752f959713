package assist

import (
	"fmt"
	"html"
	"strings"
)

// Reasons documents every ai_label.reason of an unclassified record.
var Reasons = []struct{ Name, Meaning string }{
	{ReasonNoText, "the record has no text to judge"},
	{ReasonOverLimit, fmt.Sprintf("beyond the %d records labelled per call", DefaultMaxRecords)},
	{ReasonModelFailed, "the model call for its batch failed (timeout, error, cooldown)"},
	{ReasonInvalidAnswer, "the model's answer for its batch was not JSON following the label schema, so nothing of it is used"},
	{ReasonNotReturned, "the answer had no label for it, or two"},
}

// Statuses documents every _assist.status.
var Statuses = []struct{ Name, Meaning string }{
	{"labelled", "the model answered; every eligible record has a label, classified or unclassified with its reason"},
	{"partial", "some batches failed: their records are unclassified (model_failed or invalid_answer), the rest are labelled"},
	{"failed", "the model did not answer at all: records are returned unlabelled (no ai_label), nothing is excluded or fitted, and the call costs the endpoint's price only"},
	{"off", "this deployment has no model configured: records are returned unlabelled"},
	{"withheld", "the account reached its 30-day ceiling of model calls (or it could not be read): records are returned unlabelled"},
}

// DocsHTML is the /docs/ai-labels page: the label set and its rules, from
// the values the code uses.
func DocsHTML() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Meridian AI labels</title></head><body>\n")
	p("<h1>AI labels (%s)</h1>\n", LabelSet)
	p("<p>The endpoints marked AI accept <code>judgments</code>, <code>label</code>, <code>label_evidence</code>, <code>exclude</code>, " +
		"<code>fit</code>, <code>goal</code> and <code>tokens</code> (spec 4.5), with no surcharge. A language model labels the records " +
		"in batches and answers JSON that must validate against the label schema; an answer that does not labels nothing. " +
		"A model that fails never fails the call.</p>\n")
	p("<h2 id=\"ai-label\">ai_label</h2>\n<p>With <code>judgments=on</code> (the default) every eligible record carries <code>ai_label</code>. " +
		"<code>judgments=off</code> or <code>label=none</code> returns the source's shape untouched.</p>\n<dl>\n")
	p("<dt><code>status</code></dt><dd><code>classified</code> or <code>unclassified</code> (then <code>reason</code>).</dd>\n")
	p("<dt><code>category</code></dt><dd>Exactly one of:<ul>\n")
	for _, c := range Categories {
		p("<li><code>%s</code>: %s</li>\n", c.Name, html.EscapeString(c.Meaning))
	}
	p("</ul></dd>\n<dt><code>confidence</code></dt><dd>0 to 1, the model's confidence in the category. A label is acted on only at %.1f or above.</dd>\n", ConfidentAt)
	p("<dt><code>goal_fit</code>, <code>goal_fit_confidence</code></dt><dd>With <code>fit=goal</code>: <code>%s</code>, <code>%s</code> or <code>%s</code> for the goal, and its confidence.</dd>\n",
		FitRelevant, FitIrrelevant, FitUncertain)
	p("<dt><code>evidence</code></dt><dd>With <code>label_evidence</code>: up to %d objects <code>{index, field, sentence}</code>. "+
		"Sentences are numbered from 0 across the record's text fields; a line break, or . ! ? … before a space, ends one. "+
		"A quote is kept only when it is a sentence of the record's text, and what is shown is the record's own sentence.</dd>\n", MaxEvidence)
	p("<dt><code>reason</code></dt><dd><ul>\n")
	for _, r := range Reasons {
		p("<li><code>%s</code>: %s</li>\n", r.Name, html.EscapeString(r.Meaning))
	}
	p("</ul></dd>\n</dl>\n")
	p("<h2 id=\"exclude\">exclude=engagement_bait</h2>\n<p>Removes records labelled <code>engagement_bait</code> with confidence %.1f or above; "+
		"uncertain and unclassified records stay. <code>_assist.excluded.ids</code> lists what was removed and <code>_assist.recall</code> "+
		"where it is kept. Records are only ever removed from a list (a profile is labelled, never removed).</p>\n", ConfidentAt)
	p("<h2 id=\"fit\">fit=goal</h2>\n<p>Requires <code>goal</code> (at most 600 characters, task context only). Records labelled "+
		"<code>irrelevant</code> with confidence %.1f or above are replaced by stubs <code>{id, url, ai_label, ai_stub: {reason, recall}}</code>; "+
		"the first and last records, relevant, uncertain and unclassified ones are kept, in order. With <code>tokens</code> (256 to 32000) "+
		"the most confidently irrelevant are stubbed first and stubbing stops once the data is estimated (four bytes of JSON per token) "+
		"at or under the target; the target is soft, and <code>_assist.fit</code> reports the estimate.</p>\n", ConfidentAt)
	p("<h2 id=\"recall\">Recall</h2>\n<p><code>GET /v1/assist/recall/{id}</code> (free) returns the removed and stubbed records in full, " +
		"with their labels and evidence and <code>ai_removed: {reason, position}</code>, for 24 hours, to the account that made the call; " +
		"any other account gets 404. Answers with <code>exclude</code> or <code>fit</code> are never served from the shared cache.</p>\n")
	p("<h2 id=\"status\">_assist.status</h2>\n<dl>\n")
	for _, s := range Statuses {
		p("<dt><code>%s</code></dt><dd>%s</dd>\n", s.Name, html.EscapeString(s.Meaning))
	}
	p("</dl>\n<p>Each case other than <code>labelled</code> adds a sentence to <code>_warnings</code>.</p>\n</body></html>\n")
	return b.String()
}
