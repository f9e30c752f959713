package registry

import (
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Registry is the checked, indexed set of endpoints.
type Registry struct {
	endpoints []*Endpoint
	byKey     map[string]*Endpoint
	platforms map[string]*platform
	names     []string // platform names, sorted
}

type platform struct {
	family    Family
	templates map[string]template // "event/{}" -> endpoint
}

// template is one path shape an endpoint answers to; names are the
// parameters its identifier segments fill, in order.
type template struct {
	endpoint *Endpoint
	names    []string
}

// New checks the declarations and indexes them. Every rule it enforces
// keeps a derived view (routing, validation, infra routes) unambiguous.
func New(declared []Endpoint) (*Registry, error) {
	r := &Registry{byKey: map[string]*Endpoint{}, platforms: map[string]*platform{}}
	for i := range declared {
		e := declared[i] // copy: the registry owns its endpoints
		if err := e.prepare(); err != nil {
			return nil, fmt.Errorf("registry: %s: %w", e.Key(), err)
		}
		if _, dup := r.byKey[e.Key()]; dup {
			return nil, fmt.Errorf("registry: %s declared twice", e.Key())
		}
		r.byKey[e.Key()] = &e
		r.endpoints = append(r.endpoints, &e)
	}
	for _, e := range r.endpoints {
		if err := r.index(e); err != nil {
			return nil, err
		}
	}
	for _, e := range r.endpoints {
		if e.RetiredFor == "" {
			continue
		}
		succ, ok := r.byKey[strings.TrimPrefix(e.RetiredFor, "/v1/")]
		if !ok || succ.Retired() {
			return nil, fmt.Errorf("registry: %s retired for %q, which is not a live endpoint", e.Key(), e.RetiredFor)
		}
	}
	for name := range r.platforms {
		r.names = append(r.names, name)
	}
	sort.Strings(r.names)
	return r, nil
}

func (r *Registry) index(e *Endpoint) error {
	p := r.platforms[e.Platform]
	if p == nil {
		p = &platform{family: e.Family, templates: map[string]template{}}
		r.platforms[e.Platform] = p
	}
	if p.family != e.Family {
		// API Gateway routes a whole platform to one function.
		return fmt.Errorf("registry: %s is in family %s but platform %s is in %s", e.Key(), e.Family, e.Platform, p.family)
	}
	shape, names := splitTemplate(e.ID)
	shapes := []template{{e, names}}
	keys := []string{shape}
	if e.GetParam != "" {
		keys = append(keys, strings.TrimPrefix(shape+"/{}", "/"))
		shapes = append(shapes, template{e, append(append([]string{}, names...), e.GetParam)})
	}
	for i, key := range keys {
		if other, taken := p.templates[key]; taken {
			return fmt.Errorf("registry: %s and %s both answer /v1/%s/%s", e.Key(), other.endpoint.Key(), e.Platform, key)
		}
		p.templates[key] = shapes[i]
	}
	return nil
}

// splitTemplate turns "jobs/{id}" into the shape "jobs/{}" and names [id].
func splitTemplate(id string) (string, []string) {
	if id == "" {
		return "", nil
	}
	segs := strings.Split(id, "/")
	var names []string
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			names = append(names, s[1:len(s)-1])
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/"), names
}

var wordPattern = regexp.MustCompile(`^[a-z][a-z-]*$`)

func (e *Endpoint) prepare() error {
	if e.Family == "" || e.Kind == "" || e.Name == "" || e.Origin == "" {
		return fmt.Errorf("family, kind, name and origin are required")
	}
	if (e.Origin == SpecNamed || e.Origin == Addition) && e.Decision == "" {
		return fmt.Errorf("an operation the spec only names, or one beyond it, must say what was chosen (Decision)")
	}
	if e.Platform != "" && !platformPattern.MatchString(e.Platform) {
		return fmt.Errorf("platform %q is not a lowercase path segment", e.Platform)
	}
	if e.Kind == ServiceOwned && e.Cost != 0 {
		return fmt.Errorf("service-owned endpoints cost 0")
	}
	if e.AI != (e.Records != nil) || (e.Records != nil && (e.Records.ID == "" || len(e.Records.Text) == 0)) {
		return fmt.Errorf("an AI endpoint, and only one, declares the records its labels apply to (Records: ID and Text)")
	}
	_, idParams := splitTemplate(e.ID)
	for _, seg := range strings.Split(e.ID, "/") {
		if e.ID == "" || strings.HasPrefix(seg, "{") {
			continue
		}
		// A route word that the identifier rule would lift is unreachable.
		if IsIdentifier(seg) || !wordPattern.MatchString(seg) {
			return fmt.Errorf("endpoint word %q is not a route word", seg)
		}
	}
	e.byName = map[string]*Param{}
	e.accepted = nil
	all := append([]Param{}, e.Params...)
	if e.AI {
		all = append(all, aiAssistParams...)
	}
	if e.Async {
		if e.Kind != Data || e.Cost <= 0 || e.Streams {
			return fmt.Errorf("only a paid data endpoint that does not stream runs as a web job (Async)")
		}
		all = append(all, asyncParam)
	}
	if e.Kind == Data {
		all = append(all, dryRunParam)
	}
	for i := range all {
		p := &all[i]
		if p.Type == "" {
			return fmt.Errorf("parameter %s has no type", p.Name)
		}
		if p.Type == List && p.Item == "" {
			p.Item = String
		}
		if p.Pattern != "" {
			re, err := regexp.Compile("^(?:" + p.Pattern + ")$")
			if err != nil {
				return fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			p.pattern = re
		}
		for _, n := range append([]string{p.Name}, p.Aliases...) {
			if _, dup := e.byName[n]; dup {
				return fmt.Errorf("parameter name %s declared twice", n)
			}
			e.byName[n] = p
		}
		e.accepted = append(e.accepted, p)
	}
	for _, n := range idParams {
		if _, ok := e.byName[n]; !ok {
			return fmt.Errorf("path identifier {%s} is not a declared parameter", n)
		}
	}
	if e.GetParam != "" {
		if _, ok := e.byName[e.GetParam]; !ok {
			return fmt.Errorf("GetParam %s is not a declared parameter", e.GetParam)
		}
	}
	for _, group := range e.AnyOf {
		for _, n := range group {
			if _, ok := e.byName[n]; !ok {
				return fmt.Errorf("AnyOf names undeclared parameter %s", n)
			}
		}
	}
	return nil
}

var platformPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// IsIdentifier applies the routing rule of spec 4.1 and 8: a segment that
// contains a digit or an underscore, or is longer than 24 characters, is an
// identifier rather than a route word.
func IsIdentifier(seg string) bool {
	if utf8.RuneCountInString(seg) > 24 {
		return true
	}
	return strings.ContainsAny(seg, "0123456789_")
}

// Endpoints returns every registered endpoint, retired ones included, in declaration order.
func (r *Registry) Endpoints() []*Endpoint { return r.endpoints }

// Endpoint finds an endpoint by its platform/id key.
func (r *Registry) Endpoint(key string) (*Endpoint, bool) {
	e, ok := r.byKey[key]
	return e, ok
}

// Platforms returns every platform segment, sorted.
func (r *Registry) Platforms() []string { return r.names }

// FamilyOf returns the family serving a platform.
func (r *Registry) FamilyOf(platform string) (Family, bool) {
	p, ok := r.platforms[platform]
	if !ok {
		return "", false
	}
	return p.family, true
}

// Routes is the one route table: API Gateway's routes in infra and the
// local server's dispatch both come from it.
func (r *Registry) Routes() []Route {
	routes := []Route{{Method: http.MethodGet, Path: "/v1", Family: Service}}
	for _, name := range r.names {
		if name == "" {
			continue
		}
		f := r.platforms[name].family
		routes = append(routes,
			Route{Method: "ANY", Path: "/v1/" + name, Family: f},
			Route{Method: "ANY", Path: "/v1/" + name + "/{proxy+}", Family: f},
		)
	}
	for _, s := range Surfaces {
		routes = append(routes, Route{Method: s.Method, Path: s.Path, Family: s.Family})
	}
	// Unknown paths reach the service function, which answers a typed 404.
	return append(routes, Route{Method: "ANY", Path: DefaultRoute, Family: Service})
}

// RouteTable picks the route API Gateway would: an exact path beats a
// greedy one ({proxy+}, the longest prefix first), a named method beats
// ANY, and $default catches the rest. It is indexed by path so a request
// costs a few map lookups, not a walk over every route.
type RouteTable struct {
	exact    map[string][]Route // by path
	greedy   map[string][]Route // by the prefix before "/{proxy+}"
	fallback Route              // $default, or the zero Route
}

// NewRouteTable indexes routes.
func NewRouteTable(routes []Route) *RouteTable {
	t := &RouteTable{exact: map[string][]Route{}, greedy: map[string][]Route{}}
	for _, rt := range routes {
		switch prefix, greedy := strings.CutSuffix(rt.Path, "/{proxy+}"); {
		case rt.Path == DefaultRoute:
			t.fallback = rt
		case greedy:
			t.greedy[prefix] = append(t.greedy[prefix], rt)
		default:
			t.exact[rt.Path] = append(t.exact[rt.Path], rt)
		}
	}
	return t
}

// Match is the route of a request for method and path.
func (t *RouteTable) Match(method, path string) Route {
	if rt, ok := pickMethod(t.exact[path], method); ok {
		return rt
	}
	// {proxy+} needs at least one character after the slash, so the
	// longest candidate prefix ends before the path's last byte.
	for i := strings.LastIndexByte(path[:max(len(path)-1, 0)], '/'); i >= 0; i = strings.LastIndexByte(path[:i], '/') {
		if rt, ok := pickMethod(t.greedy[path[:i]], method); ok {
			return rt
		}
	}
	return t.fallback
}

// pickMethod is the route of candidates named for method, else an ANY one.
func pickMethod(candidates []Route, method string) (Route, bool) {
	var anyMethod Route
	found := false
	for _, rt := range candidates {
		switch rt.Method {
		case method:
			return rt, true
		case "ANY":
			anyMethod, found = rt, true
		}
	}
	return anyMethod, found
}
