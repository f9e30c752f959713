package linkinbio_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/linkinbio"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/linkinbio")

const fixtures = "../../../testdata/linkinbio"

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenCases are one page of each service, written for these tests in the
// format each service's public pages have (see the package comment).
var goldenCases = []struct {
	name, service, pageURL string
}{
	{"linktree", linkinbio.Linktree, "https://linktr.ee/ana.example"},
	{"beacons", linkinbio.Beacons, "https://beacons.ai/milosample"},
	{"bio_link", linkinbio.BioLink, "https://bio.link/raesample"},
	{"carrd", linkinbio.Carrd, "https://junoexample.carrd.co/"},
}

// A page that reads as its service's page is that page, whatever text its
// owner put in it: a challenge's title, ids, scripts or an Akamai
// reference do not make it a block (a Carrd site's title and HTML are its
// owner's, and a link-in-bio page is a caller's to write).
func TestParseChallengeTextOnARealPage(t *testing.T) {
	title := regexp.MustCompile(`<title>[^<]*</title>`)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			orig := fixture(t, tc.name+".html")
			want, err := linkinbio.Parse(tc.service, orig, tc.pageURL)
			if err != nil {
				t.Fatal(err)
			}
			page := title.ReplaceAll(orig, []byte(`<title>Just a moment...</title>`))
			page = bytes.Replace(page, []byte(`</body>`), []byte(`<div id="challenge-running"></div><div id="cf-please-wait">cf-chl captcha</div>`+
				`<script>window._cf_chl_opt={cvId:'3'};</script><div class="g-recaptcha"></div>`+
				`<p>Access Denied. Reference #18.4f1c2a.1700000000. Powered and protected by Akamai</p></body>`), 1)
			if !bytes.Contains(page, []byte("<title>Just a moment...</title>")) || !bytes.Contains(page, []byte("_cf_chl_opt")) {
				t.Fatal("the fixture was not changed")
			}
			got, err := linkinbio.Parse(tc.service, page, tc.pageURL)
			if err != nil {
				t.Fatalf("a real page with challenge text: %v", err)
			}
			if !slices.Equal(got.Links, want.Links) || !slices.Equal(got.Socials, want.Socials) {
				t.Errorf("links %+v\nwant %+v", got.Links, want.Links)
			}
		})
	}
}

func TestParseGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := linkinbio.Parse(tc.service, fixture(t, tc.name+".html"), tc.pageURL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join(fixtures, tc.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Parse(%s) differs from %s:\n%s", tc.service, golden, got)
			}
			checkPage(t, p)
		})
	}
}

// TestParseLinktreeDetails spells out what the golden file holds for the
// rules that matter most.
func TestParseLinktreeDetails(t *testing.T) {
	p, err := linkinbio.Parse(linkinbio.Linktree, fixture(t, "linktree.html"), "https://linktr.ee/ana.example")
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != "Ana Example" || p.Bio != "Ceramics & slow travel. New pieces every Friday." {
		t.Errorf("title %q, bio %q", p.Title, p.Bio)
	}
	if p.AvatarURL != "https://ugc.production.linktr.ee/00000000-avatar/ana.jpg" {
		t.Errorf("avatar %q", p.AvatarURL)
	}
	urls := map[string]string{}
	for _, l := range p.Links {
		urls[l.URL] = l.Kind
	}
	for u, kind := range map[string]string{
		"https://ana-ceramics.example/shop?ref=spring":          linkinbio.KindWebsite, // utm_* gone, the duplicate merged
		"https://www.youtube.com/watch?v=aaaaaaaaaaa&si=share1": linkinbio.KindOther,
		"https://youtube.com/@AnaMakes":                         linkinbio.KindSocial,
		"https://linktr.ee/studio.partner":                      linkinbio.KindOther,
		"https://tips.example/ana":                              linkinbio.KindWebsite,
		"https://www.instagram.com/Ana.Example/":                linkinbio.KindSocial,
		"mailto:Hello@ana-ceramics.example":                     linkinbio.KindEmail,
	} {
		if urls[u] != kind {
			t.Errorf("link %s: kind %q, want %q (links %v)", u, urls[u], kind, urls)
		}
	}
	if len(p.Links) != 9 {
		t.Errorf("%d links, want 9 (header, locked, javascript: and data: dropped; duplicate merged): %+v", len(p.Links), p.Links)
	}
	want := []linkinbio.SocialLink{
		{Platform: "video_platform", Handle: "AnaMakes", URL: "https://youtube.com/@AnaMakes"},
		{Platform: "photo_social", Handle: "ana.example", URL: "https://www.instagram.com/Ana.Example/"},
		{Platform: "microblog_b", Handle: "anaexample", URL: "https://twitter.com/AnaExample"},
		{Platform: "short_video_a", Handle: "ana.example", URL: "https://www.tiktok.com/@ana.example"},
	}
	if len(p.Socials) != len(want) {
		t.Fatalf("socials %+v, want %+v", p.Socials, want)
	}
	for i := range want {
		if p.Socials[i] != want[i] {
			t.Errorf("social %d: %+v, want %+v", i, p.Socials[i], want[i])
		}
	}
}

