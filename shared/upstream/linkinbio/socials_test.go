package linkinbio_test

import (
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/linkinbio"
)

func TestClassifySocial(t *testing.T) {
	for _, tc := range []struct {
		raw, platform, handle, url string
	}{
		{"https://x.com/JunoDraws", "microblog_b", "junodraws", "https://x.com/JunoDraws"},
		{"https://mobile.twitter.com/someone_1/", "microblog_b", "someone_1", "https://mobile.twitter.com/someone_1/"},
		{"https://twitter.com/someone?s=21&t=abc", "microblog_b", "someone", "https://twitter.com/someone"},
		{"https://www.instagram.com/a.b_c/", "photo_social", "a.b_c", "https://www.instagram.com/a.b_c/"},
		{"https://instagr.am/abc", "photo_social", "abc", "https://instagr.am/abc"},
		{"https://www.tiktok.com/@some.one?lang=en", "short_video_a", "some.one", "https://www.tiktok.com/@some.one"},
		{"https://www.youtube.com/@SomeOne", "video_platform", "SomeOne", "https://www.youtube.com/@SomeOne"},
		{"https://youtube.com/channel/UC0123456789abcdefghijkl", "video_platform", "UC0123456789abcdefghijkl", "https://youtube.com/channel/UC0123456789abcdefghijkl"},
		{"https://www.youtube.com/user/OldName", "video_platform", "OldName", "https://www.youtube.com/user/OldName"},
		{"https://www.facebook.com/some.page", "social_a", "some.page", "https://www.facebook.com/some.page"},
		{"https://m.facebook.com/profile.php?id=123456&ref=x", "social_a", "123456", "https://m.facebook.com/profile.php?id=123456"},
		{"https://www.linkedin.com/in/some-one-123/", "professional_network", "some-one-123", "https://www.linkedin.com/in/some-one-123/"},
		{"https://de.linkedin.com/in/jürgen-beispiel", "professional_network", "jürgen-beispiel", "https://de.linkedin.com/in/j%C3%BCrgen-beispiel"},
		{"https://www.threads.net/@some.one", "microblog_c", "some.one", "https://www.threads.net/@some.one"},
		{"https://www.threads.com/@some.one", "microblog_c", "some.one", "https://www.threads.com/@some.one"},
		{"https://bsky.app/profile/Some.Bsky.Social", "microblog_a", "some.bsky.social", "https://bsky.app/profile/Some.Bsky.Social"},
		{"https://bsky.app/profile/did:plc:abcdefghijklmnopqrstuvwx", "microblog_a", "did:plc:abcdefghijklmnopqrstuvwx", "https://bsky.app/profile/did:plc:abcdefghijklmnopqrstuvwx"},
		{"https://github.com/Some-One", "code_host", "some-one", "https://github.com/Some-One"},
		{"https://www.twitch.tv/some_one", "twitch", "some_one", "https://www.twitch.tv/some_one"},
		{"https://www.snapchat.com/add/some.one", "snapchat", "some.one", "https://www.snapchat.com/add/some.one"},
		{"https://www.reddit.com/user/some_one/", "reddit", "some_one", "https://www.reddit.com/user/some_one/"},
		{"https://open.spotify.com/artist/0AbCdEfGhIjKlMnOpQrStU?si=x", "spotify", "0AbCdEfGhIjKlMnOpQrStU", "https://open.spotify.com/artist/0AbCdEfGhIjKlMnOpQrStU"},
		{"https://t.me/some_one", "telegram", "some_one", "https://t.me/some_one"},
		{"https://someone.tumblr.com/", "tumblr", "someone", "https://someone.tumblr.com/"},
		{"https://someone.substack.com", "substack", "someone", "https://someone.substack.com"},
		{"https://medium.com/@some.one", "medium", "some.one", "https://medium.com/@some.one"},
	} {
		c, ok := linkinbio.Classify(tc.raw)
		if !ok || c.Kind != linkinbio.KindSocial || c.Social == nil {
			t.Errorf("Classify(%q) = %+v, %v; want social", tc.raw, c, ok)
			continue
		}
		if c.Social.Platform != tc.platform || c.Social.Handle != tc.handle || c.Social.URL != tc.url || c.URL != tc.url {
			t.Errorf("Classify(%q) = %+v %+v; want %s %s %s", tc.raw, c, *c.Social, tc.platform, tc.handle, tc.url)
		}
	}
}

