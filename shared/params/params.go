// Package params validates a request's query against its endpoint's
// declared parameters (spec part 7, INVALID_PARAMETERS) and produces the
// canonical parameter set that the cache and upstreams see.
package params

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

const (
	// MaxQueryBytes bounds the raw query string (API Gateway's own request
	// line limit is 10 KiB).
	MaxQueryBytes = 8 << 10
	// MaxValueLength is the length cap of a value whose parameter sets none.
	MaxValueLength = 2048
	// maxEchoed bounds how many unknown names an error lists.
	maxEchoed = 20
)

// Plain decimal notation only: no hex, exponents, infinities or NaN.
var (
	integerPattern = regexp.MustCompile(`^[+-]?[0-9]{1,18}$`)
	decimalPattern = regexp.MustCompile(`^[+-]?[0-9]{1,18}(\.[0-9]{1,18})?$`)
)

// Query is a parsed query string.
type Query = url.Values

// Parse reads a raw query string. A query over MaxQueryBytes or one that
// is not valid form encoding is a 400; the values parsed are still
// returned so authentication can see an api_key in a refused query.
func Parse(raw string) (Query, *envelope.Error) {
	q, err := url.ParseQuery(raw)
	if len(raw) > MaxQueryBytes {
		return q, envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"The query string is too long.",
			map[string]any{"reason": "query_too_long", "max_bytes": MaxQueryBytes})
	}
	if err != nil {
		return q, envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
			"The query string is not valid form encoding (check percent-escapes and separators).",
			map[string]any{"reason": "malformed_query"})
	}
	return q, nil
}

// Result is a validated request.
type Result struct {
	// Values maps canonical names to canonical values, defaults applied,
	// aliases folded; dry_run and async are not among them.
	Values map[string]string
	DryRun bool
	// Async: the caller asked for a web job (async=1).
	Async bool
}

// CacheKey is the canonical query: equivalent spellings share it.
// It is url.Values.Encode of the values, built without the copy.
func (r Result) CacheKey() string {
	names := make([]string, 0, len(r.Values))
	for k := range r.Values {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(r.Values[k]))
	}
	return b.String()
}

// Validate checks q and the identifiers lifted from the path against e.
// Undeclared names are refused first (400), then missing required
// parameters (422, details.missing), then bad values (422 naming the field).
func Validate(e *registry.Endpoint, q Query, pathParams map[string]string) (Result, *envelope.Error) {
	if err := checkNames(e, q); err != nil {
		return Result{}, err
	}
	supplied, err := gather(e, q, pathParams)
	if err != nil {
		return Result{}, err
	}
	if err := checkRequired(e, supplied); err != nil {
		return Result{}, err
	}
	res := Result{Values: map[string]string{}}
	var problems []map[string]any
	for _, p := range e.Accepted() {
		s, ok := supplied[p.Name]
		if !ok {
			if p.Default != "" {
				res.Values[p.Name] = p.Default
			}
			continue
		}
		canonical, problem := check(p, s.value)
		if problem == nil && len(p.Hosts) > 0 {
			canonical, problem = checkHost(e.Platform, p, canonical)
		}
		if problem == nil && p.Check != nil {
			if reason, message := p.Check(canonical); reason != "" {
				problem = refusal(reason, message)
			}
		}
		if problem != nil {
			problem["field"] = s.name
			problems = append(problems, problem)
			continue
		}
		switch p.Name {
		case "dry_run":
			res.DryRun = canonical == "true"
			continue
		case "async":
			res.Async = canonical == "true"
			continue
		}
		res.Values[p.Name] = canonical
	}
	if len(problems) == 0 {
		problems = checkOrder(e, res.Values)
	}
	if len(problems) > 0 {
		return Result{}, invalidValues(problems)
	}
	return res, nil
}

// suppliedValue is a parameter's value and the name the caller used for it.
type suppliedValue struct {
	name, value string
}

