package tiktok

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// FuzzProfilePage: any page maps to a profile or to a typed fault, never a
// panic or an untyped error.
func FuzzProfilePage(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "..", "testdata", "upstream", Name, "*.json"))
	for _, file := range files {
		if raw, err := os.ReadFile(file); err == nil {
			f.Add(raw, "samplecreator")
		}
	}
	f.Add([]byte(`<script id="__UNIVERSAL_DATA_FOR_REHYDRATION__" type="application/json">{"__DEFAULT_SCOPE__":{"webapp.user-detail":{"userInfo":{"user":{"id":1e99,"uniqueId":"a"}},"statusCode":"x"}}}</script>`), "a")
	f.Add([]byte(`<script id="SIGI_STATE">{"UserModule":{"users":{"a":{"id":"1"}},"stats":{"a":{"followerCount":"-3"}}}}</script>`), "a")
	f.Fuzz(func(t *testing.T, body []byte, handle string) {
		c := &upstream.Call{Params: map[string]string{"handle": handle}}
		p := &pages.Page{Status: 200, Body: body, URL: Origin + "/@" + handle}
		_, _ = blocked(p)
		_, err := parseProfilePage(c, p)
		var fault *upstream.Fault
		if err != nil && !errors.As(err, &fault) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// FuzzVideoID: post_id values are an id or a typed refusal naming post_id.
func FuzzVideoID(f *testing.F) {
	for _, s := range []string{"7106594312292453675", "https://www.tiktok.com/@a/video/7106594312292453675", "https://vm.tiktok.com/x/", "https://www.tiktok.com/embed/v2/1", "%", "https://x/v/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := VideoID(raw)
		if err != nil {
			var fault *upstream.Fault
			if !errors.As(err, &fault) || fault.Kind != upstream.InvalidParameter || fault.Field != "post_id" {
				t.Fatalf("%q: %v", raw, err)
			}
			return
		}
		if !digits(id) || len(id) > 19 {
			t.Fatalf("%q: id %q", raw, id)
		}
	})
}
