package upstream

import (
	"encoding/json"
	"testing"
	"time"
)

func TestMappingHelpers(t *testing.T) {
	if id := NumberID(json.Number("12345678901234567890123")); id == nil || *id != "12345678901234567890123" {
		t.Errorf("a large id is kept exactly: %v", id)
	}
	if NumberID("") != nil {
		t.Error("an absent id is nil")
	}
	if got := Clip("héllo", 2); got != "h" {
		t.Errorf("Clip splits no character: %q", got)
	}
	now := time.Unix(1_800_000_000, 0)
	for in, want := range map[string]time.Duration{"1800000042": 42 * time.Second, "1799999999": 0, "": 0, "soon": 0, "-5": 0} {
		if got := UntilUnix(in, now); got != want {
			t.Errorf("UntilUnix(%q) = %v; want %v", in, got, want)
		}
	}
}

// A FlexID keeps a string as written and a number's exact digits.
func TestFlexID(t *testing.T) {
	var v struct{ A, B, C FlexID }
	if err := json.Unmarshal([]byte(`{"A":"-2140479","B":12345678901234567890,"C":null}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != "-2140479" || v.B != "12345678901234567890" || v.C != "" {
		t.Fatalf("%+v", v)
	}
	if err := json.Unmarshal([]byte(`{"A":{}}`), &v); err == nil {
		t.Error("an object is not an id")
	}
}

func TestTextAndTrimmed(t *testing.T) {
	if Text("") != nil || *Text(" a ") != " a " || Trimmed("  ") != nil || *Trimmed(" a ") != "a" {
		t.Error("empty text is unknown; Trimmed drops surrounding space")
	}
}
