package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/meridian-data/meridian/shared/upstream"
)

// keptHeaders are the answer headers a recorded fixture keeps: what
// adapters read (content type, rate-limit waits, pagination links, a WAF's
// verdict, a redirect's target). Everything else, set-cookie above all,
// is left out.
var keptHeaders = []string{
	"content-type", "content-language", "retry-after", "location", "link",
	"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
	"x-rate-limit-limit", "x-rate-limit-remaining", "x-rate-limit-reset",
	"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset",
	"x-amzn-waf-action",
}

// maxMatchedString bounds a request body string kept as a literal match;
// a longer one matches as "*" (present, any value).
const maxMatchedString = 2048

// Exchange is one request a route made and the answer it got, as the
// recorder saw them on the wire.
type Exchange struct {
	// BaseURL is the route's base URL: match.path is relative to it.
	BaseURL string
	Method  string
	URL     *url.URL
	// RequestHeader is read for the body's content type only: request
	// headers are never written.
	RequestHeader  http.Header
	RequestBody    []byte
	Status         int
	ResponseHeader http.Header
	// ResponseBody is as it came, still content-encoded.
	ResponseBody []byte
}

// recorded is the fixture format Load reads, with empty parts left out.
type recorded struct {
	Match struct {
		Method string                     `json:"method"`
		Path   string                     `json:"path"`
		Query  map[string]string          `json:"query,omitempty"`
		Body   map[string]json.RawMessage `json:"body,omitempty"`
	} `json:"match"`
	Response struct {
		Status   int               `json:"status"`
		Headers  map[string]string `json:"headers,omitempty"`
		Body     json.RawMessage   `json:"body,omitempty"`
		BodyText *string           `json:"body_text,omitempty"`
	} `json:"response"`
}

// Fixture turns an exchange into a fixture file: its name (stable for
// the same match, so recording the same request again overwrites it) and
// its contents, with every credential removed:
//
//   - match: the method, the path relative to the base URL (secrets as
//     "*"), every query parameter ("*" for credential-named ones and for
//     any value sanitising would change), and the top-level strings,
//     numbers and booleans of a JSON object body (objects and arrays,
//     which carry headers and cookies, are left out; credentials and
//     changed or long strings as "*"); request headers never;
//   - response: the status, the keptHeaders (sanitised), and the body
//     decoded (gzip, deflate, br) and sanitised: JSON as body, else
//     body_text.
//
// It is pure: no I/O, the same exchange always gives the same file.
func (s *Sanitizer) Fixture(ex Exchange) (name string, contents []byte, err error) {
	var fx recorded
	fx.Match.Method = ex.Method
	rel := s.removeSecrets(relativePath(ex.BaseURL, ex.URL))
	fx.Match.Path = strings.ReplaceAll(escapePattern(rel), Redacted, "*")
	fx.Match.Query = s.matchQuery(ex.URL.Query())
	fx.Match.Body = s.matchBody(ex.RequestHeader.Get("content-type"), ex.RequestBody)

	fx.Response.Status = ex.Status
	for _, h := range keptHeaders {
		if vs := ex.ResponseHeader.Values(h); len(vs) > 0 {
			if fx.Response.Headers == nil {
				fx.Response.Headers = map[string]string{}
			}
			fx.Response.Headers[h] = s.Text(strings.Join(vs, ", "))
		}
	}
	body, err := upstream.DecodeContent(ex.ResponseBody, ex.ResponseHeader.Get("content-encoding"))
	if err != nil {
		return "", nil, err
	}
	contentType := strings.ToLower(ex.ResponseHeader.Get("content-type"))
	jsonBody, isJSON := []byte(nil), false
	if contentType == "" || strings.Contains(contentType, "json") {
		jsonBody, isJSON = s.JSON(body)
	}
	if isJSON && len(bytes.TrimSpace(body)) > 0 {
		fx.Response.Body = jsonBody
	} else {
		text := s.Text(string(body))
		fx.Response.BodyText = &text
	}

	key, err := json.Marshal(fx.Match) // maps marshal with sorted keys: stable
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(key)
	name = fmt.Sprintf("rec-%s-%s-%s.json", strings.ToLower(ex.Method), slug(rel), hex.EncodeToString(sum[:5]))

	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fx); err != nil {
		return "", nil, err
	}
	if s.Leaks(b.Bytes()) || s.Leaks([]byte(name)) {
		// The last look: never write what still holds a secret.
		return "", nil, errors.New("a configured secret survived sanitising; the fixture is not written")
	}
	return name, b.Bytes(), nil
}

