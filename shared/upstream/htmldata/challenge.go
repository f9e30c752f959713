package htmldata

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// A page is near-empty when it shows less text than this and is smaller
// than tinyPage: a lone captcha widget means a block only there, since
// ordinary pages load reCAPTCHA, hCaptcha or Turnstile for their forms.
const (
	tinyText = 2048
	tinyPage = 64 << 10
)

// Challenge reports whether page is a bot-protection block or challenge
// page rather than the content asked for, and which system's, from the
// page's structure: its title, element ids, form actions, script and
// iframe sources, and markers of inline scripts. The reason is one of a
// fixed set (system and signal), never the page's content.
//
// Recognised:
//   - Cloudflare challenge: title "Just a moment..."; an inline script
//     defining _cf_chl_opt; a source or form action under
//     /cdn-cgi/challenge-platform/…/orchestrate/; a form action with
//     __cf_chl_; the challenge's ids (challenge-running,
//     cf-challenge-running, cf-please-wait, cf-spinner-please-wait,
//     trk_jschal_js). The bot-management beacon that ordinary pages load
//     from /cdn-cgi/challenge-platform/scripts/ does not count.
//   - Cloudflare block: title "Attention Required! | Cloudflare" or
//     "Access denied | … Cloudflare …", or the data-translate="block_headline"
//     heading.
//   - DataDome: a script or iframe from captcha-delivery.com, or the inline
//     "var dd=" block naming it (ordinary pages load js.datadome.co).
//   - PerimeterX/HUMAN: an element with id px-captcha, the meta description
//     "px-captcha", a captcha script from px-cdn.net, title "Access to this
//     page has been denied", or _pxAppId on a near-empty page (ordinary
//     pages set _pxAppId too).
//   - Amazon: a form whose action contains validateCaptcha, the
//     captchacharacters input, or title "Robot Check".
//   - Akamai: title "Access Denied" with a "Reference #" (or an
//     errors.edgesuite.net reference) in the text. Bot Manager's
//     challenges: the behavioural one's sec-if-cpt-container element
//     ("Powered and protected by Akamai", press and hold), the crypto
//     one's sec-cpt-if iframe, or a script or iframe under
//     /_sec/cp_challenge/. Ordinary pages load Akamai's sensor script
//     (/akam/…, an obfuscated first-party path) too, which does not count.
//   - Distil/Imperva: title "Pardon Our Interruption" or the
//     distilCaptchaForm; Incapsula: an iframe from /_Incapsula_Resource,
//     or "Incapsula incident ID" in an iframe's or noscript's fallback
//     text; on a near-empty page also that text anywhere or a script from
//     /_Incapsula_Resource (ordinary pages load that script too).
//   - DDoS-Guard: title "DDoS-Guard".
//   - Alibaba's slider captcha (the "punish" page of AliExpress, Taobao,
//     1688, Lazada): the punish-component element; a script or iframe of
//     the punish page from alicdn.com; a form action or iframe under
//     /_____tmd_____/; title "Captcha Interception" (or its Chinese
//     versions). On a near-empty page also: an inline script naming a
//     /_____tmd_____/punish URL with x5secdata, the "Slide to verify"
//     nocaptcha slider (ids nocaptcha, nc_1_wrapper, nc_1_n1z,
//     nc_1__scale_text), or the
//     rgv587_flag comment. Ordinary pages of these sites load the captcha
//     SDKs (baxia, AWSC, nc.js) and may hold a nocaptcha login slider.
//   - A reCAPTCHA, hCaptcha or Turnstile widget (element or iframe, not a
//     script alone), or the title "Access Denied", on a near-empty page.
//
// Titles are compared whole, case-insensitively, after collapsing white
// space, so a product titled "Access Denied (Blu-ray)" is not a block.
func Challenge(page []byte) (reason string, blocked bool) {
	var s signals
	z := html.NewTokenizer(bytes.NewReader(page))
	raw := "" // the raw-text element whose text comes next
	for {
		switch z.Next() {
		case html.ErrorToken:
			return s.verdict(len(page))
		case html.TextToken:
			s.text(z, raw)
		case html.CommentToken:
			if bytes.Contains(z.Text(), rgv587) {
				set(&s.alibabaWeak, "rgv587_flag comment")
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			raw = s.tag(z)
			continue
		}
		raw = ""
	}
}

// signals are what Challenge gathers in one pass; each names its signal.
type signals struct {
	title     string
	titleSeen bool
	visible   int  // bytes of visible text that are not white space
	reference bool // the text carries an Akamai reference

	cfChallenge, cfBlock string
	dataDome, px, amazon string
	akamai               string
	distil, incapsula    string
	incapsulaWeak        string // counts on a near-empty page only
	alibaba, alibabaWeak string // alibabaWeak counts on a near-empty page only
	widget               string
	pxAppID              bool
	scriptIsData         bool // the pending script is a JSON data block
}

// rawText are the elements whose content the tokenizer returns as one raw
// text token.
var rawText = map[string]bool{
	"script": true, "style": true, "title": true, "textarea": true, "iframe": true,
	"noscript": true, "noembed": true, "noframes": true, "xmp": true, "plaintext": true,
}

// tag inspects a start tag and returns its name when it is a raw-text
// element.
func (s *signals) tag(z *html.Tokenizer) string {
	nameB, hasAttr := z.TagName()
	name := string(nameB)
	var metaName, metaContent string
	scriptType := ""
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch string(k) {
		case "id":
			s.id(string(v))
		case "class":
			for _, c := range strings.Fields(string(v)) {
				switch c {
				case "g-recaptcha", "h-captcha", "cf-turnstile":
					set(&s.widget, c+" widget")
				}
			}
		case "src":
			s.src(name, string(v))
		case "action":
			if name == "form" {
				a := strings.ToLower(string(v))
				if strings.Contains(a, tmdPath) {
					set(&s.alibaba, "_____tmd_____ form")
				}
				if strings.Contains(a, "validatecaptcha") {
					set(&s.amazon, "validateCaptcha form")
				}
				if strings.Contains(a, "__cf_chl_") {
					set(&s.cfChallenge, "__cf_chl_ form")
				}
				if isOrchestrate(a) {
					set(&s.cfChallenge, "challenge-platform orchestration")
				}
			}
		case "data-translate":
			if string(v) == "block_headline" {
				set(&s.cfBlock, "block headline")
			}
		case "name":
			metaName = strings.ToLower(string(v))
		case "content":
			metaContent = string(v)
		case "type":
			scriptType = mediaType(string(v))
		}
	}
	if name == "meta" && metaName == "description" && strings.TrimSpace(metaContent) == "px-captcha" {
		set(&s.px, "px-captcha meta")
	}
	if name == "script" {
		s.scriptIsData = isData(scriptType)
	}
	if name == "punish-component" {
		set(&s.alibaba, "punish-component element")
	}
	if rawText[name] {
		return name
	}
	return ""
}

