package bookingdemand

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
)

// A destination is what accommodations/search can search in: one of the
// API's location filters. Its destination_id is the city id alone for a
// city (the site's own dest_id; city ids are the only signed ones) and
// "<type>:<id>" for the others, e.g. "region:1010", "airport:AMS".
type destination struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	City        string `json:"city,omitempty"`
	Country     string `json:"country,omitempty"`
	CountryCode string `json:"country_code,omitempty"`
}

// destinationTypes are the autocomplete types a search can take, in the
// API's names (a hotel is not a destination).
var destinationTypes = []string{"city", "region", "district", "landmark", "airport", "country"}

// key is the destination_id callers pass back.
func (d destination) key() string {
	if d.Type == "city" {
		return d.ID
	}
	return d.Type + ":" + d.ID
}

// field is the search body's location filter for d.
func (d destination) field() (string, any) {
	switch d.Type {
	case "airport":
		return d.Type, strings.ToUpper(d.ID)
	case "country":
		return d.Type, strings.ToLower(d.ID)
	}
	n, _ := strconv.ParseInt(d.ID, 10, 64) // parseDestination checked it
	return d.Type, n
}

// parseDestination reads a destination_id; ok is false for an id this
// source cannot read (another route may: it is not refused here).
func parseDestination(s string) (destination, bool) {
	s = strings.TrimSpace(s)
	typ, id, typed := strings.Cut(s, ":")
	if !typed {
		typ, id = "city", s
	}
	typ = strings.ToLower(typ)
	switch typ {
	case "city":
		if _, err := strconv.ParseInt(id, 10, 64); err != nil || id == "0" {
			return destination{}, false
		}
	case "region", "district", "landmark":
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 {
			return destination{}, false
		}
	case "airport":
		if len(id) != 3 || !letters(id) {
			return destination{}, false
		}
		id = strings.ToUpper(id)
	case "country":
		if len(id) != 2 || !letters(id) {
			return destination{}, false
		}
		id = strings.ToLower(id)
	default:
		return destination{}, false
	}
	return destination{Type: typ, ID: id}, true
}

func letters(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}

// suggestion is one /common/autocomplete result (3.2-Beta).
type suggestion struct {
	Type     string          `json:"type"`
	Name     translated      `json:"name"`
	ID       upstream.FlexID `json:"id"`
	Location *struct {
		City        json.Number `json:"city"`
		CityName    translated  `json:"city_name"`
		Coordinates *coords     `json:"coordinates"`
		Country     string      `json:"country"`
		CountryName translated  `json:"country_name"`
	} `json:"location"`
}

// minQuery is the autocomplete's shortest query.
const minQuery = 3

// autocomplete asks the 3.2-Beta /common/autocomplete for destinations
// matching text; field names the caller's parameter holding it.
func autocomplete(ctx context.Context, c *upstream.Call, text, lang, field string) ([]suggestion, error) {
	body := map[string]any{
		"query": text, "country": bookerCountry(c), "language": lang,
		"filters": map[string]any{"types": destinationTypes},
	}
	var list []suggestion
	_, err := post(ctx, c, autocompletePath, body, map[string]string{"query": field, "language": "language"}, &list)
	var f *upstream.Fault
	if errors.As(err, &f) && f.Status == http.StatusNotFound {
		// The beta path is missing for this account: not an answer about
		// the text, so the next route may still resolve it.
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: f.Status, Reason: "no access to " + autocompletePath}
	}
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, s := range list {
		if _, ok := s.destination(lang); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// destination is the suggestion as a search destination.
func (s suggestion) destination(lang string) (destination, bool) {
	d, ok := parseDestination(s.Type + ":" + string(s.ID))
	if !ok {
		return d, false
	}
	d.Name = deref(s.Name.in(lang))
	if l := s.Location; l != nil {
		d.City = deref(l.CityName.in(lang))
		d.Country = deref(l.CountryName.in(lang))
		d.CountryCode = strings.ToUpper(l.Country)
	}
	if d.Type == "city" && d.City == "" {
		d.City = d.Name
	}
	return d, true
}

// locationTTL is how long a text's destination is remembered.
const locationTTL = 14 * 24 * time.Hour

// resolveLocation turns search text into a destination once, then
// remembers it (key: the normalised text, the language and the booker
// country, which ranks the suggestions), so a second search of the same
// place asks no autocomplete.
func resolveLocation(ctx context.Context, c *upstream.Call, text, lang string) (destination, error) {
	var d destination
	norm := normalise(text)
	if !autocompleteOn(c) {
		return d, refused("location text needs the 3.2-Beta autocomplete, which is not enabled for this account")
	}
	if utf8.RuneCountInString(norm) < minQuery {
		return d, refused("the source's autocomplete needs at least 3 characters")
	}
	raw, err := remember(ctx, c, "location", lang+"|"+bookerCountry(c)+"|"+norm, locationTTL, func(ctx context.Context) (string, error) {
		list, err := autocomplete(ctx, c, norm, lang, "location")
		if err != nil {
			return "", err
		}
		if len(list) == 0 {
			return "", upstream.NotFoundFault("no destination matches the location")
		}
		best, _ := list[0].destination(lang)
		out, err := json.Marshal(best)
		return string(out), err
	})
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return d, upstream.MalformedFault("remembered destination unreadable: %v", err)
	}
	return d, nil
}

