package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
	"github.com/meridian-data/meridian/shared/upstream"
)

// The discovery endpoints of spec 4.2, all free, all read from the registry.

// exampleRequest is a ready-to-run request for an endpoint.
type exampleRequest struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body,omitempty"`
	Curl    string            `json:"curl"`
}

const keyPlaceholder = "YOUR_API_KEY"

func (s *Service) discoveryHandlers(reg *registry.Registry) map[string]Handler {
	baseURL := s.baseURL
	return map[string]Handler{
		"utility/endpoints": func(ctx context.Context, c *Call) (any, *envelope.Error) {
			want, filtered := c.Values["available"]
			items := []registry.Entry{}
			for _, e := range catalogue(reg, c.Values["platform"]) {
				if m := c.Values["method"]; m != "" && e.HTTPMethod() != m {
					continue
				}
				if q := strings.ToLower(c.Values["search"]); q != "" &&
					!strings.Contains(strings.ToLower(e.Key()+" "+e.Name+" "+e.Description), q) {
					continue
				}
				entry := s.entry(ctx, e)
				if filtered && entry.Available != (want == "true") {
					continue
				}
				items = append(items, entry)
			}
			return map[string]any{"items": items, "count": len(items)}, nil
		},
		"utility/endpoint": func(ctx context.Context, c *Call) (any, *envelope.Error) {
			e, err := lookupEndpoint(reg, c.Values["id"], c.Values["url"])
			if err != nil {
				return nil, err
			}
			src, _ := s.firstCalls("")
			out := map[string]any{"endpoint": s.entry(ctx, e), "request": example(src, e, baseURL(c.Request))}
			if s.cfg.DataSchemas != nil {
				if schema, ok := s.cfg.DataSchemas(e.Key()); ok {
					out["data_schema"] = json.RawMessage(schema)
				}
			}
			return out, nil
		},
		"utility/quickstart": func(ctx context.Context, c *Call) (any, *envelope.Error) {
			platform := c.Values["platform"]
			src, available := s.firstCalls(platform)
			e := quickstart(src, platform)
			if e == nil {
				return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
					"No data endpoint on this platform.", map[string]any{"platform": platform})
			}
			base := baseURL(c.Request)
			out := map[string]any{
				"endpoint":  s.entry(ctx, e),
				"available": available,
				"next":      "GET /v1/utility/endpoints?available=true lists the endpoints this deployment serves; add dry_run=1 to a call of one of them for a free estimate.",
			}
			if available {
				out["request"], out["response"] = exampleCall(e, base, e.Path()), exampleEnvelope(e, false)
				return out, nil
			}
			// Nothing live to call here: the free sandbox twin runs as
			// written, and the operator learns how to turn a source on.
			out["request"], out["response"] = exampleCall(e, base, e.SandboxPath()), exampleEnvelope(e, true)
			where := "in this deployment"
			if platform != "" {
				where = "for " + platform + " in this deployment"
			}
			msg := "No live data source is configured " + where + ", so its data calls on /v1 answer 501 ENDPOINT_NOT_AVAILABLE; " +
				"this request calls the free sandbox twin instead (synthetic data, 0 credits). An operator enables live data by " +
				"configuring a source: the credentials or upstream variables listed in the README's \"Upstream sources\" table " +
				"(environment variables, or keys of the JSON secret named by MERIDIAN_UPSTREAM_SECRET in AWS), or, for local " +
				"recorded data, MERIDIAN_UPSTREAM=replay on the local server."
			if _, elsewhere := s.firstCalls(""); platform != "" && elsewhere {
				msg += " Without platform, GET /v1/utility/quickstart picks an endpoint this deployment serves."
			}
			out["message"] = msg
			return out, nil
		},
		"utility/llms": func(ctx context.Context, c *Call) (any, *envelope.Error) {
			doc := s.llmsCatalogue(ctx, c.Values["platform"], baseURL(c.Request))
			if c.Values["format"] == "json" {
				return doc, nil
			}
			return envelope.Raw{ContentType: "text/markdown; charset=utf-8", Body: []byte(doc.markdown())}, nil
		},
	}
}

// entry is e's catalogue entry in this deployment.
func (s *Service) entry(ctx context.Context, e *registry.Endpoint) registry.Entry {
	out := e.Entry()
	out.Available = s.available(e)
	if e.LimitedCapacity {
		out.Capacity = s.capacity(ctx, e)
	}
	return out
}

