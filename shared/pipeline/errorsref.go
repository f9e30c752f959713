package pipeline

import (
	"html"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/envelope"
)

// serveErrorsReference renders the roster as the page doc_url anchors into.
func serveErrorsReference(w http.ResponseWriter) {
	var b strings.Builder
	b.WriteString("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Meridian error types</title></head><body>\n")
	b.WriteString("<h1>Meridian error types</h1>\n<p>Branch on <code>error.type</code>; <code>error.message</code> may be reworded. Every failure costs 0 credits.</p>\n")
	for _, t := range envelope.Roster {
		statuses := make([]string, 0, len(t.Statuses))
		for _, s := range t.Statuses {
			statuses = append(statuses, strconv.Itoa(s))
		}
		if len(statuses) == 0 {
			statuses = append(statuses, "never emitted")
		}
		b.WriteString("<h2 id=\"" + t.Type.Anchor() + "\">" + string(t.Type) + "</h2>\n")
		b.WriteString("<p>HTTP " + strings.Join(statuses, ", ") + ". " + html.EscapeString(t.Condition) + "</p>\n")
	}
	b.WriteString("<h2 id=\"billing-status\">error.details.billing_status</h2>\n<dl>\n")
	for _, v := range slices.Sorted(maps.Keys(BillingStatuses)) {
		b.WriteString("<dt><code>" + v + "</code></dt><dd>" + html.EscapeString(BillingStatuses[v]) + "</dd>\n")
	}
	b.WriteString("</dl>\n</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}
