package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// browser is a console page's view of the API: its session cookie, the
// CSRF token the session gave it, and the headers a browser adds.
type browser struct {
	b      *billed
	cookie string
	csrf   string
	seen   []string // every response body, to search for secrets
}

type page struct {
	code   int
	header http.Header
	raw    string
}

func (p page) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(p.raw), &m); err != nil {
		t.Fatalf("not JSON (%d): %s", p.code, p.raw)
	}
	return m
}

func (p page) reason(t *testing.T) string {
	e, _ := p.json(t)["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	r, _ := d["reason"].(string)
	return r
}

// do sends a request as the console page would: same origin, the session
// cookie, and the CSRF token on changes. Extra headers override.
func (br *browser) do(method, target, body string, headers ...string) page {
	br.b.t.Helper()
	req := httptest.NewRequest(method, "http://api.test"+target, strings.NewReader(body))
	req.Header.Set("origin", "http://api.test")
	req.Header.Set("sec-fetch-site", "same-origin")
	if body != "" {
		req.Header.Set("content-type", "application/json")
	}
	if br.cookie != "" {
		req.Header.Set("cookie", SessionCookie+"="+br.cookie)
	}
	if method != http.MethodGet && br.csrf != "" {
		req.Header.Set(CSRFHeader, br.csrf)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	rec := httptest.NewRecorder()
	br.b.p.ServeHTTP(rec, req)
	br.seen = append(br.seen, method+" "+target+"\n"+rec.Body.String())
	return page{rec.Code, rec.Header(), rec.Body.String()}
}

// keyPrefix starts every API key (spec 2.6).
const keyPrefix = "mn_"

func signedIn(t *testing.T, b *billed) *browser {
	t.Helper()
	br := &browser{b: b}
	r := br.do("POST", "/console/session", `{"token":"`+b.console+`"}`)
	if r.code != 200 {
		t.Fatalf("sign in: %d %s", r.code, r.raw)
	}
	cookies := (&http.Response{Header: r.header}).Cookies()
	if len(cookies) != 1 || cookies[0].Name != SessionCookie {
		t.Fatalf("cookies %v", r.header.Values("set-cookie"))
	}
	br.cookie, br.csrf = cookies[0].Value, r.json(t)["csrf_token"].(string)
	return br
}

func TestConsolePageIsServedWithItsPolicy(t *testing.T) {
	b := newBilled(t, 10, nil)
	br := &browser{b: b}
	for _, path := range []string{"/console", "/console/"} {
		r := br.do("GET", path, "")
		if r.code != 200 || !strings.HasPrefix(r.header.Get("content-type"), "text/html") || !strings.Contains(r.raw, "Meridian console") {
			t.Fatalf("%s: %d %s", path, r.code, r.header.Get("content-type"))
		}
		if r.header.Get("content-security-policy") != SecurityPolicy || r.header.Get("x-frame-options") != "DENY" ||
			r.header.Get("x-content-type-options") != "nosniff" || r.header.Get("cache-control") != "no-store" {
			t.Errorf("%s headers: %v", path, r.header)
		}
	}
	// Only the page's own files, nothing from another origin.
	if strings.Contains(br.seen[0], "http://") || strings.Contains(br.seen[0], "https://") {
		t.Error("the page loads something from another origin")
	}
	for _, name := range []string{"app.js", "app.css"} {
		r := br.do("GET", "/console/assets/"+name, "")
		if r.code != 200 || r.header.Get("etag") == "" || r.raw == "" {
			t.Fatalf("%s: %d", name, r.code)
		}
		if again := br.do("GET", "/console/assets/"+name, "", "if-none-match", r.header.Get("etag")); again.code != 304 {
			t.Errorf("%s revalidated: %d", name, again.code)
		}
	}
	if ct := br.do("GET", "/console/assets/app.js", "").header.Get("content-type"); !strings.Contains(ct, "javascript") {
		t.Errorf("app.js is %q", ct)
	}
	for _, path := range []string{"/console/assets/nope.js", "/console/assets/index.html", "/console/assets/", "/console/assets/..%2Fconsole.go"} {
		if r := br.do("GET", path, ""); r.code != 404 {
			t.Errorf("%s: %d", path, r.code)
		}
	}
}

func TestConsoleSignInSetsAStrictHttpOnlyCookie(t *testing.T) {
	b := newBilled(t, 10, nil)
	br := &browser{b: b}
	r := br.do("POST", "/console/session", `{"token":"`+b.console+`"}`)
	if r.code != 200 || strings.Contains(r.raw, b.console) {
		t.Fatalf("sign in: %d %s", r.code, r.raw)
	}
	set := r.header.Get("set-cookie")
	for _, want := range []string{SessionCookie + "=" + b.console, "Path=/console", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(set, want) {
			t.Errorf("cookie %q lacks %q", set, want)
		}
	}
	if strings.Contains(set, "Secure") || strings.Contains(set, "Max-Age") || strings.Contains(set, "Expires") {
		t.Errorf("over http, a session cookie: %q", set)
	}
	if body := r.json(t); body["account_id"] != b.account.ID || body["csrf_token"] != csrfToken(b.console) {
		t.Errorf("body %v", body)
	}
	// Behind API Gateway (https), the cookie is Secure.
	r = br.do("POST", "/console/session", `{"token":"`+b.console+`"}`, "x-forwarded-proto", "https", "origin", "")
	if set := r.header.Get("set-cookie"); !strings.Contains(set, "; Secure") {
		t.Errorf("over https: %q", set)
	}

	for name, c := range map[string]struct {
		body    string
		headers []string
		code    int
		reason  string
	}{
		"wrong token":     {`{"token":"mc_nope"}`, nil, 401, "invalid_console_token"},
		"no token":        {`{}`, nil, 422, "missing"},
		"an API key":      {`{"token":"` + b.key + `"}`, nil, 401, "invalid_console_token"},
		"a form post":     {"token=" + b.console, []string{"content-type", "application/x-www-form-urlencoded"}, 400, "malformed_body"},
		"from elsewhere":  {`{"token":"` + b.console + `"}`, []string{"origin", "https://evil.example"}, 401, "cross_site_request"},
		"cross-site mode": {`{"token":"` + b.console + `"}`, []string{"sec-fetch-site", "cross-site", "origin", ""}, 401, "cross_site_request"},
	} {
		r := br.do("POST", "/console/session", c.body, c.headers...)
		if r.code != c.code || r.reason(t) != c.reason || r.header.Get("set-cookie") != "" {
			t.Errorf("%s: %d %s %q", name, r.code, r.raw, r.header.Get("set-cookie"))
		}
	}
}

func TestConsoleSessionCookieAuthenticatesTheAPI(t *testing.T) {
	b := newBilled(t, 10, nil)
	br := signedIn(t, b)
	if r := br.do("GET", "/console/session", ""); r.code != 200 || r.json(t)["csrf_token"] != br.csrf {
		t.Fatalf("session: %d %s", r.code, r.raw)
	}
	if r := br.do("GET", "/console/keys", ""); r.code != 200 || r.header.Get("cache-control") != "no-store" {
		t.Fatalf("keys with the cookie: %d %s", r.code, r.raw)
	}
	r := br.do("POST", "/console/keys", `{"name":"from the page"}`)
	if r.code != 201 {
		t.Fatalf("create with the cookie and the CSRF token: %d %s", r.code, r.raw)
	}
	// A cookie that is not a token: signed out, the cookie cleared.
	stale := &browser{b: b, cookie: "mc_revoked"}
	if r := stale.do("GET", "/console/session", ""); r.code != 401 || !strings.Contains(r.header.Get("set-cookie"), "Max-Age=0") {
		t.Errorf("stale session: %d %q", r.code, r.header.Get("set-cookie"))
	}
	if r := (&browser{b: b}).do("GET", "/console/session", ""); r.code != 401 || r.reason(t) != "missing_console_token" {
		t.Errorf("no session: %d %s", r.code, r.raw)
	}
	// Sign out clears the cookie, and needs the CSRF token too.
	if r := br.do("DELETE", "/console/session", "", CSRFHeader, ""); r.code != 401 || r.header.Get("set-cookie") != "" {
		t.Errorf("forged sign-out: %d", r.code)
	}
	r = br.do("DELETE", "/console/session", "")
	if r.code != 200 || !strings.Contains(r.header.Get("set-cookie"), SessionCookie+"=;") || !strings.Contains(r.header.Get("set-cookie"), "Max-Age=0") {
		t.Errorf("sign out: %d %q", r.code, r.header.Get("set-cookie"))
	}
}

// A page on another site can make the browser send the session cookie; it
// cannot read the CSRF token, and the browser names its origin. Every
// change it forges is refused and changes nothing.
func TestConsoleRefusesForgedCrossSiteChanges(t *testing.T) {
	b := newBilled(t, 10, nil)
	br := signedIn(t, b)
	keyPath := "/console/keys/" + b.keyRec.ID
	forgeries := map[string][]string{
		"no CSRF token":       {CSRFHeader, ""},
		"a wrong CSRF token":  {CSRFHeader, csrfToken("mc_other")},
		"another origin":      {"origin", "https://evil.example"},
		"a cross-site fetch":  {"sec-fetch-site", "cross-site", "origin", ""},
		"a same-site sibling": {"sec-fetch-site", "same-site", "origin", ""},
		"a form post":         {CSRFHeader, "", "content-type", "application/x-www-form-urlencoded", "origin", "https://evil.example"},
	}
	for name, headers := range forgeries {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/console/keys", `{"name":"forged"}`},
			{"PATCH", keyPath, `{"credit_limit":0}`},
			{"POST", keyPath + "/revoke", ""},
			{"DELETE", keyPath, ""},
		} {
			r := br.do(c.method, c.path, c.body, headers...)
			if r.code != 401 || (r.reason(t) != "csrf_token_invalid" && r.reason(t) != "cross_site_request") {
				t.Errorf("%s, %s %s: %d %s", name, c.method, c.path, r.code, r.raw)
			}
		}
	}
	keys := br.do("GET", "/console/keys", "").json(t)
	items := keys["items"].([]any)
	k := items[0].(map[string]any)
	if len(items) != 1 || k["status"] != "active" || k["credit_limit"] != nil {
		t.Errorf("a forged change landed: %v", keys)
	}
	// An API client with the token itself needs no CSRF token.
	if r := b.asOwner("POST", "/console/keys", `{"name":"by the API"}`); r.code != 201 {
		t.Errorf("bearer client: %d %s", r.code, r.raw)
	}
}

func TestConsoleAnotherAccountsKeyIsNotFound(t *testing.T) {
	b := newBilled(t, 10, nil)
	other := newBilled(t, 10, nil)
	br := signedIn(t, b)
	foreign := "/console/keys/" + other.keyRec.ID
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", foreign, `{"name":"mine now"}`},
		{"POST", foreign + "/revoke", ""},
		{"POST", foreign + "/reactivate", ""},
		{"DELETE", foreign, ""},
	} {
		if r := br.do(c.method, c.path, c.body); r.code != 404 || !strings.Contains(r.raw, "RESOURCE_NOT_FOUND") {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.code, r.raw)
		}
	}
	if r := other.call("/v1/credits/balance"); r.code != 200 {
		t.Errorf("the other account's key still works: %d", r.code)
	}
}