// matchQuery is match.query: credentials and values sanitising would
// change as "*" (present, any value: replay sends placeholders), the
// rest exact. A parameter whose name holds a secret is left out.
func (s *Sanitizer) matchQuery(q url.Values) map[string]string {
	if len(q) == 0 {
		return nil
	}
	out := make(map[string]string, len(q))
	for k, vs := range q {
		if s.removeSecrets(k) != k {
			continue
		}
		v := ""
		if len(vs) > 0 {
			v = vs[0]
		}
		if CredentialName(k) || s.IsSecret(v) || s.str(v) != v || carriesCredential(v) {
			v = "*"
		}
		out[k] = v
	}
	return out
}

// matchBody is match.body for a JSON object request body: its top-level
// scalars, strings as literal patterns ("*" for credentials and for
// strings sanitising changes or longer than maxMatchedString).
func (s *Sanitizer) matchBody(contentType string, body []byte) map[string]json.RawMessage {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil
	}
	if contentType != "" && !strings.Contains(strings.ToLower(contentType), "json") {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(trimmed, &fields) != nil {
		return nil
	}
	out := map[string]json.RawMessage{}
	for k, raw := range fields {
		if s.removeSecrets(k) != k {
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			continue
		}
		var kept any
		switch t := v.(type) {
		case string:
			kept = escapePattern(t)
			if CredentialName(k) || s.IsSecret(t) || s.str(t) != t || len(t) > maxMatchedString || carriesCredential(t) {
				kept = "*"
			}
		case json.Number, bool:
			kept = t
			if CredentialName(k) {
				kept = "*"
			}
		default:
			continue // objects, arrays and null tell requests apart too rarely to carry their risk
		}
		enc, err := json.Marshal(kept)
		if err != nil {
			continue
		}
		out[k] = enc
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// carriesCredential reports whether a request value is itself a document
// naming a credential field: a forwarded request body (a service's
// httpRequestText, or its base64 httpRequestBody) in JSON or form
// encoding, carrying a csrf token or a password, say.
func carriesCredential(v string) bool {
	if decoded, _, ok := base64Text(v); ok {
		v = decoded
	}
	t := strings.TrimSpace(v)
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		var doc any
		return json.Unmarshal([]byte(t), &doc) == nil && namesCredential(doc)
	}
	if strings.Contains(t, "=") && !strings.ContainsAny(t, " \t\r\n") {
		if form, err := url.ParseQuery(t); err == nil {
			for k := range form {
				if CredentialName(k) {
					return true
				}
			}
		}
	}
	return false
}

// namesCredential reports whether a decoded JSON document has a
// credential-named field, or a name/value pair naming one, at any depth.
func namesCredential(v any) bool {
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			if namesCredential(x) {
				return true
			}
		}
	case map[string]any:
		if name, ok := t["name"].(string); ok && CredentialName(name) {
			return true
		}
		for k, x := range t {
			if CredentialName(k) && !exemptField(k) || namesCredential(x) {
				return true
			}
		}
	}
	return false
}

