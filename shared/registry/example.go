package registry

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ExampleDaysAhead is how far ahead of today a date example lies.
const ExampleDaysAhead = 30

// Example is a ready-to-run call of e from its declarations: every
// required parameter and the first member of each any-of group in query,
// and the identifiers its path template lifts in path, each set to its
// declared example. Discovery shows it; the canary runs it.
func (e *Endpoint) Example() (query url.Values, path map[string]string) {
	query, path = url.Values{}, map[string]string{}
	for _, p := range e.accepted {
		switch {
		case strings.Contains(e.ID, "{"+p.Name+"}"):
			path[p.Name] = p.ExampleValue()
		case p.Required:
			query.Set(p.Name, p.ExampleValue())
		}
	}
	for _, group := range e.AnyOf {
		if p, ok := e.Lookup(group[0]); ok {
			query.Set(p.Name, p.ExampleValue())
		}
	}
	return query, path
}

// ExampleValue is a value of p that validates: its declared example, else
// its default, first allowed value or lower bound, else a value of its type.
func (p *Param) ExampleValue() string {
	switch {
	case p.Example != "":
		return p.Example
	case p.Default != "":
		return p.Default
	case len(p.Enum) > 0:
		return p.Enum[0]
	case p.Type == Integer || p.Type == Number:
		if p.Min != nil {
			return strconv.FormatFloat(*p.Min, 'f', -1, 64)
		}
		return "1"
	case p.Type == Boolean:
		return "true"
	case p.Type == Date:
		// A month ahead: stays and date ranges in examples are never past.
		return time.Now().UTC().AddDate(0, 0, ExampleDaysAhead+p.ExampleDaysAfter).Format(time.DateOnly)
	case p.Type == URL:
		return "https://example.com/"
	}
	return "example"
}