// normalise is a text as remembered: lowercase, single spaces.
func normalise(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// Locations is the data of travel_booking/locations.
type Locations struct {
	Items   []Location `json:"items"`
	Count   int        `json:"count"`
	HasMore bool       `json:"has_more"`
	Query   string     `json:"query"`
}

// Location is one destination; id is the destination_id search-hotels
// and search-attractions take.
type Location struct {
	ID            string   `json:"id"`
	DestinationID string   `json:"destination_id"`
	Name          *string  `json:"name"`
	Type          string   `json:"type"`
	City          *string  `json:"city"`
	Country       *string  `json:"country"`
	CountryCode   *string  `json:"country_code"`
	Latitude      *float64 `json:"latitude"`
	Longitude     *float64 `json:"longitude"`
	Platform      string   `json:"platform"`
}

func locations(ctx context.Context, c *upstream.Call) (any, error) {
	query := strings.TrimSpace(c.Param("query"))
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 10
	}
	lang, err := bookingcom.Language(c)
	if err != nil {
		return nil, err
	}
	out := Locations{Items: []Location{}, Query: query}
	// A city id is what 3.1 can look up: /common/locations/cities filters by
	// ids and country, not by name.
	if id, err := strconv.ParseInt(query, 10, 64); err == nil {
		got, err := lookupCity(ctx, c, id, lang, cityFields)
		if err != nil {
			return nil, err
		}
		if got != nil {
			key := got.ID.String()
			l := Location{ID: key, DestinationID: key, Name: got.Name.in(lang), Type: "city", Platform: platformName,
				CountryCode: upper(text(got.Country))}
			l.City = l.Name
			if got.Coordinates != nil {
				l.Latitude, l.Longitude = got.Coordinates.Latitude, got.Coordinates.Longitude
			}
			out.Items = append(out.Items, l)
		}
		out.Count = len(out.Items)
		return out, nil
	}
	if !autocompleteOn(c) {
		return nil, refused("text lookups need the 3.2-Beta autocomplete, which is not enabled for this account")
	}
	if utf8.RuneCountInString(query) < minQuery {
		return nil, refused("the source's autocomplete needs at least 3 characters")
	}
	list, err := autocomplete(ctx, c, query, lang, "query")
	if err != nil {
		return nil, err
	}
	for _, s := range list {
		if len(out.Items) == limit {
			out.HasMore = true
			break
		}
		d, _ := s.destination(lang)
		l := Location{ID: d.key(), DestinationID: d.key(), Name: text(d.Name), Type: d.Type, City: text(d.City),
			Country: text(d.Country), CountryCode: text(d.CountryCode), Platform: platformName}
		if s.Location != nil && s.Location.Coordinates != nil {
			l.Latitude, l.Longitude = s.Location.Coordinates.Latitude, s.Location.Coordinates.Longitude
		}
		out.Items = append(out.Items, l)
	}
	out.Count = len(out.Items)
	return out, nil
}
