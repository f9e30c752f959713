package app_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/auth"
	"github.com/meridian-data/meridian/shared/canary"
	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/monitors"
	"github.com/meridian-data/meridian/shared/store"
	"github.com/meridian-data/meridian/shared/store/embedded"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// The console page end to end, in headless Chromium (Debian's, driven by
// playwright-core: scripts/browser.sh installs both) against the server
// `make run` starts: the same main (functions/local), its embedded store
// in a fresh data directory, the replay upstream, and the operator API on
// so the script can open an account that has never had a key. The script
// (scripts/npm-tools/console-e2e.mjs) signs in, takes the first-visit key,
// creates, revokes, reactivates, caps and deletes keys and checks each step
// against the API, pages and filters the ledger, reads usage and status,
// checks a phone's width and signs out. Screenshots: build/console-e2e/.
func TestConsoleInChromium(t *testing.T) {
	root := repoRoot(t)
	script := filepath.Join(root, "scripts", "browser.sh")
	installBrowser(t, root)
	bin := filepath.Join(t.TempDir(), "meridian-local")
	build := exec.Command("go", "build", "-o", bin, "./functions/local")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the local server: %v\n%s", err, out)
	}
	adminToken := "e2e-operator-" + strings.Repeat("x", 24)
	dataDir := t.TempDir()
	seedCanaryRun(t, dataDir)
	base := startMakeRunIn(t, bin, adminToken, dataDir)

	out := filepath.Join(root, "build", "console-e2e")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "run", base, out)
	cmd.Env = append(os.Environ(), app.EnvAdminToken+"="+adminToken)
	runBrowserScript(t, cmd, 15, 12)
}

// runBrowserScript runs a browser script (scripts/npm-tools, through
// browser.sh) and checks its report: every step passed, at least minSteps
// of them, and at least minShots screenshots written.
func runBrowserScript(t *testing.T, cmd *exec.Cmd, minSteps, minShots int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var report struct {
		Steps       []string `json:"steps"`
		Screenshots []string `json:"screenshots"`
		Failed      string   `json:"failed"`
		Error       string   `json:"error"`
		PageErrors  []string `json:"page_errors"`
	}
	if err := json.Unmarshal(lastLine(stdout.Bytes()), &report); err != nil {
		t.Fatalf("the browser script failed: %v (%v)\n%s\n%s", runErr, err, stdout.String(), stderr.String())
	}
	for _, s := range report.Steps {
		t.Logf("ok: %s", s)
	}
	if runErr != nil || report.Failed != "" {
		t.Fatalf("step %q failed: %s\npage errors: %v\n%s", report.Failed, report.Error, report.PageErrors, stderr.String())
	}
	if len(report.Steps) < minSteps || len(report.Screenshots) < minShots {
		t.Fatalf("%d steps, %d screenshots", len(report.Steps), len(report.Screenshots))
	}
	for _, s := range report.Screenshots {
		if fi, err := os.Stat(s); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", s, err)
		}
	}
}

// installBrowser installs Chromium and playwright-core (scripts/browser.sh
// install) and returns the npm tools folder, where node resolves
// playwright-core. Without them the test skips, or fails under CI=true.
func installBrowser(t *testing.T, root string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "scripts", "browser.sh"), "install")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ciRun() {
			t.Fatalf("cannot install Chromium and playwright-core: %v\n%s%s", err, stdout.Bytes(), stderr.Bytes())
		}
		t.Skipf("cannot install Chromium and playwright-core (set CI=true to fail instead): %v", err)
	}
	dir := string(lastLine(stdout.Bytes()))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not under %q: %v", dir, err)
	}
	return dir
}

// startMakeRun starts the local server binary on a free port with a fresh
// data directory and returns its base URL; cleanup stops it with SIGTERM.
func startMakeRun(t *testing.T, bin, adminToken string) string {
	t.Helper()
	return startMakeRunIn(t, bin, adminToken, t.TempDir())
}

