package booking

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
)

// acceptLanguage is what a browser set to lang sends: en-gb → "en-GB,en;q=0.9".
func acceptLanguage(lang string) string {
	base, region, ok := strings.Cut(lang, "-")
	if !ok {
		return base + ";q=1.0"
	}
	return base + "-" + strings.ToUpper(region) + "," + base + ";q=0.9"
}

// currency is the requested currency (validated as three letters), upper
// case, or "" to take the site's own choice.
func currency(c *upstream.Call) string {
	return strings.ToUpper(strings.TrimSpace(c.Param("currency")))
}

// page is the requested page number, from 1.
func page(c *upstream.Call) int {
	if n, err := strconv.Atoi(c.Param("page")); err == nil && n >= 1 {
		return n
	}
	return 1
}

// stay is a search's dates and occupancy as the site's URLs take them.
type stay struct {
	checkin, checkout string
	adults, rooms     int
	ages              []int
}

// stayOf reads checkin, checkout, adults (default 2, the site's own), rooms
// (default 1) and children_ages. The registry has checked the dates' form
// and order; a stay that starts in the past is refused here too (422, no
// charge kept), since the site would answer with no availability at all.
func stayOf(c *upstream.Call) (stay, error) {
	s := stay{checkin: c.Param("checkin"), checkout: c.Param("checkout"), adults: 2, rooms: 1}
	if _, _, err := bookingcom.Dates(c); err != nil {
		return s, err
	}
	if n, err := strconv.Atoi(c.Param("adults")); err == nil && n >= 1 {
		s.adults = n
	}
	if n, err := strconv.Atoi(c.Param("rooms")); err == nil && n >= 1 {
		s.rooms = n
	}
	for _, a := range strings.Split(c.Param("children_ages"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 || n > 17 {
			return s, upstream.InvalidParameterFault("children_ages", "invalid_age", "children_ages must be ages from 0 to 17.")
		}
		s.ages = append(s.ages, n)
	}
	return s, nil
}

// nights is the stay's length.
func (s stay) nights() int {
	in, _ := time.Parse(time.DateOnly, s.checkin)
	out, _ := time.Parse(time.DateOnly, s.checkout)
	return int(out.Sub(in).Hours() / 24)
}

// query is the stay in the site's URL parameters (one age per child).
func (s stay) query(q url.Values, lang, cur string) {
	q.Set("checkin", s.checkin)
	q.Set("checkout", s.checkout)
	q.Set("group_adults", strconv.Itoa(s.adults))
	q.Set("no_rooms", strconv.Itoa(s.rooms))
	q.Set("group_children", strconv.Itoa(len(s.ages)))
	for _, a := range s.ages {
		q.Add("age", strconv.Itoa(a))
	}
	q.Set("lang", lang)
	if cur != "" {
		q.Set("selected_currency", cur)
	}
}

// normalise is a text as remembered: lowercase, single spaces.
func normalise(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }
