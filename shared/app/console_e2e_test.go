package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/app"
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
	if out, err := exec.Command(script, "install").CombinedOutput(); err != nil {
		if ciRun() {
			t.Fatalf("cannot install Chromium and playwright-core: %v\n%s", err, out)
		}
		t.Skipf("cannot install Chromium and playwright-core (set CI=true to fail instead): %v", err)
	}
	bin := filepath.Join(t.TempDir(), "meridian-local")
	build := exec.Command("go", "build", "-o", bin, "./functions/local")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the local server: %v\n%s", err, out)
	}
	adminToken := "e2e-operator-" + strings.Repeat("x", 24)
	base := startMakeRun(t, bin, adminToken)

	out := filepath.Join(root, "build", "console-e2e")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, "run", base, out)
	cmd.Env = append(os.Environ(), app.EnvAdminToken+"="+adminToken)
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
	if len(report.Steps) < 15 || len(report.Screenshots) < 12 {
		t.Fatalf("%d steps, %d screenshots", len(report.Steps), len(report.Screenshots))
	}
	for _, s := range report.Screenshots {
		if fi, err := os.Stat(s); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", s, err)
		}
	}
}

// startMakeRun starts the local server binary on a free port with a fresh
// data directory and returns its base URL; cleanup stops it with SIGTERM.
func startMakeRun(t *testing.T, bin, adminToken string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Dir = repoRoot(t) // make run's folder: testdata/ is found from it
	cmd.Env = append(os.Environ(),
		app.EnvAddr+"=127.0.0.1:0",
		app.EnvDataDir+"="+t.TempDir(),
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
