package quora

import "testing"

// The tokenizer decodes a title's character references; decoding again
// would turn a question about "&#39;" into one about "'".
func TestPageTitleDecodedOnce(t *testing.T) {
	for page, want := range map[string]string{
		"<head><title>What does &amp;#39; mean in HTML? - Quora</title></head>": "What does &#39; mean in HTML?",
		"<head><title>Is C&amp;C worth playing in 2026? - Quora</title></head>": "Is C&C worth playing in 2026?",
		"<head><title>Why isn&#39;t Go&#x27;s map ordered? - Quora</title>":     "Why isn't Go's map ordered?",
	} {
		if got := pageTitle([]byte(page)); got == nil || *got != want {
			t.Errorf("%s: got %v, want %q", page, got, want)
		}
	}
}
