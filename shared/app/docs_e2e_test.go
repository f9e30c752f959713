package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/apidocs"
	"github.com/meridian-data/meridian/shared/openapi"
)

// docsServer builds and starts the local server as `make run` does (replay
// upstream, fresh embedded store, operator API on) and opens an account
// with 1,000 credits and one API key: the base URL and the key.
func docsServer(t *testing.T) (base, key string) {
	t.Helper()
	root := repoRoot(t)
	if !apidocs.Built() && ciRun() {
		t.Fatal("Redoc's bundle is not embedded: make test runs scripts/docs-assets.sh first")
	}
	bin := filepath.Join(t.TempDir(), "meridian-local")
	build := exec.Command("go", "build", "-o", bin, "./functions/local")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the local server: %v\n%s", err, out)
	}
	adminToken := "docs-operator-" + strings.Repeat("x", 24)
	base = startMakeRun(t, bin, adminToken)
	call := func(method, path string, body any, headers map[string]string) map[string]any {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(raw))
		req.Header.Set("content-type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s %s: %d %v %v", method, path, resp.StatusCode, err, out)
		}
		return out
	}
	acct := call(http.MethodPost, "/admin/accounts", map[string]any{"credits": 1000}, map[string]string{"x-admin-token": adminToken})
	created := call(http.MethodPost, "/console/keys", map[string]any{"name": "docs"}, map[string]string{"authorization": "Bearer " + acct["console_token"].(string)})
	key, _ = created["key"].(string)
	if !strings.HasPrefix(key, "mn_") {
		t.Fatalf("no key in %v", created)
	}
	return base, key
}

// The API reference page end to end, in headless Chromium (Debian's, driven
// by playwright-core, as the console's test), against the server `make run`
// starts: every operation of the served document appears, search finds
// one, company_registry/search's curl and Python examples name this
// deployment and the catalogue's example, the try-it form calls the
// sandbox first and stores the key nowhere, and the page has no script
// error, no policy violation and no request to another origin.
// Screenshots at desktop and phone width: build/docs-e2e/.
func TestDocsInChromium(t *testing.T) {
	root := repoRoot(t)
	installBrowser(t, root)
	base, key := docsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "browser.sh"), "script", "docs-e2e.mjs", base, filepath.Join(root, "build", "docs-e2e"))
	cmd.Env = append(os.Environ(), openapi.KeyVariable+"="+key)
	runBrowserScript(t, cmd, 7, 5)
}

// curlCommand is one curl example as the document gives it, parsed the way
// a POSIX shell reads it: single-quoted words literally, double-quoted ones
// with $VAR expanded.
type curlCommand struct {
	method, url string
	headers     http.Header
	body        string
}

// parseCurl reads the curl examples' grammar: curl -s [-X METHOD] 'URL'
// (-H 'NAME: VALUE' | -H "NAME: $VAR")... [-d 'BODY']. Anything else is an
// error, so an example the parser does not understand fails the test.
func parseCurl(src string, env map[string]string) (curlCommand, error) {
	words, err := shellWords(src, env)
	if err != nil {
		return curlCommand{}, err
	}
	c := curlCommand{method: http.MethodGet, headers: http.Header{}}
	if len(words) < 2 || words[0] != "curl" {
		return c, errorf("not a curl command: %q", src)
	}
	for i := 1; i < len(words); i++ {
		w := words[i]
		next := func() (string, error) {
			if i+1 >= len(words) {
				return "", errorf("%s needs a value", w)
			}
			i++
			return words[i], nil
		}
		switch {
		case w == "-s":
		case w == "-X" || w == "-H" || w == "-d":
			v, err := next()
			if err != nil {
				return c, err
			}
			switch w {
			case "-X":
				c.method = v
			case "-H":
				name, value, ok := strings.Cut(v, ":")
				if !ok {
					return c, errorf("header %q", v)
				}
				c.headers.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			case "-d":
				c.body = v
			}
		case strings.HasPrefix(w, "-"):
			return c, errorf("unknown option %s", w)
		case c.url == "":
			c.url = w
		default:
			return c, errorf("a second URL %q", w)
		}
	}
	if c.body != "" && c.method == http.MethodGet {
		c.method = http.MethodPost // as curl -d does
	}
	return c, nil
}

var shellVar = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)