func TestClassifyNotProfiles(t *testing.T) {
	for raw, kind := range map[string]string{
		"https://x.com/someone/status/1":                  linkinbio.KindOther,
		"https://x.com/intent/follow?screen_name=someone": linkinbio.KindOther,
		"https://twitter.com/toolonghandle_1234":          linkinbio.KindOther,
		"https://www.instagram.com/p/abc/":                linkinbio.KindOther,
		"https://www.instagram.com/explore":               linkinbio.KindOther,
		"https://www.tiktok.com/someone":                  linkinbio.KindOther,
		"https://vm.tiktok.com/ZM000/":                    linkinbio.KindOther,
		"https://www.youtube.com/watch?v=x":               linkinbio.KindOther,
		"https://youtu.be/x":                              linkinbio.KindOther,
		"https://www.facebook.com/groups/x":               linkinbio.KindOther,
		"https://www.facebook.com/profile.php?id=abc":     linkinbio.KindOther,
		"https://www.linkedin.com/company/x":              linkinbio.KindOther,
		"https://github.com/someone/repo":                 linkinbio.KindOther,
		"https://github.com/sponsors":                     linkinbio.KindOther,
		"https://github.com/-bad":                         linkinbio.KindOther,
		"https://bsky.app/profile/nodot":                  linkinbio.KindOther,
		"https://www.tumblr.com/":                         linkinbio.KindOther,
		"https://discord.gg/abc":                          linkinbio.KindOther,
		"https://lnk.bio/someone":                         linkinbio.KindOther,
		"https://stan.store/someone":                      linkinbio.KindOther,
		"https://x.com.evil.example/someone":              linkinbio.KindWebsite,
		"https://notx.com/someone":                        linkinbio.KindWebsite,
		"https://shop.example/x?utm_source=a&b=1":         linkinbio.KindWebsite,
	} {
		c, ok := linkinbio.Classify(raw)
		if !ok || c.Kind != kind || c.Social != nil {
			t.Errorf("Classify(%q) = %+v, %v; want %s", raw, c, ok, kind)
		}
	}
}

func TestClassifyNormalises(t *testing.T) {
	for raw, want := range map[string]string{
		"HTTPS://Shop.Example.:443/a?utm_source=x&utm_medium=y#frag": "https://shop.example/a",
		"http://shop.example:80/a?b=1&fbclid=z&c=2":                  "http://shop.example/a?b=1&c=2",
		"https://shop.example:8443/a?UTM_Campaign=x&q=a%20b":         "https://shop.example:8443/a?q=a%20b",
		"https://shop.example/a?gclid=1&igshid=2&mc_eid=3&_hsenc=4":  "https://shop.example/a",
		"  https://shop.example/a  ":                                 "https://shop.example/a",
		"mailto:Someone@Example.COM?subject=hi&body=there":           "mailto:Someone@example.com",
		"MAILTO:someone@example.com":                                 "mailto:someone@example.com",
		"mailto:some%20one@example.com":                              "",
		"mailto:a@example.com,b@example.com":                         "",
		"mailto:Name <a@example.com>":                                "",
		"https://[2001:db8::1]:443/x":                                "https://[2001:db8::1]/x",
		"https://user@shop.example/":                                 "",
		"javascript:alert(1)":                                        "",
		"data:text/html,hi":                                          "",
		"tel:+15555550100":                                           "",
		"/relative/path":                                             "",
		"https://":                                                   "",
	} {
		c, ok := linkinbio.Classify(raw)
		if want == "" {
			if ok {
				t.Errorf("Classify(%q) = %+v; want dropped", raw, c)
			}
			continue
		}
		if !ok || c.URL != want {
			t.Errorf("Classify(%q) = %+v, %v; want %s", raw, c, ok, want)
		}
	}
}
