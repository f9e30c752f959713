package params

import (
	"encoding/json"
	"strconv"
)

// Scalar renders a JSON string, number or boolean as a query value (a
// batch item's or a monitor's parameters given as JSON); false for
// anything else.
func Scalar(v json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), true
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return strconv.FormatBool(b), true
	}
	return "", false
}
