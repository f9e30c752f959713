package booking

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// The autocomplete the site's search box calls.
const autocompletePath = "/autocomplete.json"

// destTypes are the site's destination types a search can take.
var destTypes = map[string]bool{"city": true, "region": true, "district": true, "landmark": true, "airport": true, "country": true, "hotel": true}

// suggestion is one autocomplete result. Ids may come as strings or
// numbers: they are kept as written, never through float64.
type suggestion struct {
	DestID    json.RawMessage `json:"dest_id"`
	DestType  string          `json:"dest_type"`
	Label     string          `json:"label"`
	Label1    string          `json:"label1"`
	Value     string          `json:"value"`
	CC1       string          `json:"cc1"`
	CityName  string          `json:"city_name"`
	Region    string          `json:"region"`
	Country   string          `json:"country"`
	Latitude  flexNumber      `json:"latitude"`
	Longitude flexNumber      `json:"longitude"`
	NrHotels  flexNumber      `json:"nr_hotels"`
}

// id is the dest_id as the site writes it.
func (s suggestion) id() string { return rawID(s.DestID) }

// name is the destination's own name: value, else label1, else the label.
func (s suggestion) name() string {
	for _, v := range []string{s.Value, s.Label1, s.Label} {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// destination is a place a search runs in: the site's dest_id and
// dest_type. Its destination_id is the id alone for a city (city ids are
// what every route of this platform takes) and "<type>:<id>" for the
// others, as the partner API's route writes them.
type destination struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Name        string `json:"name,omitempty"`
	City        string `json:"city,omitempty"`
	Country     string `json:"country,omitempty"`
	CountryCode string `json:"cc,omitempty"`
	// CityID and CityName are the first city among the suggestions, for
	// attraction searches, which run in a city.
	CityID   string `json:"city_id,omitempty"`
	CityName string `json:"city_name,omitempty"`
}

func (d destination) key() string {
	if d.Type == "city" {
		return d.ID
	}
	return d.Type + ":" + d.ID
}

// parseDestination reads a destination_id; a value the site cannot search
// is the caller's (422).
func parseDestination(s string) (destination, error) {
	s = strings.TrimSpace(s)
	typ, id, typed := strings.Cut(s, ":")
	if !typed {
		typ, id = "city", s
	}
	typ = strings.ToLower(typ)
	bad := upstream.InvalidParameterFault("destination_id", "invalid_destination",
		"destination_id must be a destination id from travel_booking/locations: a city's id, or <type>:<id>.")
	if !destTypes[typ] || id == "" || strings.ContainsAny(id, " /?#&;=") {
		return destination{}, bad
	}
	if typ != "country" && typ != "airport" {
		if _, err := strconv.ParseInt(id, 10, 64); err != nil {
			return destination{}, bad
		}
	}
	return destination{ID: id, Type: typ}, nil
}

// autocompleteRequest asks the site for up to size destinations matching
// text.
func autocompleteRequest(text, lang string, size int) (pages.Request, error) {
	body, err := json.Marshal(map[string]any{"query": text, "language": lang, "size": size})
	if err != nil {
		return pages.Request{}, err
	}
	h := http.Header{}
	h.Set("Referer", Origin+"/")
	return postReq{host: AutocompleteHost, path: autocompletePath, header: h, body: body, lang: lang}.request(), nil
}

// autocomplete asks the site for up to size destinations matching text.
func (f fetcher) autocomplete(ctx context.Context, text, lang string, size int) ([]suggestion, error) {
	r, err := autocompleteRequest(text, lang, size)
	if err != nil {
		return nil, err
	}
	p, err := f.fetch(ctx, r)
	if err != nil {
		return nil, err
	}
	return suggestions(p)
}

// suggestions reads the autocomplete's answer.
func suggestions(p *pages.Page) ([]suggestion, error) {
	var out struct {
		Results *[]json.RawMessage `json:"results"`
	}
	if err := p.JSON(&out); err != nil {
		return nil, err
	}
	if out.Results == nil {
		return nil, upstream.MalformedFault("the autocomplete answer has no results list (%d bytes)", len(p.Body))
	}
	list := make([]suggestion, 0, len(*out.Results))
	for _, raw := range *out.Results {
		var s suggestion
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, upstream.MalformedFault("an autocomplete result is not the expected object (%d bytes)", len(p.Body))
		}
		if s.id() == "" || s.DestType == "" {
			continue // nothing a search could take
		}
		list = append(list, s)
	}
	return list, nil
}

// Locations is the data of travel_booking/locations.
type Locations struct {
	Items   []Location `json:"items"`
	Count   int        `json:"count"`
	HasMore *bool      `json:"has_more"`
	Query   string     `json:"query"`
}

