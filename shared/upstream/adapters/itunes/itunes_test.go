package itunes

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
)

const endpoint = "app_store_a/app-info"

func TestDefaultRecord(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	d := u.Data(t, endpoint, "app_id=1234567890", "default")

	if d["id"] != "1234567890" || d["bundle_id"] != "com.example.samplenotes" {
		t.Errorf("id, bundle_id = %v, %v", d["id"], d["bundle_id"])
	}
	dev := d["developer"].(map[string]any)
	if dev["id"] != "1000000123" || dev["name"] != "Example Software Ltd" {
		t.Errorf("developer = %v", dev)
	}
	price := d["price"].(map[string]any)
	if price["amount"] != 0.0 || price["free"] != true || price["currency"] != "USD" {
		t.Errorf("price = %v", price)
	}
	if d["size_bytes"] != 52142080.0 {
		t.Errorf("size_bytes = %v", d["size_bytes"])
	}
	if d["related_apps_included"] != false {
		t.Errorf("related_apps_included = %v, want false", d["related_apps_included"])
	}
	for _, absent := range []string{"similar_apps", "more_apps_by_developer"} {
		if _, ok := d[absent]; ok {
			t.Errorf("%s is present; this source does not carry it", absent)
		}
	}
	if w, _ := d["_warnings"].([]any); len(w) != 1 {
		t.Errorf("_warnings = %v, want the related-apps note", d["_warnings"])
	}

	req := u.LastRequest(t)
	if req.Path != "/lookup" {
		t.Errorf("path = %s", req.Path)
	}
	want := map[string]string{"id": "1234567890", "country": "us", "entity": "software"}
	for k, v := range want {
		if got := req.Query[k]; len(got) != 1 || got[0] != v {
			t.Errorf("query %s = %v, want %s", k, got, v)
		}
	}
	for _, unwanted := range []string{"bundleId", "lang"} {
		if _, ok := req.Query[unwanted]; ok {
			t.Errorf("query has %s; want it absent", unwanted)
		}
	}
	if req.Header.Get("authorization") != "" {
		t.Error("an authorization header was sent to a credential-free API")
	}
}

func TestBundleIDCountryAndLanguage(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	d := u.Data(t, endpoint, "app_id=com.example.paidcalc&country=GB&language=en-GB", "bundle-id")

	req := u.LastRequest(t)
	want := map[string]string{"bundleId": "com.example.paidcalc", "country": "gb", "lang": "en_gb", "entity": "software"}
	for k, v := range want {
		if got := req.Query[k]; len(got) != 1 || got[0] != v {
			t.Errorf("query %s = %v, want %s", k, got, v)
		}
	}
	if _, ok := req.Query["id"]; ok {
		t.Error("a bundle id was sent as id")
	}
	price := d["price"].(map[string]any)
	if price["amount"] != 4.99 || price["free"] != false || price["currency"] != "GBP" {
		t.Errorf("price = %v", price)
	}
}

func TestMissingCounters(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	d := u.Data(t, endpoint, "app_id=1000000001", "missing-counters")

	rating := d["rating"].(map[string]any)
	for _, k := range []string{"average", "count", "current_version_average", "current_version_count"} {
		if v, ok := rating[k]; !ok || v != nil {
			t.Errorf("rating.%s = %v (present %v), want null", k, v, ok)
		}
	}
	price := d["price"].(map[string]any)
	if price["amount"] != nil || price["free"] != nil {
		t.Errorf("price = %v, want amount and free null when the source states no price", price)
	}
	if v, ok := d["size_bytes"]; !ok || v != nil {
		t.Errorf("size_bytes = %v, want null for an unreadable size", v)
	}
	if w, _ := d["_warnings"].([]any); len(w) != 2 {
		t.Errorf("_warnings = %v, want the related-apps and size notes", d["_warnings"])
	}
	dev := d["developer"].(map[string]any)
	if dev["name"] != "Sample Startup Inc." {
		t.Errorf("developer.name = %v, want the seller name when no artist name", dev["name"])
	}
}

func TestLargeIDs(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	d := u.Data(t, endpoint, "app_id=98765432109876543210", "large-ids")
	if d["id"] != "98765432109876543210" {
		t.Errorf("id = %v, want the 20-digit id exactly", d["id"])
	}
	if dev := d["developer"].(map[string]any); dev["id"] != "9007199254740993123" {
		t.Errorf("developer.id = %v", dev["id"])
	}
	// Zero ratings reported by the source are real zeros, not unknowns.
	if rating := d["rating"].(map[string]any); rating["count"] != 0.0 || rating["average"] != 0.0 {
		t.Errorf("rating = %v", rating)
	}
	if d["size_bytes"] != 4294967296123.0 {
		t.Errorf("size_bytes = %v", d["size_bytes"])
	}
}

