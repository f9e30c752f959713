// Package registry declares every Meridian endpoint once. Routing, parameter
// validation, the catalogue, OpenAPI, MCP tools, the sandbox and the
// infrastructure routes are all derived from it.
package registry

import (
	"net/http"
	"regexp"
	"time"
)

// Family names the Lambda function that serves a group of platforms.
type Family string

// The families, one Lambda each (see ARCHITECTURE.md for the cut).
const (
	Commerce  Family = "commerce"
	Social    Family = "social"
	Media     Family = "media"
	Apps      Family = "apps"
	Places    Family = "places"
	Knowledge Family = "knowledge"
	Web       Family = "web"
	Bundle    Family = "bundle"
	Search    Family = "search"
	Service   Family = "service"
	Batch     Family = "batch"
	Sandbox   Family = "sandbox"
	MCP       Family = "mcp"
)

// Families lists every family in a stable order.
var Families = []Family{Commerce, Social, Media, Apps, Places, Knowledge, Web, Bundle, Search, Service, Batch, Sandbox, MCP}

// Kind separates metered data endpoints from free service-owned ones.
type Kind string

const (
	// Data endpoints return third-party public data and are metered.
	Data Kind = "data"
	// ServiceOwned endpoints (discovery, credits, status, indexes) cost 0.
	ServiceOwned Kind = "service"
)

// ParamType is the type a query parameter's value must parse as.
type ParamType string

const (
	String  ParamType = "string"
	Integer ParamType = "integer"
	Number  ParamType = "number"
	Boolean ParamType = "boolean" // a truthy or falsy flag: 1/0, true/false, yes/no, on/off
	Date    ParamType = "date"    // YYYY-MM-DD
	URL     ParamType = "url"     // absolute http(s) URL
	List    ParamType = "list"    // comma-separated values of Item type
)

// Param declares one query parameter.
type Param struct {
	Name     string
	Type     ParamType
	Item     ParamType // element type of a List; String when empty
	Required bool
	// Min and Max bound numeric values (and List elements of a numeric Item).
	Min, Max *float64
	// MaxLength bounds a string value in characters; 0 means the global cap.
	MaxLength int
	// Enum lists the allowed values; numeric enums compare numerically.
	Enum []string
	// Pattern, when set, must match the whole value (or each List element).
	Pattern     string
	PatternHint string // says in words what Pattern expects
	// Fold puts a case-insensitive code in one case ("upper" or "lower"),
	// so equivalent spellings make one canonical request.
	Fold    string
	Default string
	// RequiredWhen makes the parameter required when another parameter has
	// a value: {"fit", "goal"} means required when fit=goal.
	RequiredWhen [2]string
	// Aliases are other accepted names; the canonical name wins when both
	// are sent, then aliases in the order given.
	Aliases     []string
	Description string
	Example     string
	// ExampleDaysAfter shifts a date parameter's computed example (see
	// ExampleValue) by that many days.
	ExampleDaysAfter int
	// Hosts, when set, are the hosts a URL value must be on: one of them or
	// a subdomain (lowercase names, no scheme, port or path). A value that
	// is not URL-shaped stays an id. Set with OnHosts.
	Hosts []string
	// IDSchemes are URI schemes whose values are ids of the platform, not
	// URLs to check against Hosts (at:// post URIs, say). Set with OrScheme.
	IDSchemes []string
	// Check, when set, applies a rule of the value's meaning that no
	// declarative bound can say (a search URL's filters, say) after every
	// other check passed: it returns a reason and a message to refuse with
	// 422 INVALID_PARAMETERS before any charge or source call, or "" to
	// accept. Set with Checked.
	Check func(value string) (reason, message string)

	pattern *regexp.Regexp
}

// Deprecation marks an endpoint that still works but is going away (spec 9.3).
type Deprecation struct {
	Announced time.Time
	Sunset    time.Time
	Link      string
}

// Order says Low must not exceed High; Strict also forbids equality
// (a checkout on the checkin day).
type Order struct {
	Low, High string
	Strict    bool
}

// AIRecords locates the records an AI endpoint's labels apply to.
type AIRecords struct {
	// List is the data field holding the records ("items"); empty when the
	// data object is itself the one record (a profile).
	List string
	// ID is the record field that identifies it in exclusions and recalls.
	ID string
	// Text lists the string fields the model reads, in order; evidence
	// sentences are numbered across them from zero.
	Text []string
}

// Origin records where a declaration's contract comes from.
type Origin string

const (
	// SpecListed: parameters and cost are given by spec 4.2, 4.3 or 4.6.
	SpecListed Origin = "spec"
	// SpecNamed: the spec names the operation only; Decision says what we chose and why.
	SpecNamed Origin = "named"
	// Derived: added by Meridian (platform indexes, retired aliases).
	Derived Origin = "derived"
	// Addition: an operation beyond the specification (the creator
	// building blocks the composite operations are built from, and the
	// free credits/usage); Decision says why, and the catalogue marks it.
	Addition Origin = "addition"
)

