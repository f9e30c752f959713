package booking

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/bookingcom"
)

// graphqlPath is the GraphQL endpoint the site's front ends call.
const graphqlPath = "/dml/graphql"

// attractionsPageSize is the page the attractions front end asks for.
const attractionsPageSize = 25

// searchProductsQuery is the attractions front end's SearchProducts
// operation, asking only for what the data shape needs. Its input and
// response fields are those the front end's own query uses (input: ufi,
// filterByStartDate, filterByEndDate, extractFilterStats,
// extractFilterOptions, extractSorters, extractSections, limit, page,
// source; response: products, filterStats, filterOptions, sorters).
const searchProductsQuery = `query SearchProducts($input: AttractionsProductSearchInput!, $contextParams: AttractionsContextParamsInput) {
  attractionsProduct {
    searchProducts(input: $input, contextParams: $contextParams) {
      ... on AttractionsProductSearchResponse {
        products {
          id
          name
          slug
          shortDescription
          primaryPhoto { small __typename }
          representativePrice { chargeAmount currency publicAmount __typename }
          reviewsStats { allReviewsCount percentage combinedNumericStats { average total __typename } __typename }
          cancellationPolicy { hasFreeCancellation __typename }
          ufiDetails { bCityName countryName ufi url { country __typename } __typename }
          offers { id __typename }
          taxonomy { type { label slug __typename } __typename }
          __typename
        }
        filterStats { filteredProductCount unfilteredProductCount __typename }
        filterOptions {
          typeFilters { ...FilterOptionFragment __typename }
          labelFilters { ...FilterOptionFragment __typename }
          priceFilters { ...FilterOptionFragment __typename }
          ufiFilters { ...FilterOptionFragment __typename }
          __typename
        }
        sorters { name value __typename }
        __typename
      }
      __typename
    }
    __typename
  }
}

fragment FilterOptionFragment on FilterOption {
  name
  tagname
  productCount
  __typename
}
`

// The input fields of the site's sort and filter lists. Unlike the
// fields above, these were not seen in a captured request: they are named
// as the response names the lists (filterOptions.typeFilters, …) and as
// other clients of this GraphQL pass them (sortBy, typeFilters,
// labelFilters, priceFilters, ufiFilters), with the lists' tagname values.
const (
	inputSort   = "sortBy"
	inputTypes  = "typeFilters"
	inputLabels = "labelFilters"
	inputPrices = "priceFilters"
	inputAreas  = "ufiFilters"
)

// Attractions is the data of travel_booking/search-attractions.
type Attractions struct {
	Count       int              `json:"count"`
	Cursor      *string          `json:"cursor"`
	Destination AttractionPlace  `json:"destination"`
	HasMore     *bool            `json:"has_more"`
	Items       []Attraction     `json:"items"`
	Page        int              `json:"page"`
	Total       *float64         `json:"total"`
	Filters     AttractionFilter `json:"filters"`
	Sorts       []Sort           `json:"sorts"`
	Warnings    []string         `json:"_warnings,omitempty"`
}

// AttractionPlace is the searched city.
type AttractionPlace struct {
	City    *string `json:"city"`
	Country *string `json:"country"`
	ID      string  `json:"id"`
}

// AttractionFilter lists the site's filters for this search, the values
// types, labels, prices and areas take (the tagname of each option).
type AttractionFilter struct {
	Types  []FilterOption `json:"types"`
	Labels []FilterOption `json:"labels"`
	Prices []FilterOption `json:"prices"`
	Areas  []FilterOption `json:"areas"`
}

// FilterOption is one value of a filter list.
type FilterOption struct {
	ID    string   `json:"id"`
	Name  *string  `json:"name"`
	Count *float64 `json:"count"`
}

// Sort is one order the site offers; ID is what sort takes.
type Sort struct {
	ID     string  `json:"id"`
	Name   *string `json:"name"`
	Active *bool   `json:"active"`
}

// Attraction is one product of the results.
type Attraction struct {
	Category         *string  `json:"category"`
	City             *string  `json:"city"`
	CountryCode      *string  `json:"country_code"`
	Description      *string  `json:"description"`
	DestinationID    *string  `json:"destination_id"`
	FreeCancellation *bool    `json:"free_cancellation"`
	ID               string   `json:"id"`
	ImageURL         *string  `json:"image_url"`
	Name             *string  `json:"name"`
	Offers           *int     `json:"offers"`
	Platform         string   `json:"platform"`
	PositiveShare    *string  `json:"positive_share"`
	Price            *Price   `json:"price"`
	Rating           *float64 `json:"rating"`
	RatingsCount     *float64 `json:"ratings_count"`
	ReviewsCount     *float64 `json:"reviews_count"`
	Slug             *string  `json:"slug"`
	Type             string   `json:"type"`
	URL              *string  `json:"url"`
}

