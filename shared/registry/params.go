package registry

import (
	"slices"
	"strings"
)

// P starts a parameter declaration; the methods below refine a copy, so
// shared parameters can be declared once and reused.
func P(name string, t ParamType, description string) Param {
	return Param{Name: name, Type: t, Description: description}
}

// Req marks the parameter required.
func (p Param) Req() Param { p.Required = true; return p }

// Range bounds a numeric value (or each numeric list element).
func (p Param) Range(min, max float64) Param { p.Min, p.Max = &min, &max; return p }

// AtLeast sets only a lower bound.
func (p Param) AtLeast(min float64) Param { p.Min = &min; return p }

// Def sets the default applied when the parameter is omitted.
func (p Param) Def(v string) Param { p.Default = v; return p }

// OneOf restricts the value (or each list element) to these.
func (p Param) OneOf(values ...string) Param { p.Enum = values; return p }

// Alias adds accepted alternative names, in precedence order.
func (p Param) Alias(names ...string) Param { p.Aliases = names; return p }

// Ex sets the example value used by catalogues and ready-to-run requests.
func (p Param) Ex(v string) Param { p.Example = v; return p }

// ExDaysAfter makes a date parameter's example n days after the default
// example date (a checkout after its checkin).
func (p Param) ExDaysAfter(n int) Param { p.ExampleDaysAfter = n; return p }

// Len caps the value's length in characters.
func (p Param) Len(n int) Param { p.MaxLength = n; return p }

// Match requires the whole value (or each list element) to match pattern.
func (p Param) Match(pattern, hint string) Param { p.Pattern, p.PatternHint = pattern, hint; return p }

// Upper folds the value to upper case in the canonical request.
func (p Param) Upper() Param { p.Fold = "upper"; return p }

// Lower folds the value to lower case in the canonical request.
func (p Param) Lower() Param { p.Fold = "lower"; return p }

// Of sets the element type of a list.
func (p Param) Of(t ParamType) Param { p.Item = t; return p }

// When makes the parameter required when other=value.
func (p Param) When(other, value string) Param { p.RequiredWhen = [2]string{other, value}; return p }

// OrScheme lets a parameter with hosts also take ids written as URIs of
// these schemes (lowercase, without "://").
func (p Param) OrScheme(schemes ...string) Param { p.IDSchemes = schemes; return p }

// IsIDScheme reports whether v is a URI of one of p's id schemes.
func (p *Param) IsIDScheme(v string) bool {
	scheme, _, ok := strings.Cut(v, "://")
	return ok && slices.Contains(p.IDSchemes, strings.ToLower(scheme))
}

// Checked adds a rule of the value's meaning (see Param.Check).
func (p Param) Checked(rule func(value string) (reason, message string)) Param {
	p.Check = rule
	return p
}

// PlatformURLNote is the sentence OnHosts adds to a description, so the
// catalogue, OpenAPI and MCP tools say it without naming real hosts (the
// public API speaks neutral platform ids).
const PlatformURLNote = "A URL must be a page of this platform."

// OnHosts requires a URL value to be a page of the platform: on one of
// hosts or a subdomain of one. Call it after Named, which would replace
// the description it adds to.
func (p Param) OnHosts(hosts ...string) Param {
	p.Hosts = hosts
	p.Description = strings.TrimSpace(p.Description + " " + PlatformURLNote)
	return p
}

// AllowsHost reports whether host (a URL's host, without port) is one of
// p.Hosts or a subdomain of one. Case and one trailing dot are ignored, as
// DNS ignores them; a name with an empty label matches nothing, so
// ".etsy.com" cannot pass as a subdomain.
func (p *Param) AllowsHost(host string) bool { return HostIn(host, p.Hosts) }

// HostIn reports whether host is one of hosts (lowercase names) or a
// subdomain of one, by AllowsHost's rules: what every check that a URL is
// a platform's page uses.
func HostIn(host string, hosts []string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || strings.HasPrefix(host, ".") || strings.Contains(host, "..") {
		return false
	}
	for _, h := range hosts {
		if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	return false
}

// Shared parameter shapes.
var (
	cursorParam   = P("cursor", String, "Opaque next-page token from the previous response; pass it back unchanged.").Len(4096)
	pageParam     = P("page", Integer, "Page number, starting at 1.").AtLeast(1)
	countryParam  = P("country", String, "Two-letter country code (ISO 3166-1 alpha-2).").Match("[A-Za-z]{2}", "two letters, e.g. US").Upper().Ex("US")
	currencyParam = P("currency", String, "Three-letter currency code (ISO 4217).").Match("[A-Za-z]{3}", "three letters, e.g. USD").Upper().Ex("USD")
	localeParam   = P("language", String, "Language or locale, e.g. en or en-GB.").Match("[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*", "a language tag such as en or en-GB").Ex("en")
	handleParam   = P("handle", String, "Account handle, without a leading @.").Match(`[^@\s][^\s]*`, "a handle without a leading @ and without spaces").Len(100)
	queryParam    = P("query", String, "Search text.").Req().Len(500).Ex("coffee grinder")
	// dateParam's example is a date ahead of today (ExampleValue), so a
	// stay in the examples never falls into the past.
	dateParam = func(name, description string) Param { return P(name, Date, description) }
)

// postRecords: the model reads a post's text.
var postRecords = &AIRecords{List: "items", ID: "id", Text: []string{"text"}}

// aiAssistParams is the shared AI-assist set of spec 4.5, accepted by the
// endpoints marked AI, with no surcharge.
var aiAssistParams = []Param{
	P("judgments", String, "on (default) adds bounded AI labels (ai_label; the label set is at /docs/ai-labels) to eligible records; off preserves the original data shape.").OneOf("on", "off").Def("on"),
	P("label", String, "none disables labels (same as judgments=off).").OneOf("none"),
	P("label_evidence", Boolean, "Truthy: include exact supporting sentences and zero-based sentence indexes when a label has validated evidence."),
	P("exclude", String, "engagement_bait removes confidently labelled engagement bait; uncertain and unclassified records stay.").OneOf("engagement_bait"),
	P("fit", String, "goal replaces confidently irrelevant records with recall stubs, keeping first, last, relevant and uncertain records in order.").OneOf("goal"),
	P("goal", String, "Task context for fit=goal, at most 600 characters; required when fit=goal.").Len(600).When("fit", "goal"),
	P("tokens", Integer, "Soft response-size target for fit=goal; the result may exceed it.").Range(256, 32000),
}

// asyncParam is accepted by the endpoints marked Async.
var asyncParam = P("async", Boolean, "Truthy (e.g. 1): accept the call as a web job and answer 202 at once with its id and URL; "+
	"its credits are reserved now and settled or refunded when it ends. GET /v1/web/jobs/{id} answers its state, progress and, once done, "+
	"the envelope this call would have returned. Jobs are kept 7 days.")

// dryRunParam is accepted by every data endpoint (spec 4).
var dryRunParam = P("dry_run", Boolean, "Truthy (e.g. 1): a zero-credit estimate that fetches no sources, runs no AI and reserves no credits.")
