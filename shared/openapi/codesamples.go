package openapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/registry"
)

// KeyVariable is the environment variable every code sample reads the API
// key from, so a sample runs as pasted and no key is ever written in one.
const KeyVariable = "MERIDIAN_API_KEY"

// CodeSample is one entry of an operation's x-codeSamples (the extension
// Redoc and other renderers show beside the operation).
type CodeSample struct {
	Lang   string `json:"lang"`
	Label  string `json:"label"`
	Source string `json:"source"`
}

// exampleRequest is the call a code sample makes: the catalogue's example
// (registry Example) against the deployment's base URL.
type exampleRequest struct {
	method string
	url    string // base, path and query
	body   []byte // JSON, for batch
}

// exampleOf builds e's example call. The batch example carries one item,
// a call of batchItem (nil: none, an empty list the API refuses).
func exampleOf(e *registry.Endpoint, base string, batchItem *registry.Endpoint) exampleRequest {
	query, ids := e.Example()
	path := e.Path()
	for name, v := range ids {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	target := strings.TrimSuffix(base, "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	ex := exampleRequest{method: e.HTTPMethod(), url: target}
	if e.Platform == "batch" {
		items := []any{}
		if batchItem != nil {
			q, _ := batchItem.Example()
			params := map[string]string{}
			for k, v := range q {
				params[k] = v[0]
			}
			items = append(items, map[string]any{"platform": batchItem.Platform, "endpoint": batchItem.ID, "params": params})
		}
		ex.body, _ = json.Marshal(map[string]any{"requests": items})
	}
	return ex
}

// CodeSamples are e's runnable examples in curl, Python (requests) and
// JavaScript (fetch): the deployment's base URL, the catalogue's example
// parameters and the key from $MERIDIAN_API_KEY.
func CodeSamples(e *registry.Endpoint, base string, batchItem *registry.Endpoint) []CodeSample {
	ex := exampleOf(e, base, batchItem)
	return []CodeSample{
		{Lang: "curl", Label: "curl", Source: curlSample(ex)},
		{Lang: "python", Label: "Python", Source: pythonSample(ex)},
		{Lang: "javascript", Label: "JavaScript", Source: javascriptSample(ex)},
	}
}

// shellQuote quotes s for a POSIX shell: single quotes, each inner one
// closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func curlSample(ex exampleRequest) string {
	var b strings.Builder
	b.WriteString("curl -s ")
	if ex.method != http.MethodGet {
		b.WriteString("-X " + ex.method + " ")
	}
	b.WriteString(shellQuote(ex.url))
	b.WriteString(` -H "x-api-key: $` + KeyVariable + `"`)
	if ex.body != nil {
		b.WriteString(" -H 'content-type: application/json' -d " + shellQuote(string(ex.body)))
	}
	return b.String()
}

// quoted is a string literal both Python and JavaScript read back as s.
func quoted(s string) string { return strconv.Quote(s) }

func pythonSample(ex exampleRequest) string {
	var b strings.Builder
	b.WriteString("import os\n\nimport requests\n\n")
	b.WriteString("response = requests." + strings.ToLower(ex.method) + "(\n")
	b.WriteString("    " + quoted(ex.url) + ",\n")
	b.WriteString("    headers={\"x-api-key\": os.environ[\"" + KeyVariable + "\"]},\n")
	if ex.body != nil {
		// The body holds strings only, so its JSON is a Python literal too.
		b.WriteString("    json=" + string(ex.body) + ",\n")
	}
	b.WriteString("    timeout=60,\n)\nprint(response.status_code)\nprint(response.text)\n")
	return b.String()
}

func javascriptSample(ex exampleRequest) string {
	var b strings.Builder
	b.WriteString("// Node 18 or later, as an ES module (top-level await).\n")
	b.WriteString("const response = await fetch(" + quoted(ex.url) + ", {\n")
	if ex.method != http.MethodGet {
		b.WriteString("  method: " + quoted(ex.method) + ",\n")
	}
	if ex.body != nil {
		b.WriteString("  headers: { \"x-api-key\": process.env." + KeyVariable + ", \"content-type\": \"application/json\" },\n")
		b.WriteString("  body: JSON.stringify(" + string(ex.body) + "),\n")
	} else {
		b.WriteString("  headers: { \"x-api-key\": process.env." + KeyVariable + " },\n")
	}
	b.WriteString("});\nconsole.log(response.status, await response.text());\n")
	return b.String()
}

// describeForReaders adds what a reader of the reference looks for first:
// the price and whether this deployment serves the operation, as badges
// and in words (x-credit-cost and x-available say it to programs), and
// the runnable examples (x-codeSamples).
func describeForReaders(op obj, e *registry.Endpoint, opts Options) {
	price := strconv.FormatInt(e.Cost, 10) + " credits"
	if e.Cost == 1 {
		price = "1 credit"
	}
	badges := []any{obj{"name": price, "color": "#1f5fbf"}}
	words := "**Price:** " + price + " per successful call; a failed call costs 0."
	if e.Cost == 0 {
		badges[0] = obj{"name": "Free", "color": "#1f5fbf"}
		words = "**Price:** free (0 credits)."
	}
	if opts.Available != nil {
		available := opts.Available(e)
		op["x-available"] = available
		if available {
			badges = append(badges, obj{"name": "Available", "color": "#1a7f37"})
			words += " **Available on this deployment.**"
		} else {
			badges = append(badges, obj{"name": "Not available here", "color": "#9a6700"})
			words += " **Not available on this deployment:** it answers 501 `ENDPOINT_NOT_AVAILABLE`"
			if e.Kind == registry.Data {
				words += "; its free sandbox twin is `" + e.SandboxPath() + "`"
			}
			words += "."
		}
	}
	if e.Kind == registry.Data {
		op["x-sandbox"] = e.SandboxPath() // the free synthetic twin, same parameters
	}
	op["x-badges"] = badges
	op["description"] = words + "\n\n" + e.Description
	op["x-codeSamples"] = CodeSamples(e, strings.TrimSuffix(opts.BaseURL, "/"), opts.BatchItem)
}