// shellWords splits a command line as sh does for the quoting the examples
// use: '...' literal, "..." with $VAR expanded, words split on blanks.
func shellWords(s string, env map[string]string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case ' ', '\t', '\n':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errorf("unclosed ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case '"':
			end := strings.IndexByte(s[i+1:], '"')
			if end < 0 {
				return nil, errorf("unclosed \" in %q", s)
			}
			cur.WriteString(shellVar.ReplaceAllStringFunc(s[i+1:i+1+end], func(v string) string { return env[v[1:]] }))
			i, inWord = i+1+end, true
		case '\\', '$', '`', '|', '&', ';', '<', '>':
			return nil, errorf("unquoted %c in %q", ch, s)
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

type parseError string

func (e parseError) Error() string { return string(e) }

func errorf(format string, args ...any) error {
	return parseError(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// The curl example of every operation this deployment serves, taken from
// the served document and run with a real key against the server `make
// run` starts in replay mode, answers 200. Each example runs through curl
// itself when it is installed (Debian has it), the text as written by sh;
// without curl, through the parsed request. Either way the parser reads
// every example, so an example outside its grammar fails. Operations on
// something the account must own first (a monitor, a web job, an AI-assist
// recall) run with the id of one the test made, in place of the
// catalogue's example id.
func TestCurlExamplesAnswer200(t *testing.T) {
	base, key := docsServer(t)
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]struct {
			OperationID string               `json:"operationId"`
			Available   *bool                `json:"x-available"`
			Samples     []openapi.CodeSample `json:"x-codeSamples"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(doc.Servers) != 1 || doc.Servers[0].URL != base {
		t.Fatalf("servers %v, want %s", doc.Servers, base)
	}
	curlPath, _ := exec.LookPath("curl")
	env := map[string]string{openapi.KeyVariable: key}
	run := func(src string) (int, string) {
		t.Helper()
		c, err := parseCurl(src, env)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if !strings.HasPrefix(c.url, base+"/") {
			t.Fatalf("the example calls %s, not this deployment (%s)", c.url, base)
		}
		if curlPath != "" {
			cmd := exec.Command("sh", "-c", src+` -o "$OUT" -w '%{http_code}'`)
			out := filepath.Join(t.TempDir(), "body")
			cmd.Env = append(os.Environ(), openapi.KeyVariable+"="+key, "OUT="+out)
			code, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			body, _ := os.ReadFile(out)
			var status int
			_, _ = fmt.Sscan(string(code), &status)
			return status, string(body)
		}
		req, _ := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
		req.Header = c.headers
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(body)
	}
	samples := map[string]string{}
	for _, item := range doc.Paths {
		for _, op := range item {
			if len(op.Samples) != 3 || op.Samples[0].Lang != "curl" || op.Samples[1].Lang != "python" || op.Samples[2].Lang != "javascript" {
				t.Errorf("%s: x-codeSamples %v", op.OperationID, op.Samples)
				continue
			}
			if op.Available == nil {
				t.Errorf("%s: no x-available", op.OperationID)
			} else if *op.Available {
				samples[op.OperationID] = op.Samples[0].Source
			}
		}
	}
	if len(samples) < 50 {
		t.Fatalf("only %d operations available in replay mode", len(samples))
	}
	t.Logf("running %d curl examples (curl: %v)", len(samples), curlPath != "")
	// Make what the id-addressed examples name: a monitor and a web job.
	ids := map[string]string{}
	made := func(src, op, field, pattern string) {
		status, body := run(src)
		var env struct {
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal([]byte(body), &env)
		id, _ := env.Data[field].(string)
		if status/100 != 2 || id == "" {
			t.Fatalf("%s: %d %s", op, status, body)
		}
		ids[pattern] = id
	}
	made(samples["monitors_create"], "monitors_create", "id", `mon_[a-z0-9]{26}`)
	delete(samples, "monitors_create")
	async := strings.Replace(samples["web_social_profiles"], "' -H", "&async=1' -H", 1)
	made(async, "web_social_profiles", "job_id", `job_[a-z0-9]{26}`)
	// A recall id comes from an AI-assist answer that removed records,
	// which no replay fixture gives: its example must find nothing, typed.
	recall := samples["assist_recall"]
	delete(samples, "assist_recall")
	if status, body := run(recall); status != http.StatusNotFound || !strings.Contains(body, `"RESOURCE_NOT_FOUND"`) {
		t.Errorf("assist_recall: %d %.300s", status, body)
	}
	order := []string{}
	for id := range samples {
		order = append(order, id)
	}
	sort.Strings(order)
	for _, last := range []string{"monitors_id_delete"} { // deleting comes after the monitor's other calls
		for i, id := range order {
			if id == last {
				order = append(append(order[:i:i], order[i+1:]...), last)
				break
			}
		}
	}
	for _, id := range order {
		src := samples[id]
		for pattern, real := range ids {
			src = regexp.MustCompile(pattern).ReplaceAllString(src, real)
		}
		status, body := run(src)
		if status != http.StatusOK {
			t.Errorf("%s: %d\n%s\n%.400s", id, status, src, body)
		}
	}
}
