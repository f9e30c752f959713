package pipeline

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/service"
	"github.com/meridian-data/meridian/shared/store"
)

// The console API (an account's own keys, spec 3.1) and the operator API
// (accounts and grants). Bodies are JSON objects; failures use the error
// envelope of spec 2.2.

// ConsoleTokenPrefix starts every console token.
const ConsoleTokenPrefix = "mc_"

// maxConsoleBody bounds console and admin request bodies.
const maxConsoleBody = 64 << 10

// keyView is a key as the console shows it: never the full key.
type keyView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Prefix      string     `json:"prefix"`
	Last4       string     `json:"last4"`
	Status      string     `json:"status"`
	CreditLimit *int64     `json:"credit_limit"`
	CreditsUsed int64      `json:"credits_used"`
	CreatedAt   time.Time  `json:"created_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
}

func viewOf(k store.Key) keyView {
	return keyView{k.ID, k.Name, k.Prefix, k.Last4, string(k.Status), k.CreditLimit, k.CreditsUsed, k.CreatedAt.UTC(), k.LastUsedAt}
}

// newKeyView is the one response that carries the full key.
type newKeyView struct {
	keyView
	Key string `json:"key"`
}

func (p *Pipeline) serveConsole(x *exchange, path string) {
	if servePage(x, path) {
		return
	}
	if p.cfg.Store == nil {
		x.fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "The console needs a store.", nil))
		return
	}
	if strings.TrimSuffix(path, "/") == "/console/session" {
		p.consoleSession(x)
		return
	}
	token, fromCookie := consoleCredential(x.r)
	if token == "" {
		x.fail(unauthorized("missing_console_token", "Send the console token as Authorization: Bearer, or sign in at /console/."))
		return
	}
	acct, e := p.consoleAccount(x, token)
	if e != nil {
		x.fail(e)
		return
	}
	if fromCookie && !safeMethod(x.r.Method) {
		if e := forged(x.r, token); e != nil {
			x.fail(e)
			return
		}
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(path, "/console"), "/")
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	m := x.r.Method
	finish, handled := p.postIdempotency(x, acct.ID, token)
	if handled {
		return
	}
	if finish != nil {
		x.effect(finish)
	}
	switch {
	case rest == "/overview" && m == http.MethodGet:
		p.consoleOverview(x, acct)
	case rest == "/keys" && m == http.MethodGet:
		p.consoleKeys(x, acct)
	case rest == "/usage" && m == http.MethodGet:
		p.consoleUsage(x, acct)
	case rest == "/ledger" && m == http.MethodGet:
		p.consoleLedger(x, acct)
	case rest == "/status" && m == http.MethodGet:
		p.consoleStatus(x)
	case rest == "/keys" && m == http.MethodPost:
		p.consoleCreateKey(x, acct)
	case len(segs) == 2 && segs[0] == "keys" && m == http.MethodPatch:
		p.consoleUpdateKey(x, acct, segs[1])
	case len(segs) == 2 && segs[0] == "keys" && m == http.MethodDelete:
		p.consoleSetStatus(x, acct, segs[1], store.KeyDeleted)
	case len(segs) == 3 && segs[0] == "keys" && segs[2] == "revoke" && m == http.MethodPost:
		p.consoleSetStatus(x, acct, segs[1], store.KeyRevoked)
	case len(segs) == 3 && segs[0] == "keys" && segs[2] == "reactivate" && m == http.MethodPost:
		p.consoleSetStatus(x, acct, segs[1], store.KeyActive)
	case segs[0] == "monitors" && len(segs) <= 3:
		p.serveConsoleMonitors(x, acct, segs)
	default:
		x.fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "No console operation matches this method and path.",
			map[string]any{"path": auth.ForLog(path, 200), "method": auth.ForLog(m, 16)}))
	}
}

func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

func (p *Pipeline) consoleOverview(x *exchange, acct store.Account) {
	ctx := x.r.Context()
	keys, err := p.cfg.Store.Keys(ctx, acct.ID)
	if err != nil {
		x.fail(p.internal(x, "list keys", err))
		return
	}
	body := map[string]any{
		"account_id":         acct.ID,
		"credits_remaining":  acct.CreditsRemaining,
		"credits_lifetime":   acct.CreditsLifetime,
		"balance_changed_at": acct.BalanceChangedAt.UTC(),
	}
	if acct.KeysCreated == 0 {
		// spec 3.1: the first overview of an account that never had a key
		// creates one, shown once; of concurrent first visits one creates it.
		full, k := auth.NewKey(acct.ID, "default", nil)
		created, err := p.cfg.Store.CreateFirstKey(ctx, k)
		switch {
		case err == nil:
			keys = append(keys, created)
			body["new_key"] = map[string]string{"id": created.ID, "key": full}
		case errors.Is(err, store.ErrHasKeys):
			if keys, err = p.cfg.Store.Keys(ctx, acct.ID); err != nil {
				x.fail(p.internal(x, "list keys", err))
				return
			}
		default:
			x.fail(p.keyError(x, err))
			return
		}
	}
	views := make([]keyView, 0, len(keys))
	for _, k := range keys {
		views = append(views, viewOf(k))
	}
	body["keys"] = views
	body["spend_this_month"] = p.monthSpend(x, acct.ID)
	writeConsole(x, http.StatusOK, body)
}

func (p *Pipeline) consoleKeys(x *exchange, acct store.Account) {
	keys, err := p.cfg.Store.Keys(x.r.Context(), acct.ID)
	if err != nil {
		x.fail(p.internal(x, "list keys", err))
		return
	}
	views := make([]keyView, 0, len(keys))
	for _, k := range keys {
		views = append(views, viewOf(k))
	}
	writeConsole(x, http.StatusOK, map[string]any{"items": views, "count": len(views)})
}

// keyFields is the body of POST /console/keys and PATCH /console/keys/{id}.
// credit_limit distinguishes absent (leave alone) from null (uncapped).
type keyFields struct {
	Name        *string         `json:"name"`
	CreditLimit json.RawMessage `json:"credit_limit"`
}

func (f keyFields) check() (store.KeyChange, *envelope.Error) {
	var c store.KeyChange
	if f.Name != nil {
		name := strings.TrimSpace(*f.Name)
		if utf8.RuneCountInString(name) > 100 || strings.IndexFunc(name, func(r rune) bool { return r < ' ' }) >= 0 {
			return c, fieldError("name", "invalid", "name is at most 100 printable characters.")
		}
		c.Name = &name
	}
	if len(f.CreditLimit) > 0 {
		c.SetLimit = true
		if string(f.CreditLimit) != "null" {
			var limit int64
			if err := json.Unmarshal(f.CreditLimit, &limit); err != nil || limit < 0 {
				return c, fieldError("credit_limit", "invalid", "credit_limit is a whole number of credits, 0 or more, or null for uncapped.")
			}
			c.CreditLimit = &limit
		}
	}
	return c, nil
}

// readKeyFields reads and checks a key body, answering the refusal itself.
func readKeyFields(x *exchange) (store.KeyChange, bool) {
	var f keyFields
	e := readJSON(x.r, &f)
	var change store.KeyChange
	if e == nil {
		change, e = f.check()
	}
	if e != nil {
		x.fail(e)
		return change, false
	}
	return change, true
}

func (p *Pipeline) consoleCreateKey(x *exchange, acct store.Account) {
	change, ok := readKeyFields(x)
	if !ok {
		return
	}
	name := ""
	if change.Name != nil {
		name = *change.Name
	}
	full, k := auth.NewKey(acct.ID, name, change.CreditLimit)
	created, err := p.cfg.Store.CreateKey(x.r.Context(), k)
	if err != nil {
		x.fail(p.keyError(x, err))
		return
	}
	writeConsole(x, http.StatusCreated, newKeyView{viewOf(created), full})
}

func (p *Pipeline) consoleUpdateKey(x *exchange, acct store.Account, keyID string) {
	change, ok := readKeyFields(x)
	if !ok {
		return
	}
	k, err := p.cfg.Store.UpdateKey(x.r.Context(), acct.ID, keyID, change)
	if err != nil {
		x.fail(p.keyError(x, err))
		return
	}
	writeConsole(x, http.StatusOK, viewOf(k))
}

func (p *Pipeline) consoleSetStatus(x *exchange, acct store.Account, keyID string, to store.KeyStatus) {
	k, err := p.cfg.Store.SetKeyStatus(x.r.Context(), acct.ID, keyID, to)
	if err != nil {
		x.fail(p.keyError(x, err))
		return
	}
	writeConsole(x, http.StatusOK, viewOf(k))
}

func (p *Pipeline) keyError(x *exchange, err error) *envelope.Error {
	switch {
	case errors.Is(err, store.ErrTooManyKeys):
		return envelope.New(envelope.InvalidParameters, http.StatusConflict,
			"An account holds at most 5 active keys; revoke or delete one first.",
			map[string]any{"reason": "active_key_limit", "max": store.MaxActiveKeys})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrKeyDeleted):
		// A deleted key has left the console; it cannot be changed or restored.
		return envelope.New(envelope.ResourceNotFound, http.StatusNotFound, "No such key in this account.", nil)
	}
	return p.internal(x, "key operation", err)
}

// serveAdmin is the operator API, enabled only when an admin token is configured.
func (p *Pipeline) serveAdmin(x *exchange, path string) {
	if p.cfg.AdminToken == "" || p.cfg.Store == nil {
		x.fail(registry404(path))
		return
	}
	given := x.r.Header.Get("x-admin-token")
	if given == "" {
		x.fail(unauthorized("missing_admin_token", "Send the operator token in x-admin-token."))
		return
	}
	client := "admin:" + clientOf(x.r)
	if p.cfg.Throttle != nil {
		if wait, blocked := p.cfg.Throttle.Blocked(client); blocked {
			x.fail(rateLimited("invalid_key_attempts", wait, "Too many requests with invalid operator tokens from this client."))
			return
		}
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(p.cfg.AdminToken)) != 1 {
		p.invalidKey(client)
		x.fail(unauthorized("invalid_admin_token", "The operator token is not valid."))
		return
	}
	segs := strings.Split(strings.Trim(strings.TrimPrefix(path, "/admin"), "/"), "/")
	finish, handled := p.postIdempotency(x, operatorScope, p.cfg.AdminToken)
	if handled {
		return
	}
	if finish != nil {
		x.effect(finish)
	}
	switch {
	case len(segs) == 1 && segs[0] == "accounts" && x.r.Method == http.MethodPost:
		p.adminCreateAccount(x)
	case len(segs) == 3 && segs[0] == "accounts" && segs[2] == "credits" && x.r.Method == http.MethodPost:
		p.adminGrant(x, segs[1])
	default:
		x.fail(registry404(path))
	}
}

func (p *Pipeline) adminCreateAccount(x *exchange) {
	var body struct {
		Credits *int64 `json:"credits"`
	}
	if e := readJSON(x.r, &body); e != nil {
		x.fail(e)
		return
	}
	if body.Credits == nil || *body.Credits < 0 || *body.Credits > store.MaxCredits {
		x.fail(fieldError("credits", "invalid", "credits is a whole number from 0 to "+strconv.FormatInt(store.MaxCredits, 10)+"."))
		return
	}
	acct, token, err := CreateAccount(x.r.Context(), p.cfg.Store, *body.Credits, x.requestID)
	if err != nil {
		x.fail(p.internal(x, "create account", err))
		return
	}
	writeConsole(x, http.StatusCreated, map[string]any{"account_id": acct.ID, "console_token": token})
}

func (p *Pipeline) adminGrant(x *exchange, accountID string) {
	var body struct {
		Amount *int64 `json:"amount"`
		Note   string `json:"note"`
	}
	if e := readJSON(x.r, &body); e != nil {
		x.fail(e)
		return
	}
	if body.Amount == nil || *body.Amount <= 0 {
		x.fail(fieldError("amount", "invalid", "amount is a whole number of credits, 1 or more."))
		return
	}
	if utf8.RuneCountInString(body.Note) > 500 {
		x.fail(fieldError("note", "too_long", "note is at most 500 characters."))
		return
	}
	acct, err := p.cfg.Store.Grant(x.r.Context(), accountID, *body.Amount, body.Note, x.requestID)
	if errors.Is(err, store.ErrCreditCeiling) {
		x.fail(fieldError("amount", "out_of_range", "The balance would pass the ceiling of "+strconv.FormatInt(store.MaxCredits, 10)+" credits."))
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		x.fail(envelope.New(envelope.ResourceNotFound, http.StatusNotFound, "No such account.", nil))
		return
	}
	if err != nil {
		x.fail(p.internal(x, "grant", err))
		return
	}
	writeConsole(x, http.StatusOK, map[string]any{"account_id": acct.ID, "credits_remaining": acct.CreditsRemaining})
}

// CreateAccount opens an account and mints its console token, returned
// once; only its hash is stored. The opening credits are a grant entry
// naming requestID, written with the account.
func CreateAccount(ctx context.Context, s store.Store, credits int64, requestID string) (store.Account, string, error) {
	token := auth.NewSecret(ConsoleTokenPrefix)
	acct, err := s.CreateAccount(ctx, credits, auth.Hash(token), requestID)
	return acct, token, err
}

func registry404(path string) *envelope.Error {
	return envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "No endpoint matches this path.",
		map[string]any{"path": auth.ForLog(path, 200)})
}

func fieldError(field, reason, message string) *envelope.Error {
	return envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity, message,
		map[string]any{"field": field, "reason": reason})
}

// postIdempotency claims the Idempotency-Key of a console or operator
// POST with the rules of direct GETs (spec 3.2): 24 hours, 409 while in
// progress, 422 for another request, the original status and body
// replayed. The request is its method, path and body (as canonical JSON,
// so key order and spacing do not matter). Stored bodies are sealed with
// the caller's credential: a new key or console token is revealed again
// only to a retry that presents both.
func (p *Pipeline) postIdempotency(x *exchange, owner, credential string) (finish func(context.Context), handled bool) {
	if x.r.Method != http.MethodPost || strings.TrimSpace(x.r.Header.Get("idempotency-key")) == "" {
		return nil, false
	}
	raw, e := readBody(x.r)
	if e != nil {
		x.fail(e)
		return nil, true
	}
	x.r.Body = io.NopCloser(bytes.NewReader(raw))
	request := x.r.Method + " " + strings.TrimSuffix(x.r.URL.Path, "/") + "\n" + canonicalJSON(raw)
	return p.claimIdempotency(x, idemScope{owner: owner, fingerprint: digest(request), secret: credential})
}

// canonicalJSON re-encodes one JSON value with sorted keys; anything else
// is kept as it came.
func canonicalJSON(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as written: no two amounts share a float
	var v any
	if dec.Decode(&v) != nil || dec.Decode(&struct{}{}) != io.EOF {
		return string(raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(out)
}

func readBody(r *http.Request) ([]byte, *envelope.Error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxConsoleBody+1))
	if err != nil {
		return nil, envelope.New(envelope.InvalidParameters, http.StatusBadRequest, "The body could not be read.", map[string]any{"reason": "malformed_body"})
	}
	if len(raw) > maxConsoleBody {
		return nil, envelope.New(envelope.InvalidParameters, http.StatusRequestEntityTooLarge, "The body is too large.",
			map[string]any{"reason": "body_too_large", "max_bytes": maxConsoleBody})
	}
	return raw, nil
}

func readJSON(r *http.Request, v any) *envelope.Error {
	raw, e := readBody(r)
	if e != nil {
		return e
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.Decode(&struct{}{}) != io.EOF {
		return envelope.New(envelope.InvalidParameters, http.StatusBadRequest, "The body is not the expected JSON object.",
			map[string]any{"reason": "malformed_body"})
	}
	return nil
}

func writeConsole(x *exchange, status int, body any) {
	raw, err := envelope.Marshal(body)
	if err != nil {
		x.fail(envelope.Internal())
		return
	}
	// An answer may hold a new key or token, or an account's figures: no
	// cache keeps it.
	x.w.Header().Set("Cache-Control", "no-store")
	envelope.WriteJSON(x.w, status, x.requestID, nil, nil, raw)
}

func (p *Pipeline) internal(x *exchange, what string, err error) *envelope.Error {
	p.cfg.Logger.Error(what+" failed", "request_id", x.requestID, "error", auth.Redact(err.Error()))
	return envelope.Internal()
}

// consoleQuery validates a console read's query with the declaration of
// the /v1 endpoint it mirrors (key: platform/id), so the page and the API
// take the same parameters and refuse them alike; it answers a refusal.
func (p *Pipeline) consoleQuery(x *exchange, key string) (map[string]string, bool) {
	e, ok := p.cfg.Registry.Endpoint(key)
	if !ok {
		x.fail(p.internal(x, "console query", errors.New("no endpoint "+key)))
		return nil, false
	}
	q, err := params.Parse(x.r.URL.RawQuery)
	if err == nil {
		var res params.Result
		if res, err = params.Validate(e, q, nil); err == nil {
			return res.Values, true
		}
	}
	x.fail(err)
	return nil, false
}

// consoleLedger is GET /console/ledger: the page of GET
// /v1/credits/transactions, with its limit, cursor and request_id.
func (p *Pipeline) consoleLedger(x *exchange, acct store.Account) {
	v, ok := p.consoleQuery(x, "credits/transactions")
	if !ok {
		return
	}
	limit, _ := strconv.Atoi(v["limit"])
	page, e := service.LedgerPage(x.r.Context(), p.cfg.Store, acct.ID, store.LedgerQuery{Limit: limit, Cursor: v["cursor"], RequestID: v["request_id"]})
	if e != nil {
		x.fail(e)
		return
	}
	writeConsole(x, http.StatusOK, page)
}

// consoleStatus is GET /console/status: /v1/status's figures.
func (p *Pipeline) consoleStatus(x *exchange) {
	if p.cfg.Outcomes == nil {
		x.fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "This deployment keeps no status figures.", nil))
		return
	}
	st, e := p.svc.Status(x.r.Context())
	if e != nil {
		x.fail(e)
		return
	}
	writeConsole(x, http.StatusOK, st)
}

// monthSpend is the credits the account's calls were charged since the
// first of this month (UTC), from the worker's usage counts; nil when
// this deployment keeps none or they cannot be read (the overview still
// answers).
func (p *Pipeline) monthSpend(x *exchange, accountID string) *int64 {
	if p.cfg.Outcomes == nil {
		return nil
	}
	now := p.cfg.Now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days, err := p.cfg.Outcomes.AccountUsage(x.r.Context(), accountID, first, now)
	if err != nil {
		p.cfg.Logger.Warn("month spend unread", "request_id", x.requestID, "error", err.Error())
		return nil
	}
	var spent int64
	for _, d := range days {
		spent += d.Credits
	}
	return &spent
}

// consoleUsage is GET /console/usage: GET /v1/credits/usage's figures,
// with its days.
func (p *Pipeline) consoleUsage(x *exchange, acct store.Account) {
	if p.cfg.Outcomes == nil {
		x.fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "This deployment keeps no usage figures.", nil))
		return
	}
	v, ok := p.consoleQuery(x, "credits/usage")
	if !ok {
		return
	}
	days, _ := strconv.Atoi(v["days"])
	u, err := service.AccountUsage(x.r.Context(), p.cfg.Outcomes, acct.ID, days, p.cfg.Now())
	if err != nil {
		x.fail(p.internal(x, "usage read", err))
		return
	}
	writeConsole(x, http.StatusOK, u)
}
