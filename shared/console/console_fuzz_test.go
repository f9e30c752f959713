package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope/envelopetest"
	"github.com/meridian-data/meridian/shared/store"
)

// The console operations FuzzConsoleBodies sends a body to (op % len).
const (
	opSignIn = iota
	opCreateKey
	opUpdateKey
	opUpdateMissingKey
	opCreateAccount
	opGrant
	consoleOps
)

// Placeholders a fuzzed body may hold, replaced before it is sent so that
// inputs can reach the paths a real secret opens.
const (
	tokenPlaceholder   = "{{token}}"
	accountPlaceholder = "{{account}}"
)

// consoleState is what a console change may touch: the account's listed
// keys (id to the fields the console edits) and its balance.
type consoleState struct {
	keys    map[string]keyState
	balance int64
}

type keyState struct {
	name   string
	status store.KeyStatus
	limit  string // "" uncapped, else the limit
	hash   string
}

func (e *fuzzEnv) state(t *testing.T) consoleState {
	t.Helper()
	keys, err := e.store.Keys(context.Background(), e.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := consoleState{keys: map[string]keyState{}, balance: e.balance(t)}
	for _, k := range keys {
		limit := ""
		if k.CreditLimit != nil {
			limit = fmt.Sprint(*k.CreditLimit)
		}
		s.keys[k.ID] = keyState{k.Name, k.Status, limit, k.Hash}
	}
	return s
}

func (s consoleState) active() int {
	n := 0
	for _, k := range s.keys {
		if k.status == store.KeyActive {
			n++
		}
	}
	return n
}

// maxKeyRows is how many keys an account collects (deleted keys stay
// stored) before the fuzzer moves to a fresh one, so that listing keys
// stays quick however long it runs.
const maxKeyRows = 200

// arrange puts the account in a known state before an input runs: the
// anchor key (env.keyRec) revoked, named "anchor" and uncapped, and
// exactly active other keys active. full maps the ids of the account's
// keys to the full keys, which no answer may show; rows counts the keys
// the account ever had.
func (e *fuzzEnv) arrange(t *testing.T, active int, full map[string]string, rows *int) {
	t.Helper()
	ctx := context.Background()
	if *rows >= maxKeyRows {
		e.openAccount(t)
		clear(full)
		full[e.keyRec.ID], *rows = e.key, 1
	}
	keys, err := e.store.Keys(ctx, e.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if k.ID == e.keyRec.ID {
			if name := "anchor"; k.Name != name || k.CreditLimit != nil {
				if _, err := e.store.UpdateKey(ctx, e.account.ID, k.ID, store.KeyChange{Name: &name, SetLimit: true}); err != nil {
					t.Fatal(err)
				}
			}
			if k.Status != store.KeyRevoked {
				if _, err := e.store.SetKeyStatus(ctx, e.account.ID, k.ID, store.KeyRevoked); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if k.Status == store.KeyActive {
			if n++; n > active {
				if _, err := e.store.SetKeyStatus(ctx, e.account.ID, k.ID, store.KeyDeleted); err != nil {
					t.Fatal(err)
				}
				delete(full, k.ID)
			}
		}
	}
	for ; n < active; n++ {
		key, k := auth.NewKey(e.account.ID, "filler", nil)
		created, err := e.store.CreateKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		full[created.ID] = key
		*rows++
	}
}

// FuzzConsoleBodies sends arbitrary JSON bodies to the console's and the
// operator's changes: sign-in (POST /console/session), key creation (POST
// /console/keys), key edits (PATCH /console/keys/{id}, of a key that
// exists and of one that does not), account creation (POST
// /admin/accounts) and grants (POST /admin/accounts/{id}/credits), with
// the account holding 0 to 5 active keys. Whatever the body: no 5xx (a
// panic would be one); a refusal is a typed 4xx envelope and changes
// neither the key list nor the balance; an accepted creation adds exactly
// one key and never a sixth active one; an accepted edit changes only its
// key; and no answer shows a full API key, a key's hash, the console
// token or the operator token, except the creation's own new key.
func FuzzConsoleBodies(f *testing.F) {
	bodies := map[int][]string{
		opSignIn: {
			`{"token":"{{token}}"}`, `{"token":"  {{token}}\n"}`, `{"token":"mc_wrong"}`, `{"token":""}`, `{}`, ``,
			`{"token":null}`, `{"token":1}`, `{"token":["{{token}}"]}`, `{"token":"{{token}}","extra":1}`,
			`{"token":"{{token}}"} {"token":"{{token}}"}`, `{"token":"{{token}}","token":"mc_wrong"}`,
			"{\"token\":\"mc_\xff\xfe\"}", `{"token":"{{token}}\u0000"}`, `null`, `[]`, `"{{token}}"`,
		},
		opCreateKey: {
			`{"name":"ci","credit_limit":30}`, `{"name":"ci"}`, `{}`, ``, `{"credit_limit":null}`, `{"credit_limit":0}`,
			`{"credit_limit":-1}`, `{"credit_limit":1.5}`, `{"credit_limit":1e3}`, `{"credit_limit":"10"}`,
			`{"credit_limit":9223372036854775807}`, `{"credit_limit":9223372036854775808}`, `{"credit_limit":-0}`,
			`{"name":"` + strings.Repeat("n", 100) + `"}`, `{"name":"` + strings.Repeat("n", 101) + `"}`,
			`{"name":"` + strings.Repeat("é", 100) + `"}`, `{"name":"tab\there"}`, `{"name":"nul\u0000"}`, `{"name":"  padded  "}`,
			`{"name":"a","name":"b"}`, `{"name":null,"credit_limit":5}`, `{"name":1}`, `{"name":"ci","key":"mn_x"}`,
			"{\"name\":\"\xc3\x28\"}", `{"name":"ci"}]`, `{"name":"ci"}{"name":"again"}`, `null`, `[]`, `"ci"`,
			`{"name":"` + strings.Repeat("x", maxConsoleBody) + `"}`,
		},
		opCreateAccount: {
			`{"credits":5}`, `{"credits":0}`, `{"credits":-1}`, `{"credits":1000000000000000000}`, `{"credits":1000000000000000001}`,
			`{"credits":1} ]`, `{"credits":"5"}`, `{"credits":null}`, `{}`, ``, `{"credits":5,"account_id":"{{account}}"}`,
		},
		opGrant: {
			`{"amount":50,"note":"welcome"}`, `{"amount":1}`, `{"amount":0}`, `{"amount":-5}`, `{"amount":9223372036854775807}`,
			`{"amount":999000000000000000}`, `{"amount":5,"note":null}`, `{"amount":5,"note":"` + strings.Repeat("n", 501) + `"}`,
			`{"amount":5,"note":"` + strings.Repeat("é", 500) + `"}`, `{"amount":"5"}`, `{"amount":5.5}`, `{"note":"no amount"}`,
			`{"amount":5,"account_id":"{{account}}"}`, ``,
		},
	}
	bodies[opUpdateKey] = bodies[opCreateKey]
	bodies[opUpdateMissingKey] = bodies[opCreateKey][:4]
	for op := range consoleOps {
		for i, b := range bodies[op] {
			f.Add(uint8(op), uint8(i), b)
		}
	}
	for active := range store.MaxActiveKeys + 1 {
		f.Add(uint8(opCreateKey), uint8(active), `{"name":"at the cap"}`)
	}

	env := newFuzzEnv(f)
	full, rows := map[string]string{env.keyRec.ID: env.key}, 1
	f.Fuzz(func(t *testing.T, op, active uint8, body string) {
		op %= consoleOps
		env.arrange(t, int(active)%(store.MaxActiveKeys+1), full, &rows)
		body = strings.ReplaceAll(body, tokenPlaceholder, env.console)
		body = strings.ReplaceAll(body, accountPlaceholder, env.account.ID)
		var method, target string
		headers := []string{"authorization", "Bearer " + env.console}
		switch op {
		case opSignIn:
			method, target, headers = "POST", "/console/session", []string{"content-type", "application/json"}
		case opCreateKey:
			method, target = "POST", "/console/keys"
		case opUpdateKey:
			method, target = "PATCH", "/console/keys/"+env.keyRec.ID
		case opUpdateMissingKey:
			method, target = "PATCH", "/console/keys/key_missing"
		case opCreateAccount:
			method, target, headers = "POST", "/admin/accounts", []string{"x-admin-token", env.admin}
		case opGrant:
			method, target, headers = "POST", "/admin/accounts/"+env.account.ID+"/credits", []string{"x-admin-token", env.admin}
		}
		before := env.state(t)
		rec := env.serve(method, target, []byte(body), headers...)
		after := env.state(t)
		raw := rec.Body.Bytes()
		what := fmt.Sprintf("%s %s %.200q: HTTP %d", method, target, body, rec.Code)
		if !strings.HasPrefix(rec.Header().Get("content-type"), "application/json") || !json.Valid(raw) {
			t.Fatalf("%s: the answer is not JSON: %.500s", what, raw)
		}
		if rec.Code >= 500 {
			t.Fatalf("%s: %.500s", what, raw)
		}
		if after.active() > store.MaxActiveKeys {
			t.Fatalf("%s: %d active keys", what, after.active())
		}

		// Secrets: no answer shows one, but a creation shows its new key.
		newKey := ""
		if op == opCreateKey && rec.Code == http.StatusCreated {
			newKey = checkCreatedKey(t, what, raw, before, after)
			full[keyID(raw)] = newKey
			rows++
		}
		secrets := []string{env.console, env.admin}
		for id, key := range full {
			if key != newKey {
				secrets = append(secrets, key, key[3:])
			}
			if k, ok := after.keys[id]; ok {
				secrets = append(secrets, k.hash)
			}
		}
		for _, s := range secrets {
			if bytes.Contains(raw, []byte(s)) {
				t.Fatalf("%s: the answer shows a secret: %.500s", what, raw)
			}
		}

		if rec.Code >= 400 {
			fail, err := envelopetest.TypedFailure(rec.Code, raw)
			if err != nil {
				t.Fatalf("%s: %v: %.500s", what, err, raw)
			}
			if fail.RequestID != rec.Header().Get("x-request-id") {
				t.Fatalf("%s: request_id %q, header %q", what, fail.RequestID, rec.Header().Get("x-request-id"))
			}
			if !maps.Equal(before.keys, after.keys) || before.balance != after.balance {
				t.Fatalf("%s: a refusal changed something: keys %v -> %v, balance %d -> %d",
					what, before.keys, after.keys, before.balance, after.balance)
			}
			return
		}
		switch op {
		case opSignIn:
			if strings.TrimSpace(jsonString(t, body, "token")) != env.console {
				t.Fatalf("%s: signed in without the console token: %.300s", what, raw)
			}
			fallthrough
		case opCreateAccount:
			if !maps.Equal(before.keys, after.keys) || before.balance != after.balance {
				t.Fatalf("%s: changed the account's keys or balance", what)
			}
		case opUpdateKey:
			checkUpdatedKey(t, what, raw, env.keyRec.ID, before, after)
		case opGrant:
			var got struct {
				CreditsRemaining *int64 `json:"credits_remaining"`
			}
			if err := json.Unmarshal(raw, &got); err != nil || got.CreditsRemaining == nil || *got.CreditsRemaining != after.balance ||
				after.balance <= before.balance || after.balance > store.MaxCredits || !maps.Equal(before.keys, after.keys) {
				t.Fatalf("%s: balance %d -> %d, answer %.300s", what, before.balance, after.balance, raw)
			}
		case opCreateKey:
			// checked above
		default:
			t.Fatalf("%s: accepted: %.300s", what, raw)
		}
	})
}

// checkCreatedKey checks an accepted creation: one more key, active, the
// one the answer shows in full (once), where there was room for it; it
// returns the full key.
func checkCreatedKey(t *testing.T, what string, raw []byte, before, after consoleState) string {
	t.Helper()
	var view struct {
		ID     string `json:"id"`
		Key    string `json:"key"`
		Prefix string `json:"prefix"`
		Last4  string `json:"last4"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &view); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if before.active() >= store.MaxActiveKeys {
		t.Fatalf("%s: a key was created past the cap of %d", what, store.MaxActiveKeys)
	}
	if len(after.keys) != len(before.keys)+1 || after.active() != before.active()+1 {
		t.Fatalf("%s: %d keys (%d active) became %d (%d active)", what, len(before.keys), before.active(), len(after.keys), after.active())
	}
	if _, existed := before.keys[view.ID]; existed {
		t.Fatalf("%s: the new key's id %q existed", what, view.ID)
	}
	k, ok := after.keys[view.ID]
	if !ok || k.status != store.KeyActive || view.Status != string(store.KeyActive) {
		t.Fatalf("%s: the new key %q is not listed active", what, view.ID)
	}
	if len(view.Key) != 46 || !strings.HasPrefix(view.Key, "mn_") || view.Prefix != view.Key[:7] || view.Last4 != view.Key[42:] ||
		auth.Hash(view.Key) != k.hash || bytes.Count(raw, []byte(view.Key[3:])) != 1 {
		t.Fatalf("%s: the full key is shown once and is the stored one: %.300s", what, raw)
	}
	for id, old := range before.keys {
		if after.keys[id] != old {
			t.Fatalf("%s: key %s changed", what, id)
		}
	}
	return view.Key
}

// checkUpdatedKey checks an accepted edit: the key set, the other keys and
// the target's status are as they were.
func checkUpdatedKey(t *testing.T, what string, raw []byte, id string, before, after consoleState) {
	t.Helper()
	if len(before.keys) != len(after.keys) {
		t.Fatalf("%s: an edit changed the number of keys", what)
	}
	for kid, old := range before.keys {
		now, ok := after.keys[kid]
		switch {
		case !ok:
			t.Fatalf("%s: key %s disappeared", what, kid)
		case kid != id && now != old:
			t.Fatalf("%s: key %s changed by an edit of %s", what, kid, id)
		case kid == id && (now.status != old.status || now.hash != old.hash):
			t.Fatalf("%s: the edit changed the key's status or hash", what)
		}
	}
	if keyID(raw) != id || before.balance != after.balance {
		t.Fatalf("%s: answered for key %q; balance %d -> %d", what, keyID(raw), before.balance, after.balance)
	}
}

func keyID(raw []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.ID
}

// jsonString is a string field of an accepted body.
func jsonString(t *testing.T, body, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("an accepted body does not decode: %v", err)
	}
	s, _ := m[field].(string)
	return s
}

// fuzzEnv is what FuzzConsoleBodies runs against: the console served by
// the real pipeline over the embedded store (in a temporary folder), one
// funded account with a key, and an operator token. bbolt syncs every
// write to disk, which bounds the fuzzer's pace: with TMPDIR=/dev/shm
// (tmpfs) it runs many times faster.
type fuzzEnv struct {
	*billed
	admin string // the operator token
}

// fuzzCredits is the balance the fuzzer's accounts open with.
const fuzzCredits = 1_000_000_000

func newFuzzEnv(tb testing.TB) *fuzzEnv {
	tb.Helper()
	env := &fuzzEnv{admin: "fuzz-operator-token"}
	env.billed = newBilledOn(tb, openEmbedded(tb), fuzzCredits, nil, func(c *Config) { c.AdminToken = env.admin })
	return env
}

// openAccount opens the funded account with its key that the fuzzer uses
// from then on.
func (e *fuzzEnv) openAccount(tb testing.TB) { e.open(tb, fuzzCredits, nil) }

// balance is the account's balance as the store holds it.
func (e *fuzzEnv) balance(t *testing.T) int64 {
	t.Helper()
	a, err := e.store.Account(context.Background(), e.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a.CreditsRemaining
}

// serve runs one request through the pipeline.
func (e *fuzzEnv) serve(method, target string, body []byte, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://api.test"+target, bytes.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	e.p.ServeHTTP(rec, req)
	return rec
}
