package htmldata_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
)

// astroPage is an Astro page as Astro 4/5 renders it: a header island
// without props, and a grid island whose props use every type tag,
// escaped by html-escaper (&quot; &#39; &amp; &lt; &gt;). The shop's
// "Fish &amp; Chips" is text that holds an entity in the data itself: it
// is decoded once, by the HTML parser, and stays "&amp;" in the JSON.
const astroPage = `<!DOCTYPE html><html><head><title>boots | Example Shop</title></head><body>` +
	`<!-- <astro-island props="{&quot;hidden&quot;:[0,1]}"></astro-island> -->` +
	`<astro-island uid="1aBc" component-url="/_astro/Header.Dk2.js" component-export="default" ` +
	`renderer-url="/_astro/client.Xy1.js" ssr="" client="idle" opts="{&quot;name&quot;:&quot;Header&quot;,&quot;value&quot;:true}"></astro-island>` +
	`<astro-island uid="Zz9" prefix="r4" component-url="/shop/_astro/index.Q1w.js" component-export="ProductGrid" ` +
	`renderer-url="/shop/_astro/client.r-Ab.js" props="{&quot;catalog&quot;:[0,{&quot;term&quot;:[0,&quot;men&#39;s boots&quot;],` +
	`&quot;shop&quot;:[0,&quot;Fish &amp;amp; Chips &lt;b&gt;Co&lt;/b&gt;&quot;],&quot;brand&quot;:[0,&quot;Ünïcode® “quoted”&quot;],` +
	`&quot;count&quot;:[0,12.50],&quot;missing&quot;:[0,null],&quot;gone&quot;:[0],` +
	`&quot;products&quot;:[1,[[0,{&quot;id&quot;:[0,&quot;A1&quot;],&quot;tags&quot;:[1,[[0,&quot;x&quot;],[0]]]}],[0,{&quot;id&quot;:[0,&quot;A2&quot;]}]]],` +
	`&quot;when&quot;:[3,&quot;2026-09-25T12:00:00.000Z&quot;],&quot;pattern&quot;:[2,&quot;^a+\\d$&quot;],` +
	`&quot;stock&quot;:[4,[[1,[[0,&quot;S&quot;],[0,3]]],[1,[[0,42],[0,{&quot;n&quot;:[0,1]}]]]]],` +
	`&quot;sizes&quot;:[5,[[0,8],[0,9]]],&quot;big&quot;:[6,&quot;90071992547409931234&quot;],` +
	`&quot;link&quot;:[7,&quot;https://example.com/a?b=1&amp;c=2&quot;],&quot;bytes&quot;:[8,[1,2,255]],` +
	`&quot;wide&quot;:[10,[4000000000]],&quot;max&quot;:[11,1],&quot;min&quot;:[11,-1],&quot;future&quot;:[12,&quot;?&quot;],&quot;later&quot;:[-1]}],` +
	`&quot;page&quot;:[0,1]}" ssr="" client="load" opts="{&quot;name&quot;:&quot;ProductGrid&quot;,&quot;value&quot;:true}" await-children="">` +
	`<div class="grid"></div><!--astro:end--></astro-island></body></html>`

const astroPageProps = `{"catalog":{"term":"men's boots","shop":"Fish &amp; Chips <b>Co</b>","brand":"Ünïcode® “quoted”",` +
	`"count":12.50,"missing":null,"products":[{"id":"A1","tags":["x",null]},{"id":"A2"}],` +
	`"when":"2026-09-25T12:00:00.000Z","pattern":"^a+\\d$","stock":[["S",3],[42,{"n":1}]],"sizes":[8,9],` +
	`"big":"90071992547409931234","link":"https://example.com/a?b=1&c=2","bytes":[1,2,255],"wide":[4000000000],` +
	`"max":null,"min":null},"page":1}`

