package registry

// ParamDoc is a parameter as catalogues and indexes publish it.
type ParamDoc struct {
	Name         string   `json:"name"`
	Type         string   `json:"type"`
	Items        string   `json:"items,omitempty"`
	Required     bool     `json:"required"`
	RequiredWhen string   `json:"required_when,omitempty"`
	Description  string   `json:"description"`
	Minimum      *float64 `json:"minimum,omitempty"`
	Maximum      *float64 `json:"maximum,omitempty"`
	MaxLength    int      `json:"max_length,omitempty"`
	Enum         []string `json:"enum,omitempty"`
	Format       string   `json:"format,omitempty"`
	Default      string   `json:"default,omitempty"`
	Aliases      []string `json:"aliases,omitempty"`
	Example      string   `json:"example,omitempty"`
	// PlatformURL says a URL value must be a page of the endpoint's own
	// platform (422 wrong_host otherwise); the hosts stay internal.
	PlatformURL bool `json:"platform_url,omitempty"`
}

// Entry is an endpoint as catalogues and indexes publish it (spec 2.5:
// id, name, credit_cost, params, description, plus what a caller needs).
type Entry struct {
	ID              string     `json:"id"`
	Name            string     `json:"name"`
	Method          string     `json:"method"`
	Path            string     `json:"path"`
	CreditCost      int64      `json:"credit_cost"`
	Description     string     `json:"description"`
	Params          []ParamDoc `json:"params"`
	OneOf           [][]string `json:"one_of,omitempty"`
	AIAssist        bool       `json:"ai_assist"`
	LimitedCapacity bool       `json:"limited_capacity"`
	Deprecated      bool       `json:"deprecated"`
	Streams         bool       `json:"streams"`
	CacheTTLSeconds int64      `json:"cache_ttl_seconds"`
	Metered         bool       `json:"metered"`
	// Addition marks an operation beyond the specification (Origin Addition).
	Addition bool `json:"addition"`
	// Available says whether this deployment can serve the endpoint on
	// /v1. The registry knows no deployment: Entry leaves it false and the
	// pipeline, which holds the handler table, sets it.
	Available bool `json:"available"`
	// Capacity is a limited-capacity endpoint's shared monthly allowance
	// as this deployment counts it now; the pipeline sets it, only for
	// those endpoints.
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Capacity is what is left of a limited-capacity endpoint's shared
// monthly allowance (spec 2.4): it can end before account credits do.
type Capacity struct {
	// Remaining is the live fetches left this month across accounts; null
	// when unknown or unbounded (no allowance on some route, or the count
	// could not be read).
	Remaining *int64 `json:"remaining"`
	// ResetsAt is when the allowance resets: the start of the next
	// calendar month, UTC (RFC 3339).
	ResetsAt string `json:"resets_at"`
	// Exhausted: nothing remains, so a live fetch is refused with 429
	// UPSTREAM_ERROR (details.reason capacity_exhausted) until ResetsAt;
	// a cached answer still serves.
	Exhausted bool `json:"exhausted"`
}

// Entry describes e for catalogues; Available is the pipeline's to set.
func (e *Endpoint) Entry() Entry {
	out := Entry{
		ID: e.Key(), Name: e.Name, Method: e.HTTPMethod(), Path: e.Path(), CreditCost: e.Cost,
		Description: e.Description, Params: []ParamDoc{}, OneOf: e.AnyOf, AIAssist: e.AI,
		LimitedCapacity: e.LimitedCapacity, Deprecated: e.Deprecated != nil, Streams: e.Streams,
		CacheTTLSeconds: int64(e.CacheFor().Seconds()), Metered: e.FairUse > 0, Addition: e.Origin == Addition,
	}
	for _, p := range e.accepted {
		d := ParamDoc{
			Name: p.Name, Type: string(p.Type), Required: p.Required, Description: p.Description,
			Minimum: p.Min, Maximum: p.Max, MaxLength: p.MaxLength, Enum: p.Enum, Format: p.PatternHint,
			Default: p.Default, Aliases: p.Aliases, Example: p.Example, PlatformURL: len(p.Hosts) > 0,
		}
		if p.Type == List {
			d.Items = string(p.Item)
		}
		if p.RequiredWhen[0] != "" {
			d.RequiredWhen = p.RequiredWhen[0] + "=" + p.RequiredWhen[1]
		}
		out.Params = append(out.Params, d)
	}
	return out
}

// Live lists the endpoints a catalogue shows: every one not retired.
func (r *Registry) Live() []*Endpoint {
	var out []*Endpoint
	for _, e := range r.endpoints {
		if !e.Retired() {
			out = append(out, e)
		}
	}
	return out
}
