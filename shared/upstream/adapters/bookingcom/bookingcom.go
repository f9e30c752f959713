// Package bookingcom holds the rules of travel_booking's site that both of
// its routes follow (the partner Demand API in bookingdemand, the public
// front end in booking), so they read a caller's parameters the same way.
package bookingcom

import (
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// The site's language tags are lowercase, with a region for the languages
// it offers in several (en-gb/en-us, pt-pt/pt-br, zh-cn/zh-tw, es/es-ar):
// a bare tag of those means its first region.
var (
	regionDefault = map[string]string{"en": "en-gb", "pt": "pt-pt", "zh": "zh-cn"}
	regioned      = map[string]bool{"en-gb": true, "en-us": true, "es-ar": true, "pt-br": true, "pt-pt": true, "zh-cn": true, "zh-tw": true}
)

// Language maps the caller's language (en, en-GB, pt_BR) to the site's
// lowercase tag, en-gb by default; one the site cannot take is a 422.
func Language(c *upstream.Call) (string, error) {
	v := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(c.Param("language")), "_", "-"))
	if v == "" {
		return "en-gb", nil
	}
	parts := strings.Split(v, "-")
	base := parts[0]
	if len(base) != 2 {
		return "", upstream.InvalidParameterFault("language", "unsupported_language",
			"language must be a two-letter language, optionally with a region (such as en-GB): the source has no "+v+".")
	}
	if len(parts) > 1 && regioned[base+"-"+parts[1]] {
		return base + "-" + parts[1], nil
	}
	if d, ok := regionDefault[base]; ok {
		return d, nil
	}
	return base, nil
}

// Dates reads a stay's checkin and checkout. Both routes refuse the same
// way, before any request: a date that does not parse, a checkout not
// after its checkin (the registry checks that first) and a checkin
// already past everywhere on Earth (the site's day starts at UTC-12 at
// the earliest, so a date that is still today somewhere passes).
func Dates(c *upstream.Call) (checkin, checkout time.Time, err error) {
	checkin, err = time.Parse(time.DateOnly, c.Param("checkin"))
	if err != nil {
		return checkin, checkout, upstream.InvalidParameterFault("checkin", "invalid_date", "checkin must be a date (YYYY-MM-DD).")
	}
	checkout, err = time.Parse(time.DateOnly, c.Param("checkout"))
	if err != nil {
		return checkin, checkout, upstream.InvalidParameterFault("checkout", "invalid_date", "checkout must be a date (YYYY-MM-DD).")
	}
	earliest := c.Now.UTC().Add(-12 * time.Hour).Truncate(24 * time.Hour)
	switch {
	case checkin.Before(earliest):
		return checkin, checkout, upstream.InvalidParameterFault("checkin", "date_in_past",
			"checkin "+c.Param("checkin")+" is in the past; give today or a later date.")
	case !checkout.After(checkin):
		return checkin, checkout, upstream.InvalidParameterFault("checkout", "not_after_checkin", "checkout must be after checkin.")
	}
	return checkin, checkout, nil
}