func checkNames(e *registry.Endpoint, q Query) *envelope.Error {
	var unknown []string
	for name, values := range q {
		if _, ok := e.Lookup(name); ok {
			continue
		}
		if allEmpty(values) {
			continue // an empty undeclared value counts as omitted
		}
		unknown = append(unknown, name)
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	accepted := acceptedNames(e)
	suggestions := map[string]string{}
	for _, name := range unknown {
		if s, ok := suggest(name, accepted); ok {
			suggestions[echo(name)] = s
		}
	}
	echoed := make([]string, 0, min(len(unknown), maxEchoed))
	for _, name := range unknown[:min(len(unknown), maxEchoed)] {
		echoed = append(echoed, echo(name))
	}
	details := map[string]any{
		"unknown_parameters":  echoed,
		"accepted_parameters": accepted,
	}
	if len(suggestions) > 0 {
		details["suggestions"] = suggestions
	}
	msg := "Unknown parameter " + strconv.Quote(echo(unknown[0])) + "."
	if len(unknown) > 1 {
		msg = strconv.Itoa(len(unknown)) + " unknown parameters."
	}
	if s, ok := suggestions[echo(unknown[0])]; ok {
		msg += " Did you mean " + strconv.Quote(s) + "?"
	}
	return envelope.New(envelope.InvalidParameters, http.StatusBadRequest,
		msg+" See details.accepted_parameters.", details)
}

func acceptedNames(e *registry.Endpoint) []string {
	names := []string{}
	for _, p := range e.Accepted() {
		names = append(names, p.Name)
		names = append(names, p.Aliases...)
	}
	return names
}

// gather picks each parameter's value: the canonical name first, then its
// aliases in precedence order, then an identifier lifted from the path.
func gather(e *registry.Endpoint, q Query, pathParams map[string]string) (map[string]suppliedValue, *envelope.Error) {
	supplied := map[string]suppliedValue{}
	for _, p := range e.Accepted() {
		for _, name := range append([]string{p.Name}, p.Aliases...) {
			values := q[name]
			if len(values) > 1 {
				return nil, invalidValues([]map[string]any{{
					"field": name, "reason": "repeated",
					"message": name + " was sent more than once; send it once (lists are comma-separated).",
				}})
			}
			if _, done := supplied[p.Name]; done || len(values) == 0 || strings.TrimSpace(values[0]) == "" {
				continue
			}
			supplied[p.Name] = suppliedValue{name, values[0]}
		}
		if fromPath, ok := pathParams[p.Name]; ok {
			if s, ok := supplied[p.Name]; ok && s.value != fromPath {
				return nil, invalidValues([]map[string]any{{
					"field": s.name, "reason": "conflicts_with_path",
					"message": s.name + " in the query differs from the identifier in the path.",
				}})
			}
			supplied[p.Name] = suppliedValue{p.Name, fromPath}
		}
	}
	return supplied, nil
}

func checkRequired(e *registry.Endpoint, supplied map[string]suppliedValue) *envelope.Error {
	var missing []string
	for _, p := range e.Accepted() {
		if _, ok := supplied[p.Name]; ok {
			continue
		}
		cond := p.RequiredWhen
		if p.Required || (cond[0] != "" && strings.TrimSpace(supplied[cond[0]].value) == cond[1]) {
			missing = append(missing, p.Name)
		}
	}
	var oneOf [][]string
	for _, group := range e.AnyOf {
		found := false
		for _, name := range group {
			if _, ok := supplied[name]; ok {
				found = true
			}
		}
		if !found {
			oneOf = append(oneOf, group)
			missing = append(missing, group...)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	details := map[string]any{"missing": missing}
	msg := "Missing required parameter " + strconv.Quote(missing[0]) + "."
	if len(oneOf) > 0 {
		details["one_of"] = oneOf
		msg = "Send at least one of " + strings.Join(oneOf[0], ", ") + "."
	} else if len(missing) > 1 {
		msg = "Missing required parameters: " + strings.Join(missing, ", ") + "."
	}
	return envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity, msg, details)
}

func invalidValues(problems []map[string]any) *envelope.Error {
	first := problems[0]
	details := map[string]any{}
	for k, v := range first {
		if k != "message" {
			details[k] = v
		}
	}
	if len(problems) > 1 {
		details["errors"] = problems
	}
	msg, _ := first["message"].(string)
	return envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity, msg, details)
}

// check validates one value and returns its canonical form.
func check(p *registry.Param, raw string) (string, map[string]any) {
	v := strings.TrimSpace(raw)
	if !utf8.ValidString(v) {
		return "", problem("invalid_encoding", p.Name+" must be valid UTF-8.")
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", problem("invalid_characters", p.Name+" must not contain control characters.")
	}
	limit := p.MaxLength
	if limit == 0 {
		limit = MaxValueLength
	}
	if n := utf8.RuneCountInString(v); n > limit {
		pr := problem("too_long", p.Name+" is longer than "+strconv.Itoa(limit)+" characters.")
		pr["max_length"] = limit
		return "", pr
	}
	if p.Type != registry.List {
		return checkScalar(p, p.Type, v)
	}
	var items []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		c, pr := checkScalar(p, p.Item, item)
		if pr != nil {
			pr["value"] = echo(item)
			return "", pr
		}
		items = append(items, c)
	}
	if len(items) == 0 {
		return "", problem("empty_list", p.Name+" must list at least one value.")
	}
	return strings.Join(items, ","), nil
}

