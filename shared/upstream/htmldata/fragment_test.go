package htmldata

import "testing"

func TestFragmentText(t *testing.T) {
	for in, want := range map[string]string{
		"plain words":                                   "plain words",
		"Don&#39;t stop<br>the <b>beat</b>":             "Don't stop\nthe beat",
		"&quot;Title&quot;<br/><br/>line":               "\"Title\"\n\nline",
		"escaped once: &amp;#39;":                       "escaped once: &#39;",
		"hearts <3 & more":                              "hearts <3 & more",
		`<a href="https://example.org/x">link</a> text`: "link text",
	} {
		if got := FragmentText(in); got != want {
			t.Errorf("FragmentText(%q) = %q; want %q", in, got, want)
		}
	}
}