// Price is an amount with its currency; a price shown only as text keeps
// a null amount.
type Price struct {
	Amount   *float64 `json:"amount"`
	Currency *string  `json:"currency"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	warnCurrency = "The site priced the results in another currency than the one asked for; each price names its currency."
	warnNotCity  = "The location is not a city; attractions were searched in the first city the site suggested for it (destination says which)."
	warnSort     = "The site did not apply the requested sort; sorts marks the order it used."
)

// gqlProduct is one AttractionsProduct as the query asks for it.
type gqlProduct struct {
	ID                  json.RawMessage         `json:"id"`
	Name                string                  `json:"name"`
	Slug                string                  `json:"slug"`
	ShortDescription    string                  `json:"shortDescription"`
	PrimaryPhoto        *struct{ Small string } `json:"primaryPhoto"`
	RepresentativePrice *struct {
		ChargeAmount flexNumber `json:"chargeAmount"`
		PublicAmount flexNumber `json:"publicAmount"`
		Currency     string     `json:"currency"`
	} `json:"representativePrice"`
	ReviewsStats *struct {
		AllReviewsCount      flexNumber `json:"allReviewsCount"`
		Percentage           string     `json:"percentage"`
		CombinedNumericStats *struct {
			Average flexNumber `json:"average"`
			Total   flexNumber `json:"total"`
		} `json:"combinedNumericStats"`
	} `json:"reviewsStats"`
	CancellationPolicy *struct {
		HasFreeCancellation *bool `json:"hasFreeCancellation"`
	} `json:"cancellationPolicy"`
	UfiDetails *struct {
		BCityName   string          `json:"bCityName"`
		CountryName string          `json:"countryName"`
		UFI         json.RawMessage `json:"ufi"`
		URL         *struct {
			Country string `json:"country"`
		} `json:"url"`
	} `json:"ufiDetails"`
	Offers   *[]json.RawMessage `json:"offers"`
	Taxonomy *struct {
		Type *struct {
			Label string `json:"label"`
		} `json:"type"`
	} `json:"taxonomy"`
}

type gqlFilterOption struct {
	Name         string          `json:"name"`
	Tagname      json.RawMessage `json:"tagname"`
	ProductCount flexNumber      `json:"productCount"`
}

// gqlSearchProducts is attractionsProduct.searchProducts.
type gqlSearchProducts struct {
	Typename    string        `json:"__typename"`
	Products    *[]gqlProduct `json:"products"`
	FilterStats *struct {
		FilteredProductCount flexNumber `json:"filteredProductCount"`
	} `json:"filterStats"`
	FilterOptions *struct {
		TypeFilters  []gqlFilterOption `json:"typeFilters"`
		LabelFilters []gqlFilterOption `json:"labelFilters"`
		PriceFilters []gqlFilterOption `json:"priceFilters"`
		UfiFilters   []gqlFilterOption `json:"ufiFilters"`
	} `json:"filterOptions"`
	Sorters []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"sorters"`
	// An error answer of the attractions back end.
	StatusCode flexNumber `json:"statusCode"`
}

