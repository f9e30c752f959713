package upstream

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Small helpers adapters share when they read upstream answers.

// NumberID keeps a numeric id exactly, as a string (spec 2.4: large ids
// never become numbers); nil when absent.
func NumberID(n json.Number) *string {
	if n == "" {
		return nil
	}
	s := n.String()
	return &s
}

// Clip shortens s to at most n bytes without splitting a character, for
// upstream messages quoted in fault reasons. A bound below 0 leaves "".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// UntilUnix is the wait until the Unix second in a rate-limit reset header
// (x-ratelimit-reset and the like); 0 when absent, unreadable or past.
func UntilUnix(v string, now time.Time) time.Duration {
	secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || secs <= 0 {
		return 0
	}
	return max(time.Unix(secs, 0).Sub(now), 0)
}

// FlexID is an id a source writes as a JSON string or a number, kept as
// the text it was written as: a number's digits never pass through a
// float. null leaves it empty.
type FlexID string

func (f *FlexID) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = FlexID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = FlexID(n.String())
	return nil
}

// Text is s, or nil when the source sent it empty: an empty field is
// unknown, not "".
func Text(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Trimmed is s without surrounding space, or nil when nothing is left.
func Trimmed(s string) *string { return Text(strings.TrimSpace(s)) }