// checkPage holds for every page Parse returns.
func checkPage(t *testing.T, p linkinbio.Page) {
	t.Helper()
	seen := map[string]bool{}
	if len(p.Links) > linkinbio.MaxLinks {
		t.Errorf("%d links over the bound", len(p.Links))
	}
	for _, l := range p.Links {
		switch l.Kind {
		case linkinbio.KindEmail:
			if !strings.HasPrefix(l.URL, "mailto:") || strings.ContainsAny(l.URL, "?#") {
				t.Errorf("email link %q", l.URL)
			}
		case linkinbio.KindSocial, linkinbio.KindWebsite, linkinbio.KindOther:
			if !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://") {
				t.Errorf("%s link %q is not http(s)", l.Kind, l.URL)
			}
		default:
			t.Errorf("link %q of kind %q", l.URL, l.Kind)
		}
		if strings.Contains(strings.ToLower(l.URL), "utm_") || strings.Contains(l.URL, "#") {
			t.Errorf("link %q not normalised", l.URL)
		}
		if seen[l.URL] {
			t.Errorf("link %q twice", l.URL)
		}
		seen[l.URL] = true
	}
	for _, s := range p.Socials {
		if s.Platform == "" || s.Handle == "" || !seen[s.URL] {
			t.Errorf("social %+v", s)
		}
	}
	if p.AvatarURL != "" && !strings.HasPrefix(p.AvatarURL, "http") {
		t.Errorf("avatar %q", p.AvatarURL)
	}
}

func isMalformed(err error) bool {
	var f *upstream.Fault
	return errors.As(err, &f) && f.Kind == upstream.Malformed
}

func TestParseChangedFormat(t *testing.T) {
	for _, tc := range []struct{ name, service, file string }{
		{"linktree without account", linkinbio.Linktree, "linktree_changed.html"},
		{"linktree page read as beacons (no anchors)", linkinbio.Beacons, "linktree_changed.html"},
		{"beacons client-rendered shell", linkinbio.Beacons, "beacons_shell.html"},
		{"rendered page read as linktree", linkinbio.Linktree, "beacons.html"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := linkinbio.Parse(tc.service, fixture(t, tc.file), "")
			if !isMalformed(err) {
				t.Fatalf("Parse = %+v, %v; want a Malformed fault", p, err)
			}
		})
	}
}

