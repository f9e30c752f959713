package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// Cache statuses, as x-cache and the dry-run snapshot report them.
const (
	cacheHit    = "HIT"
	cacheMiss   = "MISS"
	cacheBypass = "BYPASS" // the caller sent Cache-Control: no-cache or no-store
	cacheOff    = "OFF"    // the endpoint is not cached, or there is no cache
)

// cacheUse is what the response cache means for one call.
type cacheUse struct {
	key    string
	ttl    time.Duration
	lookup bool // read the cache
	keep   bool // store a fresh success
	hit    *store.CacheEntry
	status string
}

// cacheUse looks the call up in the response cache, keyed on the
// canonical request (aliases folded, defaults applied, so equivalent
// spellings share an entry) and shared across accounts. Cache-Control:
// no-cache (or max-age=0) skips the lookup and refreshes the entry;
// no-store skips both.
func (p *Pipeline) cacheUse(x *exchange, c *Call) cacheUse {
	ttl := c.Endpoint.CacheFor()
	// exclude and fit return owner-bound recall references (spec 4.5):
	// never shared across accounts.
	ownerBound := c.Params.Values["exclude"] != "" || c.Params.Values["fit"] != ""
	if p.cfg.Cache == nil || ttl == 0 || ownerBound {
		return cacheUse{status: cacheOff}
	}
	// stream changes how the data travels, not the data: a streamed call
	// and a plain one share the entry.
	shared := c.Params
	if _, ok := shared.Values["stream"]; ok && c.Endpoint.Streams {
		shared.Values = maps.Clone(shared.Values)
		delete(shared.Values, "stream")
	}
	sum := sha256.Sum256([]byte(c.Endpoint.Key() + "?" + shared.CacheKey()))
	cu := cacheUse{key: hex.EncodeToString(sum[:]), ttl: ttl, lookup: true, keep: true, status: cacheMiss}
	for _, d := range strings.Split(strings.ToLower(x.r.Header.Get("cache-control")), ",") {
		switch strings.TrimSpace(d) {
		case "no-cache", "max-age=0":
			cu.lookup, cu.status = false, cacheBypass
		case "no-store":
			cu.lookup, cu.keep, cu.status = false, false, cacheBypass
		}
	}
	if !cu.lookup {
		return cu
	}
	entry, err := p.cfg.Cache.CacheGet(x.r.Context(), cu.key, p.cfg.Now())
	switch {
	case err == nil:
		cu.hit, cu.status = &entry, cacheHit
	case !errors.Is(err, store.ErrNotFound):
		// A cache that cannot be read is a miss, never a failure.
		p.cfg.Logger.Warn("cache read failed", "request_id", x.requestID, "error", err.Error())
	}
	return cu
}

// keep stores a fresh success's data, best effort.
func (p *Pipeline) keep(x *exchange, cu cacheUse, raw []byte) {
	if !cu.keep || len(raw) > store.MaxCachedBytes {
		return
	}
	now := p.cfg.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), billingTimeout)
	defer cancel()
	if err := p.cfg.Cache.CachePut(ctx, cu.key, raw, now, now.Add(cu.ttl)); err != nil {
		p.cfg.Logger.Warn("cache write failed", "request_id", x.requestID, "error", err.Error())
	}
}

// deliverCached answers from the cache: cached true, 0 credits.
func (p *Pipeline) deliverCached(x *exchange, c *Call, e *store.CacheEntry) {
	x.served = true
	s := p.success(x, c, json.RawMessage(e.Data), 0, nil)
	s.Cached = true
	body, err := envelope.Marshal(s)
	if err != nil {
		x.fail(envelope.Internal())
		return
	}
	p.write(x, s, body, cacheHit)
}
