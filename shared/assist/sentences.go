package assist

import (
	"strings"
	"unicode"
)

// Bounds on what one record sends the model: the sentences beyond them are
// not read. A first sentence longer than the whole bound is sent cut, and
// cannot be quoted as evidence.
const (
	maxSentences   = 30
	maxRecordChars = 2000
)

// sentence is one sentence of a record's text, numbered across its text
// fields from zero.
type sentence struct {
	Field string
	Text  string
	Cut   bool // Text is the start of a longer sentence
}

// splitSentences numbers the sentences of a record's text fields in
// order: a line break ends a sentence, and so does ., !, ? or … followed
// by a space. Each sentence is its exact text, trimmed.
func splitSentences(fields []string, record map[string]any) []sentence {
	var out []sentence
	total := 0
	for _, f := range fields {
		text, _ := record[f].(string)
		for _, line := range strings.Split(text, "\n") {
			for _, s := range splitLine(line) {
				switch {
				case len(out) == maxSentences:
					return out
				case total+len(s) > maxRecordChars && len(out) > 0:
					return out
				case len(s) > maxRecordChars:
					cut := []rune(s[:maxRecordChars])
					return append(out, sentence{Field: f, Text: strings.ToValidUTF8(string(cut), ""), Cut: true})
				}
				out = append(out, sentence{Field: f, Text: s})
				total += len(s)
			}
		}
	}
	return out
}

func splitLine(line string) []string {
	var out []string
	runes := []rune(line)
	start := 0
	for i, r := range runes {
		if !strings.ContainsRune(".!?…", r) || i+1 >= len(runes) || !unicode.IsSpace(runes[i+1]) {
			continue
		}
		if s := strings.TrimSpace(string(runes[start : i+1])); s != "" {
			out = append(out, s)
		}
		start = i + 1
	}
	if s := strings.TrimSpace(string(runes[start:])); s != "" {
		out = append(out, s)
	}
	return out
}

// normalise compares quotes loosely in spacing and surrounding quote
// marks only: the words must be the record's.
func normalise(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.Trim(s, "\"'“”‘’ ")
}

// validEvidence keeps the quotes that are sentences of the record: at the
// index the model gave, or else at the index where that sentence really
// is. What it returns is the record's own sentence, never the model's
// wording; a quote found nowhere is dropped.
func validEvidence(quotes []evidence, sentences []sentence) []Evidence {
	var out []Evidence
	seen := map[int]bool{}
	for _, q := range quotes {
		want := normalise(q.Sentence)
		if want == "" {
			continue
		}
		at := -1
		if q.Index >= 0 && q.Index < len(sentences) && !sentences[q.Index].Cut && normalise(sentences[q.Index].Text) == want {
			at = q.Index
		} else {
			for i, s := range sentences {
				if !s.Cut && normalise(s.Text) == want {
					at = i
					break
				}
			}
		}
		if at < 0 || seen[at] || len(out) == MaxEvidence {
			continue
		}
		seen[at] = true
		out = append(out, Evidence{Index: at, Field: sentences[at].Field, Sentence: sentences[at].Text})
	}
	return out
}
