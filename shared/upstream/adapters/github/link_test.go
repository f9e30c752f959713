package github

import (
	"net/http"
	"testing"
)

func TestNextCursor(t *testing.T) {
	cases := []struct {
		name, link string
		want       string // "" for none
	}{
		{"no header", "", ""},
		{"next and last", `<https://api.github.com/user/1/repos?per_page=2&page=2>; rel="next", <https://api.github.com/user/1/repos?per_page=2&page=9>; rel="last"`, "2"},
		{"last page", `<https://api.github.com/user/1/repos?page=8>; rel="prev", <https://api.github.com/user/1/repos?page=1>; rel="first"`, ""},
		{"raw comma inside the URL", `<https://api.github.com/repositories/1/issues?labels=bug,ui&page=3>; rel="next"`, "3"},
		{"unquoted rel", `<https://api.github.com/x?page=4>; rel=next`, "4"},
		{"several relations", `<https://api.github.com/x?page=5>; rel="next last"`, "5"},
		{"next after others", `<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x?page=3>; rel="next"`, "3"},
	}
	for _, tc := range cases {
		h := http.Header{}
		if tc.link != "" {
			h.Set("Link", tc.link)
		}
		got, err := nextCursor(h)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if (got == nil) != (tc.want == "") || (got != nil && *got != tc.want) {
			t.Errorf("%s: cursor %v; want %q", tc.name, deref(got), tc.want)
		}
	}
	h := http.Header{}
	h.Set("Link", `<https://api.github.com/x?after=Y3Vyc29y>; rel="next"`)
	if _, err := nextCursor(h); err == nil {
		t.Error("a rel=next without a page number was accepted")
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
