package amazon

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// shopRef is the storefront a url parameter names.
type shopRef struct {
	handle string
	// market is the marketplace of the URL's host; nil for a bare name.
	market *marketplace
}

// readShopRef reads a shop URL (https://www.amazon.<tld>/shop/<handle>,
// any page under it) or a bare shop name. Validation has already kept
// URLs on Amazon's hosts.
func readShopRef(v string) (shopRef, error) {
	v = strings.TrimSpace(v)
	bad := upstream.InvalidParameterFault("url", "invalid_shop",
		"url must be a shop page URL (/shop/<name>) or a shop name.")
	if !strings.Contains(v, "/") {
		h := strings.TrimPrefix(v, "@")
		if !validHandle(h) {
			return shopRef{}, bad
		}
		return shopRef{handle: h}, nil
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return shopRef{}, bad
	}
	m, ok := byHost(u.Hostname())
	if !ok {
		return shopRef{}, bad
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 || parts[0] != "shop" || !validHandle(parts[1]) {
		return shopRef{}, bad
	}
	return shopRef{handle: parts[1], market: &m}, nil
}

// validHandle accepts storefront names: letters, digits, "-", "_", ".".
func validHandle(h string) bool {
	if h == "" || len(h) > 100 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return h != "." && h != ".."
}

// shopTarget resolves the call to a storefront and its marketplace: a
// URL's own host decides its marketplace, country decides for a name.
func shopTarget(c *upstream.Call) (shopRef, marketplace, error) {
	ref, err := readShopRef(c.Param("url"))
	if err != nil {
		return shopRef{}, marketplace{}, err
	}
	if ref.market != nil {
		return ref, *ref.market, nil
	}
	m, err := marketplaceFor(c.Param("country"), defaultMarket)
	return ref, m, err
}

func shopRequest(c *upstream.Call) (pages.Request, error) {
	ref, m, err := shopTarget(c)
	if err != nil {
		return pages.Request{}, err
	}
	return m.request("/shop/"+url.PathEscape(ref.handle), nil, nil), nil
}

// shopPost is a post of marketplace_b/shop.
type shopPost struct {
	ID         string   `json:"id"`
	Type       string   `json:"type"`
	Title      *string  `json:"title"`
	URL        *string  `json:"url"`
	Thumbnail  *string  `json:"thumbnail"`
	ItemsCount *float64 `json:"items_count"`
	Pinned     bool     `json:"pinned"`
}

// shopProduct is a product (and item) of marketplace_b/shop.
type shopProduct struct {
	ASIN                  string   `json:"asin"`
	Platform              string   `json:"platform"`
	Type                  string   `json:"type"`
	Title                 *string  `json:"title"`
	URL                   string   `json:"url"`
	Price                 *float64 `json:"price"`
	Rank                  int      `json:"rank"`
	IsAmazonChoice        *bool    `json:"is_amazon_choice"`
	IsBestSeller          *bool    `json:"is_best_seller"`
	ClimatePledgeFriendly *bool    `json:"climate_pledge_friendly"`
}

// shopData is marketplace_b/shop.
type shopData struct {
	Platform        string         `json:"platform"`
	Handle          string         `json:"handle"`
	Name            *string        `json:"name"`
	Description     *string        `json:"description"`
	URL             string         `json:"url"`
	IsTopCreator    bool           `json:"is_top_creator"`
	AffiliateStatus *string        `json:"affiliate_status"`
	Country         string         `json:"country"`
	Marketplace     map[string]any `json:"marketplace"`
	PostsCount      *int           `json:"posts_count"`
	PostsCursor     *string        `json:"posts_cursor"`
	Posts           []shopPost     `json:"posts"`
	Count           int            `json:"count"`
	Items           []shopProduct  `json:"items"`
	Products        []shopProduct  `json:"products"`
	ProductsOfPost  any            `json:"products_of_post"`
	Warnings        []string       `json:"_warnings,omitempty"`
}

// warnNoProductDetails is the _warnings sentence of a storefront with
// products, fixed so that callers can match it.
const warnNoProductDetails = "Storefront pages show no product prices or badges: price, is_amazon_choice, " +
	"is_best_seller and climate_pledge_friendly are null for every product."

func parseShop(c *upstream.Call, p *pages.Page) (any, error) {
	ref, m, err := shopTarget(c)
	if err != nil {
		return nil, err
	}
	doc, err := html.Parse(bytes.NewReader(p.Body))
	if err != nil {
		return nil, upstream.MalformedFault("the storefront page (%d bytes) does not parse as HTML", len(p.Body))
	}
	out := shopData{
		Platform:    platform,
		Handle:      ref.handle,
		URL:         m.origin() + "/shop/" + url.PathEscape(ref.handle),
		Country:     m.Country,
		Marketplace: m.view(),
		Posts:       []shopPost{},
		Items:       []shopProduct{},
	}
	if t := find(doc, func(n *html.Node) bool { return n.Data == "title" }); t != nil {
		out.Name = nonEmpty(storeName(textOf(t)))
	}
	if d := find(doc, func(n *html.Node) bool {
		return classHas(n, "profile-description", "description-text", "profile-bio", "storefront-bio")
	}); d != nil {
		out.Description = nonEmpty(textOf(d, "see-more"))
	}
	out.IsTopCreator = find(doc, func(n *html.Node) bool { return classHas(n, "top-creator") }) != nil

	seen := map[string]bool{}
	var cards []*html.Node
	walk(doc, func(n *html.Node) bool {
		if n.Type == html.ElementNode && attr(n, "data-aci") != "" {
			cards = append(cards, n)
			return false // a card's own elements are not cards
		}
		return true
	})
	for _, card := range cards {
		post, asins := readPost(card, m)
		if seen["post:"+post.ID] {
			continue
		}
		seen["post:"+post.ID] = true
		out.Posts = append(out.Posts, post)
		for _, a := range asins {
			if seen["asin:"+a.ASIN] {
				continue
			}
			seen["asin:"+a.ASIN] = true
			a.Rank = len(out.Items) + 1
			out.Items = append(out.Items, a)
		}
	}
	if out.Name == nil && len(out.Posts) == 0 {
		return nil, upstream.MalformedFault("no storefront name or posts (data-aci cards) in a %d-byte page", len(p.Body))
	}
	out.Count = len(out.Items)
	out.Products = out.Items
	if out.Count > 0 {
		// Always null here, which a caller could take for "not a best seller".
		out.Warnings = append(out.Warnings, warnNoProductDetails)
	}
	// The page's "load more" state: a token while more posts exist.
	if st := find(doc, func(n *html.Node) bool { return classHas(n, "shop-ajax-state") }); st != nil {
		token, more := "", false
		walk(st, func(n *html.Node) bool {
			if n.Type == html.ElementNode && n.Data == "input" {
				switch attr(n, "name") {
				case "pageToken":
					token = strings.TrimSpace(attr(n, "value"))
				case "shouldLoadMoreFlag":
					more = attr(n, "value") == "true"
				}
			}
			return true
		})
		if more && token != "" && token != "0" {
			out.PostsCursor = &token
		}
		if !more {
			// Every post is on this page, so their number is the total;
			// while more can be loaded the total is unknown.
			n := len(out.Posts)
			out.PostsCount = &n
		}
	}
	return out, nil
}

// storeName is the creator's name from the page title ("<name>'s Amazon
// Page", "<name> - Amazon.co.uk"); "" when the title names no one.
func storeName(title string) string {
	title = clean(title)
	for _, suffix := range []string{"'s Amazon Page", "’s Amazon Page"} {
		if strings.HasSuffix(title, suffix) {
			return strings.TrimSpace(strings.TrimSuffix(title, suffix))
		}
	}
	for _, sep := range []string{" - Amazon", " | Amazon", ": Amazon"} {
		if i := strings.Index(title, sep); i > 0 {
			return strings.TrimSpace(title[:i])
		}
	}
	if strings.HasPrefix(strings.ToLower(title), "amazon") {
		return "" // the site's own name, not a creator's
	}
	return title
}

// readPost maps a data-aci card and the products it shows.
func readPost(card *html.Node, m marketplace) (shopPost, []shopProduct) {
	post := shopPost{ID: attr(card, "data-aci"), Type: "post"}
	switch cls := attr(card, "class"); {
	case strings.Contains(cls, "list-item"):
		post.Type = "list"
	case strings.Contains(cls, "video"):
		post.Type = "video"
	case strings.Contains(cls, "photo"), strings.Contains(cls, "image"):
		post.Type = "photo"
	}
	if a := find(card, func(n *html.Node) bool { return n.Data == "a" && strings.Contains(attr(n, "href"), "/shop/") }); a != nil {
		post.URL = nonEmpty(m.absolute(attr(a, "href")))
	}
	if t := find(card, func(n *html.Node) bool { return classHas(n, "list-title", "item-title") }); t != nil {
		post.Title = nonEmpty(textOf(t))
	}
	if img := find(card, func(n *html.Node) bool {
		return n.Data == "img" && (classHas(n, "list-image") || strings.Contains(attr(n, "class"), "image"))
	}); img != nil {
		post.Thumbnail = nonEmpty(m.absolute(attr(img, "src")))
	}
	if n := find(card, func(n *html.Node) bool { return classHas(n, "list-itemcount") }); n != nil {
		post.ItemsCount = leadingCount(textOf(n))
	}
	post.Pinned = find(card, func(n *html.Node) bool { return classHas(n, "full-bleed-pinned-badge") }) != nil

	var products []shopProduct
	walk(card, func(n *html.Node) bool {
		if n.Type != html.ElementNode {
			return true
		}
		asin := strings.TrimSpace(strings.TrimPrefix(attr(n, "data-asin"), "amzn1.asin."))
		if asin == "" {
			return true
		}
		p := shopProduct{ASIN: asin, Platform: platform, Type: "product", URL: m.productURL(asin)}
		if img := find(n, func(n *html.Node) bool { return n.Data == "img" }); img != nil {
			p.Title = nonEmpty(attr(img, "alt"))
		}
		products = append(products, p)
		return false
	})
	return post, products
}

// leadingCount reads an exact count that starts a label ("12 items",
// "1,204 items"); an abbreviated one ("1.2K") is not exact: nil.
func leadingCount(s string) *float64 {
	s = clean(s)
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == ',') {
		end++
	}
	if end == 0 || (end < len(s) && s[end] != ' ') {
		return nil
	}
	n, err := strconv.Atoi(strings.ReplaceAll(s[:end], ",", ""))
	if err != nil {
		return nil
	}
	f := float64(n)
	return &f
}