func checkScalar(p *registry.Param, t registry.ParamType, v string) (string, map[string]any) {
	switch t {
	case registry.Integer, registry.Number:
		pattern, kind := decimalPattern, "a number"
		if t == registry.Integer {
			pattern, kind = integerPattern, "an integer"
		}
		f, err := strconv.ParseFloat(v, 64)
		if !pattern.MatchString(v) || err != nil {
			pr := problem("invalid_type", p.Name+" must be "+kind+".")
			pr["expected"] = string(t)
			return "", pr
		}
		if len(p.Enum) > 0 {
			for _, allowed := range p.Enum {
				if a, _ := strconv.ParseFloat(allowed, 64); a == f {
					return allowed, nil
				}
			}
			return "", notAllowed(p)
		}
		if (p.Min != nil && f < *p.Min) || (p.Max != nil && f > *p.Max) {
			return "", outOfRange(p)
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	case registry.Boolean:
		switch strings.ToLower(v) {
		case "1", "true", "yes", "on":
			return "true", nil
		case "0", "false", "no", "off":
			return "false", nil
		}
		pr := problem("invalid_type", p.Name+" must be a flag: 1, true, yes or on; 0, false, no or off.")
		pr["expected"] = "boolean"
		return "", pr
	case registry.Date:
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			pr := problem("invalid_date", p.Name+" must be a date in the form YYYY-MM-DD.")
			pr["expected"] = "YYYY-MM-DD"
			return "", pr
		}
		return d.Format(time.DateOnly), nil
	case registry.URL:
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
			pr := problem("invalid_url", p.Name+" must be an absolute http or https URL.")
			pr["expected"] = "url"
			return "", pr
		}
		return v, nil
	}
	switch p.Fold {
	case "upper":
		v = strings.ToUpper(v)
	case "lower":
		v = strings.ToLower(v)
	}
	if re := p.Compiled(); re != nil && !re.MatchString(v) {
		pr := problem("invalid_format", p.Name+" must be "+p.PatternHint+".")
		pr["expected"] = p.PatternHint
		return "", pr
	}
	if len(p.Enum) > 0 {
		for _, allowed := range p.Enum {
			if v == allowed {
				return v, nil
			}
		}
		return "", notAllowed(p)
	}
	return v, nil
}

