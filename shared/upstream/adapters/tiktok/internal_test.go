package tiktok

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

func TestVideoID(t *testing.T) {
	const id = "7703265652473805901"
	for raw, want := range map[string]string{
		id:             id,
		"0000123":      "123",
		" " + id + " ": id,
		"https://www.tiktok.com/@sample.creator/video/" + id + "?is_from_webapp=1": id,
		"https://www.tiktok.com/@sample/video/" + id + "/":                         id,
		"http://m.tiktok.com/v/" + id + ".html?u_code=x":                           id,
		"https://www.tiktok.com/embed/v2/" + id:                                    id,
		"https://www.tiktok.com/embed/" + id:                                       id,
		"https://www.tiktok.com/@sample/photo/" + id:                               id,
		"https://tiktok.com/share/video/" + id:                                     id,
		"https://WWW.TikTok.COM./@sample/video/" + id:                              id,
	} {
		got, err := VideoID(raw)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", raw, got, err, want)
		}
	}
	for raw, code := range map[string]string{
		"12345678901234567890":                       "invalid_post_id", // beyond 64 bits
		"9223372036854775808":                        "invalid_post_id", // beyond int64
		"0":                                          "invalid_post_id",
		"https://vm.tiktok.com/ZMsample1/":           "short_link",
		"https://vt.tiktok.com/ZSsample2/":           "short_link",
		"https://www.tiktok.com/t/ZTsample3/":        "short_link",
		"https://www.tiktok.com/@sample":             "not_a_post",
		"https://www.tiktok.com/@sample/video/abc":   "not_a_post",
		"https://evil.example/@sample/video/" + id:   "not_a_post",
		"https://tiktok.com.evil.example/v/" + id:    "not_a_post",
		"https://eviltiktok.com/@a/video/" + id:      "not_a_post",
		"ftp://www.tiktok.com/@sample/video/" + id:   "invalid_post_id",
		"https://user@www.tiktok.com/@a/video/" + id: "invalid_post_id",
		"not an id": "invalid_post_id",
	} {
		_, err := VideoID(raw)
		f, ok := err.(*upstream.Fault)
		if !ok || f.Kind != upstream.InvalidParameter || f.Field != "post_id" || f.Code != code {
			t.Errorf("%q: %v; want %s", raw, err, code)
		}
	}
}

func TestFlexValues(t *testing.T) {
	var v struct {
		A, B, C, D    flexID
		N, S, X, F, M flexInt
	}
	in := `{"A":7703265652473805901,"B":"7703265652473805902","C":null,"N":12,"S":"48291","X":-1,"F":1.5,"M":"1.2M"}`
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != "7703265652473805901" || v.B != "7703265652473805902" || v.C != "" || v.D != "" {
		t.Errorf("ids %+v", v)
	}
	if *v.N.v != 12 || *v.S.v != 48291 || v.X.v != nil || v.F.v != nil || v.M.v != nil {
		t.Errorf("counts %v %v %v %v %v", v.N.v, v.S.v, v.X.v, v.F.v, v.M.v)
	}
	for _, bad := range []string{`{"A":7.7e18}`, `{"A":-5}`, `{"A":true}`} {
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}

func TestIDTime(t *testing.T) {
	got, ok := idTime("7703265652473805901")
	if !ok || !got.Equal(time.Date(2026, 11, 1, 18, 5, 0, 0, time.UTC)) {
		t.Errorf("%v %v", got, ok)
	}
}

func TestPostsCursorRoundTrip(t *testing.T) {
	today := time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)
	v := int64(7)
	in := postsCursor{End: "20261020", Before: "7698861078185074287", Served: 3, Videos: &v}
	out, err := decodePostsCursor(in.encode(), today)
	if err != nil || out.End != in.End || out.Before != in.Before || out.Served != 3 || *out.Videos != 7 {
		t.Errorf("%+v %v", out, err)
	}
}

func TestQuotaWait(t *testing.T) {
	now := time.Date(2026, 11, 3, 23, 59, 59, 500_000_000, time.UTC)
	if got := quotaWait(http.Header{}, now); got != time.Second {
		t.Errorf("a half second to midnight: %v", got)
	}
	h := http.Header{}
	h.Set("retry-after", now.Add(90*time.Second).Format(http.TimeFormat))
	if got := quotaWait(h, now); got < 89*time.Second || got > 91*time.Second {
		t.Errorf("an HTTP date: %v", got)
	}
}

func TestElementIDs(t *testing.T) {
	page := []byte(`<html><body><p id="cs" class="x"></p><!-- <p id="wci"></p> --><script>var s = '<p id="wci">';</script></body></html>`)
	ids := elementIDs(page)
	if !ids["cs"] || ids["wci"] {
		t.Errorf("ids %v: comments and script text hold no elements", ids)
	}
}
