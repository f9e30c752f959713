package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/app"
	"github.com/meridian-data/meridian/shared/upstream/adapters/harvestapi"
	"github.com/meridian-data/meridian/shared/upstream/adapters/lix"
	"github.com/meridian-data/meridian/shared/upstream/replay"
)

// The local source's key (sent as X-API-Key by the harvestapi adapter)
// and the session cookie it sets: characters that encodings change.
const (
	recordKey    = "hv-key/9a8b+7c6d=5e4f&g"
	recordCookie = "hv-session-31f2e4d5c6b7"
)

const recordOp = "professional_network/locations"

// harvestSource answers as HarvestAPI does (the project's fixtures) when
// the request carries the key, setting a session cookie; 401 otherwise.
func harvestSource(t *testing.T) *httptest.Server {
	t.Helper()
	answers, err := replay.Load(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != recordKey {
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"status":401,"error":"Invalid API key"}`))
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "hv_session", Value: recordCookie, Path: "/"})
		answers.ServeHTTP(w, r) // /harvestapi/<path>: the fixtures' provider folder
	}))
	t.Cleanup(src.Close)
	return src
}

// serve runs the operation once on a runner built as the canary builds it.
func serve(t *testing.T, replayURL string, params map[string]string) any {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
	out := app.NewUpstream(logger, os.LookupEnv, replayURL).Serve(context.Background(), recordOp, params)
	if out.Fault != nil {
		t.Fatalf("%s (replay %q): %v", recordOp, replayURL, out.Fault)
	}
	raw, err := json.Marshal(out.Data)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}

func TestRecordWritesSanitisedFixturesThatReplay(t *testing.T) {
	offline(t)
	src := harvestSource(t)
	t.Setenv("MERIDIAN_UPSTREAM_HARVESTAPI_URL", src.URL+"/harvestapi")
	t.Setenv(harvestapi.KeySecret, recordKey)
	t.Setenv(lix.KeySecret, "") // harvestapi is the operation's only route: nothing else is called
	dir := filepath.Join(t.TempDir(), "recorded")

	code, out, errOut := runCanary(t, "-record", dir, "-only", recordOp, "-json")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	live := parseRows(t, out)[recordOp+" harvestapi"]
	if !live.OK || live.Route != "harvestapi" {
		t.Fatalf("live row %+v", live)
	}
	if !strings.Contains(errOut, "recorded 1 source answers under "+dir) || !strings.Contains(errOut, "harvestapi/rec-get-linkedin-geo-id-search-") {
		t.Errorf("stderr does not say where the fixture went:\n%s", errOut)
	}

	// The fixture replays the same answer: the same data, the same fields filled.
	// (Replay makes every provider a route: the operation's other one, lix,
	// has no recorded answer, and fails.)
	code, out, errOut = runCanary(t, "-replay", "-fixtures", dir, "-only", recordOp, "-json")
	rows := parseRows(t, out)
	if code != exitFailed || len(rows) != 2 || rows[recordOp+" lix"].OK {
		t.Fatalf("replay: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	replayed := rows[recordOp+" harvestapi"]
	if !replayed.OK || replayed.Route != "harvestapi" || !reflect.DeepEqual(replayed.FilledFields, live.FilledFields) ||
		*replayed.FillRate != *live.FillRate {
		t.Errorf("replayed row %+v, live %+v", replayed, live)
	}
	srv, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	if got, want := serve(t, base, live.Params), serve(t, "", live.Params); !reflect.DeepEqual(got, want) {
		t.Errorf("replayed data %v\nlive data %v", got, want)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !strings.HasPrefix(reqs[0].Fixture, "rec-") {
		t.Errorf("replay requests %+v", reqs)
	}

	// The key and the cookie appear nowhere in what was written.
	leaks := []string{recordKey, url.QueryEscape(recordKey), url.PathEscape(recordKey), base64.StdEncoding.EncodeToString([]byte(recordKey)),
		strings.ReplaceAll(recordKey, "&", `\u0026`), recordCookie}
	files := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		text := p + "\n" + string(raw)
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds a secret (%d characters):\n%s", p, len(leak), raw)
			}
		}
		if strings.Contains(strings.ToLower(text), "cookie") || strings.Contains(strings.ToLower(text), "x-api-key") {
			t.Errorf("%s holds a cookie or key header:\n%s", p, raw)
		}
		return nil
	})
	if err != nil || files != 1 {
		t.Errorf("%d files (%v), want 1", files, err)
	}
	if strings.Contains(errOut, recordKey) {
		t.Error("the key was printed")
	}
}

func TestRecordRefusedWithReplay(t *testing.T) {
	offline(t)
	dir := filepath.Join(t.TempDir(), "recorded")
	code, _, errOut := runCanary(t, "-record", dir, "-replay", "-fixtures", fixtures)
	if code != exitUsage || !strings.Contains(errOut, "-record") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("something was written: %v", err)
	}
}