// seedCanaryRun records a canary run in the embedded store of dataDir, as
// the deployment's canary function would: a run against the replay
// fixtures, in which code_host/profile's page lost its location (the
// console shows what went null).
func seedCanaryRun(t *testing.T, dataDir string) {
	t.Helper()
	base, _ := replayAndStore(t, quietLogger())
	s, err := embedded.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	none := func(string) (string, bool) { return "", false }
	c := &app.Canary{Store: s, Runner: app.NewUpstream(quietLogger(), none, base), Lookup: none, Logger: quietLogger()}
	rep, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range rep.Operations {
		if o.Operation == "code_host/profile" {
			lower := 0.8571 // 12 of 14 fields
			rep.Operations[i].State, rep.Operations[i].NullFields, rep.Operations[i].Breach = canary.StateDrifting, []string{"location"}, true
			rep.Operations[i].FillRate = &lower
		}
	}
	raw, err := canary.Encode(rep)
	if err == nil {
		err = s.RecordCanaryRun(context.Background(), store.CanaryRun{At: rep.FinishedAt, Report: raw})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// startMakeRunIn is startMakeRun on the data directory dir.
func startMakeRunIn(t *testing.T, bin, adminToken, dir string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Dir = repoRoot(t) // make run's folder: testdata/ is found from it
	cmd.Env = append(os.Environ(),
		app.EnvAddr+"=127.0.0.1:0",
		app.EnvDataDir+"="+dir,
		app.EnvAdminToken+"="+adminToken,
		app.EnvUpstream+"="+app.UpstreamReplay,
		app.EnvErrorsURL+"=",
	)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, exited := make(chan string, 1), make(chan struct{})
	var tail sync.WaitGroup
	tail.Add(1)
	go func() {
		defer tail.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "meridian listening" {
				ready <- line.Addr
			}
			_, _ = logs.Write(append(sc.Bytes(), '\n'))
		}
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("the local server did not stop on SIGINT")
		}
		tail.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.Bytes())
		}
	})
	select {
	case addr := <-ready:
		return addr
	case <-exited:
		t.Fatalf("the local server exited:\n%s", logs.Bytes())
	case <-time.After(30 * time.Second):
		t.Fatalf("the local server did not start:\n%s", logs.Bytes())
	}
	return ""
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

// The console's Monitors section end to end, in the same Chromium: the
// local server's parts (embedded store, the in-process scheduler and jobs
// of app.LocalRuns, the local usage events, every family's function) run
// in this process so the test can drive the scheduler. The script
// (scripts/npm-tools/console-monitors-e2e.mjs) signs in, makes a key
// to run with and one it must not offer, creates a monitor through the
// form after three refusals shown next to their fields, waits for the
// scheduler's first run, pauses and resumes it, has the test deliver six
// more runs (the source's answer changes from the fourth), reads them
// newest first page by page with their changes, follows a run's request id
// to the ledger, and deletes the monitor. Screenshots: build/console-e2e/monitors/.
func TestConsoleMonitorsInChromium(t *testing.T) {
	root := repoRoot(t)
	installBrowser(t, root) // skips, or fails under CI=true, without a browser
	logger := quietLogger()
	fixtures, err := replay.Load(filepath.Join(root, "testdata", "upstream"))
	if err != nil {
		t.Fatal(err)
	}
	var changed atomic.Bool
	source := httptest.NewServer(changingRegistry(fixtures, &changed))
	t.Cleanup(source.Close)

	s := newEmbedded(t)
	ctx, cancel := context.WithCancel(context.Background())
	deps := app.Deps{Store: s, Upstream: app.NewUpstream(logger, func(string) (string, bool) { return "", false }, source.URL)}
	deps.Events = app.LocalEvents(ctx, s, logger)
	scheduler, jobs, err := app.LocalRuns(ctx, logger, &deps)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(app.LocalHandler(logger, deps))
	t.Cleanup(func() {
		api.Close()
		cancel()
		scheduler.Wait()
		jobs.Wait()
	})
	acct, token, err := auth.CreateAccount(ctx, s, 100, envelope.NewRequestID())
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(deliverRuns(ctx, t, s, scheduler, acct.ID, &changed))
	t.Cleanup(hook.Close)

	out := filepath.Join(root, "build", "console-e2e", "monitors")
	run, stopRun := context.WithTimeout(ctx, 2*time.Minute)
	defer stopRun()
	cmd := exec.CommandContext(run, filepath.Join(root, "scripts", "browser.sh"), "script", "console-monitors-e2e.mjs", api.URL, hook.URL, out)
	cmd.Env = append(os.Environ(), "MERIDIAN_CONSOLE_TOKEN="+token)
	runBrowserScript(t, cmd, 18, 10)
	// Seven runs of one credit each, then one refused, and no monitor left.
	if got := balance(t, s, acct.ID); got != 93 {
		t.Errorf("balance %d after seven runs of a one-credit operation", got)
	}
	if left, err := s.ListMonitors(ctx, acct.ID); err != nil || len(left) != 0 {
		t.Errorf("monitors left: %v %v", left, err)
	}
}

