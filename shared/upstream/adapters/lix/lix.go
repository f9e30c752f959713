// Package lix serves the professional_network lookups (locations, schools,
// industries) over Lix's Search Facet Typeahead
// (GET /v1/search/sales/facet, https://lix-it.com/docs), a commercial
// provider with published request and response formats, on the operator's
// own API key.
//
// Why a commercial provider: the filters of the network's people search
// take ids (a location's geo id, a school's organisation id, an industry's
// id in the network's industry taxonomy), and the typeaheads that map text
// to them answer only a signed-in session. Lix documents one endpoint for
// every facet: query (text), type (BING_GEO for geography, SCHOOL,
// INDUSTRY, ...), count and start; it answers
// {"data": {"elements": [{"displayValue", "id"}], "paging": {"count"}}}.
// The facet ids are the network's own: the same geo, organisation and
// industry ids its free people search takes in geoUrn, schoolFilter and
// industry. Errors are {"error": {"type", "message"}} with the statuses
// Lix lists (401 key, 402 over quota, 407 viewer not connected, 429 rate
// limit, 5xx).
package lix

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// KeySecret is the operator's Lix API key, sent as the Authorization header.
const KeySecret = "MERIDIAN_LIX_API_KEY"

// ViewerSecret optionally names the LinkedIn account (connected to the Lix
// account) the typeahead runs as: Lix's viewer_id.
const ViewerSecret = "MERIDIAN_LIX_VIEWER_ID"

// Provider is the Lix provider; it needs the operator's key.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     "lix_api",
		Label:    "data_provider_b", // a third-party service: never named in answers
		Protocol: "Lix API (JSON, Authorization: API key): Search Facet Typeahead (GET /v1/search/sales/facet) for geography, schools and industries",
		Docs:     "https://lix-it.com/docs",
		BaseURL:  "https://api.lix-it.com",
		Secrets: []upstream.Secret{
			{
				Name:     KeySecret,
				Required: true,
				Doc: "The API key of a Lix account (lix-it.com > API), sent as the Authorization header. The account needs a " +
					"LinkedIn account connected through the Lix extension; the typeahead is free while the account has credits.",
			},
			{
				Name: ViewerSecret,
				Doc: "Optional: the LinkedIn id of the connected account to run the typeahead as (Lix's viewer_id); " +
					"unset, Lix uses the account's default.",
			},
		},
		Endpoints: map[string]upstream.Adapter{
			"professional_network/locations":  facet("BING_GEO"),
			"professional_network/schools":    facet("SCHOOL"),
			"professional_network/industries": facet("INDUSTRY"),
		},
	}
}

const facetPath = "/v1/search/sales/facet"

// facetBody is the typeahead's answer, or its error.
type facetBody struct {
	Data *struct {
		Elements *[]struct {
			DisplayValue string          `json:"displayValue"`
			ID           upstream.FlexID `json:"id"`
		} `json:"elements"`
		Paging *struct {
			Count *json.Number `json:"count"`
			Start *json.Number `json:"start"`
			Total *json.Number `json:"total"`
		} `json:"paging"`
	} `json:"data"`
	Error *lixError `json:"error"`
}

type lixError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Lookup is the data of the three lookups.
type Lookup struct {
	Items    []Entry  `json:"items"`
	Count    int      `json:"count"`
	HasMore  *bool    `json:"has_more"`
	Query    *string  `json:"query"`
	Warnings []string `json:"_warnings,omitempty"`
}

// Entry is one id and its name.
type Entry struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
}

