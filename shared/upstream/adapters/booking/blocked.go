package booking

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// blocked recognises the answers a client that is not a browser gets
// instead of content: AWS WAF's challenge (Booking.com's bot control,
// answered as 202 or 405 with an x-amzn-waf-action header and an untitled
// page that loads challenge.js from *.awswaf.com and sets
// window.awsWafCookieDomainList and window.gokuProps), any HTML page
// answered as 202 (the site answers content with 200), and the systems
// htmldata.Challenge knows. The site's real pages load the WAF's token
// script too, so its markers count only on a 202 or 405 or an untitled
// page. The reason is one of a fixed set, never the page's content.
func blocked(p *pages.Page) (string, bool) {
	if a := p.Header.Get("x-amzn-waf-action"); a != "" {
		return "AWS WAF (x-amzn-waf-action header)", true
	}
	if signal, titled := wafSignal(p.Body); signal != "" &&
		(p.Status == http.StatusAccepted || p.Status == http.StatusMethodNotAllowed || !titled) {
		return "AWS WAF challenge (" + signal + ")", true
	}
	if p.Status == http.StatusAccepted && p.LooksHTML() {
		return "an HTML page answered as 202 (a challenge)", true
	}
	return htmldata.Challenge(p.Body)
}

// wafMarkers are names only AWS WAF's challenge scripts set.
var wafMarkers = [][]byte{[]byte("awsWafCookieDomainList"), []byte("gokuProps"), []byte("AwsWafIntegration")}

// wafSignal names the first AWS WAF challenge marker of a page, read with
// the HTML tokenizer (a script from an awswaf.com host, an inline script
// setting the challenge's globals, or the challenge's container element),
// and says whether the page has a title with text.
func wafSignal(page []byte) (signal string, titled bool) {
	z := html.NewTokenizer(bytes.NewReader(page))
	raw := "" // the raw-text element whose text comes next
	for {
		switch z.Next() {
		case html.ErrorToken:
			return signal, titled
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			raw = tag
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch {
				case signal != "":
				case tag == "script" && string(k) == "src" && awsWAFHost(string(v)):
					signal = "challenge script from awswaf.com"
				case string(k) == "id" && string(v) == "challenge-container":
					signal = "challenge-container element"
				}
			}
			continue
		case html.TextToken:
			text := z.Text()
			switch raw {
			case "title":
				titled = titled || len(bytes.TrimSpace(text)) > 0
			case "script":
				for _, m := range wafMarkers {
					if signal == "" && bytes.Contains(text, m) {
						signal = "challenge globals in an inline script"
					}
				}
			}
		}
		raw = ""
	}
}

// awsWAFHost reports whether a script source is on AWS WAF's domain.
func awsWAFHost(src string) bool {
	u, err := url.Parse(strings.TrimSpace(src))
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	return host == "awswaf.com" || strings.HasSuffix(host, ".awswaf.com")
}
