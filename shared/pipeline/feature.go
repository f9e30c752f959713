package pipeline

import (
	"net/http"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// Feature is a part of the service built on the pipeline that serves
// endpoints of its own: monitors (shared/monitors) and web jobs' state
// (shared/webjobs). New gives each the pipeline as a Runner, the only way it
// reaches the request path, and serves the handlers it returns as
// built-ins (unless Config.Handlers already has the key).
type Feature interface {
	Handlers(r Runner) map[string]Handler
}

// Runner is what a Feature may use of the pipeline.
type Runner interface {
	// Run runs a request on someone's behalf (Pipeline.Run).
	Run(r *http.Request, as RunAs) Answer
	// Available reports whether this deployment serves e.
	Available(e *registry.Endpoint) bool
	// ErrorsURL is the errors reference that an answer to r anchors its
	// doc_url into.
	ErrorsURL(r *http.Request) string
}

var _ Runner = (*Pipeline)(nil)

// RunLease is how long a worker's claim on a run it makes through Run (a
// monitor's run, a web job) should hold before another delivery may take
// it over: longer than any call (RequestTimeout) and its billing writes,
// so only a dead worker's claim lapses.
const RunLease = RequestTimeout + 2*BillingTimeout + time.Minute

// NotAvailable is the 501 ENDPOINT_NOT_AVAILABLE of an endpoint this
// deployment does not serve on /v1.
func NotAvailable(e *registry.Endpoint) *envelope.Error { return notAvailable(e, false) }
