package etsy

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// pageCard is one review card the listing page renders server-side:
//
//	<div data-review-region="<transaction id>">
//	  <div role="img" aria-label="Rating: 5 out of 5 stars">…</div>
//	  <div class="wt-text-body">…review text…</div>
//	  <a href="https://www.etsy.com/people/<handle>?ref=l_review">Name</a>
//	  <span class="… wt-text-body-small--tight …">Oct 9, 2025</span>
//	  <img src="https://i.etsystatic.com/iusa/…">  (the reviewer's avatar)
//	  <img src="https://i.etsystatic.com/iap/…">   (a photo from the review)
//	</div>
//
// Images are told apart by their path on Etsy's image host (iusa: user
// avatars, iap: review "appreciation" photos), not by their position, and
// lazy images carry the URL in data-src.
type pageCard struct {
	ID     string
	Rating *float64
	Text   string
	Name   string
	URL    string
	Avatar string
	Date   string
	Photos []string
}

// capture collects an element's text until its end tag at the same depth.
type capture struct {
	into  *string
	depth int
	buf   strings.Builder
}

// reviewCards walks the page with the HTML tokenizer and returns its review
// cards in page order; a page without any returns none.
func reviewCards(page []byte) []pageCard {
	z := html.NewTokenizer(bytes.NewReader(page))
	var (
		cards []pageCard
		card  *pageCard
		depth int // element depth inside the current card (the card is 1)
		caps  []*capture
	)
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if card != nil && card.ID != "" {
				cards = append(cards, *card)
			}
			return cards
		case html.TextToken:
			for _, c := range caps {
				c.buf.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			attrs := map[string]string{}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				attrs[string(k)] = string(v)
			}
			a := atom.Lookup(name)
			if card == nil {
				if id, ok := attrs["data-review-region"]; ok {
					card = &pageCard{ID: strings.TrimSpace(id)}
					depth = 1
					if tt == html.SelfClosingTagToken || isVoid(a) {
						card = nil
					}
				}
				continue
			}
			opens := tt == html.StartTagToken && !isVoid(a)
			if opens {
				depth++
			}
			card.element(a, attrs, depth, opens, &caps)
		case html.EndTagToken:
			if card == nil {
				continue
			}
			name, _ := z.TagName()
			if isVoid(atom.Lookup(name)) {
				continue
			}
			kept := caps[:0]
			for _, c := range caps {
				if c.depth == depth {
					*c.into = strings.Join(strings.Fields(c.buf.String()), " ")
					continue
				}
				kept = append(kept, c)
			}
			caps = kept
			depth--
			if depth == 0 {
				if card.ID != "" {
					cards = append(cards, *card)
				}
				card, caps = nil, nil
			}
		}
	}
}

// element reads one tag inside a card.
func (c *pageCard) element(a atom.Atom, attrs map[string]string, depth int, opens bool, caps *[]*capture) {
	start := func(into *string) {
		if opens && *into == "" {
			*caps = append(*caps, &capture{into: into, depth: depth})
		}
	}
	if label := attrs["aria-label"]; attrs["role"] == "img" && c.Rating == nil {
		c.Rating = starLabel(label)
	}
	classes := strings.Fields(attrs["class"])
	switch {
	case a == atom.A:
		// The avatar and the name are often two links to the same profile.
		if u := profileURL(attrs["href"]); u != "" {
			if c.URL == "" {
				c.URL = u
			}
			start(&c.Name)
		}
	case a == atom.Img:
		src := attrs["src"]
		if !strings.HasPrefix(src, "https://") {
			src = attrs["data-src"]
		}
		switch imageKind(src) {
		case "iusa":
			if c.Avatar == "" {
				c.Avatar = src
			}
		case "iap":
			c.Photos = append(c.Photos, src)
		}
	case hasClass(classes, "wt-text-body"):
		start(&c.Text)
	case a == atom.Span && hasClass(classes, "wt-text-body-small--tight"):
		start(&c.Date)
	}
}

func hasClass(classes []string, name string) bool {
	for _, c := range classes {
		if c == name {
			return true
		}
	}
	return false
}

func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Br, atom.Col, atom.Embed, atom.Hr, atom.Img, atom.Input,
		atom.Link, atom.Meta, atom.Source, atom.Track, atom.Wbr:
		return true
	}
	return false
}

// starLabel reads "Rating: 4 out of 5 stars" (or "4 out of 5 stars").
func starLabel(label string) *float64 {
	f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(label), "Rating:"))
	if len(f) < 3 || f[1] != "out" {
		return nil
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 1 || v > maxRating {
		return nil
	}
	return &v
}

// profileURL is a reviewer's public profile, https://www.etsy.com/people/<handle>,
// without the tracking query; "" for any other link.
func profileURL(href string) string {
	u, err := url.Parse(strings.TrimSpace(href))
	if err != nil || (u.Host != "" && u.Host != "www.etsy.com" && u.Host != "etsy.com") {
		return ""
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] != "people" || parts[1] == "" {
		return ""
	}
	return "https://www.etsy.com/people/" + url.PathEscape(parts[1])
}

// imageKind is the first path segment of an https image on Etsy's image
// host (iusa, iap, il, …), or "".
func imageKind(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.Scheme != "https" || u.Host != "i.etsystatic.com" {
		return ""
	}
	kind, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	return kind
}

// cardDate reads a card's rendered US-English date ("Oct 9, 2025").
func cardDate(s string) *string {
	for _, layout := range []string{"Jan 2, 2006", "January 2, 2006"} {
		if t, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
			return ptr(t.Format("2006-01-02"))
		}
	}
	return nil
}
