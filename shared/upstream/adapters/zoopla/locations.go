package zoopla

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// geoOperation and geoQuery are the typeahead's GraphQL operation, as the
// site's search box asks it.
const (
	geoOperation = "getSearchSuggestions"
	geoQuery     = "query getSearchSuggestions($locationPrefix: String!) { geoSuggestion(locationPrefix: $locationPrefix) { geoIdentifier geoLabel geoSubLabel } }"
)

// Locations is the data of property_portal/locations.
type Locations struct {
	Count   int        `json:"count"`
	HasMore bool       `json:"has_more"`
	Items   []Location `json:"items"`
	Query   string     `json:"query"`
}

// Location is one area: Identifier and Label are what search-sale takes.
type Location struct {
	Identifier *string `json:"identifier"`
	Label      *string `json:"label"`
	Name       *string `json:"name"`
	// Type is "station" or "school" when the identifier says so (its
	// station/ or schools/ path), else null: the typeahead names no type.
	Type *string `json:"type"`
}

// locationsRequest asks the typeahead for the text, with the operator's
// key when one is configured.
func locationsRequest(c *upstream.Call) (pages.Request, error) {
	text := strings.Join(strings.Fields(c.Param("query")), " ")
	if text == "" {
		return pages.Request{}, upstream.InvalidParameterFault("query", "required", "Give the text to look up.")
	}
	vars, err := json.Marshal(map[string]string{"locationPrefix": text})
	if err != nil {
		return pages.Request{}, upstream.MalformedFault("cannot encode the typeahead's variables: %v", err)
	}
	q := url.Values{}
	q.Set("operationName", geoOperation)
	q.Set("variables", string(vars))
	q.Set("query", geoQuery)
	h := http.Header{}
	// The page the site's own search box calls from (a referer, not an
	// origin header, which an unblocking service may refuse to set).
	h.Set("referer", Origin+"/")
	// A GraphQL GET is served only with a header a form could not send
	// (servers refuse simple cross-site GETs as CSRF).
	h.Set("x-apollo-operation-name", geoOperation)
	if key := c.Secret(KeySecret); key != "" {
		h.Set("x-api-key", key)
	}
	return pages.Request{Host: GraphQLHost, Path: "/graphql", Query: q, Header: h, JSON: true, Country: "GB"}, nil
}

// geoAnswer is the GraphQL answer: data.geoSuggestion, or errors.
type geoAnswer struct {
	Data *struct {
		GeoSuggestion *[]struct {
			GeoIdentifier *string `json:"geoIdentifier"`
			GeoLabel      *string `json:"geoLabel"`
			GeoSubLabel   *string `json:"geoSubLabel"`
		} `json:"geoSuggestion"`
	} `json:"data"`
	Errors []struct {
		Message string `json:"message"`
	} `json:"errors"`
}

// parseLocations maps the typeahead's suggestions, in its order.
func parseLocations(c *upstream.Call, p *pages.Page) (any, error) {
	var ans geoAnswer
	if err := upstream.DecodeJSON(p.Body, &ans); err != nil {
		return nil, upstream.MalformedFault("the typeahead's answer is not its JSON (a %d-byte body)", len(p.Body))
	}
	if ans.Data == nil || ans.Data.GeoSuggestion == nil {
		if len(ans.Errors) > 0 {
			// The API refused the query (a key it does not accept, say).
			return nil, &upstream.Fault{Kind: upstream.Rejected, Status: p.Status,
				Reason: "the typeahead answered GraphQL errors: " + upstream.Clip(ans.Errors[0].Message, 120)}
		}
		return nil, upstream.MalformedFault("the typeahead's answer has no data.geoSuggestion (a %d-byte body)", len(p.Body))
	}
	limit := 10
	if n, err := strconv.Atoi(c.Param("limit")); err == nil && n >= 1 {
		limit = n
	}
	all := *ans.Data.GeoSuggestion
	res := Locations{Items: make([]Location, 0, min(len(all), limit)), Query: strings.Join(strings.Fields(c.Param("query")), " ")}
	for _, s := range all {
		if len(res.Items) == limit {
			res.HasMore = true
			break
		}
		id := strings.TrimSpace(deref(s.GeoIdentifier))
		label := strings.TrimSpace(deref(s.GeoLabel))
		if id == "" && label == "" {
			continue // nothing a caller could search or show
		}
		res.Items = append(res.Items, Location{Identifier: str(id), Label: str(label), Name: str(label), Type: kindOf(id)})
	}
	res.Count = len(res.Items)
	return res, nil
}

// kindOf reads the kind of area an identifier's path names.
func kindOf(id string) *string {
	switch {
	case strings.HasPrefix(id, "station/"):
		return str("station")
	case strings.HasPrefix(id, "schools/"):
		return str("school")
	}
	return nil
}