// The full key appears in exactly one answer: the one that created it.
func TestConsoleShowsAFullKeyOnlyOnce(t *testing.T) {
	b := newBilled(t, 10, nil, withOutcomes)
	br := signedIn(t, b)
	created := br.do("POST", "/console/keys", `{"name":"once"}`)
	full, _ := created.json(t)["key"].(string)
	if created.code != 201 || !strings.HasPrefix(full, keyPrefix) {
		t.Fatalf("create: %d %s", created.code, created.raw)
	}
	var keyID string
	for _, it := range br.do("GET", "/console/keys", "").json(t)["items"].([]any) {
		if k := it.(map[string]any); k["name"] == "once" {
			keyID = k["id"].(string)
		}
	}
	// Use the key, then visit every page and operation the console has.
	if r := b.consoleDo("GET", "/v1/marketplace_a/search?query=once", "", "x-api-key", full); r.code != 200 {
		t.Fatalf("paid call: %d %s", r.code, r.raw)
	}
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/console/", ""}, {"GET", "/console/assets/app.js", ""}, {"GET", "/console/session", ""},
		{"GET", "/console/overview", ""}, {"GET", "/console/keys", ""}, {"GET", "/console/ledger?limit=100", ""},
		{"GET", "/console/status", ""}, {"PATCH", "/console/keys/" + keyID, `{"name":"renamed","credit_limit":5}`},
		{"POST", "/console/keys/" + keyID + "/revoke", ""}, {"POST", "/console/keys/" + keyID + "/reactivate", ""},
		{"DELETE", "/console/keys/" + keyID, ""}, {"GET", "/console/keys", ""},
	} {
		if r := br.do(c.method, c.path, c.body); r.code >= 300 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.code, r.raw)
		}
	}
	shown := 0
	for _, body := range br.seen {
		if strings.Contains(body, full) {
			shown++
		}
		if strings.Contains(body, full[len(keyPrefix):len(full)-4]) && !strings.Contains(body, full) {
			t.Errorf("part of the key's body appears: %s", body[:min(len(body), 200)])
		}
	}
	if shown != 1 {
		t.Errorf("the full key appeared in %d answers", shown)
	}
}

