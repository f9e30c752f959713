package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/meridian-data/meridian/shared/canary"
)

// writeTable prints one line per operation and route, aligned, then a
// summary line. FILL is the fill rate against its baseline; the last
// column says why a line failed (the fault's reason, credentials
// redacted, or the first schema violation) or which fields went null.
func writeTable(w io.Writer, rep canary.Report) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tROUTE\tSTATUS\tLATENCY\tSCHEMA\tFILL\tLEGS\tNOTE")
	failed, drifting := 0, 0
	for _, c := range rep.Checks {
		switch {
		case !c.OK:
			failed++
		case c.Drifting:
			drifting++
		}
		note := c.Reason
		switch {
		case c.SchemaError != "":
			note = c.SchemaError
		case len(c.NullFields) > 0:
			note = "went null: " + strings.Join(c.NullFields, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Operation, dash(c.Route), c.Status,
			latency(c.Latency()), dash(c.Schema), fill(c), legs(c.Legs), note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// An empty NOTE still leaves the padding of the columns before it.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n"))); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d checks: %d ok, %d drifting, %d failed; %d of %d source requests\n",
		len(rep.Checks), len(rep.Checks)-failed-drifting, drifting, failed, rep.SourceRequests, rep.Budget)
	return err
}

// writeJSON prints one JSON object per operation and route, one per line.
func writeJSON(w io.Writer, checks []canary.Check) error {
	enc := json.NewEncoder(w)
	for _, c := range checks {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func latency(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < time.Second {
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// fill reads like "93%", "71%<95%" (drifting below its baseline) or "-".
func fill(c canary.Check) string {
	if c.FillRate == nil {
		return "-"
	}
	s := fmt.Sprintf("%.0f%%", *c.FillRate*100)
	if c.Drifting && c.BaselineFillRate != nil {
		s += fmt.Sprintf("<%.0f%%", *c.BaselineFillRate*100)
	}
	return s
}

// legs reads like "atproto_public x1 403 rejected".
func legs(ls []canary.Leg) string {
	if len(ls) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		s := fmt.Sprintf("%s x%d", l.Route, l.Attempts)
		if l.OK {
			s += " ok"
		} else {
			if l.Status != 0 {
				s += fmt.Sprintf(" %d", l.Status)
			}
			if l.Fault != "" {
				s += " " + l.Fault
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
