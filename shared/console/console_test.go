package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/store"
)

func (b *billed) consoleDo(method, target, body string, headers ...string) response {
	b.t.Helper()
	req := httptest.NewRequest(method, "http://api.test"+target, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.p.ServeHTTP(rec, req)
	res := response{code: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	res.body = decode(b.t.(*testing.T), rec.Body.String())
	return res
}

func (b *billed) asOwner(method, target, body string) response {
	return b.consoleDo(method, target, body, "authorization", "Bearer "+b.console)
}

func TestConsoleAuthentication(t *testing.T) {
	b := newBilled(t, 10, nil)
	if r := b.consoleDo("GET", "/console/overview", ""); r.code != 401 || r.details()["reason"] != "missing_console_token" {
		t.Errorf("no token: %d %s", r.code, r.raw)
	}
	if r := b.consoleDo("GET", "/console/overview", "", "authorization", "Bearer mc_nope"); r.code != 401 || r.details()["reason"] != "invalid_console_token" {
		t.Errorf("bad token: %d %s", r.code, r.raw)
	}
	if r := b.consoleDo("GET", "/console/overview", "", "authorization", "Bearer "+b.key); r.code != 401 {
		t.Errorf("an API key is not a console token: %d", r.code)
	}
	if r := b.asOwner("GET", "/console/nothing", ""); r.code != 404 || r.errorType() != "ENDPOINT_NOT_FOUND" {
		t.Errorf("unknown console path: %d", r.code)
	}
}

func TestConsoleOverviewCreatesTheFirstKeyOnce(t *testing.T) {
	b := newBilled(t, 10, nil)
	acct, token, err := auth.CreateAccount(t.Context(), b.store, 50, "req_open")
	if err != nil {
		t.Fatal(err)
	}
	b.console = token
	r := b.asOwner("GET", "/console/overview", "")
	nk, ok := r.body["new_key"].(map[string]any)
	if r.code != 200 || !ok || r.body["account_id"] != acct.ID || r.body["credits_remaining"] != float64(50) {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	key := nk["key"].(string)
	if len(key) != 46 || !strings.HasPrefix(key, "mn_") {
		t.Fatalf("key %q", key)
	}
	if got := b.do("GET", "/v1/credits/balance", "x-api-key", key); got.code != 200 {
		t.Errorf("the new key works at once: %d", got.code)
	}
	r = b.asOwner("GET", "/console/overview", "")
	if _, again := r.body["new_key"]; again || strings.Contains(r.raw, key[3:]) {
		t.Errorf("the key is shown once: %s", r.raw)
	}
	if keys := r.body["keys"].([]any); len(keys) != 1 || keys[0].(map[string]any)["prefix"] != key[:7] || keys[0].(map[string]any)["last4"] != key[42:] {
		t.Errorf("keys %v", keys)
	}
}

func TestConsoleKeyLifecycle(t *testing.T) { testConsoleKeyLifecycle(t, newBilled) }

func testConsoleKeyLifecycle(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil)
	r := b.asOwner("POST", "/console/keys", `{"name":"ci","credit_limit":30}`)
	if r.code != 201 || r.body["name"] != "ci" || r.body["credit_limit"] != float64(30) || r.body["status"] != "active" ||
		r.body["credits_used"] != float64(0) || r.body["id"] == nil || r.body["prefix"] == nil || r.body["last4"] == nil {
		t.Fatalf("create: %d %s", r.code, r.raw)
	}
	id, key := r.body["id"].(string), r.body["key"].(string)
	if list := b.asOwner("GET", "/console/keys", ""); strings.Contains(list.raw, key[3:]) || list.body["count"] != float64(2) {
		t.Errorf("the list never shows a full key: %s", list.raw)
	}
	use := func() int { return b.do("GET", "/v1/credits/balance", "x-api-key", key).code }
	if use() != 200 {
		t.Fatal("new key")
	}
	if r := b.asOwner("POST", "/console/keys/"+id+"/revoke", ""); r.code != 200 || r.body["status"] != "revoked" {
		t.Fatalf("revoke: %s", r.raw)
	}
	if got := b.do("GET", "/v1/credits/balance", "x-api-key", key); got.code != 401 || got.details()["reason"] != "invalid_api_key" {
		t.Errorf("revocation applies on the very next request: %d", got.code)
	}
	if r := b.asOwner("POST", "/console/keys/"+id+"/reactivate", ""); r.code != 200 || r.body["status"] != "active" || use() != 200 {
		t.Errorf("reactivate: %s", r.raw)
	}
	if r := b.asOwner("PATCH", "/console/keys/"+id, `{"name":"renamed"}`); r.code != 200 || r.body["name"] != "renamed" || r.body["credit_limit"] != float64(30) {
		t.Errorf("rename keeps the limit: %s", r.raw)
	}
	if r := b.asOwner("PATCH", "/console/keys/"+id, `{"credit_limit":null}`); r.code != 200 || r.body["credit_limit"] != nil {
		t.Errorf("uncap: %s", r.raw)
	}
	if r := b.asOwner("DELETE", "/console/keys/"+id, ""); r.code != 200 || r.body["status"] != "deleted" || use() != 401 {
		t.Errorf("delete: %s", r.raw)
	}
	if r := b.asOwner("POST", "/console/keys/"+id+"/reactivate", ""); r.code != 404 || r.errorType() != "RESOURCE_NOT_FOUND" {
		t.Errorf("no undo after delete: %d %s", r.code, r.raw)
	}
	if list := b.asOwner("GET", "/console/keys", ""); list.body["count"] != float64(1) {
		t.Errorf("a deleted key disappears: %s", list.raw)
	}
	if r := b.asOwner("POST", "/console/keys/key_unknown/revoke", ""); r.code != 404 {
		t.Errorf("unknown key: %d", r.code)
	}
}

func TestConsoleFiveKeyCapAndBadBodies(t *testing.T) { testConsoleFiveKeyCapAndBadBodies(t, newBilled) }

func testConsoleFiveKeyCapAndBadBodies(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 100, nil) // holds one key already
	for i := 0; i < 4; i++ {
		if r := b.asOwner("POST", "/console/keys", `{"name":"k"}`); r.code != 201 {
			t.Fatalf("key %d: %s", i+2, r.raw)
		}
	}
	r := b.asOwner("POST", "/console/keys", `{}`)
	if r.code != http.StatusConflict || r.errorType() != "INVALID_PARAMETERS" || r.details()["reason"] != "active_key_limit" || r.details()["max"] != float64(5) {
		t.Fatalf("sixth key: %d %s", r.code, r.raw)
	}
	checkEnvelope(t, r)
	for body, status := range map[string]int{
		`{"name":`:              400,
		`{"nme":"x"}`:           400,
		`[]`:                    400,
		`{"credit_limit":-1}`:   422,
		`{"credit_limit":1.5}`:  422,
		`{"credit_limit":"10"}`: 422,
		`{"name":"` + strings.Repeat("n", 101) + `"}`: 422,
	} {
		if r := b.asOwner("PATCH", "/console/keys/"+b.keyRec.ID, body); r.code != status {
			t.Errorf("%s: %d, want %d", body, r.code, status)
		}
	}
}

func TestAdminAPI(t *testing.T) {
	off := newBilled(t, 10, nil)
	if r := off.consoleDo("POST", "/admin/accounts", `{"credits":5}`, "x-admin-token", "anything"); r.code != 404 {
		t.Errorf("disabled without MERIDIAN_ADMIN_TOKEN: %d", r.code)
	}
	b := newBilled(t, 10, nil, func(c *Config) { c.AdminToken = "operator-secret" })
	if r := b.consoleDo("POST", "/admin/accounts", `{"credits":5}`); r.code != 401 || r.details()["reason"] != "missing_admin_token" {
		t.Errorf("no token: %d %s", r.code, r.raw)
	}
	if r := b.consoleDo("POST", "/admin/accounts", `{"credits":5}`, "x-admin-token", "wrong"); r.code != 401 {
		t.Errorf("wrong token: %d", r.code)
	}
	admin := func(method, target, body string) response {
		return b.consoleDo(method, target, body, "x-admin-token", "operator-secret")
	}
	r := admin("POST", "/admin/accounts", `{"credits":250}`)
	if r.code != 201 || r.body["account_id"] == nil || !strings.HasPrefix(r.body["console_token"].(string), auth.ConsoleTokenPrefix) {
		t.Fatalf("create: %d %s", r.code, r.raw)
	}
	id := r.body["account_id"].(string)
	b.console = r.body["console_token"].(string)
	if ov := b.asOwner("GET", "/console/overview", ""); ov.code != 200 || ov.body["credits_remaining"] != float64(250) {
		t.Errorf("the new console token works: %s", ov.raw)
	}
	r = admin("POST", "/admin/accounts/"+id+"/credits", `{"amount":50,"note":"welcome"}`)
	if r.code != 200 || r.body["credits_remaining"] != float64(300) {
		t.Fatalf("grant: %d %s", r.code, r.raw)
	}
	page, _ := b.store.Ledger(t.Context(), id, storeQuery(10))
	if len(page.Entries) != 2 || page.Entries[0].Note != "welcome" || page.Entries[0].RequestID != r.header.Get("x-request-id") ||
		page.Entries[1].RequestID == "" {
		t.Errorf("grant entries name their requests: %+v", page.Entries)
	}
	for target, body := range map[string]string{
		"/admin/accounts":                    `{"credits":-1}`,
		"/admin/accounts/" + id + "/credits": `{"amount":0}`,
	} {
		if r := admin("POST", target, body); r.code != 422 {
			t.Errorf("%s %s: %d", target, body, r.code)
		}
	}
	if r := admin("POST", "/admin/accounts/acct_missing/credits", `{"amount":5}`); r.code != 404 || r.errorType() != "RESOURCE_NOT_FOUND" {
		t.Errorf("unknown account: %d", r.code)
	}
	if r := admin("GET", "/admin/accounts", ""); r.code != 404 {
		t.Errorf("unknown admin operation: %d", r.code)
	}
}

func TestConsoleFirstKeyIsCreatedOnceUnderConcurrency(t *testing.T) {
	testConsoleFirstKeyIsCreatedOnceUnderConcurrency(t, newBilled)
}

func testConsoleFirstKeyIsCreatedOnceUnderConcurrency(t *testing.T, newBilled billedFactory) {
	b := newBilled(t, 10, nil)
	_, token, err := auth.CreateAccount(t.Context(), b.store, 5, "req_open")
	if err != nil {
		t.Fatal(err)
	}
	b.console = token
	var revealed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := b.asOwner("GET", "/console/overview", "")
			if r.code != 200 || len(r.body["keys"].([]any)) != 1 {
				t.Errorf("%d %s", r.code, r.raw)
			}
			if _, ok := r.body["new_key"]; ok {
				revealed.Add(1)
			}
		}()
	}
	wg.Wait()
	if revealed.Load() != 1 {
		t.Fatalf("the first key was revealed %d times", revealed.Load())
	}
	id := b.asOwner("GET", "/console/keys", "").body["items"].([]any)[0].(map[string]any)["id"].(string)
	b.asOwner("DELETE", "/console/keys/"+id, "")
	r := b.asOwner("GET", "/console/overview", "")
	if _, ok := r.body["new_key"]; ok || len(r.body["keys"].([]any)) != 0 {
		t.Errorf("deleting every key does not bring one back: %s", r.raw)
	}
}

