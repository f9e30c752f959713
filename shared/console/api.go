package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/service"
	"github.com/meridian-data/meridian/shared/store"
)

// The console API (an account's own keys, spec 3.1). Bodies are JSON
// objects; failures use the error envelope of spec 2.2.

// Config wires the console.
type Config struct {
	Registry *registry.Registry
	// Store holds accounts, keys and the ledger; without one the console
	// answers 501 and the operator API 404.
	Store store.Store
	// Outcomes and Canary give the usage and status figures (nil: 501).
	Outcomes store.Outcomes
	Canary   store.CanaryLog
	// Monitors is the account's monitors (nil: 501).
	Monitors *monitors.Service
	// Throttle refuses clients that keep presenting wrong console or
	// operator tokens (the pipeline's, shared with wrong API keys).
	Throttle *auth.Throttle
	// AdminToken enables the operator API (/admin) when set.
	AdminToken string
	Logger     *slog.Logger
	Now        func() time.Time
}

// Console serves /console (the page, its session and the console API)
// and /admin (the operator API) as a pipeline.Surface.
type Console struct {
	cfg Config
	// status gives /console/status the figures of /v1/status.
	status *service.Service
}

var _ pipeline.Surface = (*Console)(nil)

// New builds the console.
func New(cfg Config) *Console {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Console{cfg: cfg, status: service.New(service.Config{
		Registry: cfg.Registry, Outcomes: cfg.Outcomes, Canary: cfg.Canary, Logger: cfg.Logger, Now: cfg.Now,
	})}
}

// Owns implements pipeline.Surface: /console and /admin, and below.
func (c *Console) Owns(path string) bool {
	return path == "/console" || strings.HasPrefix(path, "/console/") || path == "/admin" || strings.HasPrefix(path, "/admin/")
}

// Serve implements pipeline.Surface.
func (c *Console) Serve(x *pipeline.Exchange) {
	path := x.Request().URL.EscapedPath()
	if path == "/admin" || strings.HasPrefix(path, "/admin/") {
		c.serveAdmin(x, path)
		return
	}
	c.serveConsole(x, path)
}

// invalidCredential counts a wrong console or operator token against
// client's invalid-credential throttle.
func (c *Console) invalidCredential(client string) {
	if c.cfg.Throttle != nil {
		c.cfg.Throttle.Failed(client)
	}
}

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

func (c *Console) serveConsole(x *pipeline.Exchange, path string) {
	if servePage(x, path) {
		return
	}
	if c.cfg.Store == nil {
		x.Fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "The console needs a store.", nil))
		return
	}
	if strings.TrimSuffix(path, "/") == "/console/session" {
		c.consoleSession(x)
		return
	}
	token, fromCookie := consoleCredential(x.Request())
	if token == "" {
		x.Fail(pipeline.Unauthorized("missing_console_token", "Send the console token as Authorization: Bearer, or sign in at /console/."))
		return
	}
	acct, e := c.consoleAccount(x, token)
	if e != nil {
		x.Fail(e)
		return
	}
	if fromCookie && !safeMethod(x.Request().Method) {
		if e := forged(x.Request(), token); e != nil {
			x.Fail(e)
			return
		}
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(path, "/console"), "/")
	segs := strings.Split(strings.Trim(rest, "/"), "/")
	m := x.Request().Method
	if idempotent(x, acct.ID, token) {
		return
	}
	switch {
	case rest == "/overview" && m == http.MethodGet:
		c.consoleOverview(x, acct)
	case rest == "/keys" && m == http.MethodGet:
		c.consoleKeys(x, acct)
	case rest == "/usage" && m == http.MethodGet:
		c.consoleUsage(x, acct)
	case rest == "/ledger" && m == http.MethodGet:
		c.consoleLedger(x, acct)
	case rest == "/status" && m == http.MethodGet:
		c.consoleStatus(x)
	case rest == "/keys" && m == http.MethodPost:
		c.consoleCreateKey(x, acct)
	case len(segs) == 2 && segs[0] == "keys" && m == http.MethodPatch:
		c.consoleUpdateKey(x, acct, segs[1])
	case len(segs) == 2 && segs[0] == "keys" && m == http.MethodDelete:
		c.consoleSetStatus(x, acct, segs[1], store.KeyDeleted)
	case len(segs) == 3 && segs[0] == "keys" && segs[2] == "revoke" && m == http.MethodPost:
		c.consoleSetStatus(x, acct, segs[1], store.KeyRevoked)
	case len(segs) == 3 && segs[0] == "keys" && segs[2] == "reactivate" && m == http.MethodPost:
		c.consoleSetStatus(x, acct, segs[1], store.KeyActive)
	case segs[0] == "monitors" && len(segs) <= 3:
		c.serveConsoleMonitors(x, acct, segs)
	default:
		x.Fail(envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "No console operation matches this method and path.",
			map[string]any{"path": auth.ForLog(path, 200), "method": auth.ForLog(m, 16)}))
	}
}