func TestConsoleLedgerPagesAndFilters(t *testing.T) {
	b := newBilled(t, 100, nil)
	var ids []string
	for range 3 {
		ids = append(ids, b.call("/v1/marketplace_a/search?query=x"+strings.Repeat("y", len(ids))).header.Get("x-request-id"))
	}
	failed := b.call("/v1/marketplace_a/search?query=fail").header.Get("x-request-id")
	br := signedIn(t, b)
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		target := "/console/ledger?limit=2"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		body := br.do("GET", target, "").json(t)
		for _, it := range body["items"].([]any) {
			seen[it.(map[string]any)["id"].(string)] = true
		}
		if body["has_more"] != true {
			break
		}
		cursor = body["cursor"].(string)
		if pages > 10 {
			t.Fatal("no end")
		}
	}
	// grant + 3 debits + the failure's debit and refund
	if len(seen) != 6 {
		t.Errorf("%d entries over the pages", len(seen))
	}
	pair := br.do("GET", "/console/ledger?request_id="+failed, "").json(t)["items"].([]any)
	if len(pair) != 2 || pair[0].(map[string]any)["type"] != "refund" || pair[1].(map[string]any)["type"] != "debit" {
		t.Errorf("the failure's entries: %v", pair)
	}
	// The console's page is /v1/credits/transactions's page.
	api := b.call("/v1/credits/transactions?request_id=" + failed).body["data"].(map[string]any)["items"]
	if mine := br.do("GET", "/console/ledger?request_id="+failed, "").json(t)["items"]; !reflect.DeepEqual(mine, api) {
		t.Errorf("console and API disagree:\n%v\n%v", mine, api)
	}
	for target, reason := range map[string]string{
		"/console/ledger?limit=0":          "out_of_range",
		"/console/ledger?limit=101":        "out_of_range",
		"/console/ledger?request_id=nope":  "invalid_format",
		"/console/ledger?cursor=garbage!!": "invalid_cursor",
	} {
		if r := br.do("GET", target, ""); r.code != 422 || r.reason(t) != reason {
			t.Errorf("%s: %d %s", target, r.code, r.raw)
		}
	}
}

