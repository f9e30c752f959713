package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/assist"
	"github.com/meridian-data/meridian/shared/pipeline"
	"github.com/meridian-data/meridian/shared/queue"
	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/dynamostore/dynamotest"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters"
	"github.com/meridian-data/meridian/shared/usage"
)

// capturedEvents keeps the usage events a pipeline emits.
type capturedEvents struct {
	mu     sync.Mutex
	events []usage.Event
}

func (c *capturedEvents) Emit(m queue.Message) {
	b, err := usage.Decode(m.Encoded())
	if err != nil || b.Usage == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, *b.Usage)
}

func (c *capturedEvents) of(requestID string) (usage.Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.events {
		if e.RequestID == requestID {
			return e, true
		}
	}
	return usage.Event{}, false
}

// assistRig is the whole pipeline of make run over the replay upstream,
// with the model the variables name (replayed too) and a clock.
type assistRig struct {
	h      http.Handler
	s      store.Store
	events *capturedEvents
	now    time.Time
	mu     sync.Mutex
}

func (r *assistRig) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now
}

func (r *assistRig) advance(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = r.now.Add(d)
}

func newAssistRig(t *testing.T, s store.Store, modelVars map[string]string, tune func(*pipeline.Config)) *assistRig {
	t.Helper()
	base, emb := replayAndStore(t, quietLogger())
	if s == nil {
		s = emb
	}
	lookup := func(name string) (string, bool) {
		v, ok := modelVars[name]
		return v, ok
	}
	var m assist.Model
	if modelVars != nil {
		var err error
		if m, err = app.NewModel(quietLogger(), lookup, base); err != nil {
			t.Fatal(err)
		}
	}
	rig := &assistRig{s: s, events: &capturedEvents{}, now: time.Now().UTC()}
	runner := upstream.NewRunner(adapters.All(), upstream.Settings{ReplayURL: base})
	cfg := app.Config("", quietLogger(), app.Deps{Store: s, Upstream: runner, Model: m, Events: rig.events})
	cfg.Now = rig.clock
	cfg.Assist.Now = rig.clock
	if tune != nil {
		tune(&cfg.Config)
	}
	rig.h = app.New(cfg)
	return rig
}

func (r *assistRig) get(target, key string) (int, map[string]any) { return serve(r.h, target, key) }

// replayModel names the model a replay answers as: the recorded answers of
// testdata/upstream/openai_chat, or a fault fixture of either provider.
func replayModel(provider, id string) map[string]string {
	return map[string]string{
		"MERIDIAN_MODEL_PROVIDER": provider, "MERIDIAN_MODEL_ID": id, "MERIDIAN_MODEL_URL": "https://model.invalid/v1",
		"MERIDIAN_MODEL_TIMEOUT": "300ms",
	}
}

func dataOf(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	d, ok := body["data"].(map[string]any)
	if !ok {
		t.Fatalf("no data: %v", body)
	}
	return d
}