// A value of a parameter with hosts is a URL when it has a scheme
// ("https:", "ftp:", "javascript:"), starts with "//", or starts with a
// dotted host name and a path ("www.etsy.com/listing/1"). Anything else
// ("1234567890", "example-shop", "1005006123456789.html") stays an id.
var (
	schemePrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	bareHostPath = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z][A-Za-z0-9-]*\.?(:[0-9]*)?/`)
)

// checkHost keeps a URL in a parameter with declared hosts on its
// platform's own pages, here in validation so that a foreign URL is
// refused before any cache lookup, fetch or charge (the URL policy still
// applies to whatever is fetched). An id passes unchanged. A URL must be
// http(s), without credentials, on an allowed host. "//host/..." and
// "host/..." are read as https and canonicalised to it, so handlers see
// only ids and absolute URLs, and both spellings share a cache key.
func checkHost(platform string, p *registry.Param, v string) (string, map[string]any) {
	abs := v
	switch {
	case strings.HasPrefix(v, "//"):
		abs = "https:" + v
	case bareHostPath.MatchString(v):
		abs = "https://" + v
	case !schemePrefix.MatchString(v):
		return v, nil
	case p.IsIDScheme(v):
		return v, nil // an id written as a URI of the platform's own scheme (at://…)
	}
	u, err := url.Parse(abs)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" || u.User != nil || !wellFormedHost(u.Hostname()) {
		msg := p.Name + " must be an absolute http or https URL without credentials"
		if p.Type != registry.URL {
			msg += ", or an id"
		}
		pr := problem("invalid_url", msg+".")
		pr["expected"] = "url"
		return "", pr
	}
	if !p.AllowsHost(u.Hostname()) {
		// The platform's neutral id only: real host names stay internal.
		msg := "The URL in " + p.Name + " is not a page of " + platform + "; send a URL of a " + platform + " page"
		if p.Type != registry.URL {
			msg += " or an id"
		}
		pr := problem("wrong_host", msg+".")
		pr["platform"] = platform
		return "", pr
	}
	return abs, nil
}

// wellFormedHost refuses an empty host and empty labels (".etsy.com",
// "etsy..com"); one trailing dot is the DNS root and allowed.
func wellFormedHost(h string) bool {
	h = strings.TrimSuffix(h, ".")
	return h != "" && !strings.HasPrefix(h, ".") && !strings.Contains(h, "..")
}

func problem(reason, message string) map[string]any {
	return map[string]any{"reason": reason, "message": message}
}

// refusal is problem, for where a local variable has that name.
var refusal = problem

func notAllowed(p *registry.Param) map[string]any {
	pr := problem("not_allowed", p.Name+" must be one of: "+strings.Join(p.Enum, ", ")+".")
	pr["allowed"] = p.Enum
	return pr
}

func outOfRange(p *registry.Param) map[string]any {
	msg := p.Name + " is out of range"
	pr := problem("out_of_range", "")
	if p.Min != nil {
		pr["min"] = *p.Min
		msg += "; minimum " + strconv.FormatFloat(*p.Min, 'f', -1, 64)
	}
	if p.Max != nil {
		pr["max"] = *p.Max
		msg += "; maximum " + strconv.FormatFloat(*p.Max, 'f', -1, 64)
	}
	pr["message"] = msg + "."
	return pr
}

func checkOrder(e *registry.Endpoint, values map[string]string) []map[string]any {
	for _, o := range e.Ordered {
		low, okLow := values[o.Low]
		high, okHigh := values[o.High]
		if !okLow || !okHigh {
			continue
		}
		var backwards bool
		lf, errL := strconv.ParseFloat(low, 64)
		hf, errH := strconv.ParseFloat(high, 64)
		if errL == nil && errH == nil {
			backwards = lf > hf || (o.Strict && lf == hf)
		} else { // dates in YYYY-MM-DD order as strings
			backwards = low > high || (o.Strict && low == high)
		}
		if backwards {
			rel := "on or after"
			if o.Strict {
				rel = "after"
			}
			pr := problem("out_of_order", o.High+" must be "+rel+" "+o.Low+".")
			pr["field"] = o.High
			pr["after"] = o.Low
			return []map[string]any{pr}
		}
	}
	return nil
}

func allEmpty(values []string) bool {
	for _, v := range values {
		if v != "" {
			return false
		}
	}
	return true
}

// echo bounds a caller-supplied name before it goes into a response.
func echo(s string) string {
	const limit = 100
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