func TestConsoleStatusIsTheAPIsStatus(t *testing.T) {
	b := newBilled(t, 100, nil, withOutcomes)
	b.call("/v1/marketplace_a/search?query=ok")
	br := signedIn(t, b)
	page := br.do("GET", "/console/status", "")
	api := b.call("/v1/status")
	want := api.body["data"].(map[string]any)["platforms"]
	if page.code != 200 || !reflect.DeepEqual(page.json(t)["platforms"], want) {
		t.Errorf("console %d %s\napi %v", page.code, page.raw, want)
	}
}

func TestConsoleUsageAndMonthSpendAreTheAPIs(t *testing.T) {
	b := newBilled(t, 100, nil, withOutcomes)
	for _, q := range []string{"a", "b", "fail"} {
		b.call("/v1/marketplace_a/search?query=" + q)
	}
	br := signedIn(t, b)
	page := br.do("GET", "/console/usage?days=7", "")
	api := b.call("/v1/credits/usage?days=7")
	if page.code != 200 || api.code != 200 || !reflect.DeepEqual(page.json(t), api.body["data"]) {
		t.Fatalf("console %d %s\napi %d %s", page.code, page.raw, api.code, api.raw)
	}
	totals := page.json(t)["totals"].(map[string]any)
	if totals["calls"] != float64(3) || totals["credits"] != float64(6) || totals["errors"] != float64(1) {
		t.Errorf("totals %v", totals)
	}
	if spent := br.do("GET", "/console/overview", "").json(t)["spend_this_month"]; spent != float64(6) {
		t.Errorf("spend this month %v, want the two successes' 6", spent)
	}
	for days, reason := range map[string]string{"0": "out_of_range", "31": "out_of_range", "x": "invalid_type"} {
		if r := br.do("GET", "/console/usage?days="+days, ""); r.code != 422 || r.reason(t) != reason {
			t.Errorf("days=%s: %d %s", days, r.code, r.raw)
		}
	}
	// Without usage figures the overview still answers.
	plain := newBilled(t, 10, nil)
	if r := signedIn(t, plain).do("GET", "/console/overview", ""); r.code != 200 || r.json(t)["spend_this_month"] != nil {
		t.Errorf("overview without outcomes: %d %s", r.code, r.raw)
	}
}
