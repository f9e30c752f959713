package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
)

// A run in the deployment, on both stores: it is recorded for the next run
// and /v1/status, its source attempts are counted in fair use under the
// operator's own name, its metrics are written, and no account is charged
// or written to: the ledger holds the grant alone.
func TestCanaryRunInTheDeployment(t *testing.T) {
	base, _ := replayAndStore(t, quietLogger())
	bothStores(t, func(t *testing.T, s store.Store) {
		t.Parallel()
		testCanaryRun(t, s, base)
	})
}

func testCanaryRun(t *testing.T, s store.Store, base string) {
	ctx := context.Background()
	acct, key := newAccount(t, s, 50, nil)
	env := map[string]string{canary.EnvBudget: "40", canary.EnvNamespace: "Meridian/test/Canary"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var metrics bytes.Buffer
	c := &app.Canary{Store: s, Runner: app.NewUpstream(quietLogger(), lookup, base), Lookup: lookup, Metrics: &metrics, Logger: quietLogger()}

	first, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Budget != 40 || first.SourceRequests == 0 || first.SourceRequests > 40 {
		t.Fatalf("budget %d, %d source requests", first.Budget, first.SourceRequests)
	}
	attempts := map[string]int{}
	checked := 0
	for _, o := range first.Operations {
		switch o.State {
		case canary.StateOK:
			checked++
		case canary.StateFailing, canary.StateDrifting:
			t.Errorf("%s: %s", o.Operation, o.State)
		}
		attempts[o.Operation] = o.Attempts
	}
	if checked == 0 {
		t.Fatal("nothing was checked")
	}
	// Fair use: the attempts, under the operator's name.
	fu := s.(store.FairUse)
	for op, n := range attempts {
		if n == 0 {
			continue
		}
		if used, err := fu.FairUseUsed(ctx, canary.FairUseAccount, op, time.Now()); err != nil || used != int64(n) {
			t.Errorf("%s: fair use %d, %v; the run made %d attempts", op, used, err, n)
		}
	}
	// Recorded: the next run reads it as its history.
	runs, err := s.(store.CanaryLog).CanaryRuns(ctx, 7, time.Now())
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs recorded, %v", len(runs), err)
	}
	if back, err := canary.Decode(runs[0].Report); err != nil || len(back.Operations) != len(first.Operations) {
		t.Fatalf("the recorded run: %v", err)
	}
	if !strings.Contains(metrics.String(), `"Namespace":"Meridian/test/Canary"`) || !strings.Contains(metrics.String(), `"Breach":0`) {
		t.Errorf("metrics:\n%.500s", metrics.String())
	}
	second, err := c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if runs, _ := s.(store.CanaryLog).CanaryRuns(ctx, 7, time.Now()); len(runs) != 2 {
		t.Errorf("%d runs after the second", len(runs))
	}

	// No account was charged or written to.
	got, err := s.Account(ctx, acct.ID)
	if err != nil || got.CreditsRemaining != 50 {
		t.Errorf("balance %d, %v", got.CreditsRemaining, err)
	}
	page, err := s.Ledger(ctx, acct.ID, store.LedgerQuery{Limit: 50})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Type != store.EntryGrant {
		t.Errorf("ledger %+v, %v", page.Entries, err)
	}

	// /v1/status shows each checked platform's part of the last run, with
	// no route or vendor names.
	api := httptest.NewServer(app.LocalHandler(quietLogger(), app.Deps{Store: s, Upstream: app.NewUpstream(quietLogger(), lookup, base)}))
	defer api.Close()
	req, _ := http.NewRequest(http.MethodGet, api.URL+"/v1/status", nil)
	req.Header.Set("x-api-key", key)
	resp, err := api.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var status struct {
		Data struct {
			Platforms []struct {
				Platform string                 `json:"platform"`
				State    string                 `json:"state"`
				Canary   *canary.PlatformResult `json:"canary"`
			} `json:"platforms"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &status); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %d %s", resp.StatusCode, body)
	}
	want := second.Platforms()
	seen := 0
	for _, p := range status.Data.Platforms {
		w, ok := want[p.Platform]
		switch {
		case !ok && p.Canary != nil:
			t.Errorf("%s: a canary result for a platform the run did not check", p.Platform)
		case ok && (p.Canary == nil || !p.Canary.CheckedAt.Equal(second.FinishedAt) || p.Canary.State != w.State ||
			len(p.Canary.Operations) != len(w.Operations)):
			t.Errorf("%s: canary %+v, want %+v", p.Platform, p.Canary, w)
		case ok:
			seen++
		}
	}
	if seen != len(want) || seen == 0 {
		t.Errorf("%d platforms with a canary result, want %d", seen, len(want))
	}
	for _, p := range adapters.All() {
		if strings.Contains(string(body), `"`+p.Name+`"`) {
			t.Errorf("the status names the route %s", p.Name)
		}
	}
}

func TestCanarySettings(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	if c, err := app.CanarySettingsFrom(none); err != nil || c.Budget != canary.DefaultBudget || c.FillShare != canary.DefaultFillShare ||
		c.Namespace != canary.DefaultNamespace || c.Only != nil {
		t.Errorf("defaults: %+v %v", c, err)
	}
	set := map[string]string{canary.EnvBudget: "12", canary.EnvFillShare: "0.9", canary.EnvNamespace: "Meridian/prod/Canary",
		canary.EnvOnly: " code_host/profile, company_registry/search/ "}
	c, err := app.CanarySettingsFrom(func(k string) (string, bool) { v, ok := set[k]; return v, ok })
	if err != nil || c.Budget != 12 || c.FillShare != 0.9 || c.Namespace != "Meridian/prod/Canary" ||
		len(c.Only) != 2 || c.Only[1] != "company_registry/search" {
		t.Errorf("set: %+v %v", c, err)
	}
	for _, bad := range []map[string]string{
		{canary.EnvBudget: "0"}, {canary.EnvBudget: "ten"}, {canary.EnvFillShare: "0"}, {canary.EnvFillShare: "1.2"}, {canary.EnvFillShare: "x"},
		{canary.EnvOnly: "nope/nothing"}, {canary.EnvOnly: "utility/endpoints"},
	} {
		lookup := func(k string) (string, bool) { v, ok := bad[k]; return v, ok }
		if _, err := app.CanarySettingsFrom(lookup); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
