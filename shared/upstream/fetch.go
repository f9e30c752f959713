package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// MaxBody caps an upstream body; a larger one is an unusable answer.
const MaxBody = 8 << 20

// userAgent identifies Meridian to upstreams, as their terms ask.
const userAgent = "Meridian/1 (+https://github.com/meridian-data/meridian)"

// Response is an upstream answer read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Get fetches path (relative to the provider's base URL) with query and
// header. A 2xx answer returns the response; any other status returns the
// response and StatusFault's classification, so an adapter that knows its
// upstream's error bodies can re-classify. Transport failures and
// deadlines are Faults too.
func (c *Call) Get(ctx context.Context, path string, query url.Values, header http.Header) (*Response, error) {
	return c.do(ctx, http.MethodGet, path, query, header, nil)
}

// Post sends a JSON body (for session creation and similar calls).
func (c *Call) Post(ctx context.Context, path string, header http.Header, body any) (*Response, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	if header == nil {
		header = http.Header{}
	}
	header.Set("content-type", "application/json")
	return c.do(ctx, http.MethodPost, path, nil, header, raw)
}

// Send makes a request with any method and a raw body (sent as given,
// with the content type the header names), answering as Get does: for a
// page-fetch route that forwards a site's own request.
func (c *Call) Send(ctx context.Context, method, path string, query url.Values, header http.Header, body []byte) (*Response, error) {
	return c.do(ctx, method, path, query, header, body)
}

// PostForm POSTs a form-encoded body (an OAuth token endpoint, say) to
// path, answering as Get does.
func (c *Call) PostForm(ctx context.Context, path string, header http.Header, form url.Values) (*Response, error) {
	if header == nil {
		header = http.Header{}
	}
	header.Set("content-type", "application/x-www-form-urlencoded")
	return c.do(ctx, http.MethodPost, path, nil, header, []byte(form.Encode()))
}

// GetJSON is Get followed by decoding a 2xx body into out; a body that
// does not decode is Malformed.
func (c *Call) GetJSON(ctx context.Context, path string, query url.Values, header http.Header, out any) (*Response, error) {
	resp, err := c.Get(ctx, path, query, header)
	if err != nil {
		return resp, err
	}
	return resp, DecodeJSON(resp.Body, out)
}

// DecodeJSON decodes an upstream body; numbers stay json.Number-safe for
// the caller's types, and trailing garbage is refused.
func DecodeJSON(body []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(out); err != nil {
		return MalformedFault("body is not the expected JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return MalformedFault("body has data after its JSON value")
	}
	return nil
}

func (c *Call) do(ctx context.Context, method, path string, query url.Values, header http.Header, body []byte) (*Response, error) {
	if f := c.admitted(ctx); f != nil {
		return nil, f
	}
	target := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, MalformedFault("cannot build the upstream request: %v", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if req.Header.Get("user-agent") == "" {
		req.Header.Set("user-agent", userAgent)
	}
	if req.Header.Get("accept") == "" {
		req.Header.Set("accept", "application/json")
	}
	return send(ctx, c.client, req)
}

// send makes one request and reads its answer in full, classifying
// failures as Faults.
func send(ctx context.Context, client *http.Client, req *http.Request) (*Response, error) {
	res, err := client.Do(req)
	if err != nil {
		return nil, transportFault(ctx, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxBody+1))
	if err != nil {
		return nil, transportFault(ctx, err)
	}
	if len(raw) > MaxBody {
		return nil, MalformedFault("body larger than %d bytes", MaxBody)
	}
	resp := &Response{Status: res.StatusCode, Header: res.Header, Body: raw}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return resp, StatusFault(res.StatusCode, res.Header)
	}
	return resp, nil
}

// transportFault classifies a failure to get an answer: the attempt's
// deadline is a Timeout, anything else (refused, reset, cut short) Transport.
func transportFault(ctx context.Context, err error) *Fault {
	var netErr net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &netErr) && netErr.Timeout()) {
		return &Fault{Kind: Timeout, Reason: "no answer before the deadline"}
	}
	var refused *URLRefusedError
	if errors.As(err, &refused) {
		return unsafeURL("", refused)
	}
	return &Fault{Kind: Transport, Reason: scrub(err)}
}

// scrub keeps a transport error's cause but drops the URL, whose query
// may hold a credential (some upstreams take API keys as parameters).
func scrub(err error) string {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Op + ": " + u.Err.Error()
	}
	return err.Error()
}

// parseRetryAfter reads a Retry-After header: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// GetPublic fetches a caller-supplied URL (the value of parameter field)
// under the URL policy: public addresses only, on every redirect too. A
// refusal is an InvalidParameter fault naming field (422). Non-2xx
// statuses classify as in Get.
func (c *Call) GetPublic(ctx context.Context, field, raw string, header http.Header) (*Response, error) {
	if f := c.admitted(ctx); f != nil {
		return nil, f
	}
	u, err := c.public.Check(ctx, raw)
	if err != nil {
		return nil, unsafeURL(field, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, unsafeURL(field, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("user-agent", userAgent)
	resp, err := send(ctx, c.public.Client(), req)
	var f *Fault
	if errors.As(err, &f) && f.Kind == InvalidParameter {
		f.Field = field // a redirect the policy refused
	}
	return resp, err
}

// unsafeURL is the fault of a URL the policy refuses.
func unsafeURL(field string, err error) *Fault {
	return InvalidParameterFault(field, "unsafe_url", "The URL is not fetched: "+err.Error())
}

// Doer is the attempt's HTTP client for an SDK that makes its own requests
// (the AWS SDK, say): each request first passes the attempt's admission gate,
// as Get's do, so a limited route takes its allowance unit at the first
// request, and a refusal is the gate's *Fault (wrapped by the SDK). Answers
// come as they are, their bodies capped at MaxBody; the SDK reads statuses.
func (c *Call) Doer() interface {
	Do(*http.Request) (*http.Response, error)
} {
	return doerFunc(func(req *http.Request) (*http.Response, error) {
		if f := c.admitted(req.Context()); f != nil {
			return nil, f
		}
		res, err := c.client.Do(req)
		if err != nil {
			return nil, err
		}
		res.Body = &cappedBody{ReadCloser: res.Body, left: MaxBody}
		return res, nil
	})
}

// doerFunc is a function serving as an HTTP client.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// errBodyTooLarge ends the reading of a body past MaxBody.
var errBodyTooLarge = errors.New("upstream body larger than the cap")

// cappedBody reads at most left bytes, then fails, so an SDK decoding an
// endless body fails as Get's callers do instead of holding it all.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly MaxBody from a longer one.
		var probe [1]byte
		n, err := b.ReadCloser.Read(probe[:])
		if n > 0 {
			return 0, errBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
