package amazon

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Tolerant JSON pieces for the deals widget. The widget's product objects
// are a front end's, not a published API: optional blocks come bare or
// wrapped as {"entity": …}, numbers as numbers or numeric strings. A block
// whose shape changed reads as absent (null in the data) rather than
// failing the whole page; the grid itself missing is a Malformed fault.

// ent is a block given bare or as {"entity": …}; V is nil when absent or
// unreadable.
type ent[T any] struct{ V *T }

func (e *ent[T]) UnmarshalJSON(b []byte) error {
	var w struct {
		Entity json.RawMessage `json:"entity"`
	}
	if json.Unmarshal(b, &w) == nil && len(w.Entity) > 0 && !bytes.Equal(w.Entity, []byte("null")) {
		b = w.Entity
	}
	var v T
	if json.Unmarshal(b, &v) == nil {
		e.V = &v
	}
	return nil
}

// num is a number given as a JSON number or as a plain decimal string
// ("19.99"); anything else (a formatted "£19.99", "1.234,56") is unknown,
// since reading it would mean guessing the locale.
type num struct{ V *float64 }

func (n *num) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if unq, err := strconv.Unquote(s); err == nil {
		s = strings.TrimSpace(unq)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && plainDecimal(s) {
		n.V = &f
	}
	return nil
}

func plainDecimal(s string) bool {
	dot := false
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0:
			dot = true
		case c == '-' && i == 0:
		default:
			return false
		}
	}
	return s != "" && s != "-"
}

// str is an id given as a string or a number (kept exactly as written).
type str string

func (s *str) UnmarshalJSON(b []byte) error {
	var v string
	if json.Unmarshal(b, &v) == nil {
		*s = str(v)
		return nil
	}
	var n json.Number
	if json.Unmarshal(b, &n) == nil {
		*s = str(n.String())
	}
	return nil
}

// pct is a percentage given as a number, a numeric string or {"value": n}.
type pct struct{ V *float64 }

func (p *pct) UnmarshalJSON(b []byte) error {
	var n num
	_ = n.UnmarshalJSON(b)
	if n.V == nil {
		var o struct {
			Value num `json:"value"`
		}
		if json.Unmarshal(b, &o) == nil {
			n = o.Value
		}
	}
	p.V = n.V
	return nil
}

// instant is a deal's end: an RFC 3339 string or a Unix time in seconds
// or milliseconds; V is RFC 3339 in UTC, "" when unknown.
type instant struct{ V string }

func (t *instant) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if at, err := time.Parse(time.RFC3339, strings.TrimSpace(s)); err == nil {
			t.V = at.UTC().Format(time.RFC3339)
			return nil
		}
	}
	var n num
	_ = n.UnmarshalJSON(b)
	if n.V != nil && *n.V > 0 && *n.V == math.Trunc(*n.V) {
		v := int64(*n.V)
		if v > 1e11 { // milliseconds (1e11 s is the year 5138)
			t.V = time.UnixMilli(v).UTC().Format(time.RFC3339)
		} else {
			t.V = time.Unix(v, 0).UTC().Format(time.RFC3339)
		}
	}
	return nil
}

// money is a price block in any of the widget's spellings: {"price":
// "19.99"}, {"amount": 19.99}, {"value": {"amount": …}} or
// {"moneyValueOrRange": {"value": {"amount": …, "currencyCode": …}}}.
type money struct {
	Price        num     `json:"price"`
	Amount       num     `json:"amount"`
	Value        *amount `json:"value"`
	ValueOrRange *struct {
		Value *amount `json:"value"`
	} `json:"moneyValueOrRange"`
	CurrencyCode string `json:"currencyCode"`
	Currency     string `json:"currency"`
}

type amount struct {
	Amount       num    `json:"amount"`
	CurrencyCode string `json:"currencyCode"`
	Unit         string `json:"unit"`
}

// read returns the amount and its currency code (when the block names one).
func (m *money) read() (*float64, string) {
	if m == nil {
		return nil, ""
	}
	cur := firstNonEmpty(m.CurrencyCode, m.Currency)
	for _, a := range []*amount{m.Value, valueOf(m.ValueOrRange)} {
		if a != nil && a.Amount.V != nil {
			return a.Amount.V, currencyCode(firstNonEmpty(a.CurrencyCode, a.Unit, cur))
		}
	}
	if m.Price.V != nil {
		return m.Price.V, currencyCode(cur)
	}
	return m.Amount.V, currencyCode(cur)
}

func valueOf(v *struct {
	Value *amount `json:"value"`
}) *amount {
	if v == nil {
		return nil
	}
	return v.Value
}

// currencyCode keeps an ISO 4217 code, nothing else (a symbol is not one).
func currencyCode(s string) string {
	s = strings.ToUpper(strings.TrimSpace(s))
	if len(s) != 3 {
		return ""
	}
	for _, c := range s {
		if c < 'A' || c > 'Z' {
			return ""
		}
	}
	return s
}

// text is a display block: {"content": {"fragments": [{"text": …}]}},
// {"displayString": …} or a plain string.
type text struct{ V string }

func (t *text) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		t.V = clean(s)
		return nil
	}
	var o struct {
		DisplayString string `json:"displayString"`
		Text          string `json:"text"`
		Content       *struct {
			Fragments []struct {
				Text string `json:"text"`
			} `json:"fragments"`
		} `json:"content"`
	}
	if json.Unmarshal(b, &o) != nil {
		return nil
	}
	if o.Content != nil {
		var parts []string
		for _, f := range o.Content.Fragments {
			if f := clean(f.Text); f != "" {
				parts = append(parts, f)
			}
		}
		t.V = strings.Join(parts, " ")
	}
	if t.V == "" {
		t.V = clean(firstNonEmpty(o.DisplayString, o.Text))
	}
	return nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// clean collapses white space.
func clean(s string) string { return strings.Join(strings.Fields(s), " ") }
