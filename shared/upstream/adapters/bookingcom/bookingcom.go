// Package bookingcom holds the rules of travel_booking's site that both of
// its routes follow (the partner Demand API in bookingdemand, the public
// front end in booking), so they read a caller's parameters the same way.
package bookingcom

import (
	"strings"

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