// facet is the adapter of one facet type: query is the typeahead's text,
// limit its count (start 0: a lookup is one page).
func facet(kind string) upstream.Adapter {
	return func(ctx context.Context, c *upstream.Call) (any, error) {
		query := strings.TrimSpace(c.Param("query"))
		limit, err := strconv.Atoi(c.Param("limit"))
		if err != nil || limit < 1 {
			limit = 10
		}
		q := url.Values{"query": {query}, "type": {kind}, "count": {strconv.Itoa(limit)}, "start": {"0"}}
		if v := c.Secret(ViewerSecret); v != "" {
			q.Set("viewer_id", v)
		}
		h := http.Header{}
		h.Set("Authorization", c.Secret(KeySecret))
		resp, err := c.Get(ctx, facetPath, q, h)
		if err != nil {
			var f *upstream.Fault
			if errors.As(err, &f) && resp != nil && f.Status != 0 {
				return nil, classify(f, resp.Body, c)
			}
			return nil, err
		}
		var body facetBody
		if err := upstream.DecodeJSON(resp.Body, &body); err != nil {
			return nil, err
		}
		if body.Data == nil || body.Data.Elements == nil {
			if body.Error != nil {
				return nil, classify(&upstream.Fault{}, resp.Body, c)
			}
			return nil, upstream.MalformedFault("facet typeahead answer (%d bytes) has no data.elements", len(resp.Body))
		}
		out := Lookup{Items: []Entry{}, Query: &query}
		for _, e := range *body.Data.Elements {
			id := text(string(e.ID))
			if id == nil {
				continue // a suggestion without an id cannot filter anything
			}
			if len(out.Items) == limit {
				break
			}
			out.Items = append(out.Items, Entry{ID: id, Name: text(e.DisplayValue)})
		}
		out.Count = len(out.Items)
		// Fewer rows than asked for is the whole list; a full page may have
		// more, which the typeahead's paging does not say.
		if out.Count < limit {
			none := false
			out.HasMore = &none
		} else if p := body.Data.Paging; p != nil && p.Total != nil {
			if total, err := p.Total.Int64(); err == nil {
				more := total > int64(out.Count)
				out.HasMore = &more
			}
		}
		return out, nil
	}
}

// overQuotaWait rests the route when the account is over its plan's quota
// (402): it lasts until the operator tops up, which the runner's longest
// rest (an hour) stands for.
const overQuotaWait = time.Hour

// classify maps Lix's documented errors (status and error.type) to faults;
// the key never reaches a reason.
func classify(f *upstream.Fault, raw []byte, c *upstream.Call) *upstream.Fault {
	var body struct {
		Error *lixError `json:"error"`
	}
	_ = json.Unmarshal(raw, &body)
	var e lixError
	if body.Error != nil {
		e = *body.Error
	}
	msg := strings.Trim(e.Type+": "+e.Message, ": ")
	if key := c.Secret(KeySecret); key != "" {
		msg = strings.ReplaceAll(msg, key, "[key]")
	}
	msg = upstream.Clip(msg, 200)
	detail := func(s string) string {
		if msg == "" {
			return s
		}
		return s + " (" + msg + ")"
	}
	switch {
	case f.Status == http.StatusTooManyRequests || e.Type == "rate_limit":
		f.Kind, f.Reason = upstream.RateLimited, detail("rate limited") // StatusFault read retry-after
	case f.Status == http.StatusPaymentRequired:
		f.Kind, f.Reason, f.RetryAfter = upstream.RateLimited, detail("over the plan's quota"), overQuotaWait
	case f.Status == http.StatusUnauthorized || f.Status == http.StatusForbidden:
		f.Kind, f.Reason = upstream.Rejected, detail("API key refused (is it valid?)")
	case f.Status == http.StatusProxyAuthRequired || e.Type == "viewer_invalid":
		f.Kind, f.Reason = upstream.Rejected, detail("no connected account to run as (check the viewer id and the extension)")
	case e.Type == "queued" || e.Type == "api_error" || f.Status >= 500:
		// queued: Lix asks for the request again in a few minutes.
		f.Kind, f.Reason = upstream.ServerError, detail("the source could not answer now")
	case f.Status == 0:
		f.Kind, f.Reason = upstream.Malformed, detail("the answer is an error without data")
	default:
		// 400 params_invalid, 404 unknown_route: Meridian's request is
		// wrong, not the caller's; a typeahead has nothing to be missing.
		f.Kind, f.Reason = upstream.Rejected, detail(http.StatusText(f.Status))
	}
	return f
}

// text is a string the source may send as null or "": both are unknown.
var text = upstream.Trimmed