// capacity is what is left of a limited-capacity endpoint's shared monthly
// allowance: one store read per route with an allowance, so only those
// endpoints pay for it. Remaining stays null when it cannot be known; the
// available flag keeps meaning "a route is configured".
func (s *Service) capacity(ctx context.Context, e *registry.Endpoint) *registry.Capacity {
	if s.cfg.Upstream == nil {
		return &registry.Capacity{ResetsAt: upstream.NextMonth(s.cfg.Now()).Format(time.RFC3339)}
	}
	c, err := s.cfg.Upstream.Capacity(ctx, e.Key())
	out := &registry.Capacity{ResetsAt: c.ResetsAt.Format(time.RFC3339)}
	if err != nil {
		s.cfg.Logger.Warn("capacity not read", "endpoint", e.Key(), "error", err.Error())
		return out
	}
	if c.Bounded {
		out.Remaining, out.Exhausted = &c.Remaining, c.Remaining == 0
	}
	return out
}

// endpointSource lists the endpoints discovery picks a first call from: a
// *registry.Registry offers every registered one, served only those this
// deployment can serve.
type endpointSource interface {
	Live() []*registry.Endpoint
}

// served is the part of the registry this deployment can serve.
type served []*registry.Endpoint

func (s served) Live() []*registry.Endpoint { return s }

// firstCalls is what a first call on platform ("" for any) is picked
// from: the endpoints this deployment serves, or, when it serves no data
// endpoint there, every registered one (available false: only their
// sandbox twins answer).
func (s *Service) firstCalls(platform string) (src endpointSource, available bool) {
	var live served
	for _, e := range s.cfg.Registry.Live() {
		if s.available(e) {
			live = append(live, e)
		}
	}
	if quickstart(live, platform) != nil {
		return live, true
	}
	return s.cfg.Registry, false
}

// catalogue lists the live endpoints a catalogue shows: data and service
// endpoints, not the indexes of the API and its platforms, optionally of
// one platform.
func catalogue(src endpointSource, platform string) []*registry.Endpoint {
	var out []*registry.Endpoint
	for _, e := range src.Live() {
		if e.Origin == registry.Derived || e.Platform == "" || (platform != "" && e.Platform != platform) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// lookupEndpoint finds an endpoint by platform/endpoint id or by a URL or
// path of a call to it (resolved as spec 4.1 resolves paths).
func lookupEndpoint(reg *registry.Registry, id, rawURL string) (*registry.Endpoint, *envelope.Error) {
	if id != "" {
		if e, ok := reg.Endpoint(strings.Trim(id, "/")); ok && !e.Retired() {
			return e, nil
		}
		return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
			"No endpoint has this id; GET /v1/utility/endpoints lists them.", map[string]any{"id": id})
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"url is not a URL or path.", map[string]any{"field": "url", "reason": "invalid_url"})
	}
	path := u.EscapedPath()
	if rest, ok := strings.CutPrefix(path, "/sandbox"); ok {
		path = "/v1" + rest
	}
	res, rerr := reg.Resolve(path)
	if rerr != nil {
		return nil, envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
			"No endpoint answers this URL.", notFoundDetails(rawURL, rerr))
	}
	return res.Endpoint, nil
}

// notFoundDetails names the URL no endpoint answers and, for a retired
// endpoint, why (endpoint_removed).
func notFoundDetails(rawURL string, rerr *envelope.Error) map[string]any {
	details := map[string]any{"url": rawURL}
	if reason, ok := rerr.Details["reason"].(string); ok {
		details["reason"] = reason
	}
	return details
}

// example builds e's ready-to-run request on /v1 from the declared
// examples. The batch example carries one item: the quickstart call
// picked from src (firstCalls, so a deployment's example calls an
// endpoint it serves; a registry always has one to pick).
func example(src endpointSource, e *registry.Endpoint, base string) exampleRequest {
	ex := exampleCall(e, base, e.Path())
	if e.Platform != "batch" {
		return ex
	}
	item := quickstart(src, "")
	u, _ := url.Parse(exampleCall(item, "", item.Path()).URL)
	params := map[string]string{}
	for k, v := range u.Query() {
		params[k] = v[0]
	}
	ex.Body, _ = json.Marshal(map[string]any{"requests": []any{map[string]any{"platform": item.Platform, "endpoint": item.ID, "params": params}}})
	ex.Headers["content-type"] = "application/json"
	ex.Curl = "curl -s -X POST '" + ex.URL + "' -H 'x-api-key: " + keyPlaceholder + "' -H 'content-type: application/json' -d '" + string(ex.Body) + "'"
	return ex
}

