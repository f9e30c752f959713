package canary_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

const fixtures = "../../testdata/upstream"

// source is the replay upstream behind a switch: once flipped, answers of
// paths under prefix have old renamed to new (a site that changed its
// page), and paths under failing answer 500. It counts every request.
type source struct {
	replay   http.Handler
	requests atomic.Int64
	flipAt   int64 // the request from which the change shows (0: never)
	prefix   string
	old, new string
	failing  string
}

func (s *source) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.requests.Add(1)
	if s.failing != "" && strings.HasPrefix(r.URL.Path, s.failing) {
		http.Error(w, `{"message":"Server Error"}`, http.StatusInternalServerError)
		return
	}
	if s.flipAt == 0 || n < s.flipAt || !strings.HasPrefix(r.URL.Path, s.prefix) {
		s.replay.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	s.replay.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("content-length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(bytes.ReplaceAll(rec.Body.Bytes(), []byte(s.old), []byte(s.new)))
}

func newSource(t *testing.T) (*source, string) {
	t.Helper()
	srv, err := replay.Load(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	s := &source{replay: srv}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func config(base string, only ...string) canary.Config {
	shipped, err := canary.Shipped()
	if err != nil {
		panic(err)
	}
	return canary.Config{
		Runner:   app.NewUpstream(quiet(), func(string) (string, bool) { return "", false }, base),
		Registry: registry.Default(), Only: only, Baselines: shipped,
	}
}

func operation(t *testing.T, r canary.Report, key string) canary.Operation {
	t.Helper()
	for _, o := range r.Operations {
		if o.Operation == key {
			return o
		}
	}
	t.Fatalf("no operation %s in %+v", key, r.Operations)
	return canary.Operation{}
}

// A source that starts answering a changed page halfway through a run (the
// profile's "location" renamed): that operation's fill rate drops below
// its baseline's share, the run names the field that went null, the other
// operation is untouched, and the alarm condition (two breaching runs in a
// row) holds from the second run on.
func TestChangedPageDriftsAndAlarmsAfterTwoRuns(t *testing.T) {
	src, base := newSource(t)
	src.prefix, src.old, src.new = "/github_rest/users/", `"location"`, `"place"`
	src.flipAt = 2 // app-info (one request) sees the old pages; the profile the new

	cfg := config(base, "app_store_a/app-info", "code_host/profile")
	cfg.FillShare = 0.95
	first := canary.Run(context.Background(), cfg)
	profile := operation(t, first, "code_host/profile")
	if profile.State != canary.StateDrifting || !profile.Breach || profile.Alarm {
		t.Fatalf("first run: %+v", profile)
	}
	if !slices.Equal(profile.NullFields, []string{"location"}) || profile.FillRate == nil || profile.BaselineFillRate == nil ||
		*profile.FillRate >= *profile.BaselineFillRate {
		t.Errorf("first run: null %v, fill %v of %v", profile.NullFields, profile.FillRate, profile.BaselineFillRate)
	}
	if app := operation(t, first, "app_store_a/app-info"); app.State != canary.StateOK || app.Breach || len(app.NullFields) != 0 {
		t.Errorf("the unchanged operation: %+v", app)
	}

	cfg.History = []canary.Report{first}
	second := canary.Run(context.Background(), cfg)
	if p := operation(t, second, "code_host/profile"); !p.Breach || !p.Alarm || !slices.Equal(p.NullFields, []string{"location"}) {
		t.Errorf("second run: %+v", p)
	}
	if a := operation(t, second, "app_store_a/app-info"); a.Alarm {
		t.Errorf("the unchanged operation alarms: %+v", a)
	}

	// The site changes back: the next run is fine, and so the alarm clears.
	src.flipAt = 0
	cfg.History = []canary.Report{second, first}
	third := canary.Run(context.Background(), cfg)
	if p := operation(t, third, "code_host/profile"); p.State != canary.StateOK || p.Breach || p.Alarm {
		t.Errorf("third run: %+v", p)
	}
}

// Each route is checked and reported alone: a failing route is its own
// failed check, while the operation as callers get it (failover) is fine.
func TestFailingRouteIsReportedPerRoute(t *testing.T) {
	src, base := newSource(t)
	src.failing = "/aliexpress_affiliate/"
	rep := canary.Run(context.Background(), config(base, "marketplace_a/search"))
	byRoute := map[string]canary.Check{}
	for _, c := range rep.Checks {
		byRoute[c.Route] = c
	}
	if len(byRoute) != 4 {
		t.Fatalf("routes checked: %v", rep.Checks)
	}
	if c := byRoute["aliexpress_affiliate"]; c.OK || c.Status != "server_error 502" || c.FillRate != nil {
		t.Errorf("the failing route: %+v", c)
	}
	for _, route := range []string{"aliexpress", "zyte_api", "scraperapi"} {
		if c := byRoute[route]; !c.OK || c.Drifting || c.FillRate == nil {
			t.Errorf("%s: %+v", route, c)
		}
	}
	op := operation(t, rep, "marketplace_a/search")
	if op.State != canary.StateOK || op.Route != "aliexpress" || op.Breach {
		t.Errorf("the operation: %+v", op)
	}
	// Every route down: the operation fails, and breaches.
	src.failing = "/"
	if op := operation(t, canary.Run(context.Background(), config(base, "marketplace_a/search")), "marketplace_a/search"); op.State != canary.StateFailing || !op.Breach {
		t.Errorf("every route failing: %+v", op)
	}
}

// The budget is a hard ceiling on source requests, every route, retry and
// fetch included; checks it leaves no request for are not failures.
func TestBudgetIsNeverExceeded(t *testing.T) {
	src, base := newSource(t)
	for _, budget := range []int64{1, 7, 25, 60} {
		src.requests.Store(0)
		cfg := config(base)
		cfg.Budget, cfg.Parallel = budget, 4
		rep := canary.Run(context.Background(), cfg)
		if got := src.requests.Load(); got > budget || rep.SourceRequests != got {
			t.Fatalf("budget %d: %d requests reached the source, the report says %d", budget, got, rep.SourceRequests)
		}
		unchecked := 0
		for _, o := range rep.Operations {
			switch o.State {
			case canary.StateNotChecked:
				unchecked++
				if o.Breach {
					t.Errorf("budget %d: %s breaches without a check", budget, o.Operation)
				}
			case canary.StateFailing, canary.StateDrifting:
				t.Errorf("budget %d: %s %s (%+v)", budget, o.Operation, o.State, o)
			}
		}
		if unchecked == 0 {
			t.Errorf("budget %d: every operation was checked", budget)
		}
	}
}

// Without a shipped baseline, a route is judged against the median of its
// last seven runs, and the fields the latest of them filled.
func TestRecentBaseline(t *testing.T) {
	_, base := newSource(t)
	cfg := config(base, "code_host/profile")
	cfg.Baselines = nil
	first := canary.Run(context.Background(), cfg)
	if c := first.Checks[0]; c.BaselineFillRate != nil || c.Drifting || len(c.NullFields) != 0 {
		t.Fatalf("no baseline yet: %+v", c)
	}
	rate := func(x float64) *float64 { return &x }
	history := []canary.Report{}
	for _, r := range []float64{1, 0.2, 0.9, 0.95, 0.3, 1, 0.99, 0.1 /* an eighth, older run: not counted */} {
		h := first
		h.Checks = []canary.Check{first.Checks[0]}
		h.Checks[0].FillRate = rate(r)
		h.Checks[0].FilledFields = append(slices.Clone(first.Checks[0].FilledFields), "bio")
		history = append(history, h)
	}
	cfg.History = history
	c := canary.Run(context.Background(), cfg).Checks[0]
	if c.BaselineSource != "recent" || c.BaselineFillRate == nil || *c.BaselineFillRate != 0.95 || !slices.Equal(c.NullFields, []string{"bio"}) {
		t.Errorf("against the recent runs: %v (%s), null %v", c.BaselineFillRate, c.BaselineSource, c.NullFields)
	}
}

// The metrics are CloudWatch embedded metric format documents: one per
// route and one per operation, the latter with Breach.
func TestMetricsAreEmbeddedMetricFormat(t *testing.T) {
	src, base := newSource(t)
	src.failing = "/aliexpress_affiliate/"
	rep := canary.Run(context.Background(), config(base, "marketplace_a/search", "code_host/profile"))
	var buf bytes.Buffer
	if err := canary.WriteMetrics(&buf, "Meridian/test/Canary", rep); err != nil {
		t.Fatal(err)
	}
	type doc struct {
		AWS struct {
			Timestamp         int64 `json:"Timestamp"`
			CloudWatchMetrics []struct {
				Namespace  string     `json:"Namespace"`
				Dimensions [][]string `json:"Dimensions"`
				Metrics    []struct{ Name, Unit string }
			} `json:"CloudWatchMetrics"`
		} `json:"_aws"`
	}
	perRoute, perOp := 0, map[string]float64{}
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var d doc
		var values map[string]any
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil || json.Unmarshal(sc.Bytes(), &values) != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		m := d.AWS.CloudWatchMetrics
		if d.AWS.Timestamp != rep.FinishedAt.UnixMilli() || len(m) != 1 || m[0].Namespace != "Meridian/test/Canary" || len(m[0].Dimensions) != 1 {
			t.Fatalf("metadata: %s", sc.Text())
		}
		for _, dim := range m[0].Dimensions[0] {
			if _, ok := values[dim].(string); !ok {
				t.Errorf("dimension %s has no value: %s", dim, sc.Text())
			}
		}
		for _, metric := range m[0].Metrics {
			if _, ok := values[metric.Name].(float64); !ok || metric.Unit == "" {
				t.Errorf("metric %s has no number: %s", metric.Name, sc.Text())
			}
		}
		switch len(m[0].Dimensions[0]) {
		case 2:
			perRoute++
		case 1:
			perOp[values[canary.DimOperation].(string)] = values[canary.MetricBreach].(float64)
		}
	}
	if perRoute != 5 || len(perOp) != 2 || perOp["marketplace_a/search"] != 0 || perOp["code_host/profile"] != 0 {
		t.Errorf("%d route documents, operations %v", perRoute, perOp)
	}
}

// Runs are stored as Encode writes them and read back whole.
func TestEncodeDecode(t *testing.T) {
	_, base := newSource(t)
	rep := canary.Run(context.Background(), config(base, "code_host/profile"))
	raw, err := canary.Encode(rep)
	if err != nil {
		t.Fatal(err)
	}
	back, err := canary.Decode(raw)
	if err != nil || len(back.Checks) != 1 || back.Checks[0].FillRate == nil || *back.Checks[0].FillRate != *rep.Checks[0].FillRate ||
		!back.FinishedAt.Equal(rep.FinishedAt) {
		t.Fatalf("%+v %v", back, err)
	}
	if _, err := canary.Decode([]byte("not gzip")); err == nil {
		t.Error("garbage decoded")
	}
}