// attractions serves travel_booking/search-attractions.
func (f fetcher) attractions(ctx context.Context, c *upstream.Call) (any, error) {
	lang, err := bookingcom.Language(c)
	if err != nil {
		return nil, err
	}
	d, err := f.destinationOf(ctx, c, lang)
	if err != nil {
		return nil, err
	}
	var warnings []string
	ufi, city := d.ID, d.City
	if d.Type != "city" {
		if c.Param("destination_id") != "" || d.CityID == "" {
			return nil, upstream.InvalidParameterFault(fieldOf(c), "not_a_city",
				"Attractions are searched in a city: give a city's destination_id, or a location that names a city.")
		}
		ufi, city = d.CityID, d.CityName
		warnings = append(warnings, warnNotCity)
	}
	ufiNum, err := strconv.ParseInt(ufi, 10, 64)
	if err != nil {
		return nil, upstream.InvalidParameterFault(fieldOf(c), "invalid_destination", "destination_id must be a city's destination id.")
	}
	pg := page(c)
	input := map[string]any{
		"ufi": ufiNum, "limit": attractionsPageSize, "page": pg, "source": "search_box",
		"extractFilterStats": true, "extractFilterOptions": true, "extractSorters": true, "extractSections": false,
		"filterBySupportedLanguage": []string{},
	}
	if v := c.Param("start_date"); v != "" {
		input["filterByStartDate"] = v
	}
	if v := c.Param("end_date"); v != "" {
		input["filterByEndDate"] = v
	}
	sort := c.Param("sort")
	if sort != "" {
		input[inputSort] = sort
	}
	for param, field := range map[string]string{"types": inputTypes, "labels": inputLabels, "prices": inputPrices, "areas": inputAreas} {
		if list := splitList(c.Param(param)); len(list) > 0 {
			input[field] = list
		}
	}
	body, err := json.Marshal(map[string]any{
		"operationName": "SearchProducts",
		"variables": map[string]any{
			"input": input,
			// No affiliate label: the site's own default applies.
			"contextParams": map[string]any{"urlCode": "", "test": false, "showInactive": false, "source": "search_box", "adPlat": "", "label": ""},
		},
		"extensions": map[string]any{},
		"query":      searchProductsQuery,
	})
	if err != nil {
		return nil, err
	}
	q := url.Values{"lang": {lang}}
	cur := currency(c)
	if cur != "" {
		q.Set("selected_currency", cur)
	}
	h := http.Header{}
	h.Set("Referer", Origin+"/attractions/searchresults.html?dest_id="+url.QueryEscape(ufi))
	h.Set("X-Booking-Topic", "capla_browser_b-attractions-product-frontend-capla")
	h.Set("X-Booking-Site-Type-Id", "1")
	p, err := f.post(ctx, postReq{path: graphqlPath, query: q, header: h, body: body, lang: lang})
	if err != nil {
		return nil, err
	}
	sp, err := searchProducts(p.Body)
	if err != nil {
		return nil, err
	}
	out := Attractions{Items: []Attraction{}, Page: pg, Destination: AttractionPlace{ID: ufi, City: trimmed(city), Country: trimmed(d.Country)}}
	for _, pr := range *sp.Products {
		it := attraction(pr)
		if it.ID == "" {
			continue
		}
		if out.Destination.City == nil && it.DestinationID != nil && *it.DestinationID == ufi && pr.UfiDetails != nil {
			out.Destination.City = trimmed(pr.UfiDetails.BCityName)
		}
		if out.Destination.Country == nil && it.DestinationID != nil && *it.DestinationID == ufi && pr.UfiDetails != nil {
			out.Destination.Country = trimmed(pr.UfiDetails.CountryName)
		}
		if cur != "" && it.Price != nil && it.Price.Currency != nil && !strings.EqualFold(*it.Price.Currency, cur) && !contains(warnings, warnCurrency) {
			warnings = append(warnings, warnCurrency)
		}
		out.Items = append(out.Items, it)
	}
	out.Count = len(out.Items)
	if sp.FilterStats != nil {
		out.Total = sp.FilterStats.FilteredProductCount.ptr()
	}
	switch {
	case out.Total != nil:
		more := float64((pg-1)*attractionsPageSize+out.Count) < *out.Total
		out.HasMore = &more
	case out.Count < attractionsPageSize:
		no := false
		out.HasMore = &no
	}
	if fo := sp.FilterOptions; fo != nil {
		out.Filters = AttractionFilter{Types: filterOptions(fo.TypeFilters), Labels: filterOptions(fo.LabelFilters),
			Prices: filterOptions(fo.PriceFilters), Areas: filterOptions(fo.UfiFilters)}
	}
	for i, s := range sp.Sorters {
		if s.Value == "" {
			continue
		}
		// The site's first sorter is its default order.
		active := s.Value == sort || (sort == "" && i == 0)
		out.Sorts = append(out.Sorts, Sort{ID: s.Value, Name: trimmed(s.Name), Active: &active})
	}
	out.Warnings = warnings
	return out, nil
}