// Location is one destination; id and destination_id are the value
// search-hotels and search-attractions take.
type Location struct {
	ID            string   `json:"id"`
	DestinationID string   `json:"destination_id"`
	Name          *string  `json:"name"`
	Label         *string  `json:"label"`
	Type          string   `json:"type"`
	City          *string  `json:"city"`
	Region        *string  `json:"region"`
	Country       *string  `json:"country"`
	CountryCode   *string  `json:"country_code"`
	Latitude      *float64 `json:"latitude"`
	Longitude     *float64 `json:"longitude"`
	Hotels        *float64 `json:"hotels"`
	Platform      string   `json:"platform"`
}

// locationsLimit is the number of destinations asked for, 10 by default.
func locationsLimit(c *upstream.Call) int {
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 10
	}
	return limit
}

// locationsRequest is travel_booking/locations' autocomplete request.
func locationsRequest(c *upstream.Call) (pages.Request, error) {
	lang, err := bookingcom.Language(c)
	if err != nil {
		return pages.Request{}, err
	}
	return autocompleteRequest(strings.TrimSpace(c.Param("query")), lang, locationsLimit(c))
}

// parseLocations maps travel_booking/locations' suggestions.
func parseLocations(c *upstream.Call, p *pages.Page) (any, error) {
	query := strings.TrimSpace(c.Param("query"))
	limit := locationsLimit(c)
	list, err := suggestions(p)
	if err != nil {
		return nil, err
	}
	out := Locations{Items: []Location{}, Query: query}
	for _, s := range list {
		if len(out.Items) == limit {
			break
		}
		d := destination{ID: s.id(), Type: strings.ToLower(s.DestType)}
		l := Location{ID: d.key(), DestinationID: d.key(), Name: trimmed(s.name()), Label: trimmed(s.Label), Type: d.Type,
			City: trimmed(s.CityName), Region: trimmed(s.Region), Country: trimmed(s.Country), CountryCode: upperPtr(s.CC1),
			Latitude: s.Latitude.ptr(), Longitude: s.Longitude.ptr(), Hotels: s.NrHotels.ptr(), Platform: platform}
		if l.City == nil && d.Type == "city" {
			l.City = l.Name
		}
		out.Items = append(out.Items, l)
	}
	out.Count = len(out.Items)
	if out.Count < limit {
		no := false
		out.HasMore = &no // the site had fewer than asked for
	}
	return out, nil
}

// resolve is the destination a location text names: the first suggestion,
// remembered under the normalised text and the site's language so that
// the next search of the same text asks no autocomplete (per route: each
// provider keeps its own).
func (f fetcher) resolve(ctx context.Context, c *upstream.Call, text, lang string) (destination, error) {
	key := "destination|" + lang + "|" + normalise(text)
	raw, err := c.Remembered(ctx, key, destinationTTL, func(ctx context.Context) (string, error) {
		list, err := f.autocomplete(ctx, strings.TrimSpace(text), lang, 10)
		if err != nil {
			return "", err
		}
		if len(list) == 0 {
			return "", upstream.NotFoundFault("the site's autocomplete knows no destination for the location")
		}
		first := list[0]
		d := destination{ID: first.id(), Type: strings.ToLower(first.DestType), Name: first.name(), City: first.CityName,
			Country: first.Country, CountryCode: strings.ToLower(first.CC1)}
		if d.Type == "city" && d.City == "" {
			d.City = d.Name
		}
		for _, s := range list {
			if strings.EqualFold(s.DestType, "city") {
				d.CityID, d.CityName = s.id(), s.name()
				break
			}
		}
		b, err := json.Marshal(d)
		return string(b), err
	})
	if err != nil {
		return destination{}, err
	}
	var d destination
	if err := json.Unmarshal([]byte(raw), &d); err != nil || d.ID == "" || !destTypes[d.Type] {
		return destination{}, upstream.MalformedFault("a remembered destination is unreadable")
	}
	return d, nil
}

// destinationOf is the destination a search asks for: destination_id, or
// location resolved (and remembered).
func (f fetcher) destinationOf(ctx context.Context, c *upstream.Call, lang string) (destination, error) {
	if id := strings.TrimSpace(c.Param("destination_id")); id != "" {
		return parseDestination(id)
	}
	if text := strings.TrimSpace(c.Param("location")); text != "" {
		return f.resolve(ctx, c, text, lang)
	}
	return destination{}, upstream.InvalidParameterFault("location", "missing_destination", "Give location or destination_id.")
}

// flexNumber is a number the site sends as a JSON number or a string.
type flexNumber struct {
	v  float64
	ok bool
}

func (n *flexNumber) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(strings.TrimSpace(s))
	}
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return nil // not a number: unknown, not a failure
	}
	n.v, n.ok = v, true
	return nil
}

func (n flexNumber) ptr() *float64 {
	if !n.ok {
		return nil
	}
	v := n.v
	return &v
}

// rawID is an id written as a JSON string or number, as written; "" when
// absent or of another type.
func rawID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return strings.TrimSpace(s)
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&n) != nil {
		return ""
	}
	return n.String()
}

func upperPtr(s string) *string {
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	s = strings.ToUpper(s)
	return &s
}