// Endpoint is one registered operation.
type Endpoint struct {
	Platform string
	// ID is everything after the platform: "search", "profile/repos",
	// "jobs/{id}", "{id}/runs", or "" for the platform index. A {name}
	// segment is an identifier lifted into the parameter called name.
	ID          string
	Name        string
	Description string
	Family      Family
	Kind        Kind
	Method      string // http.MethodGet unless set
	Cost        int64
	Params      []Param
	// AnyOf lists groups of which at least one member must be sent.
	AnyOf [][]string
	// Ordered pairs must not run backwards (min_price <= max_price).
	Ordered []Order
	// GetParam makes ID/{value} resolve here too, as the collection's get
	// endpoint, passing value as this parameter (spec 4.1).
	GetParam string
	// CacheTTL is how long a success stays in the response cache; zero
	// means DefaultCacheTTL for data endpoints. Uncached turns it off.
	CacheTTL time.Duration
	Uncached bool
	// FairUse marks a metered endpoint: its default ceiling of upstream
	// attempts per account over a rolling 30 days (spec 8); 0 = not
	// metered. Operators override ceilings in configuration.
	FairUse int64
	// AI marks the endpoints that accept the shared AI-assist set (spec 4.5).
	AI bool
	// Records says which records of an AI endpoint's data the model labels
	// and which of their fields it reads (required when AI is set).
	Records         *AIRecords
	LimitedCapacity bool
	// MayNotFind marks a service-owned endpoint that answers 404
	// RESOURCE_NOT_FOUND when what it is asked for does not exist (every
	// data endpoint may); the OpenAPI document lists that response.
	MayNotFind bool
	Streams    bool // accepts stream=1 (spec 4.4)
	// Async accepts async=1: the call is accepted as a web job (202) and
	// runs in the worker; GET /v1/web/jobs/{id} answers its outcome.
	Async      bool
	Deprecated *Deprecation
	// RetiredFor, when set, retires the endpoint: it answers 410 naming this successor path.
	RetiredFor string
	Origin     Origin
	Decision   string // for SpecNamed: what the upstream needs and why we chose these params

	accepted []*Param          // Params plus dry_run and the AI set, as validated
	byName   map[string]*Param // canonical names and aliases
}

// Path is the canonical request path, e.g. /v1/social_a/event.
func (e *Endpoint) Path() string {
	if e.Platform == "" {
		return "/v1"
	}
	if e.ID == "" {
		return "/v1/" + e.Platform
	}
	return "/v1/" + e.Platform + "/" + e.ID
}

// Key is platform/id, the form utility/endpoint takes.
func (e *Endpoint) Key() string {
	if e.ID == "" {
		return e.Platform
	}
	return e.Platform + "/" + e.ID
}

// SandboxPath is where the free synthetic twin of a data endpoint lives.
func (e *Endpoint) SandboxPath() string {
	return "/sandbox" + e.Path()[len("/v1"):]
}

// HTTPMethod returns the method the endpoint answers.
func (e *Endpoint) HTTPMethod() string {
	if e.Method == "" {
		return http.MethodGet
	}
	return e.Method
}

// IsIndex reports whether the endpoint is the API index (/v1) or a
// platform index derived from the declarations: both list the catalogue.
func (e *Endpoint) IsIndex() bool {
	return e.Kind == ServiceOwned && e.ID == "" && (e.Platform == "" || e.Origin == Derived)
}

// DefaultCacheTTL keeps a data endpoint's successes for ten minutes.
const DefaultCacheTTL = 10 * time.Minute

// CacheFor is how long the endpoint's successes are cached; 0 = never.
func (e *Endpoint) CacheFor() time.Duration {
	switch {
	case e.Kind != Data || e.Uncached:
		return 0
	case e.CacheTTL > 0:
		return e.CacheTTL
	}
	return DefaultCacheTTL
}

// Retired reports whether the endpoint answers 410.
func (e *Endpoint) Retired() bool { return e.RetiredFor != "" }

// Accepted lists every parameter the endpoint validates, in declaration
// order: its own, then the AI-assist set, then async, then dry_run.
func (e *Endpoint) Accepted() []*Param { return e.accepted }

// Lookup finds a parameter by canonical name or alias.
func (e *Endpoint) Lookup(name string) (*Param, bool) {
	p, ok := e.byName[name]
	return p, ok
}

// Compiled returns the parameter's compiled pattern, or nil.
func (p *Param) Compiled() *regexp.Regexp { return p.pattern }

// Route maps an API Gateway route to the family that serves it. Path uses
// API Gateway syntax ({proxy+} is greedy); Method "ANY" matches every method.
type Route struct {
	Method string
	Path   string
	Family Family
}

// Surface is a path outside /v1 (spec 4.2): the machine-readable
// descriptions, the MCP server, the sandbox and the errors reference.
type Surface struct {
	Method      string // "ANY" for every method
	Path        string // API Gateway syntax
	Family      Family
	Description string
}

// DefaultRoute is API Gateway's catch-all route key.
const DefaultRoute = "$default"