func (s *signals) id(v string) {
	switch v {
	case "challenge-running", "cf-challenge-running", "cf-please-wait", "cf-spinner-please-wait", "trk_jschal_js":
		set(&s.cfChallenge, v+" element")
	case "px-captcha":
		set(&s.px, "px-captcha element")
	case "captchacharacters":
		set(&s.amazon, "captcha characters input")
	case "distilCaptchaForm":
		set(&s.distil, "distilCaptchaForm")
	case "sec-if-cpt-container":
		set(&s.akamai, "behavioural challenge container")
	case "sec-cpt-if":
		set(&s.akamai, "sec-cpt-if iframe")
	case "nocaptcha", "nc_1_wrapper", "nc_1_n1z", "nc_1__scale_text":
		set(&s.alibabaWeak, "nocaptcha slider")
	}
}

func (s *signals) src(tag, v string) {
	lower := strings.ToLower(v)
	if isOrchestrate(lower) {
		set(&s.cfChallenge, "challenge-platform orchestration")
	}
	if tag != "script" && tag != "iframe" {
		return
	}
	u, err := url.Parse(strings.TrimSpace(lower))
	if err != nil {
		return
	}
	host := u.Hostname()
	switch {
	case inDomain(host, "captcha-delivery.com"):
		set(&s.dataDome, "captcha-delivery.com "+tag)
	case inDomain(host, "px-cdn.net") && strings.Contains(u.Path, "captcha"):
		set(&s.px, "px-cdn.net captcha script")
	case inDomain(host, "alicdn.com") && strings.Contains(u.Path, "punish"):
		set(&s.alibaba, "punish page "+tag)
	case tag == "iframe" && strings.Contains(u.Path, tmdPath):
		set(&s.alibaba, "_____tmd_____ iframe")
	case strings.Contains(u.Path, "/_sec/cp_challenge/"):
		set(&s.akamai, "cp_challenge "+tag)
	case tag == "iframe" && strings.Contains(u.Path, "_incapsula_resource"):
		set(&s.incapsula, "_Incapsula_Resource iframe")
	case strings.Contains(u.Path, "_incapsula_resource"):
		set(&s.incapsulaWeak, "_Incapsula_Resource script")
	case tag == "iframe" && isWidgetFrame(host, u.Path):
		set(&s.widget, "captcha iframe")
	}
}

func isWidgetFrame(host, path string) bool {
	switch {
	case inDomain(host, "hcaptcha.com"), host == "challenges.cloudflare.com":
		return true
	case inDomain(host, "google.com"), inDomain(host, "recaptcha.net"):
		return strings.HasPrefix(path, "/recaptcha/")
	}
	return false
}

// isOrchestrate tells Cloudflare's challenge orchestration (only on
// challenge pages) from its bot-management scripts (on ordinary pages too).
func isOrchestrate(lower string) bool {
	i := strings.Index(lower, "/cdn-cgi/challenge-platform/")
	return i >= 0 && strings.Contains(lower[i:], "/orchestrate/")
}

