package console

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/store"
)

// The operator API (/admin): accounts and grants, enabled only when an
// operator token is configured.

// operatorScope owns the operator API's Idempotency-Keys.
const operatorScope = "operator"

// serveAdmin is the operator API, enabled only when an admin token is configured.
func (c *Console) serveAdmin(x *pipeline.Exchange, path string) {
	if c.cfg.AdminToken == "" || c.cfg.Store == nil {
		x.Fail(registry404(path))
		return
	}
	given := x.Request().Header.Get("x-admin-token")
	if given == "" {
		x.Fail(pipeline.Unauthorized("missing_admin_token", "Send the operator token in x-admin-token."))
		return
	}
	client := "admin:" + auth.ClientOf(x.Request())
	if c.cfg.Throttle != nil {
		if wait, blocked := c.cfg.Throttle.Blocked(client); blocked {
			x.Fail(pipeline.RateLimited("invalid_key_attempts", wait, "Too many requests with invalid operator tokens from this client."))
			return
		}
	}
	if subtle.ConstantTimeCompare([]byte(given), []byte(c.cfg.AdminToken)) != 1 {
		c.invalidCredential(client)
		x.Fail(pipeline.Unauthorized("invalid_admin_token", "The operator token is not valid."))
		return
	}
	segs := strings.Split(strings.Trim(strings.TrimPrefix(path, "/admin"), "/"), "/")
	if idempotent(x, operatorScope, c.cfg.AdminToken) {
		return
	}
	switch {
	case len(segs) == 1 && segs[0] == "accounts" && x.Request().Method == http.MethodPost:
		c.adminCreateAccount(x)
	case len(segs) == 3 && segs[0] == "accounts" && segs[2] == "credits" && x.Request().Method == http.MethodPost:
		c.adminGrant(x, segs[1])
	default:
		x.Fail(registry404(path))
	}
}

func (c *Console) adminCreateAccount(x *pipeline.Exchange) {
	var body struct {
		Credits *int64 `json:"credits"`
	}
	if e := readJSON(x.Request(), &body); e != nil {
		x.Fail(e)
		return
	}
	if body.Credits == nil || *body.Credits < 0 || *body.Credits > store.MaxCredits {
		x.Fail(envelope.FieldError("credits", "invalid", "credits is a whole number from 0 to "+strconv.FormatInt(store.MaxCredits, 10)+"."))
		return
	}
	acct, token, err := auth.CreateAccount(x.Request().Context(), c.cfg.Store, *body.Credits, x.RequestID())
	if err != nil {
		x.Fail(c.internal(x, "create account", err))
		return
	}
	writeConsole(x, http.StatusCreated, map[string]any{"account_id": acct.ID, "console_token": token})
}

func (c *Console) adminGrant(x *pipeline.Exchange, accountID string) {
	var body struct {
		Amount *int64 `json:"amount"`
		Note   string `json:"note"`
	}
	if e := readJSON(x.Request(), &body); e != nil {
		x.Fail(e)
		return
	}
	if body.Amount == nil || *body.Amount <= 0 {
		x.Fail(envelope.FieldError("amount", "invalid", "amount is a whole number of credits, 1 or more."))
		return
	}
	if utf8.RuneCountInString(body.Note) > 500 {
		x.Fail(envelope.FieldError("note", "too_long", "note is at most 500 characters."))
		return
	}
	acct, err := c.cfg.Store.Grant(x.Request().Context(), accountID, *body.Amount, body.Note, x.RequestID())
	if errors.Is(err, store.ErrCreditCeiling) {
		x.Fail(envelope.FieldError("amount", "out_of_range", "The balance would pass the ceiling of "+strconv.FormatInt(store.MaxCredits, 10)+" credits."))
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		x.Fail(envelope.New(envelope.ResourceNotFound, http.StatusNotFound, "No such account.", nil))
		return
	}
	if err != nil {
		x.Fail(c.internal(x, "grant", err))
		return
	}
	writeConsole(x, http.StatusOK, map[string]any{"account_id": acct.ID, "credits_remaining": acct.CreditsRemaining})
}