func TestAstroIslands(t *testing.T) {
	islands, err := htmldata.AstroIslands([]byte(astroPage))
	if err != nil {
		t.Fatal(err)
	}
	if len(islands) != 2 {
		t.Fatalf("%d islands; want 2 (the commented one is not an element)", len(islands))
	}
	header := islands[0]
	if header.ComponentExport != "default" || header.Name != "Header" || header.Client != "idle" ||
		header.ComponentURL != "/_astro/Header.Dk2.js" || string(header.Props) != "{}" {
		t.Fatalf("header island %+v", header)
	}
	grid := islands[1]
	if grid.ComponentExport != "ProductGrid" || grid.Name != "ProductGrid" || grid.Client != "load" ||
		grid.ComponentURL != "/shop/_astro/index.Q1w.js" || grid.RendererURL != "/shop/_astro/client.r-Ab.js" {
		t.Fatalf("grid island %+v", grid)
	}
	if grid.Dropped != 2 {
		t.Fatalf("Dropped %d; want 2 (the type-12 and type -1 values)", grid.Dropped)
	}
	sameJSON(t, grid.Props, astroPageProps)
	if !strings.Contains(string(grid.Props), `"count":12.50`) || !strings.Contains(string(grid.Props), "90071992547409931234") {
		t.Fatalf("numbers not kept as written: %s", grid.Props)
	}
}

// Astro before 3.0 wrote nested arrays as JSON text inside a string.
func TestAstroIslandsStringifiedArrays(t *testing.T) {
	page := `<astro-island component-export="List" props="{&quot;items&quot;:[1,&quot;[[0,{\&quot;id\&quot;:[0,7]}],[0,\&quot;b\&quot;]]&quot;],` +
		`&quot;set&quot;:[5,&quot;[[0,1]]&quot;],&quot;bytes&quot;:[9,&quot;[1,2]&quot;]}"></astro-island>`
	islands, err := htmldata.AstroIslands([]byte(page))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, islands[0].Props, `{"items":[{"id":7},"b"],"set":[1],"bytes":[1,2]}`)
}

func TestAstroIslandsFaults(t *testing.T) {
	valid := `<astro-island component-export="Ok" props="{&quot;a&quot;:[0,1]}"></astro-island>`
	for name, c := range map[string]struct {
		page, reason string
	}{
		"no island":        {`<html><body><div props="{}"></div></body></html>`, "no astro-island element"},
		"not an object":    {`<astro-island props="[0,1]"></astro-island>`, "not a JSON object"},
		"not JSON":         {`<astro-island props="{&quot;a&quot;:[0,1]"></astro-island>`, "value cut short"},
		"trailing text":    {`<astro-island props="{} {}"></astro-island>`, "text after"},
		"bare value":       {`<astro-island props="{&quot;a&quot;:1}"></astro-island>`, "not a [type, value] pair"},
		"tag not a number": {`<astro-island props="{&quot;a&quot;:[&quot;0&quot;,1]}"></astro-island>`, "type tag"},
		"array as value":   {`<astro-island props="{&quot;a&quot;:[0,[1]]}"></astro-island>`, "array tagged as a plain value"},
		"set not an array": {`<astro-island props="{&quot;a&quot;:[5,{}]}"></astro-island>`, "not an array"},
		"date an object":   {`<astro-island props="{&quot;a&quot;:[3,{}]}"></astro-island>`, "not text"},
		"typed non-number": {`<astro-island props="{&quot;a&quot;:[8,[&quot;1&quot;]]}"></astro-island>`, "non-number"},
		"array no value":   {`<astro-island props="{&quot;a&quot;:[1]}"></astro-island>`, "has no value"},
	} {
		_, err := htmldata.AstroIslands([]byte(c.page))
		f, ok := err.(*upstream.Fault)
		if !ok || f.Kind != upstream.Malformed || !strings.Contains(f.Reason, c.reason) || !strings.Contains(f.Reason, "-byte page") {
			t.Errorf("%s: error %v; want a malformed fault saying %q", name, err, c.reason)
		}
		// A broken island beside a readable one is skipped.
		islands, err := htmldata.AstroIslands([]byte(c.page + valid))
		if err != nil || len(islands) != 1 || islands[0].ComponentExport != "Ok" {
			t.Errorf("%s beside a valid island: %+v, %v", name, islands, err)
		}
	}
}

func sameJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("test's JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