func inDomain(host, domain string) bool {
	return host == domain || strings.HasSuffix(host, "."+domain)
}

var (
	cfChlOpt        = []byte("_cf_chl_opt")
	pxAppID         = []byte("_pxAppId")
	captchaDelivery = []byte("captcha-delivery.com")
	ddVar           = []byte("var dd")
	akamaiRef       = []byte("Reference #")
	edgesuite       = []byte("errors.edgesuite.net")
	punishURL       = []byte("_____tmd_____/punish")
	x5secdata       = []byte("x5secdata")
	rgv587          = []byte("rgv587_flag")
	incidentID      = []byte("Incapsula incident ID")
)

// tmdPath is the path under which Alibaba's anti-bot serves its punish
// (captcha) and verify pages.
const tmdPath = "/_____tmd_____/"

// text inspects a text token: raw is the element it belongs to, "" for
// ordinary (visible) text.
func (s *signals) text(z *html.Tokenizer, raw string) {
	switch raw {
	case "title":
		if !s.titleSeen {
			s.titleSeen = true
			t := z.Text()
			if len(t) > 256 {
				t = t[:256]
			}
			s.title = strings.Join(strings.Fields(string(t)), " ")
		}
	case "script":
		if s.scriptIsData {
			return
		}
		t := z.Raw()
		if bytes.Contains(t, cfChlOpt) {
			set(&s.cfChallenge, "_cf_chl_opt script")
		}
		if bytes.Contains(t, pxAppID) {
			s.pxAppID = true
		}
		if bytes.Contains(t, captchaDelivery) && bytes.Contains(t, ddVar) {
			set(&s.dataDome, "captcha-delivery.com dd script")
		}
		if bytes.Contains(t, punishURL) && bytes.Contains(t, x5secdata) {
			set(&s.alibabaWeak, "punish URL script")
		}
	case "iframe", "noscript":
		// The fallback text of a frame or noscript: not shown, but
		// Imperva's block page says its incident there.
		if bytes.Contains(z.Text(), incidentID) {
			set(&s.incapsula, "incident ID")
		}
	case "", "textarea":
		t := z.Text()
		if bytes.Contains(t, incidentID) {
			set(&s.incapsulaWeak, "incident ID")
		}
		for _, c := range t {
			switch c {
			case ' ', '\t', '\n', '\r', '\f':
			default:
				s.visible++
			}
		}
		if !s.reference && (bytes.Contains(t, akamaiRef) || bytes.Contains(t, edgesuite)) {
			s.reference = true
		}
	}
}

// set keeps the first signal found of a kind.
func set(field *string, signal string) {
	if *field == "" {
		*field = signal
	}
}

func (s *signals) verdict(size int) (string, bool) {
	title := strings.ToLower(s.title)
	tiny := s.visible < tinyText && size < tinyPage
	switch {
	case s.cfChallenge != "":
		return "cloudflare challenge: " + s.cfChallenge, true
	case title == "just a moment..." || title == "just a moment…":
		return "cloudflare challenge: title", true
	case s.cfBlock != "":
		return "cloudflare block: " + s.cfBlock, true
	case title == "attention required! | cloudflare",
		strings.HasPrefix(title, "access denied |") && strings.Contains(title, "cloudflare"):
		return "cloudflare block: title", true
	case s.dataDome != "":
		return "datadome captcha: " + s.dataDome, true
	case s.px != "":
		return "perimeterx captcha: " + s.px, true
	case strings.TrimSuffix(title, ".") == "access to this page has been denied":
		return "perimeterx block: title", true
	case s.pxAppID && tiny:
		return "perimeterx block: _pxAppId on a near-empty page", true
	case s.amazon != "":
		return "amazon captcha: " + s.amazon, true
	case title == "robot check":
		return "amazon captcha: title", true
	case title == "access denied" && s.reference:
		return "akamai block: Access Denied with a reference", true
	case s.akamai != "":
		return "akamai challenge: " + s.akamai, true
	case title == "pardon our interruption":
		return "distil/imperva block: title", true
	case s.distil != "":
		return "distil/imperva block: " + s.distil, true
	case s.incapsula != "":
		return "incapsula block: " + s.incapsula, true
	case tiny && s.incapsulaWeak != "":
		return "incapsula block: " + s.incapsulaWeak + " on a near-empty page", true
	case title == "ddos-guard":
		return "ddos-guard challenge: title", true
	case s.alibaba != "":
		return "alibaba captcha: " + s.alibaba, true
	case title == "captcha interception" || title == "验证码拦截" || title == "驗證碼攔截":
		return "alibaba captcha: title", true
	case tiny && s.alibabaWeak != "":
		return "alibaba captcha: " + s.alibabaWeak + " on a near-empty page", true
	case tiny && s.widget != "":
		return "captcha page: " + s.widget + " on a near-empty page", true
	case tiny && title == "access denied":
		return "access denied page: title on a near-empty page", true
	}
	return "", false
}
