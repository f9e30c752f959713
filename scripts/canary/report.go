package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// writeTable prints the rows aligned, then a summary line. The last column
// says why a row failed: the fault's reason (credentials redacted) or the
// first schema violation.
func writeTable(w io.Writer, rows []row) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tROUTE\tSTATUS\tLATENCY\tSCHEMA\tFIELDS FILLED\tLEGS\tNOTE")
	failed := 0
	for _, r := range rows {
		if !r.OK {
			failed++
		}
		note := r.Reason
		if r.SchemaError != "" {
			note = r.SchemaError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Operation, dash(r.Route), r.Status,
			latency(r), dash(r.Schema), r.Fields.String(), legs(r.Legs), note)
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
	_, err := fmt.Fprintf(w, "%d operations: %d ok, %d failed\n", len(rows), len(rows)-failed, failed)
	return err
}

// writeJSON prints one JSON object per operation, one per line.
func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
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

func latency(r row) string {
	if r.latency <= 0 {
		return "-"
	}
	if r.latency < time.Second {
		return fmt.Sprintf("%.1fms", float64(r.latency.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2fs", r.latency.Seconds())
}

// legs reads like "atproto_public x1 403 rejected; atproto_session x1 ok".
func legs(ls []leg) string {
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
