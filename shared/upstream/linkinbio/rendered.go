package linkinbio

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
)

// maxAnchorText bounds the text gathered for one anchor, in bytes.
const maxAnchorText = 4 * maxTitle

// maxAnchors bounds the anchors read from one page: real profile pages
// have tens, a hostile page may have hundreds of thousands.
const maxAnchors = 10000

// anchor is an <a> being read.
type anchor struct {
	href, label, alt string
	text             strings.Builder
}

func (a *anchor) title() string {
	if t := clean(a.text.String(), maxTitle); t != "" {
		return t
	}
	if t := clean(a.label, maxTitle); t != "" {
		return t
	}
	return clean(a.alt, maxTitle)
}

// parseRendered reads a server-rendered page: its meta tags and anchors.
func parseRendered(page []byte, base *url.URL, s *service) (*Page, error) {
	meta := map[string]string{} // first content per property or name
	docTitle := ""
	p := &Page{}
	c := newCollector(p)
	pageHost := base.Hostname()
	c.own = func(host string) bool { return host == pageHost || inDomains(host, s.hosts) }

	z := html.NewTokenizer(bytes.NewReader(page))
	var cur *anchor
	inTitle := false
	anchors := 0
	flush := func() {
		if cur != nil {
			if anchors++; anchors <= maxAnchors {
				c.add(cur.title(), cur.href, base)
			}
			cur = nil
		}
	}
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			attrs := readAttrs(z, hasAttr)
			switch string(name) {
			case "a":
				flush()
				if href, ok := attrs["href"]; ok {
					cur = &anchor{href: href, label: firstNonEmpty(attrs["aria-label"], attrs["title"])}
					if tt == html.SelfClosingTagToken {
						flush()
					}
				}
			case "img":
				if cur != nil && cur.alt == "" {
					cur.alt = attrs["alt"]
				}
			case "meta":
				key := strings.ToLower(firstNonEmpty(attrs["property"], attrs["name"]))
				if _, seen := meta[key]; key != "" && !seen {
					meta[key] = attrs["content"]
				}
			case "title":
				inTitle = docTitle == "" && tt == html.StartTagToken
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch string(name) {
			case "a":
				flush()
			case "title":
				inTitle = false
			}
		case html.TextToken:
			if inTitle {
				docTitle = clean(string(z.Text()), maxTitle)
				inTitle = false
			} else if cur != nil && cur.text.Len() < maxAnchorText {
				t := z.Text()
				cur.text.Write(t[:min(len(t), maxAnchorText-cur.text.Len())])
				cur.text.WriteByte(' ')
			}
		}
	}
	flush()

	p.Title = trimSuffixes(clean(firstNonEmpty(meta["og:title"], meta["twitter:title"], docTitle), maxTitle), s.suffixes)
	p.Bio = clean(firstNonEmpty(meta["og:description"], meta["description"], meta["twitter:description"]), maxBio)
	p.AvatarURL = avatar(firstNonEmpty(meta["og:image"], meta["og:image:url"], meta["twitter:image"]), base)
	if len(p.Links) == 0 {
		return nil, upstream.MalformedFault("%s page of %d bytes has no outbound link: not the rendered profile format",
			s.id, len(page))
	}
	return p, nil
}

// readAttrs reads a tag's attributes (names lowercased by the tokenizer,
// values unescaped), the first of each name.
func readAttrs(z *html.Tokenizer, more bool) map[string]string {
	attrs := map[string]string{}
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		if _, seen := attrs[string(k)]; !seen {
			attrs[string(k)] = string(v)
		}
	}
	return attrs
}

// trimSuffixes removes a service's suffix from a title, case-insensitively.
func trimSuffixes(title string, suffixes []string) string {
	for _, s := range suffixes {
		if n := len(title) - len(s); n > 0 && strings.EqualFold(title[n:], s) {
			if cut := strings.TrimSpace(title[:n]); cut != "" {
				return cut
			}
		}
	}
	return title
}