func (c *Console) consoleOverview(x *pipeline.Exchange, acct store.Account) {
	ctx := x.Request().Context()
	keys, err := c.cfg.Store.Keys(ctx, acct.ID)
	if err != nil {
		x.Fail(c.internal(x, "list keys", err))
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
		created, err := c.cfg.Store.CreateFirstKey(ctx, k)
		switch {
		case err == nil:
			keys = append(keys, created)
			body["new_key"] = map[string]string{"id": created.ID, "key": full}
		case errors.Is(err, store.ErrHasKeys):
			if keys, err = c.cfg.Store.Keys(ctx, acct.ID); err != nil {
				x.Fail(c.internal(x, "list keys", err))
				return
			}
		default:
			x.Fail(c.keyError(x, err))
			return
		}
	}
	views := make([]keyView, 0, len(keys))
	for _, k := range keys {
		views = append(views, viewOf(k))
	}
	body["keys"] = views
	body["spend_this_month"] = c.monthSpend(x, acct.ID)
	writeConsole(x, http.StatusOK, body)
}

func (c *Console) consoleKeys(x *pipeline.Exchange, acct store.Account) {
	keys, err := c.cfg.Store.Keys(x.Request().Context(), acct.ID)
	if err != nil {
		x.Fail(c.internal(x, "list keys", err))
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
			return c, envelope.FieldError("name", "invalid", "name is at most 100 printable characters.")
		}
		c.Name = &name
	}
	if len(f.CreditLimit) > 0 {
		c.SetLimit = true
		if string(f.CreditLimit) != "null" {
			var limit int64
			if err := json.Unmarshal(f.CreditLimit, &limit); err != nil || limit < 0 {
				return c, envelope.FieldError("credit_limit", "invalid", "credit_limit is a whole number of credits, 0 or more, or null for uncapped.")
			}
			c.CreditLimit = &limit
		}
	}
	return c, nil
}

// readKeyFields reads and checks a key body, answering the refusal itself.
func readKeyFields(x *pipeline.Exchange) (store.KeyChange, bool) {
	var f keyFields
	e := readJSON(x.Request(), &f)
	var change store.KeyChange
	if e == nil {
		change, e = f.check()
	}
	if e != nil {
		x.Fail(e)
		return change, false
	}
	return change, true
}

func (c *Console) consoleCreateKey(x *pipeline.Exchange, acct store.Account) {
	change, ok := readKeyFields(x)
	if !ok {
		return
	}
	name := ""
	if change.Name != nil {
		name = *change.Name
	}
	full, k := auth.NewKey(acct.ID, name, change.CreditLimit)
	created, err := c.cfg.Store.CreateKey(x.Request().Context(), k)
	if err != nil {
		x.Fail(c.keyError(x, err))
		return
	}
	writeConsole(x, http.StatusCreated, newKeyView{viewOf(created), full})
}

func (c *Console) consoleUpdateKey(x *pipeline.Exchange, acct store.Account, keyID string) {
	change, ok := readKeyFields(x)
	if !ok {
		return
	}
	k, err := c.cfg.Store.UpdateKey(x.Request().Context(), acct.ID, keyID, change)
	if err != nil {
		x.Fail(c.keyError(x, err))
		return
	}
	writeConsole(x, http.StatusOK, viewOf(k))
}

func (c *Console) consoleSetStatus(x *pipeline.Exchange, acct store.Account, keyID string, to store.KeyStatus) {
	k, err := c.cfg.Store.SetKeyStatus(x.Request().Context(), acct.ID, keyID, to)
	if err != nil {
		x.Fail(c.keyError(x, err))
		return
	}
	writeConsole(x, http.StatusOK, viewOf(k))
}

func (c *Console) keyError(x *pipeline.Exchange, err error) *envelope.Error {
	switch {
	case errors.Is(err, store.ErrTooManyKeys):
		return envelope.New(envelope.InvalidParameters, http.StatusConflict,
			"An account holds at most 5 active keys; revoke or delete one first.",
			map[string]any{"reason": "active_key_limit", "max": store.MaxActiveKeys})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrKeyDeleted):
		// A deleted key has left the console; it cannot be changed or restored.
		return envelope.New(envelope.ResourceNotFound, http.StatusNotFound, "No such key in this account.", nil)
	}
	return c.internal(x, "key operation", err)
}

func registry404(path string) *envelope.Error {
	return envelope.New(envelope.EndpointNotFound, http.StatusNotFound, "No endpoint matches this path.",
		map[string]any{"path": auth.ForLog(path, 200)})
}