// searchProducts reads data.attractionsProduct.searchProducts; GraphQL
// errors without data are the site refusing the query, an error response
// of the attractions back end is classified by its status, a missing
// products list is a changed shape.
func searchProducts(body []byte) (gqlSearchProducts, error) {
	var resp struct {
		Data *struct {
			AttractionsProduct *struct {
				SearchProducts *gqlSearchProducts `json:"searchProducts"`
			} `json:"attractionsProduct"`
		} `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := upstream.DecodeJSON(body, &resp); err != nil {
		return gqlSearchProducts{}, err
	}
	if resp.Data == nil || resp.Data.AttractionsProduct == nil || resp.Data.AttractionsProduct.SearchProducts == nil {
		if len(resp.Errors) > 0 {
			return gqlSearchProducts{}, &upstream.Fault{Kind: upstream.Rejected,
				Reason: "the site's GraphQL refused the query: " + upstream.Clip(resp.Errors[0].Message, 160)}
		}
		return gqlSearchProducts{}, upstream.MalformedFault("no attractionsProduct.searchProducts in a %d-byte answer", len(body))
	}
	sp := *resp.Data.AttractionsProduct.SearchProducts
	if sp.Products == nil {
		if code, ok := sp.StatusCode.v, sp.StatusCode.ok; ok {
			switch {
			case code == http.StatusNotFound:
				return sp, upstream.NotFoundFault("the site has no attractions destination with that id")
			case code == http.StatusBadRequest:
				return sp, &upstream.Fault{Kind: upstream.Rejected, Status: http.StatusBadRequest, Reason: "the attractions search refused the request"}
			}
			return sp, &upstream.Fault{Kind: upstream.ServerError, Reason: "the attractions search answered an error " + strconv.Itoa(int(code))}
		}
		return sp, upstream.MalformedFault("searchProducts (%s) has no products list in a %d-byte answer", upstream.Clip(sp.Typename, 60), len(body))
	}
	return sp, nil
}

// attraction maps one product.
func attraction(pr gqlProduct) Attraction {
	it := Attraction{ID: rawID(pr.ID), Name: trimmed(pr.Name), Slug: trimmed(pr.Slug), Description: trimmed(pr.ShortDescription),
		Platform: platform, Type: "attraction"}
	if pr.PrimaryPhoto != nil {
		it.ImageURL = trimmed(pr.PrimaryPhoto.Small)
	}
	if rp := pr.RepresentativePrice; rp != nil {
		amount := rp.ChargeAmount.ptr()
		if amount == nil {
			amount = rp.PublicAmount.ptr()
		}
		if amount != nil || strings.TrimSpace(rp.Currency) != "" {
			it.Price = &Price{Amount: amount, Currency: upperPtr(rp.Currency)}
		}
	}
	if rs := pr.ReviewsStats; rs != nil {
		it.ReviewsCount = rs.AllReviewsCount.ptr()
		// With no reviews the share reads "0": unknown, not none positive.
		if it.ReviewsCount != nil && *it.ReviewsCount > 0 {
			it.PositiveShare = trimmed(rs.Percentage)
		}
		if cs := rs.CombinedNumericStats; cs != nil {
			it.RatingsCount = cs.Total.ptr()
			if it.RatingsCount != nil && *it.RatingsCount > 0 {
				it.Rating = cs.Average.ptr()
			}
		}
	}
	if cp := pr.CancellationPolicy; cp != nil {
		it.FreeCancellation = cp.HasFreeCancellation
	}
	if u := pr.UfiDetails; u != nil {
		it.City = trimmed(u.BCityName)
		if id := rawID(u.UFI); id != "" {
			it.DestinationID = &id
		}
		if u.URL != nil {
			if cc := strings.ToLower(strings.TrimSpace(u.URL.Country)); cc != "" {
				up := strings.ToUpper(cc)
				it.CountryCode = &up
				if it.Slug != nil {
					link := Origin + "/attractions/" + url.PathEscape(cc) + "/" + url.PathEscape(*it.Slug) + ".html"
					it.URL = &link
				}
			}
		}
	}
	if pr.Offers != nil {
		n := len(*pr.Offers)
		it.Offers = &n
	}
	if pr.Taxonomy != nil && pr.Taxonomy.Type != nil {
		it.Category = trimmed(pr.Taxonomy.Type.Label)
	}
	return it
}

func filterOptions(list []gqlFilterOption) []FilterOption {
	out := []FilterOption{}
	for _, o := range list {
		id := rawID(o.Tagname)
		if id == "" {
			continue
		}
		out = append(out, FilterOption{ID: id, Name: trimmed(o.Name), Count: o.ProductCount.ptr()})
	}
	return out
}

// splitList is a comma list's non-empty members.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// fieldOf names the parameter a destination came from.
func fieldOf(c *upstream.Call) string {
	if c.Param("destination_id") != "" {
		return "destination_id"
	}
	return "location"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