// Each fault runs on a fresh runner: repeated unhealthy attempts would
// otherwise put the route into its cooldown and skip later cases.
func TestFaults(t *testing.T) {
	fault := func(t *testing.T, query string, kind upstream.FaultKind) upstream.Outcome {
		t.Helper()
		return adaptertest.Start(t, Provider(), nil).Fault(t, endpoint, query, kind)
	}

	t.Run("not found", func(t *testing.T) {
		fault(t, "app_id=1", upstream.NotFound)
	})
	t.Run("developer id", func(t *testing.T) {
		// A developer's id is not an app, even though entity=software lists its apps.
		fault(t, "app_id=1000000123", upstream.NotFound)
	})
	t.Run("throttled 403", func(t *testing.T) {
		out := fault(t, "app_id=3000000001", upstream.RateLimited)
		if out.Fault.RetryAfter != time.Minute {
			t.Errorf("RetryAfter = %v, want a minute", out.Fault.RetryAfter)
		}
	})
	t.Run("429", func(t *testing.T) {
		out := fault(t, "app_id=3000000002", upstream.RateLimited)
		if out.Fault.RetryAfter != 30*time.Second {
			t.Errorf("RetryAfter = %v, want 30s", out.Fault.RetryAfter)
		}
	})
	t.Run("500", func(t *testing.T) {
		out := fault(t, "app_id=5000000001", upstream.ServerError)
		if out.Trace.Attempts != 3 {
			t.Errorf("attempts = %d, want 3 (5xx is retried)", out.Trace.Attempts)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		fault(t, "app_id=6000000001", upstream.Malformed)
	})
	t.Run("bad country", func(t *testing.T) {
		out := fault(t, "app_id=1234567890&country=zz", upstream.InvalidParameter)
		if e := out.Error(); e.Status != 422 || e.Details["field"] != "country" {
			t.Errorf("error = %+v, want 422 naming country", e)
		}
	})
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		raw  string
		want int64
		null bool
		ok   bool
	}{
		{`"52142080"`, 52142080, false, true},
		{`52142080`, 52142080, false, true},
		{`" 1024 "`, 1024, false, true},
		{``, 0, true, true},
		{`null`, 0, true, true},
		{`"12 MB"`, 0, true, false},
		{`"-5"`, 0, true, false},
		{`"1.5"`, 0, true, false},
		{`"99999999999999999999999"`, 0, true, false},
	}
	for _, c := range cases {
		got, ok := parseSize(json.RawMessage(c.raw))
		if ok != c.ok || (got == nil) != c.null || (got != nil && *got != c.want) {
			t.Errorf("parseSize(%s) = %v, %v", c.raw, got, ok)
		}
	}
}

// TestRealFormatVariants reads our fixtures in the formats real answers
// come in: a JP-store record (Japanese text, integer price 0, a
// current-version count of 0) and a trimmed record without bundleId,
// artistId, currency or fileSizeBytes, whose fields stay null.
func TestRealFormatVariants(t *testing.T) {
	u := adaptertest.Start(t, Provider(), nil)
	jp := u.Data(t, endpoint, "app_id=1400000777&country=JP", "jp-store")
	if jp["name"] != "サンプル音楽パズル！ほしぞらステージ" || jp["size_bytes"] != 2147483904.0 || jp["bundle_id"] != "jp.example.hoshizora" {
		t.Errorf("jp record = %v", jp)
	}
	if r := jp["rating"].(map[string]any); r["current_version_count"] != 0.0 || r["count"] != 20417.0 {
		t.Errorf("jp rating = %v; the zero count must stay 0", r)
	}
	if p := jp["price"].(map[string]any); p["free"] != true || p["currency"] != "JPY" || p["formatted"] != "無料" {
		t.Errorf("jp price = %v", p)
	}

	trimmed := u.Data(t, endpoint, "app_id=1400000888&country=DE", "trimmed-record")
	for _, field := range []string{"bundle_id", "size_bytes", "version"} {
		if v, ok := trimmed[field]; !ok || v != nil {
			t.Errorf("%s = %v; want null", field, v)
		}
	}
	if d := trimmed["developer"].(map[string]any); d["id"] != nil || d["name"] != "Beispiel AB" {
		t.Errorf("trimmed developer = %v", d)
	}
	if p := trimmed["price"].(map[string]any); p["free"] != true || p["currency"] != nil || p["formatted"] != "Gratis" {
		t.Errorf("trimmed price = %v", p)
	}
	if w, _ := trimmed["_warnings"].([]any); len(w) != 1 {
		t.Errorf("_warnings = %v; an absent size is unknown, not unreadable", trimmed["_warnings"])
	}
}