// idempotent applies the Idempotency-Key of a console or operator POST
// (pipeline.Exchange.Idempotent): the request is its method, path and
// body (as canonical JSON, so key order and spacing do not matter), and
// stored bodies are sealed with the caller's credential: a new key or
// console token is revealed again only to a retry that presents both.
// handled means the answer is given.
func idempotent(x *pipeline.Exchange, owner, credential string) (handled bool) {
	r := x.Request()
	if r.Method != http.MethodPost || strings.TrimSpace(r.Header.Get("idempotency-key")) == "" {
		return false
	}
	raw, e := readBody(r)
	if e != nil {
		x.Fail(e)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return x.Idempotent(owner, r.Method+" "+strings.TrimSuffix(r.URL.Path, "/")+"\n"+canonicalJSON(raw), credential)
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

func writeConsole(x *pipeline.Exchange, status int, body any) {
	raw, err := envelope.Marshal(body)
	if err != nil {
		x.Fail(envelope.Internal())
		return
	}
	// An answer may hold a new key or token, or an account's figures: no
	// cache keeps it.
	x.Writer().Header().Set("Cache-Control", "no-store")
	envelope.WriteJSON(x.Writer(), status, x.RequestID(), nil, nil, raw)
}

func (c *Console) internal(x *pipeline.Exchange, what string, err error) *envelope.Error {
	c.cfg.Logger.Error(what+" failed", "request_id", x.RequestID(), "error", auth.Redact(err.Error()))
	return envelope.Internal()
}

// consoleQuery validates a console read's query with the declaration of
// the /v1 endpoint it mirrors (key: platform/id), so the page and the API
// take the same parameters and refuse them alike; it answers a refusal.
func (c *Console) consoleQuery(x *pipeline.Exchange, key string) (map[string]string, bool) {
	e, ok := c.cfg.Registry.Endpoint(key)
	if !ok {
		x.Fail(c.internal(x, "console query", errors.New("no endpoint "+key)))
		return nil, false
	}
	q, err := params.Parse(x.Request().URL.RawQuery)
	if err == nil {
		var res params.Result
		if res, err = params.Validate(e, q, nil); err == nil {
			return res.Values, true
		}
	}
	x.Fail(err)
	return nil, false
}

// consoleLedger is GET /console/ledger: the page of GET
// /v1/credits/transactions, with its limit, cursor and request_id.
func (c *Console) consoleLedger(x *pipeline.Exchange, acct store.Account) {
	v, ok := c.consoleQuery(x, "credits/transactions")
	if !ok {
		return
	}
	limit, _ := strconv.Atoi(v["limit"])
	page, e := service.LedgerPage(x.Request().Context(), c.cfg.Store, acct.ID, store.LedgerQuery{Limit: limit, Cursor: v["cursor"], RequestID: v["request_id"]})
	if e != nil {
		x.Fail(e)
		return
	}
	writeConsole(x, http.StatusOK, page)
}

// consoleStatus is GET /console/status: /v1/status's figures.
func (c *Console) consoleStatus(x *pipeline.Exchange) {
	if c.cfg.Outcomes == nil {
		x.Fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "This deployment keeps no status figures.", nil))
		return
	}
	st, e := c.status.Status(x.Request().Context())
	if e != nil {
		x.Fail(e)
		return
	}
	writeConsole(x, http.StatusOK, st)
}

// monthSpend is the credits the account's calls were charged since the
// first of this month (UTC), from the worker's usage counts; nil when
// this deployment keeps none or they cannot be read (the overview still
// answers).
func (c *Console) monthSpend(x *pipeline.Exchange, accountID string) *int64 {
	if c.cfg.Outcomes == nil {
		return nil
	}
	now := c.cfg.Now().UTC()
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days, err := c.cfg.Outcomes.AccountUsage(x.Request().Context(), accountID, first, now)
	if err != nil {
		c.cfg.Logger.Warn("month spend unread", "request_id", x.RequestID(), "error", err.Error())
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
func (c *Console) consoleUsage(x *pipeline.Exchange, acct store.Account) {
	if c.cfg.Outcomes == nil {
		x.Fail(envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented, "This deployment keeps no usage figures.", nil))
		return
	}
	v, ok := c.consoleQuery(x, "credits/usage")
	if !ok {
		return
	}
	days, _ := strconv.Atoi(v["days"])
	u, err := service.AccountUsage(x.Request().Context(), c.cfg.Outcomes, acct.ID, days, c.cfg.Now())
	if err != nil {
		x.Fail(c.internal(x, "usage read", err))
		return
	}
	writeConsole(x, http.StatusOK, u)
}