// changingRegistry is the replay upstream, except that while changed is
// set the company register's search answers differently: its first company
// renamed and its last one gone.
func changingRegistry(fixtures *replay.Server, changed *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !changed.Load() || r.URL.Path != "/companies_house/search/companies" {
			fixtures.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		fixtures.ServeHTTP(rec, r)
		raw := rec.Body.Bytes()
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil {
			if items, _ := body["items"].([]any); len(items) > 1 {
				if first, ok := items[0].(map[string]any); ok {
					first["title"] = "SAMPLE WIDGETS RENAMED LIMITED"
				}
				body["items"] = items[:len(items)-1]
				body["total_results"] = len(items) - 1
				raw, _ = json.Marshal(body)
			}
		}
		for k, v := range rec.Header() {
			if !strings.EqualFold(k, "content-length") {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(raw)
	})
}

// deliverRuns is the test's hook for the browser script: POST
// /deliver?monitor=ID&runs=N&change_at=K&from=F waits for the scheduler's
// first run of the monitor (at its creation time), then has the local
// scheduler deliver N scheduled times from the Fth after it (default 1)
// one after another, each run finished before the next (the source
// changes from the Kth; 0: never), and answers the ids of the first run
// and those delivered, newest first.
func deliverRuns(ctx context.Context, t *testing.T, s *embedded.Store, scheduler *monitors.LocalScheduler, accountID string, changed *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(format string, args ...any) {
			t.Errorf("deliver: "+format, args...)
			http.Error(w, fmt.Sprintf(format, args...), http.StatusInternalServerError)
		}
		q := r.URL.Query()
		n, _ := strconv.Atoi(q.Get("runs"))
		changeAt, _ := strconv.Atoi(q.Get("change_at"))
		from, err := strconv.Atoi(cmp.Or(q.Get("from"), "1"))
		if err != nil || from < 1 {
			fail("from=%q", q.Get("from"))
			return
		}
		m, err := s.Monitor(ctx, accountID, q.Get("monitor"))
		if err != nil {
			fail("monitor %q: %v", q.Get("monitor"), err)
			return
		}
		anchor, every := m.CreatedAt.UTC().Truncate(time.Second), time.Duration(m.IntervalMinutes)*time.Minute
		finished := func(at time.Time) error {
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				run, err := s.Run(ctx, accountID, m.ID, store.RunID(at), time.Now())
				if err == nil && run.Status != store.RunRunning {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the run of %s did not finish: %+v %v", at, run, err)
				}
			}
		}
		if err := finished(anchor); err != nil {
			fail("the scheduler's first run: %v", err)
			return
		}
		ids := []string{store.RunID(anchor)}
		for i := from; i < from+n; i++ {
			changed.Store(changeAt > 0 && i >= changeAt)
			at := anchor.Add(time.Duration(i) * every)
			scheduler.Deliver(ctx, at)
			if err := finished(at); err != nil {
				fail("run %d: %v", i, err)
				return
			}
			ids = append([]string{store.RunID(at)}, ids...)
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"runs": ids})
	})
}
