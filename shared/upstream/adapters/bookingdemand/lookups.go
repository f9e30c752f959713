package bookingdemand

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// How long looked-up names are kept: the constants change rarely (new
// facilities), a city's name and id almost never.
const (
	constantsTTL = 24 * time.Hour
	cityTTL      = 30 * 24 * time.Hour
)

// names are the constants' names in one language, by id.
type names struct {
	Facilities     map[string]string `json:"f"`
	RoomFacilities map[string]string `json:"rf"`
	Types          map[string]string `json:"t"`
	RoomTypes      map[string]string `json:"rt"`
	// Beds are each bed type's name and its width in metric and imperial.
	Beds map[string][3]string `json:"b"`
}

type constant struct {
	ID                  json.Number `json:"id"`
	Name                translated  `json:"name"`
	Description         translated  `json:"description"`
	DescriptionImperial translated  `json:"description_imperial"`
}

type constantsData struct {
	AccommodationFacilities []constant `json:"accommodation_facilities"`
	AccommodationTypes      []constant `json:"accommodation_types"`
	BedTypes                []constant `json:"bed_types"`
	RoomFacilities          []constant `json:"room_facilities"`
	RoomTypes               []constant `json:"room_types"`
}

// lookupNames reads the names behind the codes in lang, from the memory
// when another call read them in the last day.
func lookupNames(ctx context.Context, c *upstream.Call, lang string) (*names, error) {
	raw, err := remember(ctx, c, "constants", lang, constantsTTL, func(ctx context.Context) (string, error) {
		var d constantsData
		body := map[string]any{
			"constants": []string{"accommodation_facilities", "accommodation_types", "bed_types", "room_facilities", "room_types"},
			"languages": []string{lang},
		}
		if _, err := post(ctx, c, constantsPath, body, nil, &d); err != nil {
			return "", err
		}
		n := names{Facilities: byID(d.AccommodationFacilities, lang), RoomFacilities: byID(d.RoomFacilities, lang),
			Types: byID(d.AccommodationTypes, lang), RoomTypes: byID(d.RoomTypes, lang), Beds: map[string][3]string{}}
		for _, b := range d.BedTypes {
			if b.ID == "" {
				continue
			}
			n.Beds[b.ID.String()] = [3]string{deref(b.Name.in(lang)), deref(b.Description.in(lang)), deref(b.DescriptionImperial.in(lang))}
		}
		out, err := json.Marshal(n)
		return string(out), err
	})
	if err != nil {
		return nil, err
	}
	var n names
	if err := json.Unmarshal([]byte(raw), &n); err != nil {
		return nil, upstream.MalformedFault("remembered constants unreadable: %v", err)
	}
	return &n, nil
}

func byID(list []constant, lang string) map[string]string {
	out := make(map[string]string, len(list))
	for _, k := range list {
		if name := k.Name.in(lang); k.ID != "" && name != nil {
			out[k.ID.String()] = *name
		}
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// name is the name of a code in table, or nil.
func name(table map[string]string, id json.Number) *string {
	if id == "" || table == nil {
		return nil
	}
	if v, ok := table[id.String()]; ok && v != "" {
		return &v
	}
	return nil
}

// city is a city record of common/locations/cities.
type city struct {
	ID          json.Number `json:"id"`
	Name        translated  `json:"name"`
	Country     string      `json:"country"`
	Coordinates *coords     `json:"coordinates"`
}

type coords struct {
	Latitude  *float64 `json:"latitude"`
	Longitude *float64 `json:"longitude"`
}

// cityFields maps a cities request's fields to the caller's.
var cityFields = map[string]string{"city": "query", "languages": "language"}

// lookupCity reads one city by id; nil when the source has none.
func lookupCity(ctx context.Context, c *upstream.Call, id int64, lang string, fields map[string]string) (*city, error) {
	var list []city
	body := map[string]any{"city": id, "languages": []string{lang}}
	if _, err := post(ctx, c, citiesPath, body, fields, &list); err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].ID.String() == strconv.FormatInt(id, 10) {
			return &list[i], nil
		}
	}
	return nil, nil
}

// placeName is a city's remembered name and country code.
type placeName struct {
	Name    string `json:"n"`
	Country string `json:"c,omitempty"`
}

// cityName is a city's name in lang, remembered for a month; an empty
// name when the source does not know the id.
func cityName(ctx context.Context, c *upstream.Call, id int64, lang string) (placeName, error) {
	var p placeName
	raw, err := remember(ctx, c, "city", lang+"|"+itoa(id), cityTTL, func(ctx context.Context) (string, error) {
		got, err := lookupCity(ctx, c, id, lang, nil)
		if err != nil {
			return "", err
		}
		var p placeName
		if got != nil {
			p = placeName{Name: deref(got.Name.in(lang)), Country: got.Country}
		}
		out, err := json.Marshal(p)
		return string(out), err
	})
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return p, upstream.MalformedFault("remembered city unreadable: %v", err)
	}
	return p, nil
}
