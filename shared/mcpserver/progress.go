package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Progress of the streaming tools (search/all, search/creators): a
// tools/call that asks for progress (_meta.progressToken) is answered as
// server-sent events, the one POST an MCP notification can travel on in
// stateless mode; the tool calls the API with stream=1 and turns each leg
// event into a notifications/progress as the API writes it. Every other
// request is answered as JSON, exactly as without progress.

// progressPeekBytes bounds how much of a POST is read to decide how to
// answer it: a tools/call of a streaming tool is a few hundred bytes; a
// larger body is answered as JSON.
const progressPeekBytes = 64 << 10

// The API's stream events (pipeline.EventLeg and pipeline.EventResult;
// the pipeline imports this package, so they cannot be referred to).
const (
	eventLeg    = "leg"
	eventResult = "result"
)

// asksForProgress reports whether r is a single tools/call of one of the
// streaming tools with a progress token. The body is restored for the
// SDK whatever is read.
func asksForProgress(r *http.Request, streaming map[string]bool) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	peeked, err := io.ReadAll(io.LimitReader(r.Body, progressPeekBytes+1))
	r.Body = restoredBody{Reader: io.MultiReader(bytes.NewReader(peeked), r.Body), Closer: r.Body}
	if err != nil || len(peeked) > progressPeekBytes {
		return false
	}
	// A batch is an array and fails to decode here: it stays JSON.
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			Meta struct {
				ProgressToken any `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(peeked, &msg) != nil {
		return false
	}
	return msg.Method == "tools/call" && streaming[msg.Params.Name] && validToken(msg.Params.Meta.ProgressToken)
}

// restoredBody is a request body with its first bytes put back.
type restoredBody struct {
	io.Reader
	io.Closer
}

// validToken: MCP progress tokens are strings or integers.
func validToken(token any) bool {
	switch token.(type) {
	case string, float64, json.Number, int, int64:
		return true
	}
	return false
}

// withStream adds stream=1 to an encoded query.
func withStream(query string) string {
	// queryOf's output always parses.
	q, _ := url.ParseQuery(query)
	q.Set("stream", "1")
	return q.Encode()
}

// legEvent is what a progress notification reads of a leg event.
type legEvent struct {
	Platform string `json:"platform"`
	Status   int    `json:"status"`
	OK       bool   `json:"ok"`
	Cached   bool   `json:"cached"`
	Count    *int   `json:"count"`
	Error    *struct {
		Type string `json:"type"`
	} `json:"error"`
	Progress *struct {
		Done  int `json:"done"`
		Total int `json:"total"`
	} `json:"progress"`
}

// message names the platform and how its leg ended.
func (ev legEvent) message() string {
	if ev.OK {
		s := fmt.Sprintf("%s: ok (%d)", ev.Platform, ev.Status)
		if ev.Count != nil {
			s += fmt.Sprintf(", %d item%s", *ev.Count, plural(int64(*ev.Count)))
		}
		if ev.Cached {
			s += ", cached"
		}
		return s
	}
	kind := "error"
	if ev.Error != nil && ev.Error.Type != "" {
		kind = ev.Error.Type
	}
	if ev.Status == 0 {
		return fmt.Sprintf("%s: failed (%s, did not run)", ev.Platform, kind)
	}
	return fmt.Sprintf("%s: failed (%d %s)", ev.Platform, ev.Status, kind)
}

// progressReporter sends one progress notification per leg event.
type progressReporter struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	sent    float64 // the last progress sent
	// clientGone ends the API call: called when a notification cannot
	// be sent, which in SSE mode means the client's stream has closed.
	clientGone func()
	logger     *slog.Logger
}

// leg notifies one leg event, and fails when the client has gone.
func (p *progressReporter) leg(data []byte) error {
	var ev legEvent
	if json.Unmarshal(data, &ev) != nil {
		return nil
	}
	var progress, total float64
	if ev.Progress != nil {
		progress, total = float64(ev.Progress.Done), float64(ev.Progress.Total)
	}
	// MCP requires progress to increase with every notification.
	if progress <= p.sent {
		progress = p.sent + 1
	}
	p.sent = progress
	if total < progress {
		total = 0 // unknown
	}
	// The leg event as the API streams it, items included: a leg whose
	// notification was sent was delivered as the stream's charging rule
	// counts it.
	err := p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token, Progress: progress, Total: total, Message: ev.message(),
		Meta: mcp.Meta{"meridian/leg": json.RawMessage(bytes.Clone(data))},
	})
	if err != nil {
		p.clientGone()
		return fmt.Errorf("progress notification not sent: %w", err)
	}
	return nil
}

// isEventStream reports a text/event-stream content type.
func isEventStream(contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && media == "text/event-stream"
}

// eventParser reads server-sent events as they are written: lines up to
// "\n" (a "\r" before it dropped), "event:" and "data:" fields, comments
// (keep-alives) skipped, and an event dispatched at its blank line.
type eventParser struct {
	partial []byte // the start of a line not yet ended
	event   string
	data    bytes.Buffer
	hasData bool
}

func (p *eventParser) feed(b []byte, dispatch func(event string, data []byte)) {
	buf := append(p.partial, b...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		p.line(bytes.TrimSuffix(buf[:i], []byte("\r")), dispatch)
		buf = buf[i+1:]
	}
	p.partial = append([]byte(nil), buf...)
}

func (p *eventParser) line(line []byte, dispatch func(event string, data []byte)) {
	if len(line) == 0 {
		if p.hasData {
			dispatch(p.event, bytes.TrimSuffix(p.data.Bytes(), []byte("\n")))
		}
		p.event, p.hasData = "", false
		p.data.Reset()
		return
	}
	if line[0] == ':' {
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		p.event = string(value)
	case "data":
		p.data.Write(value)
		p.data.WriteByte('\n')
		p.hasData = true
	}
}
