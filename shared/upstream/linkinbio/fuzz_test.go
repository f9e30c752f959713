package linkinbio_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/linkinbio"
)

// FuzzParse: no page makes Parse panic, failures are always typed faults
// (Malformed, or Rejected for a challenge page), the page is not changed,
// and every page returned keeps the package's invariants.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"linktree", "linktree_changed", "beacons", "beacons_shell", "bio_link", "carrd"} {
		page := fixture(f, name+".html")
		for _, service := range linkinbio.Services() {
			f.Add(service, page, "https://"+service+".example/x")
		}
	}
	f.Add(linkinbio.Linktree, []byte(`<script id="__NEXT_DATA__">{"props":{"pageProps":{"account":{"username":"a"},"links":[{"url":"https://x.com/a?utm_source=1"},{"url":"mailto:a@b.c?x"}]}}}</script>`), "")
	f.Add(linkinbio.Linktree, []byte(`<script id="__NEXT_DATA__">{"props":{"pageProps":{"account":{"username":"a","socialLinks":[{"type":"X","url":"javascript:x"}]},"links":null}}}</script>`), "")
	f.Add(linkinbio.Beacons, []byte(`<a href="//evil.example/x"><img alt="y"></a><a href="mailto:a@b.example">`), "beacons.ai/x")
	f.Add(linkinbio.Carrd, []byte(`<a href="https://someone.tumblr.com">t</a><a href=#x>`), "https://a.carrd.co")
	f.Add(linkinbio.BioLink, []byte(`<title>x | bio.link</title><a href="https://www.facebook.com/profile.php?id=1">f</a>`), "::")
	f.Fuzz(func(t *testing.T, service string, page []byte, pageURL string) {
		orig := bytes.Clone(page)
		p, err := linkinbio.Parse(service, page, pageURL)
		if !bytes.Equal(page, orig) {
			t.Fatal("Parse changed the page")
		}
		if err != nil {
			var f *upstream.Fault
			if !errors.As(err, &f) || (f.Kind != upstream.Malformed && f.Kind != upstream.Rejected) {
				t.Fatalf("untyped or unexpected failure %v", err)
			}
			return
		}
		if p.Service != service || p.Links == nil || p.Socials == nil {
			t.Fatalf("page %+v", p)
		}
		checkPage(t, p)
		for _, l := range p.Links {
			// Normalisation is idempotent.
			c, ok := linkinbio.Classify(l.URL)
			if !ok || c.URL != l.URL || c.Kind != l.Kind {
				t.Fatalf("link %+v reclassified as %+v, %v", l, c, ok)
			}
		}
	})
}
