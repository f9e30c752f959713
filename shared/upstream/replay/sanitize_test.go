package replay

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The secrets of these tests: characters that every encoding changes.
const (
	testKey   = "k3y/with+odd&chars=\"<>"
	testToken = "tok_9f8e7d6c5b4a"
)

func testSanitizer() *Sanitizer { return NewSanitizer([]string{testKey, testToken, "", "ab"}) }

// forms are the encodings a leak check looks for, independently of
// secretForms (so a form the sanitiser forgot still fails a test).
func forms(secret string) []string {
	j, _ := json.Marshal(secret)
	jj, _ := json.Marshal(string(j[1 : len(j)-1]))
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(secret)
	return []string{
		secret, url.QueryEscape(secret), url.PathEscape(secret), string(j[1 : len(j)-1]), string(jj[1 : len(jj)-1]),
		strings.TrimSpace(noHTML.String()), base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.StdEncoding.EncodeToString([]byte(secret + ":")),
	}
}

func assertClean(t *testing.T, what, got string) {
	t.Helper()
	for _, secret := range []string{testKey, testToken} {
		for _, f := range forms(secret) {
			if strings.Contains(got, f) {
				t.Errorf("%s still holds a secret (form %q): %s", what, f, got)
			}
		}
	}
}

func TestSanitizerText(t *testing.T) {
	s := testSanitizer()
	jsonEscaped := func(v string) string { b, _ := json.Marshal(v); return string(b[1 : len(b)-1]) }
	cases := []struct {
		name, in, want string
	}{
		{"raw", "key is " + testKey + ".", "key is REDACTED."},
		{"url-encoded query", "?api=" + url.QueryEscape(testKey) + "&x=1", "?api=REDACTED&x=1"},
		{"url-encoded path", "/p/" + url.PathEscape(testKey), "/p/REDACTED"},
		{"lower-case hex", "a=" + strings.ToLower(url.QueryEscape(testKey)), "a=REDACTED"},
		{"json-escaped", `{"k":"` + jsonEscaped(testKey) + `"}`, `{"k":"REDACTED"}`},
		{"json in json", jsonEscaped(`{"k":"` + jsonEscaped(testKey) + `"}`), jsonEscaped(`{"k":"REDACTED"}`)},
		{"html-escaped", `<a title="k3y/with+odd&amp;chars=&#34;&lt;&gt;">`, `<a title="REDACTED">`},
		{"basic credential", "Basic " + base64.StdEncoding.EncodeToString([]byte(testKey+":")), "Basic REDACTED"},
		{"short secret untouched in text", "a cab on ab street", "a cab on ab street"},
		{"whole short secret", "ab", "REDACTED"},
		{
			"S3 presigned URL",
			"see https://b.s3.amazonaws.com/o.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101&X-Amz-Date=20260101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=abc123&w=200 now",
			"see https://b.s3.amazonaws.com/o.jpg?w=200 now",
		},
		{
			"CloudFront signed URL",
			"https://d1.cloudfront.net/v.mp4?Expires=1800000000&Signature=Zm9v~bar&Key-Pair-Id=K2ABC",
			"https://d1.cloudfront.net/v.mp4",
		},
		{
			"Facebook CDN in HTML",
			`<img src="https://scontent.xx.fbcdn.net/v/t51/1_n.jpg?stp=dst-jpg&amp;_nc_cat=1&amp;_nc_sid=8b3546&amp;_nc_ohc=Q7xyz&amp;oh=00_AfB&amp;oe=6779A1B2" alt="x">`,
			`<img src="https://scontent.xx.fbcdn.net/v/t51/1_n.jpg?stp=dst-jpg&amp;_nc_cat=1" alt="x">`,
		},
		{
			"CDN URL JSON-escaped in a script",
			`<script>{"u":"https:\/\/scontent.cdninstagram.com\/v\/p.jpg?_nc_ht=x\u0026_nc_ohc=abc\u0026oh=00_A\u0026oe=67AB"}</script>`,
			`<script>{"u":"https:\/\/scontent.cdninstagram.com\/v\/p.jpg?_nc_ht=x"}</script>`,
		},
		{
			"token and sig parameters, fragment kept",
			"https://x.example/a?id=7&token=abc&sig=def#top",
			"https://x.example/a?id=7#top",
		},
		{"unsigned URL unchanged", "https://x.example/a?id=7&page=2", "https://x.example/a?id=7&page=2"},
		{"expires alone unchanged", "https://x.example/a?expires=1", "https://x.example/a?expires=1"},
		{"oe without a signature unchanged", "https://shop.example/dp/B0?ie=UTF8&oe=UTF8", "https://shop.example/dp/B0?ie=UTF8&oe=UTF8"},
		{"policy with a signature", "https://d.example/v?Policy=eyJ&Signature=x&Key-Pair-Id=K&q=1", "https://d.example/v?q=1"},
		{
			"configured token in a URL",
			"https://api.example/v1?access_token=" + testToken + "&fields=id",
			"https://api.example/v1?fields=id",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := s.Text(c.in)
			if got != c.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
			assertClean(t, c.name, got)
		})
	}
}