// exampleCall is the call of e at path (its /v1 path or its /sandbox
// twin) with every required parameter and the first member of each any-of
// group, set to their declared examples.
func exampleCall(e *registry.Endpoint, base, path string) exampleRequest {
	q, ids := e.Example()
	for name, v := range ids {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	target := base + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	return exampleRequest{
		Method: e.HTTPMethod(), URL: target, Headers: map[string]string{"x-api-key": keyPlaceholder},
		Curl: "curl -s " + methodFlag(e) + "'" + target + "' -H 'x-api-key: " + keyPlaceholder + "'",
	}
}

// methodFlag is curl's -X for an endpoint that is not a GET.
func methodFlag(e *registry.Endpoint) string {
	if m := e.HTTPMethod(); m != http.MethodGet {
		return "-X " + m + " "
	}
	return ""
}

// quickstart picks the cheapest data endpoint of src (of a platform),
// preferring paid ones with simple requests, so the first call shows a
// real charge.
func quickstart(src endpointSource, platform string) *registry.Endpoint {
	var best *registry.Endpoint
	for _, e := range catalogue(src, platform) {
		if e.Kind != registry.Data || e.Streams {
			continue
		}
		if best == nil || rank(e) < rank(best) {
			best = e
		}
	}
	return best
}

func rank(e *registry.Endpoint) int64 {
	cost := e.Cost
	if cost == 0 || e.LimitedCapacity || e.Deprecated != nil || e.FairUse > 0 {
		cost += 1_000 // free, scarce or fading endpoints make a poor first call
	}
	required := len(e.AnyOf)
	for _, p := range e.Params {
		if p.Required {
			required++
		}
	}
	return cost*100 + int64(required)
}

// exampleEnvelope is the success envelope the quickstart request returns:
// on /v1 it is charged; the sandbox twin's is free and synthetic.
func exampleEnvelope(e *registry.Endpoint, sandbox bool) map[string]any {
	out := map[string]any{
		"success":           true,
		"platform":          e.Platform,
		"endpoint":          e.Path(),
		"data":              map[string]any{},
		"credits_used":      e.Cost,
		"credits_remaining": 1000 - e.Cost,
		"request_id":        "req_0194f1a2b3c4d5e6f708192a3b4c5d6e",
		"cached":            false,
	}
	if sandbox {
		out["endpoint"], out["credits_used"], out["synthetic"], out["degraded"] = e.SandboxPath(), 0, true, false
		delete(out, "credits_remaining")
	}
	return out
}

// baseURL is the deployment's public address: the one MERIDIAN_ERRORS_URL
// names when it is this deployment's /docs/errors, else as the caller
// reached it.
func (s *Service) baseURL(r *http.Request) string {
	if base, ok := strings.CutSuffix(s.cfg.ErrorsURL, "/docs/errors"); ok && base != "" {
		return base
	}
	proto := envelope.ForwardedProto(r)
	if proto != "http" && proto != "https" {
		proto = "http"
		if r.TLS != nil || r.URL.Scheme == "https" {
			proto = "https"
		}
	}
	ref := envelope.ErrorsReference(proto, r.Host)
	return strings.TrimSuffix(ref, "/docs/errors")
}

// llmsDoc is the whole catalogue for an agent (GET /v1/utility/llms).
type llmsDoc struct {
	BaseURL    string           `json:"base_url"`
	Auth       map[string]any   `json:"auth"`
	Envelopes  map[string]any   `json:"envelopes"`
	ErrorTypes []map[string]any `json:"error_types"`
	Endpoints  []registry.Entry `json:"endpoints"`
	// sandbox maps a data endpoint's id to its sandbox twin, for the
	// markdown's notes on unavailable endpoints.
	sandbox map[string]string
}

func (s *Service) llmsCatalogue(ctx context.Context, platform, base string) llmsDoc {
	doc := llmsDoc{
		BaseURL: base + "/v1",
		Auth: map[string]any{
			"header": "x-api-key: <API_KEY>",
			"bearer": "Authorization: Bearer <API_KEY> on GET requests under /v1 and /sandbox and on /mcp",
			"never":  "api_key in the query string is refused",
		},
		Envelopes: map[string]any{
			"success": []string{"success (true)", "platform", "endpoint", "data", "credits_used", "credits_remaining", "request_id", "cached"},
			"error":   []string{"success (false)", "error.type", "error.message", "error.status", "error.doc_url", "error.details", "credits_used (0)", "request_id"},
		},
	}
	for _, t := range envelope.Roster {
		doc.ErrorTypes = append(doc.ErrorTypes, map[string]any{"type": t.Type, "statuses": t.Statuses, "condition": t.Condition})
	}
	doc.sandbox = map[string]string{}
	for _, e := range catalogue(s.cfg.Registry, platform) {
		doc.Endpoints = append(doc.Endpoints, s.entry(ctx, e))
		if e.Kind == registry.Data {
			doc.sandbox[e.Key()] = e.SandboxPath()
		}
	}
	sort.SliceStable(doc.Endpoints, func(i, j int) bool { return doc.Endpoints[i].ID < doc.Endpoints[j].ID })
	return doc
}

func bound(v *float64, name string) string {
	if v == nil {
		return ""
	}
	return name + " " + strconv.FormatFloat(*v, 'f', -1, 64) + " "
}

func (d llmsDoc) markdown() string {
	var b strings.Builder
	w := func(s ...string) {
		for _, x := range s {
			b.WriteString(x)
		}
		b.WriteString("\n")
	}
	w("# Meridian API")
	w()
	w("Public data from many platforms in one JSON envelope. Successful data calls spend credits; failures cost 0.")
	w()
	w("- Base URL: ", d.BaseURL)
	w("- Auth: header `x-api-key: <API_KEY>` (Bearer only on GET requests under /v1 and /sandbox and on /mcp; never `api_key` in the query)")
	w("- Data calls: `GET {base}/{platform}/{endpoint}?params`; add `dry_run=1` for a free estimate")
	available := 0
	for _, e := range d.Endpoints {
		if e.Available {
			available++
		}
	}
	line := "- Available in this deployment: " + strconv.Itoa(available) + " of " + strconv.Itoa(len(d.Endpoints)) + " endpoints below"
	if available < len(d.Endpoints) {
		line += "; the others (marked) answer 501 `ENDPOINT_NOT_AVAILABLE`, and a data endpoint's free synthetic twin under /sandbox answers instead"
	}
	w(line)
	w()
	w("## Envelopes")
	w()
	w("Success: `{\"success\": true, \"platform\", \"endpoint\", \"data\", \"credits_used\", \"credits_remaining\", \"request_id\", \"cached\"}`")
	w()
	w("Error: `{\"success\": false, \"error\": {\"type\", \"message\", \"status\", \"doc_url\", \"details\"}, \"credits_used\": 0, \"request_id\"}` — branch on `error.type`.")
	w()
	w("## Error types")
	w()
	for _, t := range d.ErrorTypes {
		statuses := []string{}
		for _, s := range t["statuses"].([]int) {
			statuses = append(statuses, strconv.Itoa(s))
		}
		if len(statuses) == 0 {
			statuses = []string{"never emitted"}
		}
		w("- `", string(t["type"].(envelope.Type)), "` (", strings.Join(statuses, ", "), "): ", t["condition"].(string))
	}
	w()
	w("## Endpoints")
	for _, e := range d.Endpoints {
		w()
		unit := " credits)"
		if e.CreditCost == 1 {
			unit = " credit)"
		}
		heading := "### " + e.Method + " /v1/" + e.ID + " (" + strconv.FormatInt(e.CreditCost, 10) + unit
		if !e.Available {
			heading += " — not available in this deployment"
		}
		w(heading)
		w()
		if !e.Available {
			note := "Not available in this deployment: answers 501 `ENDPOINT_NOT_AVAILABLE`."
			if sb, ok := d.sandbox[e.ID]; ok {
				note = "Not available in this deployment (no live source is configured; /v1 answers 501 `ENDPOINT_NOT_AVAILABLE`): free synthetic data at `" + sb + "`, same parameters."
			}
			w(note)
			w()
		}
		w(e.Description)
		if e.Method == http.MethodPost {
			w(`Body: {"requests": [{"platform": "...", "endpoint": "...", "params": {"name": "value"}}]}, at most 20 items; each is charged under its own endpoint's rules.`)
		}
		for _, p := range e.Params {
			line := "- `" + p.Name + "` (" + p.Type
			if p.Items != "" {
				line += " of " + p.Items
			}
			if p.Required {
				line += ", required"
			}
			if p.RequiredWhen != "" {
				line += ", required when " + p.RequiredWhen
			}
			if p.Minimum != nil || p.Maximum != nil {
				line += ", " + strings.TrimSpace(bound(p.Minimum, "min")+bound(p.Maximum, "max"))
			}
			if len(p.Enum) > 0 {
				line += ", one of " + strings.Join(p.Enum, "|")
			}
			if p.Default != "" {
				line += ", default " + p.Default
			}
			w(line, "): ", p.Description)
		}
		for _, g := range e.OneOf {
			w("- at least one of: ", strings.Join(g, ", "))
		}
	}
	return b.String()
}