func TestParseLinktreeShapes(t *testing.T) {
	page := func(nextData string) []byte {
		return []byte(`<html><body><script id="__NEXT_DATA__" type="application/json">` + nextData + `</script></body></html>`)
	}
	for _, tc := range []struct {
		name, data string
		ok         bool
		links      int
		avatar     string
	}{
		{"links under account", `{"props":{"pageProps":{"account":{"username":"a","links":[{"type":"CLASSIC","title":"x","url":"https://a.example/"}]}}}}`, true, 1, ""},
		{"empty links list", `{"props":{"pageProps":{"account":{"username":"a"},"links":[]}}}`, true, 0, ""},
		{"data: avatar dropped", `{"props":{"pageProps":{"account":{"username":"a","profilePictureUrl":"data:image/png;base64,AAAA"},"links":[]}}}`, true, 0, ""},
		{"relative link dropped", `{"props":{"pageProps":{"account":{"username":"a"},"links":[{"url":"/x"},{"url":"//cdn.example/x"}]}}}`, true, 0, ""},
		{"no links list", `{"props":{"pageProps":{"account":{"username":"a"}}}}`, false, 0, ""},
		{"no username", `{"props":{"pageProps":{"account":{"username":""},"links":[]}}}`, false, 0, ""},
		{"username of another type", `{"props":{"pageProps":{"account":{"username":7},"links":[]}}}`, false, 0, ""},
		{"links of another type", `{"props":{"pageProps":{"account":{"username":"a"},"links":{"0":{}}}}}`, false, 0, ""},
		{"no pageProps", `{"props":{}}`, false, 0, ""},
		{"not an object", `[1,2]`, false, 0, ""},
		{"null", `null`, false, 0, ""},
		{"broken JSON", `{"props":{"pageProps":{"account":{"username":"a"`, false, 0, ""},
		{"empty script", ``, false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := linkinbio.Parse(linkinbio.Linktree, page(tc.data), "https://linktr.ee/a")
			if !tc.ok {
				if !isMalformed(err) {
					t.Fatalf("Parse = %+v, %v; want a Malformed fault", p, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Links) != tc.links || p.AvatarURL != tc.avatar || p.Links == nil || p.Socials == nil {
				t.Errorf("Parse = %+v", p)
			}
		})
	}
}

func TestParseHostile(t *testing.T) {
	t.Run("huge page", func(t *testing.T) {
		huge := bytes.Repeat([]byte("<a href=\"https://a.example/\">x</a>"), linkinbio.MaxPageBytes/30)
		if _, err := linkinbio.Parse(linkinbio.Beacons, huge, ""); !isMalformed(err) {
			t.Fatalf("err = %v, want Malformed", err)
		}
	})
	t.Run("many links are bounded", func(t *testing.T) {
		var b strings.Builder
		for i := range 5000 {
			b.WriteString(`<a href="https://a.example/` + strings.Repeat("x", i%50) + `/` + string(rune('a'+i%26)) + `?n=` + strconv.Itoa(i) + `">l</a>`)
		}
		p, err := linkinbio.Parse(linkinbio.BioLink, []byte(b.String()), "https://bio.link/x")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Links) != linkinbio.MaxLinks {
			t.Errorf("%d links, want %d", len(p.Links), linkinbio.MaxLinks)
		}
	})
	t.Run("long texts are bounded", func(t *testing.T) {
		long := strings.Repeat("é", 100000)
		page := `<meta property="og:title" content="` + long + `"><meta name="description" content="` + long + `"><a href="https://a.example/">` + long + `</a>`
		p, err := linkinbio.Parse(linkinbio.Carrd, []byte(page), "https://x.carrd.co/")
		if err != nil {
			t.Fatal(err)
		}
		if n := len([]rune(p.Title)); n > 300 {
			t.Errorf("title of %d runes", n)
		}
		if n := len([]rune(p.Bio)); n > 2000 {
			t.Errorf("bio of %d runes", n)
		}
		if n := len([]rune(p.Links[0].Title)); n > 300 {
			t.Errorf("link title of %d runes", n)
		}
	})
	t.Run("hostile schemes and URLs", func(t *testing.T) {
		page := `<a href="javascript:alert(1)">a</a><a href=" JaVaScRiPt:alert(1)">b</a>` +
			`<a href="data:text/html,x">c</a><a href="vbscript:x">d</a><a href="file:///etc/passwd">e</a>` +
			`<a href="https://user:pw@evil.example/">f</a><a href="https://a.example/%zz">g</a>` +
			`<a href="https://a.example/` + "\x01" + `">h</a><a href="https://` + strings.Repeat("a", 3000) + `.example/">i</a>` +
			`<a href="mailto:a@b.example,c@d.example">j</a><a href="mailto:">k</a><a href="mailto:not-an-address">l</a>` +
			`<a href="mailto:x@y.example%0aBcc:z@w.example">m</a><a href="intent://x#Intent;end">n</a>` +
			`<a href="https://ok.example/">ok</a>`
		p, err := linkinbio.Parse(linkinbio.Beacons, []byte(page), "https://beacons.ai/x")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Links) != 1 || p.Links[0].URL != "https://ok.example/" {
			t.Errorf("links %+v", p.Links)
		}
	})
	t.Run("only hostile links", func(t *testing.T) {
		page := `<meta property="og:title" content="x"><a href="javascript:alert(1)">a</a>`
		if _, err := linkinbio.Parse(linkinbio.Beacons, []byte(page), ""); !isMalformed(err) {
			t.Fatalf("err = %v, want Malformed", err)
		}
	})
	t.Run("challenge page", func(t *testing.T) {
		page := `<html><head><title>Just a moment...</title></head><body><div id="challenge-running"></div>` +
			`<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1"></script></body></html>`
		_, err := linkinbio.Parse(linkinbio.Linktree, []byte(page), "")
		var f *upstream.Fault
		if !errors.As(err, &f) || f.Kind != upstream.Rejected {
			t.Fatalf("err = %v, want Rejected", err)
		}
	})
	t.Run("unknown service", func(t *testing.T) {
		if _, err := linkinbio.Parse("myspace", fixture(t, "beacons.html"), ""); !isMalformed(err) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("reasons carry no page content", func(t *testing.T) {
		secret := "secret-person@example.com"
		page := `<script id="__NEXT_DATA__" type="application/json">{"props":{"pageProps":{"account":{"username":"` + secret + `"`
		_, err := linkinbio.Parse(linkinbio.Linktree, []byte(page), "")
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestRecognise(t *testing.T) {
	for raw, want := range map[string]string{
		"https://linktr.ee/ana.example":         linkinbio.Linktree,
		"linktr.ee/ana.example":                 linkinbio.Linktree,
		"http://www.linktr.ee/ana?utm_source=x": linkinbio.Linktree,
		"https://LINKTR.EE./Ana":                linkinbio.Linktree,
		"https://beacons.ai/milosample":         linkinbio.Beacons,
		"https://beacons.page/milosample":       linkinbio.Beacons,
		"https://bio.link/raesample":            linkinbio.BioLink,
		"https://junoexample.carrd.co":          linkinbio.Carrd,
		"https://junoexample.carrd.co/#work":    linkinbio.Carrd,
		"https://linktr.ee/":                    "",
		"https://linktr.ee":                     "",
		"https://linktr.ee/s/about":             "",
		"https://beacons.ai/signup":             "",
		"https://carrd.co/":                     "",
		"https://www.carrd.co/build":            "",
		"https://a.b.carrd.co/":                 "",
		"https://linktr.ee.evil.example/ana":    "",
		"https://evil.example/linktr.ee/ana":    "",
		"https://user@linktr.ee/ana":            "",
		"https://linktr.ee:8443/ana":            "",
		"ftp://linktr.ee/ana":                   "",
		"javascript:linktr.ee/ana":              "",
		"https://lnk.bio/someone":               "",
		"https://stan.store/someone":            "",
		"":                                      "",
		"https://linktr.ee/a\nb":                "",
	} {
		got, ok := linkinbio.Recognise(raw)
		if got != want || ok != (want != "") {
			t.Errorf("Recognise(%q) = %q, %v; want %q", raw, got, ok, want)
		}
	}
}