func TestAdminGrantCeiling(t *testing.T) {
	b := newBilled(t, 10, nil, func(c *Config) { c.AdminToken = "op" })
	r := b.consoleDo("POST", "/admin/accounts/"+b.account.ID+"/credits", `{"amount":9223372036854775807}`, "x-admin-token", "op")
	if r.code != 422 || r.details()["field"] != "amount" {
		t.Fatalf("%d %s", r.code, r.raw)
	}
	if a, _ := b.store.Account(t.Context(), b.account.ID); a.CreditsRemaining != 10 {
		t.Errorf("balance %d", a.CreditsRemaining)
	}
	if r := b.consoleDo("POST", "/admin/accounts", `{"credits":1} ]`, "x-admin-token", "op"); r.code != 400 {
		t.Errorf("trailing data: %d", r.code)
	}
}

func TestOperatorAndConsolePostsAreIdempotent(t *testing.T) {
	testOperatorAndConsolePostsAreIdempotent(t, newBilled)
}

// testOperatorAndConsolePostsAreIdempotent: an operator or account owner
// retrying a POST after a timeout, with the same Idempotency-Key, gets the
// first answer again and nothing happens twice (spec 3.2's rules).
func testOperatorAndConsolePostsAreIdempotent(t *testing.T, newBilled billedFactory) {
	ctx := t.Context()
	b := newBilled(t, 10, nil, func(c *Config) { c.AdminToken = "operator-secret" })
	admin := func(target, body, key string) response {
		return b.consoleDo("POST", target, body, "x-admin-token", b.surface.cfg.AdminToken, "idempotency-key", key)
	}
	grant := "/admin/accounts/" + b.account.ID + "/credits"
	first := admin(grant, `{"amount":50,"note":"welcome"}`, "grant-1")
	if first.code != 200 || first.body["credits_remaining"] != float64(60) {
		t.Fatalf("grant: %d %s", first.code, first.raw)
	}
	// The same request, spelled differently, replays; the balance moved once.
	again := admin(grant, `{ "note": "welcome", "amount": 50 }`, "grant-1")
	if again.code != 200 || again.raw != first.raw || again.header.Get("x-idempotent-replay") != "true" ||
		again.header.Get("x-request-id") != first.header.Get("x-request-id") {
		t.Fatalf("retry: %d %v %s", again.code, again.header, again.raw)
	}
	if a, _ := b.store.Account(ctx, b.account.ID); a.CreditsRemaining != 60 {
		t.Fatalf("granted twice: %d", a.CreditsRemaining)
	}
	grants := 0
	for _, e := range b.entries(t, "") {
		if e.Type == store.EntryGrant && e.Amount == 50 {
			grants++
		}
	}
	if grants != 1 {
		t.Fatalf("%d grant entries", grants)
	}
	if r := admin(grant, `{"amount":51,"note":"welcome"}`, "grant-1"); r.code != 422 || r.details()["reason"] != "idempotency_key_reused" {
		t.Errorf("another grant with the same key: %d %s", r.code, r.raw)
	}
	if r := admin(grant, `{"amount":50,"note":"welcome"}`, strings.Repeat("k", 256)); r.code != 422 || r.details()["field"] != "Idempotency-Key" {
		t.Errorf("a 256-character key: %d %s", r.code, r.raw)
	}
	// Without a key, every POST is its own.
	for i := 0; i < 2; i++ {
		b.consoleDo("POST", grant, `{"amount":5}`, "x-admin-token", "operator-secret")
	}
	if a, _ := b.store.Account(ctx, b.account.ID); a.CreditsRemaining != 70 {
		t.Fatalf("two grants without a key: %d", a.CreditsRemaining)
	}

	// Account creation: the retry gets the same account and console token.
	created := admin("/admin/accounts", `{"credits":25}`, "open-1")
	if created.code != 201 {
		t.Fatalf("create: %d %s", created.code, created.raw)
	}
	if r := admin("/admin/accounts", `{"credits":25}`, "open-1"); r.code != 201 || r.raw != created.raw {
		t.Fatalf("create retried: %d %s", r.code, r.raw)
	}
	// The kept answer reveals the token only to a retry with the operator
	// token: the record holds it sealed, and a rotated operator token
	// cannot open it.
	rec, claimed, err := b.store.(store.Idempotency).ClaimIdempotency(ctx, operatorScope, digest("open-1"), "probe", "req_probe",
		b.clock.Now(), b.clock.Now().Add(time.Minute), b.clock.Now().Add(time.Hour))
	if err != nil || claimed || rec.State != store.IdemStored {
		t.Fatalf("record: %v %v %+v", err, claimed, rec)
	}
	token := created.body["console_token"].(string)
	if _, err := decompress(rec.Body); err == nil || strings.Contains(string(rec.Body), token) {
		t.Fatal("the stored answer is readable without the operator token")
	}
	b.surface.cfg.AdminToken = "rotated-secret"
	if r := admin("/admin/accounts", `{"credits":25}`, "open-1"); r.code != 422 || r.details()["reason"] != "idempotency_result_not_kept" {
		t.Errorf("replay under another operator token: %d %s", r.code, r.raw)
	}

	// Console: a key created once, however often the owner retries.
	owner := func(method, target, body, key string) response {
		return b.consoleDo(method, target, body, "authorization", "Bearer "+b.console, "idempotency-key", key)
	}
	k := owner("POST", "/console/keys", `{"name":"ci"}`, "key-1")
	if k.code != 201 || k.body["key"] == nil {
		t.Fatalf("create key: %d %s", k.code, k.raw)
	}
	if r := owner("POST", "/console/keys", `{"name":"ci"}`, "key-1"); r.code != 201 || r.raw != k.raw || r.header.Get("x-idempotent-replay") != "true" {
		t.Fatalf("create key retried: %d %s", r.code, r.raw)
	}
	if list := b.asOwner("GET", "/console/keys", ""); list.body["count"] != float64(2) {
		t.Errorf("one key created: %s", list.raw)
	}
	revoke := "/console/keys/" + k.body["id"].(string) + "/revoke"
	if r := owner("POST", revoke, "", "revoke-1"); r.code != 200 || r.body["status"] != "revoked" {
		t.Fatalf("revoke: %d %s", r.code, r.raw)
	}
	if r := owner("POST", revoke, "", "revoke-1"); r.code != 200 || r.header.Get("x-idempotent-replay") != "true" {
		t.Errorf("revoke retried: %d %v", r.code, r.header)
	}
	// A key is the account's: the same key for another request is 422.
	if r := owner("POST", "/console/keys", `{"name":"other"}`, "revoke-1"); r.code != 422 || r.details()["reason"] != "idempotency_key_reused" {
		t.Errorf("another console request with the same key: %d %s", r.code, r.raw)
	}
}