// relativePath is u's path relative to the route's base URL, as the
// replay upstream sees it under /<provider>. A request for another host
// (a site's other marketplace) keeps its whole path, as it does when the
// base URL is moved.
func relativePath(base string, u *url.URL) string {
	p := u.Path
	if b, err := url.Parse(base); err == nil {
		prefix := strings.TrimSuffix(b.Path, "/")
		if prefix != "" && (p == prefix || strings.HasPrefix(p, prefix+"/")) {
			p = strings.TrimPrefix(p, prefix)
		}
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// escapePattern makes a literal a path.Match pattern matching only itself.
func escapePattern(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug is a readable file-name part for a path.
func slug(p string) string {
	s := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(p), "-"), "-")
	if len(s) > 48 {
		s = strings.TrimRight(s[:48], "-")
	}
	if s == "" {
		return "root"
	}
	return s
}

// Recorder is an http.RoundTripper in front of the routes' transport
// (upstream.Settings.Client) that writes each answer a route gets as a
// fixture under Dir/<provider>/, sanitised (Sanitizer.Fixture) before
// anything reaches the disk. It learns a request's provider and base URL
// from upstream.RouteOf; requests outside a route's attempt pass through
// unrecorded. A redirect the client follows is recorded as the final
// answer to the first request, which is what the adapter saw.
type Recorder struct {
	dir  string
	next http.RoundTripper
	san  *Sanitizer

	mu       sync.Mutex
	written  map[string]Recorded // by file path
	errs     []error
	unrouted int
	// origins maps a request that got a redirect to the exchange's first
	// request, for the hop the client makes next.
	origins map[*http.Request]origin
}

// Recorded is one fixture file written.
type Recorded struct {
	Provider string
	Path     string // the file, under the recorder's folder
	Status   int    // the answer's status
}

// origin is the request a (possibly redirected) exchange started with.
type origin struct {
	method string
	url    *url.URL
	header http.Header
	body   []byte
}

// NewRecorder records into dir the answers next gets, removing the
// secret values given (every configured credential) and every cookie,
// session token and signing parameter.
func NewRecorder(dir string, secrets []string, next http.RoundTripper) *Recorder {
	if next == nil {
		next = http.DefaultTransport
	}
	return &Recorder{dir: dir, next: next, san: NewSanitizer(secrets), written: map[string]Recorded{}, origins: map[*http.Request]origin{}}
}

// RoundTrip passes the request on and records its answer.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	route, ok := upstream.RouteOf(req.Context())
	if !ok {
		r.mu.Lock()
		r.unrouted++
		r.mu.Unlock()
		return r.next.RoundTrip(req)
	}
	sent, body := req, []byte(nil)
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		// A copy: a RoundTripper must not change the request it is given.
		sent, body = req.Clone(req.Context()), b
		sent.Body = io.NopCloser(bytes.NewReader(b))
		sent.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		sent.ContentLength = int64(len(b))
	}
	res, err := r.next.RoundTrip(sent)
	if err != nil {
		return res, err
	}
	first := origin{method: req.Method, url: req.URL, header: req.Header, body: body}
	r.mu.Lock()
	if req.Response != nil {
		if o, ok := r.origins[req.Response.Request]; ok {
			first = o
			delete(r.origins, req.Response.Request)
		}
	}
	if res.StatusCode >= 300 && res.StatusCode <= 399 && res.Header.Get("location") != "" {
		r.origins[sent] = first
	}
	r.mu.Unlock()

	raw, readErr := io.ReadAll(io.LimitReader(res.Body, upstream.MaxBody+1))
	rest := io.Reader(res.Body)
	if readErr != nil {
		rest = errReader{readErr}
	}
	res.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(raw), rest), Closer: res.Body}
	if readErr != nil || len(raw) > upstream.MaxBody {
		return res, nil // not an answer the adapter can use: nothing to record
	}
	r.record(route, Exchange{
		BaseURL: route.BaseURL, Method: first.method, URL: first.url, RequestHeader: first.header, RequestBody: first.body,
		Status: res.StatusCode, ResponseHeader: res.Header, ResponseBody: raw,
	})
	return res, nil
}

// record writes one exchange's fixture, replacing an earlier recording
// of the same match.
func (r *Recorder) record(route upstream.RouteInfo, ex Exchange) {
	name, contents, err := r.san.Fixture(ex)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s %s: %w", route.Provider, ex.Method, err))
		return
	}
	if route.Provider == "" || filepath.Base(route.Provider) != route.Provider || route.Provider == "." || route.Provider == ".." {
		r.errs = append(r.errs, fmt.Errorf("provider %q cannot name a folder", route.Provider))
		return
	}
	folder := filepath.Join(r.dir, route.Provider)
	file := filepath.Join(folder, name)
	if err := writeFile(folder, file, contents); err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.written[file] = Recorded{Provider: route.Provider, Path: file, Status: ex.Status}
}

// writeFile replaces file whole (a temporary file renamed), so a fixture
// is never left half written.
func writeFile(folder, file string, contents []byte) error {
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(folder, ".rec-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(contents); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// Written lists the fixture files written so far, by path.
func (r *Recorder) Written() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Recorded, 0, len(r.written))
	for _, w := range r.written {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Err joins the failures to record (nil when every answer was written).
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// Unrouted counts requests that passed through outside any route's
// attempt, unrecorded.
func (r *Recorder) Unrouted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unrouted
}

// readCloser reads the recorded bytes (then the rest) and closes the
// original body.
type readCloser struct {
	io.Reader
	io.Closer
}

// errReader hands the caller the read error the recorder met.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
