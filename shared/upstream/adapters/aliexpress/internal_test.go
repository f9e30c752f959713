package aliexpress

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// The Open Platform's signature for business APIs, against a value
// computed independently (Python: hmac.new(secret, "".join(k+v for k in
// sorted(params)), sha256).hexdigest().upper()).
func TestSignKnownVector(t *testing.T) {
	q := url.Values{}
	for k, v := range map[string]string{
		"app_key": "12345678", "method": "aliexpress.affiliate.product.query", "sign_method": "sha256",
		"timestamp": "1700000000000", "keywords": "usb c cable", "page_no": "1",
	} {
		q.Set(k, v)
	}
	q.Set("sign", "ignored: sign is never signed")
	if got, want := sign("helloworld", q), "CF0F75C3A5D1712C029768361DA15A6E1AE3843D3774C2337534C9C4170E6B25"; got != want {
		t.Errorf("sign = %s; want %s", got, want)
	}
}

func TestExactSold(t *testing.T) {
	for desc, want := range map[string]float64{"312 sold": 312, "1,204 sold": 1204, " 7 sold ": 7} {
		if got, ok := exactSold(desc); !ok || got != want {
			t.Errorf("%q = %v %v", desc, got, ok)
		}
	}
	for _, desc := range []string{"1,000+ sold", "1.2K sold", "10.000+ vendidos", "312 vendidos", "1,20 sold", "12,3456 sold", "sold", ""} {
		if _, ok := exactSold(desc); ok {
			t.Errorf("%q read as exact", desc)
		}
	}
}

func TestInitData(t *testing.T) {
	page := func(script string) []byte {
		return []byte("<html><head><script>if(window._dida_config_._init_data_==null){}</script></head><body><script>" + script + "</script></body></html>")
	}
	for name, script := range map[string]string{
		"bare key":      `window._dida_config_._init_data_= { data: {"data":{"root":{}}} }`,
		"quoted key":    `window._dida_config_._init_data_ = {"data" : {"data":{"root":{}}}};`,
		"after reads":   `var u=e._init_data_;window._dida_config_._init_data_={data:{"data":{"root":{}}}}`,
		"strict (JSON)": `window._dida_config_._init_data_ = {"data": {"data": {"root": {}}}, "x": 1};`,
	} {
		v, err := initData(page(script))
		if err != nil || strings.ReplaceAll(string(v), " ", "") != `{"data":{"root":{}}}` {
			t.Errorf("%s: %s %v", name, v, err)
		}
	}
	for name, script := range map[string]string{
		"no assignment": `var x = window._dida_config_._init_data_;`,
		"not JSON":      `window._dida_config_._init_data_= { data: {root: 1} }`,
		"other member":  `window._dida_config_._init_data_= { page: {"a": 1} }`,
	} {
		_, err := initData(page(script))
		f, ok := err.(*upstream.Fault)
		if !ok || f.Kind != upstream.Malformed || !strings.Contains(f.Reason, "-byte page") || strings.Contains(f.Reason, "root: 1") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBlockedPunishURL: a fetch that ended on the captcha's URL is blocked
// whatever its body; the search page's own URL is not.
func TestBlockedPunishURL(t *testing.T) {
	body := []byte("<html><body><div id=\"root\"></div></body></html>")
	punish := &pages.Page{Status: 200, Body: body,
		URL: "https://www.aliexpress.com//w/wholesale-usb-c-cable.html/_____tmd_____/punish?x5secdata=x&x5step=1"}
	if reason, ok := blocked(punish); !ok || !strings.Contains(reason, "captcha") {
		t.Errorf("punish URL: %q %v", reason, ok)
	}
	search := &pages.Page{Status: 200, Body: body, URL: "https://www.aliexpress.com/w/wholesale-usb-c-cable.html?SearchText=usb+c+cable"}
	if reason, ok := blocked(search); ok {
		t.Errorf("search page blocked: %q", reason)
	}
}

// TestStringList: the gateway's {"string": [...]} list, a plain array,
// and any other shape as no list (never a failed page).
func TestStringList(t *testing.T) {
	for raw, want := range map[string]string{
		`{"string": ["//a.jpg", " ", "https://b.jpg"]}`: "https://a.jpg,https://b.jpg",
		`["https://a.jpg"]`:                             "https://a.jpg",
		`"https://a.jpg,https://b.jpg"`:                 "",
		`{"string": "x"}`:                               "",
		`null`:                                          "",
	} {
		var l stringList
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got := strings.Join(l.absolute(), ","); got != want {
			t.Errorf("%s = %q; want %q", raw, got, want)
		}
	}
}

func TestProductIDOf(t *testing.T) {
	for raw, want := range map[string]string{
		"1005006123456789":      "1005006123456789",
		"1005006123456789.html": "1005006123456789",
		"https://www.aliexpress.com/item/1005006123456789.html#nav-review":          "1005006123456789",
		"https://www.aliexpress.com/store/product/name/1103_32812345678.html":       "",
		"https://www.aliexpress.com/item/1005006123456789.htm":                      "",
		"https://www.aliexpress.com/w/wholesale-cable.html?productId=12a":           "",
		"https://aliexpress.ru/item/1005006123456789.html?sku_id=12000036000000000": "1005006123456789",
	} {
		got, ok := productIDOf(raw)
		if got != want || ok != (want != "") {
			t.Errorf("%s = %q %v; want %q", raw, got, ok, want)
		}
	}
}