func TestSanitizerJSON(t *testing.T) {
	s := testSanitizer()
	page := `<html><img src="https://cdn.example/i.jpg?oh=1&oe=2&w=3"><p>` + testKey + `</p></html>`
	cases := []struct {
		name, in, want string
	}{
		{"secret in a string", `{"echo":"` + testToken + `","n":1.50}`, `{"echo":"REDACTED","n":1.50}`},
		{"escaped secret decodes and goes", `{"echo":"k3y\/with+odd\u0026chars=\"\u003c\u003e"}`, `{"echo":"REDACTED"}`},
		{"credential fields", `{"access_token":"eyJhbGciOi","refreshJwt":"r1","password":"","session":{"id":"s1","n":2},"key":"product-7"}`,
			`{"access_token":"REDACTED","key":"product-7","password":"","refreshJwt":"REDACTED","session":{"id":"REDACTED","n":2}}`},
		{"cookie as a name/value pair", `{"headers":[{"name":"Set-Cookie","value":"sid=abc; Path=/"},{"name":"Content-Type","value":"text/html"}]}`,
			`{"headers":[{"name":"Set-Cookie","value":"REDACTED"},{"name":"Content-Type","value":"text/html"}]}`},
		{"signed CDN URLs in values", `{"items":[{"img":"https://scontent.cdninstagram.com/v/a.jpg?_nc_ohc=x&oh=y&oe=z&_nc_ht=h"},{"img":"https://b.s3.amazonaws.com/k?X-Amz-Signature=s&X-Amz-Security-Token=t"}]}`,
			`{"items":[{"img":"https://scontent.cdninstagram.com/v/a.jpg?_nc_ht=h"},{"img":"https://b.s3.amazonaws.com/k"}]}`},
		{"base64 page body", `{"statusCode":200,"httpResponseBody":"` + base64.StdEncoding.EncodeToString([]byte(page)) + `"}`,
			`{"httpResponseBody":"` + base64.StdEncoding.EncodeToString([]byte(`<html><img src="https://cdn.example/i.jpg?w=3"><p>REDACTED</p></html>`)) + `","statusCode":200}`},
		{"big numbers exact", `[12345678901234567890, true, null]`, `[12345678901234567890,true,null]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := s.JSON([]byte(c.in))
			if !ok {
				t.Fatalf("JSON(%s): not JSON", c.in)
			}
			if string(got) != c.want {
				t.Errorf("JSON(%s)\n got %s\nwant %s", c.in, got, c.want)
			}
			assertClean(t, c.name, string(got))
		})
	}
	if _, ok := s.JSON([]byte(`{"a":1} {"b":2}`)); ok {
		t.Error("two JSON values accepted as one")
	}
	if _, ok := s.JSON([]byte(`<html>`)); ok {
		t.Error("HTML accepted as JSON")
	}
}

func TestCredentialName(t *testing.T) {
	for _, n := range []string{"key", "api_key", "apiKey", "X-API-Key", "token", "access_token", "session", "sid", "auth",
		"signature", "sig", "password", "secret", "client_secret", "X-Amz-Security-Token", "x-amz-date", "Cookie",
		"Set-Cookie", "Authorization", "Proxy-Authorization", "x-csrf-token", "X-RapidAPI-Key", "sessionid"} {
		if !CredentialName(n) {
			t.Errorf("%s: not taken for a credential", n)
		}
	}
	for _, n := range []string{"q", "page", "url", "country_code", "cursor", "content-type", "id", "keywords", "monkey"} {
		if CredentialName(n) {
			t.Errorf("%s: taken for a credential", n)
		}
	}
}

func TestFixtureFromExchange(t *testing.T) {
	s := testSanitizer()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(`{"user":{"name":"Ada","avatar":"https://cdn.example/a.jpg?oh=1&oe=2"},"echo":"` + testToken + `"}`))
	_ = zw.Close()
	u, _ := url.Parse("https://api.example/base/v2/users/ada%5B1%5D?api_key=" + url.QueryEscape(testKey) + "&fields=name,avatar&x=" + testToken + "&cb=https%3A%2F%2Fa.example%2F%3Fsig%3D1")
	ex := Exchange{
		BaseURL: "https://api.example/base/", Method: http.MethodPost, URL: u,
		RequestHeader: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + testToken}},
		RequestBody: mustJSON(t, map[string]any{"url": "https://shop.example/p?id=1", "geolocation": "GB", "n": 2, "token": testToken,
			"echo": "x" + testKey, "headers": []map[string]string{{"name": "cookie", "value": "s=1"}},
			"httpRequestText": `{"query":"q","csrfToken":"c5rf-from-the-page"}`, "form": "user=ada&password=pw1234",
			"httpRequestBody": base64.StdEncoding.EncodeToString([]byte(`{"variables":{"session_id":"s-9"}}`)), "plain": "a=b"}),
		Status: 200,
		ResponseHeader: http.Header{
			"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}, "Set-Cookie": {"session=srv-cookie"},
			"Retry-After": {"3"}, "Link": {`<https://api.example/base/v2/users?page=2&access_token=` + testToken + `>; rel="next"`},
			"X-Request-Id": {"r-1"},
		},
		ResponseBody: gz.Bytes(),
	}
	name, contents, err := s.Fixture(ex)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "rec-post-v2-users-ada-1-") || !strings.HasSuffix(name, ".json") {
		t.Errorf("file name %q", name)
	}
	assertClean(t, "fixture", string(contents))
	for _, gone := range []string{"c5rf-from-the-page", "pw1234", "srv-cookie", "Set-Cookie", "set-cookie", "X-Request-Id", "x-request-id", "Authorization", "cookie", "oh=", "sig%3D1"} {
		if strings.Contains(string(contents), gone) {
			t.Errorf("fixture holds %q:\n%s", gone, contents)
		}
	}
	var fx Fixture
	if err := json.Unmarshal(contents, &fx); err != nil {
		t.Fatalf("%v\n%s", err, contents)
	}
	if fx.Match.Method != "POST" || fx.Match.Path != `/v2/users/ada\[1\]` {
		t.Errorf("match %s %s", fx.Match.Method, fx.Match.Path)
	}
	wantQuery := map[string]string{"api_key": "*", "fields": "name,avatar", "x": "*", "cb": "*"}
	if len(fx.Match.Query) != len(wantQuery) {
		t.Errorf("query %v, want %v", fx.Match.Query, wantQuery)
	}
	for k, v := range wantQuery {
		if fx.Match.Query[k] != v {
			t.Errorf("query %s = %q, want %q", k, fx.Match.Query[k], v)
		}
	}
	wantBody := map[string]string{"url": `"https://shop.example/p\\?id=1"`, "geolocation": `"GB"`, "n": `2`, "token": `"*"`, "echo": `"*"`,
		"httpRequestText": `"*"`, "form": `"*"`, "httpRequestBody": `"*"`, "plain": `"a=b"`}
	if len(fx.Match.Body) != len(wantBody) {
		t.Errorf("body %v", fx.Match.Body)
	}
	for k, v := range wantBody {
		if string(fx.Match.Body[k]) != v {
			t.Errorf("body %s = %s, want %s", k, fx.Match.Body[k], v)
		}
	}
	if fx.Response.Status != 200 || fx.Response.Headers["retry-after"] != "3" || fx.Response.Headers["content-type"] != "application/json" ||
		fx.Response.Headers["link"] != `<https://api.example/base/v2/users?page=2>; rel="next"` || len(fx.Response.Headers) != 3 {
		t.Errorf("response headers %v", fx.Response.Headers)
	}
	if string(fx.Response.Body) == "" || fx.Response.BodyText != nil {
		t.Fatalf("JSON answer not kept as body: %s", contents)
	}
	var body map[string]any
	_ = json.Unmarshal(fx.Response.Body, &body)
	if body["echo"] != Redacted || body["user"].(map[string]any)["avatar"] != "https://cdn.example/a.jpg" {
		t.Errorf("body %v", body)
	}

	// The same request again names the same file; another does not.
	again, _, _ := s.Fixture(ex)
	ex.URL, _ = url.Parse("https://api.example/base/v2/users/ada%5B1%5D?fields=name")
	other, _, _ := s.Fixture(ex)
	if again != name || other == name {
		t.Errorf("names %q, %q, %q", name, again, other)
	}

	// A page is body_text, sanitised.
	ex.ResponseHeader = http.Header{"Content-Type": {"text/html"}}
	ex.ResponseBody = []byte(`<p>` + testKey + `</p><img src="https://x.example/i.png?Signature=a&Expires=2&w=1">`)
	_, contents, err = s.Fixture(ex)
	if err != nil {
		t.Fatal(err)
	}
	fx = Fixture{}
	_ = json.Unmarshal(contents, &fx)
	if fx.Response.BodyText == nil || *fx.Response.BodyText != `<p>REDACTED</p><img src="https://x.example/i.png?w=1">` {
		t.Errorf("page:\n%s", contents)
	}

	// A fixture always loads.
	srv := New()
	if err := srv.Add("p", name, fx); err != nil {
		t.Errorf("recorded fixture does not load: %v", err)
	}
}

func TestRelativePathAndSlug(t *testing.T) {
	for _, c := range []struct{ base, u, want string }{
		{"https://api.example", "https://api.example/v1/x", "/v1/x"},
		{"http://127.0.0.1:9/harvestapi", "http://127.0.0.1:9/harvestapi/linkedin/geo", "/linkedin/geo"},
		{"http://127.0.0.1:9/harvestapi/", "http://127.0.0.1:9/harvestapi", "/"},
		{"https://www.site.com", "https://www.site.de/s/k", "/s/k"},
		{"https://h/api", "https://h/apix/y", "/apix/y"},
	} {
		u, _ := url.Parse(c.u)
		if got := relativePath(c.base, u); got != c.want {
			t.Errorf("relativePath(%s, %s) = %s, want %s", c.base, c.u, got, c.want)
		}
	}
	if slug("/") != "root" || slug("/V1/Extract") != "v1-extract" || len(slug("/"+strings.Repeat("a", 80))) != 48 {
		t.Error("slug")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
