package registry

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/meridian-data/meridian/shared/envelope"
)

// MaxPathLength bounds the paths resolution will look at; anything longer
// cannot be a registered path.
const MaxPathLength = 2048

// Resolution is a resolved path: the endpoint and the identifiers lifted
// out of the path, keyed by the parameter they fill.
type Resolution struct {
	Endpoint   *Endpoint
	PathParams map[string]string
}

// Resolve maps an escaped request path under /v1 to an endpoint (spec 4.1).
// Unknown paths are 404 ENDPOINT_NOT_FOUND with the platform and endpoint as
// parsed; retired endpoints are 410 naming their successor.
func (r *Registry) Resolve(escapedPath string) (Resolution, *envelope.Error) {
	segs, raws, ok := splitPath(escapedPath)
	if !ok {
		return Resolution{}, PathNotFound(escapedPath)
	}
	var platformName, parsedEndpoint string
	if len(segs) > 0 {
		platformName = segs[0]
	}
	if len(segs) > 1 {
		parsedEndpoint = strings.Join(segs[1:], "/")
	}
	p, ok := r.platforms[platformName]
	if !ok || (len(segs) > 0 && raws[0] != segs[0]) {
		// Route words are matched as written, as API Gateway matches
		// routes: an escaped platform name is not that platform.
		return Resolution{}, notFound(escapedPath, platformName, parsedEndpoint)
	}
	shape := make([]string, 0, len(segs))
	var ids []string
	for i := 1; i < len(segs); i++ {
		seg := segs[i]
		switch {
		case IsIdentifier(seg):
			shape = append(shape, "{}")
			ids = append(ids, seg)
		case seg == raws[i] && wordPattern.MatchString(seg):
			shape = append(shape, seg)
		default: // no route word is escaped or holds other characters ("{}" included)
			return Resolution{}, notFound(escapedPath, platformName, parsedEndpoint)
		}
	}
	t, ok := p.templates[strings.Join(shape, "/")]
	if !ok {
		return Resolution{}, notFound(escapedPath, platformName, parsedEndpoint)
	}
	e := t.endpoint
	if e.Retired() {
		return Resolution{}, envelope.New(envelope.EndpointNotFound, http.StatusGone,
			"This endpoint has been retired. Use "+e.RetiredFor+" instead.",
			map[string]any{
				"platform":  platformName,
				"endpoint":  parsedEndpoint,
				"reason":    "endpoint_removed",
				"successor": e.RetiredFor,
			})
	}
	res := Resolution{Endpoint: e}
	if len(ids) > 0 {
		res.PathParams = make(map[string]string, len(ids))
		for i, name := range t.names {
			res.PathParams[name] = ids[i]
		}
	}
	return res, nil
}

// splitPath returns the unescaped segments after /v1, or false when the
// path cannot name a route: outside /v1, too long, empty segments, bad
// escapes or encoded slashes. A single trailing slash is forgiven.
// It also returns the segments as written.
func splitPath(escapedPath string) (segs, raws []string, ok bool) {
	rest, ok := strings.CutPrefix(escapedPath, "/v1")
	if !ok || (rest != "" && rest[0] != '/') || len(escapedPath) > MaxPathLength {
		return nil, nil, false
	}
	rest = strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/")
	if rest == "" {
		return nil, nil, true
	}
	raws = strings.Split(rest, "/")
	for _, raw := range raws {
		seg, err := url.PathUnescape(raw)
		if err != nil || seg == "" || strings.Contains(seg, "/") {
			return nil, nil, false
		}
		segs = append(segs, seg)
	}
	return segs, raws, true
}

// PathNotFound is the 404 for a path that names no endpoint, with the
// platform and endpoint as parsed when the path could be parsed.
func PathNotFound(escapedPath string) *envelope.Error {
	segs, _, ok := splitPath(escapedPath)
	if !ok {
		return notFound(escapedPath, "", "")
	}
	var platformName, endpoint string
	if len(segs) > 0 {
		platformName = segs[0]
	}
	if len(segs) > 1 {
		endpoint = strings.Join(segs[1:], "/")
	}
	return notFound(escapedPath, platformName, endpoint)
}

// maxEcho bounds how much of a caller's path is echoed back in details.
const maxEcho = 200

func notFound(path, platformName, endpoint string) *envelope.Error {
	msg := "No endpoint matches this path. GET /v1/utility/endpoints lists every endpoint."
	if platformName == "" && endpoint == "" && path != "/v1" {
		return envelope.New(envelope.EndpointNotFound, http.StatusNotFound, msg,
			map[string]any{"platform": nil, "endpoint": nil, "path": truncate(path)})
	}
	return envelope.New(envelope.EndpointNotFound, http.StatusNotFound, msg,
		map[string]any{"platform": truncate(platformName), "endpoint": truncate(endpoint)})
}

func truncate(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	// Cut on a rune boundary so the echo stays valid UTF-8 where the input was.
	cut := maxEcho
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
