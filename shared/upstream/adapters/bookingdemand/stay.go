package bookingdemand

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
)

// The source's limits on a stay (accommodations/search and availability):
// check-in at most 500 days ahead, 1 to 90 nights.
const (
	maxDaysAhead = 500
	maxNights    = 90
)

// Occupancy defaults: the site's own (two adults, one room).
const (
	defaultAdults = 2
	defaultRooms  = 1
)

// stay is a validated stay: dates, nights and guests.
type stay struct {
	Checkin, Checkout string
	Nights            int
	Adults, Rooms     int
	Children          []int
}

// guests is the API's AccommodationsGuests.
func (s stay) guests() map[string]any {
	g := map[string]any{"number_of_adults": s.Adults, "number_of_rooms": s.Rooms}
	if len(s.Children) > 0 {
		g["children"] = s.Children
	}
	return g
}

// readStay checks the dates and occupancy before any request or charge: a
// check-in already past everywhere on Earth (UTC-12), beyond the source's
// 500 days, a stay over 90 nights or more rooms than adults is a 422. The
// registry has already required checkout after checkin.
func readStay(c *upstream.Call) (stay, error) {
	var s stay
	in, out, err := bookingcom.Dates(c)
	if err != nil {
		return s, err
	}
	if in.After(dateOf(c.Now.UTC()).AddDate(0, 0, maxDaysAhead)) {
		return s, upstream.InvalidParameterFault("checkin", "date_too_far",
			fmt.Sprintf("checkin may be at most %d days ahead.", maxDaysAhead))
	}
	s.Checkin, s.Checkout = in.Format(time.DateOnly), out.Format(time.DateOnly)
	s.Nights = int(out.Sub(in).Hours() / 24)
	if s.Nights > maxNights {
		return s, upstream.InvalidParameterFault("checkout", "stay_too_long",
			fmt.Sprintf("a stay may last at most %d nights.", maxNights))
	}
	s.Adults, s.Rooms = defaultAdults, defaultRooms
	if v := c.Param("adults"); v != "" {
		if s.Adults, err = strconv.Atoi(v); err != nil {
			return s, upstream.InvalidParameterFault("adults", "invalid_number", "adults must be a whole number.")
		}
	}
	if v := c.Param("rooms"); v != "" {
		if s.Rooms, err = strconv.Atoi(v); err != nil {
			return s, upstream.InvalidParameterFault("rooms", "invalid_number", "rooms must be a whole number.")
		}
	}
	if s.Rooms > s.Adults {
		return s, upstream.InvalidParameterFault("rooms", "more_rooms_than_adults",
			fmt.Sprintf("each room needs an adult: %d rooms for %d adults.", s.Rooms, s.Adults))
	}
	for _, a := range strings.Split(c.Param("children_ages"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		age, err := strconv.Atoi(a)
		if err != nil || age < 0 || age > 17 {
			return s, upstream.InvalidParameterFault("children_ages", "invalid_age", "children_ages must list ages from 0 to 17.")
		}
		s.Children = append(s.Children, age)
	}
	return s, nil
}

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// stayFields maps the source's parameter names in an availability or
// search body to the caller's.
var stayFields = map[string]string{
	"checkin": "checkin", "checkout": "checkout", "currency": "currency",
	"guests.number_of_adults": "adults", "number_of_adults": "adults",
	"guests.number_of_rooms": "rooms", "number_of_rooms": "rooms",
	"guests.children": "children_ages", "children": "children_ages",
	"languages": "language",
}

func withFields(extra map[string]string) map[string]string {
	out := make(map[string]string, len(stayFields)+len(extra))
	for k, v := range stayFields {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
