package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/params"
	"github.com/meridian-data/meridian/shared/registry"
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
	// fill is the in-process flight this call leads as the key's filler
	// (request collapsing); its cache write ends it.
	fill *flight
}

// cacheUse is the call's use of the response cache, with the lookup
// started beside authentication (startLookup) when there was one.
//
// A composite's leg reads the cache (a direct call paid its list price
// for what it finds) but never fills it: a composite costs less than its
// legs would, so an entry a leg wrote would hand its data to the next
// direct call for free.
func (p *Pipeline) cacheUse(x *exchange, c *Call) cacheUse {
	if c.lookup != nil {
		<-c.lookup.done
		cu := c.lookup.cu
		p.awaitFill(x, &cu, &c.lookup.join)
		return cu
	}
	cu := p.cachePlan(x, c.Endpoint, c.Params)
	cu.keep = cu.keep && c.parent == ""
	p.lookupCache(x.r.Context(), x.requestID, &cu)
	return cu
}

// cacheLookup is a cache lookup under way; on a miss it also joins the
// key's fill (request collapsing), so the fill's claim runs beside
// authentication too.
type cacheLookup struct {
	done chan struct{}
	cu   cacheUse
	join fillJoin
}

// startLookup starts the lookup of a validated request in the cache.
func (p *Pipeline) startLookup(x *exchange, e *registry.Endpoint, v params.Result) *cacheLookup {
	l := &cacheLookup{done: make(chan struct{}), cu: p.cachePlan(x, e, v)}
	x.lookup = l
	if !l.cu.lookup {
		close(l.done)
		return l
	}
	ctx, requestID := x.r.Context(), x.requestID
	collapses := collapsible(e, v, l.cu)
	run := func() {
		defer close(l.done)
		p.lookupCache(ctx, requestID, &l.cu)
		if collapses && l.cu.hit == nil {
			l.join = p.joinFill(ctx, requestID, l.cu.key)
		}
	}
	if p.cacheInProcess {
		// A goroutine (and growing its stack) would cost more than the read.
		run()
		return l
	}
	go run()
	return l
}

// cachePlan is what the response cache means for a request, keyed on the
// canonical request (aliases folded, defaults applied, so equivalent
// spellings share an entry) and shared across accounts. Cache-Control:
// no-cache (or max-age=0) skips the lookup and refreshes the entry;
// no-store skips both.
func (p *Pipeline) cachePlan(x *exchange, e *registry.Endpoint, v params.Result) cacheUse {
	ttl := e.CacheFor()
	// exclude and fit return owner-bound recall references (spec 4.5):
	// never shared across accounts.
	ownerBound := v.Values["exclude"] != "" || v.Values["fit"] != ""
	if p.cfg.Cache == nil || ttl == 0 || ownerBound {
		return cacheUse{status: cacheOff}
	}
	// stream changes how the data travels, not the data: a streamed call
	// and a plain one share the entry.
	shared := v
	if _, ok := shared.Values["stream"]; ok && e.Streams {
		shared.Values = maps.Clone(shared.Values)
		delete(shared.Values, "stream")
	}
	cu := cacheUse{key: cacheKey(e, shared), ttl: ttl, lookup: true, keep: true, status: cacheMiss}
	for _, d := range strings.Split(strings.ToLower(x.r.Header.Get("cache-control")), ",") {
		switch strings.TrimSpace(d) {
		case "no-cache", "max-age=0":
			cu.lookup, cu.status = false, cacheBypass
		case "no-store":
			cu.lookup, cu.keep, cu.status = false, false, cacheBypass
		}
	}
	return cu
}

// cacheKey is the response cache's key of a validated request.
func cacheKey(e *registry.Endpoint, v params.Result) string {
	sum := sha256.Sum256([]byte(e.Key() + "?" + v.CacheKey()))
	return hex.EncodeToString(sum[:])
}

// CacheKey is the response cache's key of a request for endpoint (a
// platform/endpoint key) with the raw query: the key the cache entry and
// its fill marker are stored under.
func CacheKey(reg *registry.Registry, endpoint, rawQuery string) (string, error) {
	e, ok := reg.Endpoint(endpoint)
	if !ok {
		return "", fmt.Errorf("no endpoint %s", endpoint)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", err
	}
	v, verr := params.Validate(e, q, nil)
	if verr != nil {
		return "", verr
	}
	return cacheKey(e, v), nil
}

// lookupCache reads the planned entry, if the plan looks up.
func (p *Pipeline) lookupCache(ctx context.Context, requestID string, cu *cacheUse) {
	if !cu.lookup {
		return
	}
	entry, err := p.cfg.Cache.CacheGet(ctx, cu.key, p.cfg.Now())
	switch {
	case err == nil:
		cu.hit, cu.status = &entry, cacheHit
	case !errors.Is(err, store.ErrNotFound):
		// A cache that cannot be read is a miss, never a failure.
		p.cfg.Logger.Warn("cache read failed", "request_id", requestID, "error", err.Error())
	}
}

// keep stores a fresh success's data, an effect of its answer (it lands
// before the answer leaves), best effort.
func (p *Pipeline) keep(x *exchange, cu cacheUse, raw []byte) {
	if !cu.keep || len(raw) > store.MaxCachedBytes {
		return
	}
	now := p.cfg.Now()
	if cu.fill != nil {
		cu.fill.handedOff = true
	}
	x.effect(func(ctx context.Context) {
		err := p.cfg.Cache.CachePut(ctx, cu.key, raw, now, now.Add(cu.ttl))
		if err != nil {
			p.cfg.Logger.Warn("cache write failed", "request_id", x.requestID, "error", err.Error())
		}
		if cu.fill != nil {
			// The requests waiting for this fill are answered from the
			// entry, now that it is stored; a failed write is a failed fill.
			var entry *store.CacheEntry
			if err == nil {
				entry = &store.CacheEntry{Data: raw, StoredAt: now, ExpiresAt: now.Add(cu.ttl)}
			}
			p.endFlight(cu.key, cu.fill, entry)
		}
	})
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
