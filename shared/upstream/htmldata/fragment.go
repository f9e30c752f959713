package htmldata

import (
	"strings"

	"golang.org/x/net/html"
)

// FragmentText is the text an HTML fragment shows, as APIs send it in a
// field meant for display (YouTube's textDisplay: "I&#39;ll<br><b>go</b>"):
// tags are dropped, <br> is a line break, and character references are
// decoded exactly once by the tokenizer ("&amp;#39;" stays "&#39;"). A
// "<" that starts no tag ("<3") is kept as text.
func FragmentText(fragment string) string {
	if !strings.ContainsAny(fragment, "<&") {
		return fragment
	}
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(fragment))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			if name, _ := z.TagName(); string(name) == "br" {
				b.WriteByte('\n')
			}
		}
	}
}
