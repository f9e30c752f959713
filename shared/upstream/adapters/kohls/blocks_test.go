package kohls_test

import (
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/kohls"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Akamai's bot walls are blocks whatever the status they come with: the
// behavioural challenge served as 200 on the direct route fails over to
// Zyte API, and a call every route refuses with a 200 wall (Access Denied
// directly and through ScraperAPI, the challenge through Zyte API) ends in
// the typed refusal, never in "the answer could not be read".
func TestBlocksServedAs200(t *testing.T) {
	site := kohls.Site()
	routes := adaptertest.StartRoutes(t, []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}, nil, adaptertest.Options)

	out := routes.Serve(t, endpoint, "query=challenged+coat")
	if out.Fault != nil || out.Trace.ServedBy != pages.ZyteName {
		t.Fatalf("challenged direct: served by %q, fault %v", out.Trace.ServedBy, out.Fault)
	}
	if l := out.Trace.Legs[0]; l.ServedBy != kohls.Name || l.Fault != upstream.Rejected || l.Status != 200 {
		t.Fatalf("direct leg %+v; want a block served as 200", l)
	}

	out = routes.Serve(t, endpoint, "query=denied+coat")
	if out.Fault == nil || out.Fault.Kind != upstream.Rejected || len(out.Trace.Legs) != 3 {
		t.Fatalf("blocked everywhere: fault %v, legs %+v", out.Fault, out.Trace.Legs)
	}
	for _, l := range out.Trace.Legs {
		if l.Fault != upstream.Rejected {
			t.Errorf("leg %+v; want rejected", l)
		}
	}
	if !strings.Contains(out.Fault.Reason, "block or challenge") {
		t.Errorf("reason %q", out.Fault.Reason)
	}
	if e := out.Error(); e.Status != 502 || e.Message != "The source refused the request." {
		t.Errorf("caller's error %d %q; want the refusal", e.Status, e.Message)
	}
}
