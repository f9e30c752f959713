package canary

import (
	"encoding/json"
	"io"
)

// WriteMetrics writes the run's metrics in CloudWatch's embedded metric
// format: one JSON line per checked route (dimensions Operation and Route)
// and one per checked operation (Operation alone, with Breach, which the
// stack's alarms watch). In Lambda, each line written to stdout becomes a
// log event CloudWatch turns into metrics, so the function needs no
// cloudwatch:PutMetricData. Checks the budget stopped write nothing: a
// missing point is not a breach.
func WriteMetrics(w io.Writer, namespace string, r Report) error {
	enc := json.NewEncoder(w)
	at := r.FinishedAt.UnixMilli()
	for _, c := range r.Checks {
		if !c.Checked() || c.Route == "" {
			continue
		}
		values := map[string]any{
			DimOperation: c.Operation, DimRoute: c.Route,
			MetricSuccess: flag(c.Status == "ok"), MetricSchemaValid: flag(c.OK), MetricLatency: c.LatencyMS,
		}
		if c.FillRate != nil {
			values[MetricFillRate] = *c.FillRate
		}
		if err := enc.Encode(emf(namespace, at, []string{DimOperation, DimRoute}, values)); err != nil {
			return err
		}
	}
	for _, o := range r.Operations {
		if o.State == StateNotChecked {
			continue
		}
		values := map[string]any{
			DimOperation:  o.Operation,
			MetricSuccess: flag(o.State != StateFailing), MetricSchemaValid: flag(o.SchemaValid != nil && *o.SchemaValid),
			MetricLatency: o.LatencyMS, MetricBreach: flag(o.Breach),
		}
		if o.FillRate != nil {
			values[MetricFillRate] = *o.FillRate
		}
		if err := enc.Encode(emf(namespace, at, []string{DimOperation}, values)); err != nil {
			return err
		}
	}
	return nil
}

// units of the metrics.
var units = map[string]string{
	MetricSuccess: "Count", MetricSchemaValid: "Count", MetricFillRate: "None", MetricLatency: "Milliseconds", MetricBreach: "Count",
}

// emf is one embedded-metric-format document: the values (dimensions and
// metrics) at the top level, and the _aws metadata naming which are which.
func emf(namespace string, at int64, dims []string, values map[string]any) map[string]any {
	var metrics []map[string]string
	for _, name := range []string{MetricSuccess, MetricSchemaValid, MetricFillRate, MetricLatency, MetricBreach} {
		if _, ok := values[name]; ok {
			metrics = append(metrics, map[string]string{"Name": name, "Unit": units[name]})
		}
	}
	doc := map[string]any{"_aws": map[string]any{
		"Timestamp": at,
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": namespace, "Dimensions": [][]string{dims}, "Metrics": metrics,
		}},
	}}
	for k, v := range values {
		doc[k] = v
	}
	return doc
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