func itemsOf(data map[string]any) []map[string]any {
	var out []map[string]any
	for _, v := range data["items"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

// validates checks a reply's data against its published schema.
func validates(t *testing.T, key string, data map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(data)
	if err := schemas.Validate(key, raw); err != nil {
		t.Errorf("%s data does not validate: %v", key, err)
	}
}

// ledgerOf is what the ledger holds for one request.
func ledgerOf(t *testing.T, s store.Store, accountID, requestID string) []store.Entry {
	t.Helper()
	page, err := s.Ledger(context.Background(), accountID, store.LedgerQuery{Limit: 50, RequestID: requestID})
	if err != nil {
		t.Fatal(err)
	}
	return page.Entries
}

// A model that fails in any way (5xx, timeout, reset, a body that is not
// its envelope, an answer that is not JSON or does not follow the schema,
// its rate limit) never fails the call: the data comes back unlabelled
// with a warning, and the call is charged its price exactly once.
func TestAFailingModelLeavesTheCallUnlabelledAndChargedOnce(t *testing.T) {
	for _, provider := range []string{"openai", "bedrock"} {
		for _, fault := range []string{"fault-500", "fault-timeout", "fault-reset", "malformed-envelope", "malformed-json", "schema-invalid", "rate-limited"} {
			t.Run(provider+"/"+fault, func(t *testing.T) {
				rig := newAssistRig(t, nil, replayModel(provider, fault), nil)
				acct, key := newAccount(t, rig.s, 20, nil)
				code, body := rig.get("/v1/microblog_a/search?query=golang&exclude=engagement_bait", key)
				if code != 200 || body["credits_used"] != 3.0 || body["credits_remaining"] != 17.0 {
					t.Fatalf("%d credits %v/%v %v", code, body["credits_used"], body["credits_remaining"], body["error"])
				}
				data := dataOf(t, body)
				for _, it := range itemsOf(data) {
					if it["ai_label"] != nil {
						t.Errorf("a label from a failed model: %v", it["ai_label"])
					}
				}
				if len(itemsOf(data)) != 3 || data["_assist"].(map[string]any)["status"] != "failed" ||
					!slices.Contains(data["_warnings"].([]any), any(assist.WarnFailed)) {
					t.Errorf("items %d _assist %v _warnings %v", len(itemsOf(data)), data["_assist"], data["_warnings"])
				}
				validates(t, "microblog_a/search", data)
				entries := ledgerOf(t, rig.s, acct.ID, body["request_id"].(string))
				if len(entries) != 1 || entries[0].Amount != -3 {
					t.Errorf("ledger %+v: want one debit of 3", entries)
				}
				ev, _ := rig.events.of(body["request_id"].(string))
				if ev.Model == nil || ev.Model.Calls < 1 || len(ev.Model.Legs) == 0 {
					t.Errorf("the model's attempts are in the usage event: %+v", ev.Model)
				}
				// A degraded answer is not kept for other callers.
				code, body = rig.get("/v1/microblog_a/search?query=golang", key)
				if code != 200 || body["cached"] == true || body["credits_used"] != 3.0 {
					t.Errorf("second call %d cached %v credits %v", code, body["cached"], body["credits_used"])
				}
			})
		}
	}
}

// The recorded answers replay labels, evidence (a quote that is not in
// the text dropped), exclusion, fitting and the recall, on both stores.
func TestLabelsExclusionFitAndRecall(t *testing.T) {
	for name, s := range map[string]store.Store{"embedded": nil, "dynamodb": dynamotest.NewStore(t)} {
		t.Run(name, func(t *testing.T) {
			rig := newAssistRig(t, s, replayModel("openai", app.ReplayModel), nil)
			acct, key := newAccount(t, rig.s, 50, nil)
			_, otherKey := newAccount(t, rig.s, 50, nil)
			q := url.Values{"query": {"mechanical keyboard"}, "exclude": {"engagement_bait"}, "fit": {"goal"},
				"goal": {"compare tactile switch reviews"}, "label_evidence": {"1"}}
			code, body := rig.get("/v1/microblog_a/search?"+q.Encode(), key)
			if code != 200 || body["credits_used"] != 3.0 {
				t.Fatalf("%d %v", code, body)
			}
			data := dataOf(t, body)
			validates(t, "microblog_a/search", data)
			items := itemsOf(data)
			var ids []string
			for _, it := range items {
				id := it["id"].(string)
				ids = append(ids, id[strings.LastIndex(id, "/")+1:])
			}
			// Post 2 is confident bait (removed); 3 is uncertain bait (kept);
			// 4 and 6 are confidently irrelevant (stubbed); 7 is irrelevant
			// but last (kept); order holds.
			if strings.Join(ids, ",") != "3lkbd7aaa01,3lkbd7aaa03,3lkbd7aaa04,3lkbd7aaa05,3lkbd7aaa06,3lkbd7aaa07" || data["count"] != 6.0 {
				t.Fatalf("items %v count %v", ids, data["count"])
			}
			for i, it := range items {
				stub, stubbed := it["ai_stub"].(map[string]any)
				if stubbed != (i == 2 || i == 4) || (stubbed && it["text"] != nil) {
					t.Errorf("item %d stubbed %v: %v", i, stubbed, it)
				}
				if stubbed && stub["recall"] == nil {
					t.Errorf("stub without a recall: %v", it)
				}
			}
			if l := items[1]["ai_label"].(map[string]any); l["category"] != "engagement_bait" || l["confidence"] != 0.72 {
				t.Errorf("uncertain bait stays with its label: %v", l)
			}
			meta := data["_assist"].(map[string]any)
			recall := meta["recall"].(map[string]any)
			if fmt.Sprint(meta["excluded"].(map[string]any)["ids"]) != "[at://did:plc:sample7giveawayhubaaaaaaaa/app.bsky.feed.post/3lkbd7aaa02]" {
				t.Errorf("excluded %v", meta["excluded"])
			}

			// The recall: the owner reads the three records, in full.
			code, rb := rig.get(recall["path"].(string), key)
			if code != 200 || rb["credits_used"] != 0.0 {
				t.Fatalf("recall %d %v", code, rb)
			}
			kept := itemsOf(dataOf(t, rb))
			if len(kept) != 3 || kept[0]["text"] == nil || dataOf(t, rb)["request_id"] != body["request_id"] {
				t.Errorf("recall %v", dataOf(t, rb))
			}
			// Evidence: post 2's second quote is not in its text and is dropped.
			ev := kept[0]["ai_label"].(map[string]any)["evidence"].([]any)
			if len(ev) != 1 || ev[0].(map[string]any)["sentence"] != "Like, repost and follow to win a custom mechanical keyboard." || ev[0].(map[string]any)["index"] != 1.0 {
				t.Errorf("evidence %v", ev)
			}
			// Another account, and the owner after 24 hours: 404.
			if code, rb := rig.get(recall["path"].(string), otherKey); code != 404 || rb["error"].(map[string]any)["type"] != "RESOURCE_NOT_FOUND" {
				t.Errorf("another account: %d %v", code, rb)
			}
			rig.advance(store.RecallTTL)
			if code, _ := rig.get(recall["path"].(string), key); code != 404 {
				t.Errorf("after 24 hours: %d", code)
			}
			if balance, _ := rig.s.Account(context.Background(), acct.ID); balance.CreditsRemaining != 47 {
				t.Errorf("one charge of 3 (the recall is free): %d", balance.CreditsRemaining)
			}
			ev2, _ := rig.events.of(body["request_id"].(string))
			if ev2.Model == nil || ev2.Model.Calls != 1 || ev2.Model.InputTokens != 1440 || ev2.Model.OutputTokens != 720 {
				t.Errorf("usage event model %+v", ev2.Model)
			}
		})
	}
}

// Labels without exclusion or fitting are shared through the cache; a
// call with exclude or fit never is (its recall is its owner's).
func TestLabelledAnswersAreCachedOwnerBoundOnesAreNot(t *testing.T) {
	rig := newAssistRig(t, nil, replayModel("openai", app.ReplayModel), nil)
	_, key := newAccount(t, rig.s, 50, nil)
	code, body := rig.get("/v1/microblog_a/search?query=golang", key)
	items := itemsOf(dataOf(t, body))
	if code != 200 || items[2]["ai_label"].(map[string]any)["category"] != "informative" {
		t.Fatalf("%d %v", code, items[2]["ai_label"])
	}
	validates(t, "microblog_a/search", dataOf(t, body))
	if _, again := rig.get("/v1/microblog_a/search?query=golang", key); again["cached"] != true || again["credits_used"] != 0.0 {
		t.Errorf("a labelled answer is cached: %v %v", again["cached"], again["credits_used"])
	}
	rig.get("/v1/microblog_a/search?query=golang&exclude=engagement_bait", key)
	if _, again := rig.get("/v1/microblog_a/search?query=golang&exclude=engagement_bait", key); again["cached"] == true {
		t.Error("an answer with exclude is never cached")
	}
	// judgments=off is the source's shape, untouched.
	code, body = rig.get("/v1/microblog_a/search?query=golang&judgments=off", key)
	data := dataOf(t, body)
	if code != 200 || data["_assist"] != nil || itemsOf(data)[0]["ai_label"] != nil || len(data["_warnings"].([]any)) != 1 {
		t.Errorf("judgments=off: %v", data)
	}
	if _, none := rig.get("/v1/microblog_a/search?query=golang&label=none", key); dataOf(t, none)["_assist"] != nil {
		t.Error("label=none is judgments=off")
	}
}

// make run's default has no model: labels are off, and say so.
func TestWithoutAModelLabelsAreOffAndSaySo(t *testing.T) {
	rig := newAssistRig(t, nil, nil, nil)
	_, key := newAccount(t, rig.s, 50, nil)
	for _, target := range []string{"/v1/microblog_a/search?query=golang", "/v1/microblog_b/profile?handle=sample_gopher&exclude=engagement_bait"} {
		code, body := rig.get(target, key)
		data := dataOf(t, body)
		if code != 200 || data["_assist"].(map[string]any)["status"] != "off" || !slices.Contains(data["_warnings"].([]any), any(assist.WarnOff)) {
			t.Errorf("%s: %d %v", target, code, data)
		}
		if data["ai_label"] != nil || (data["items"] != nil && itemsOf(data)[0]["ai_label"] != nil) {
			t.Errorf("%s: a label without a model", target)
		}
		key := strings.TrimPrefix(strings.SplitN(target, "?", 2)[0], "/v1/")
		validates(t, key, data)
	}
}

// fit=goal needs a goal; tokens, goal and label are bounded; a refusal is
// 422 and costs nothing.
func TestAIParametersAreValidated(t *testing.T) {
	rig := newAssistRig(t, nil, replayModel("openai", app.ReplayModel), nil)
	acct, key := newAccount(t, rig.s, 50, nil)
	for _, q := range []string{
		"fit=goal",
		"fit=goal&goal=",
		"fit=goal&goal=" + strings.Repeat("g", 601),
		"fit=goal&goal=g&tokens=255",
		"fit=goal&goal=g&tokens=32001",
		"fit=goal&goal=g&tokens=many",
		"fit=relevance&goal=g",
		"exclude=spam",
		"judgments=maybe",
		"label=all",
		"label_evidence=perhaps",
	} {
		code, body := rig.get("/v1/microblog_a/search?query=golang&"+q, key)
		if code != 422 || body["error"].(map[string]any)["type"] != "INVALID_PARAMETERS" || body["credits_used"] != 0.0 {
			t.Errorf("%s: %d %v", q, code, body["error"])
		}
	}
	for _, q := range []string{"fit=goal&goal=g&tokens=256", "fit=goal&goal=" + strings.Repeat("g", 600) + "&tokens=32000"} {
		if code, body := rig.get("/v1/microblog_a/search?query=golang&"+q, key); code != 200 {
			t.Errorf("%s: %d %v", q, code, body["error"])
		}
	}
	if a, _ := rig.s.Account(context.Background(), acct.ID); a.CreditsRemaining != 44 {
		t.Errorf("only the two valid calls were charged: %d", a.CreditsRemaining)
	}
}

// An account's model calls have a 30-day ceiling: past it, answers are
// unlabelled (withheld), the data still served and charged its price.
func TestTheModelCeilingWithholdsLabels(t *testing.T) {
	rig := newAssistRig(t, nil, replayModel("openai", app.ReplayModel), func(c *pipeline.Config) { c.ModelFairUse = 1 })
	_, key := newAccount(t, rig.s, 50, nil)
	_, body := rig.get("/v1/microblog_a/search?query=golang&exclude=engagement_bait", key)
	if dataOf(t, body)["_assist"].(map[string]any)["status"] != "labelled" {
		t.Fatalf("%v", dataOf(t, body)["_assist"])
	}
	code, body := rig.get("/v1/microblog_a/search?query=golang&exclude=engagement_bait", key)
	if code != 200 || dataOf(t, body)["_assist"].(map[string]any)["status"] != "withheld" || body["credits_used"] != 3.0 {
		t.Errorf("%d %v", code, dataOf(t, body)["_assist"])
	}
	if ev, _ := rig.events.of(body["request_id"].(string)); ev.Model != nil {
		t.Errorf("no model call past the ceiling: %+v", ev.Model)
	}
}

// The docs page publishes the label set the code uses.
func TestTheLabelDocsPage(t *testing.T) {
	rig := newAssistRig(t, nil, nil, nil)
	rec := httptest.NewRecorder()
	rig.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://api.test/docs/ai-labels", nil))
	if rec.Code != 200 || !strings.Contains(rec.Header().Get("content-type"), "text/html") {
		t.Fatalf("%d", rec.Code)
	}
	for _, c := range assist.Categories {
		if !strings.Contains(rec.Body.String(), "<code>"+c.Name+"</code>") {
			t.Errorf("category %s is not documented", c.Name)
		}
	}
}