// walk visits n and its descendants in document order; visit returns
// false to skip a node's children.
func walk(n *html.Node, visit func(*html.Node) bool) {
	if !visit(n) {
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, visit)
	}
}

// find is the first element under n (n included) that match accepts.
func find(n *html.Node, match func(*html.Node) bool) *html.Node {
	var found *html.Node
	walk(n, func(x *html.Node) bool {
		if found != nil {
			return false
		}
		if x.Type == html.ElementNode && match(x) {
			found = x
			return false
		}
		return true
	})
	return found
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// classHas reports whether a class of n contains one of the fragments
// (the site's class names carry build suffixes).
func classHas(n *html.Node, fragments ...string) bool {
	for _, cls := range strings.Fields(attr(n, "class")) {
		for _, f := range fragments {
			if strings.Contains(cls, f) {
				return true
			}
		}
	}
	return false
}

// textOf is the collapsed text of n, scripts and styles left out, and
// controls whose data-action contains one of skipActions (a "see more"
// toggle is not part of a description).
func textOf(n *html.Node, skipActions ...string) string {
	var b strings.Builder
	walk(n, func(x *html.Node) bool {
		if x.Type == html.ElementNode && (x.Data == "script" || x.Data == "style") {
			return false
		}
		if x.Type == html.ElementNode {
			for _, a := range skipActions {
				if strings.Contains(attr(x, "data-action"), a) {
					return false
				}
			}
		}
		if x.Type == html.TextNode {
			b.WriteString(x.Data)
			b.WriteByte(' ')
		}
		return true
	})
	return clean(b.String())
}
