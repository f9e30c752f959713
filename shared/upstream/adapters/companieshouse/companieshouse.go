// Package companieshouse serves company_registry/search over the Companies
// House Public Data API's company search:
//
//	GET /search/companies?q=<text>&items_per_page=<n>&start_index=<offset>
//
// authenticated with an API key sent as the HTTP Basic user name and an
// empty password. Paging is by offset: the cursor this endpoint returns is
// the next start_index as a decimal string, opaque to the caller, who
// passes it back unchanged.
package companieshouse

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// Name is the provider's internal name (base URL variable, fixture folder).
const Name = "companies_house"

// APIKeySecret holds the REST API key.
const APIKeySecret = "MERIDIAN_COMPANIES_HOUSE_API_KEY"

// companyPageBase is where a company's public register page lives.
const companyPageBase = "https://find-and-update.company-information.service.gov.uk/company/"

// rateWindow is the API's documented rate-limit window (600 requests per
// five minutes): no rate-limit wait is longer.
const rateWindow = 5 * time.Minute

// Provider is the Companies House Public Data API.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     Name,
		Protocol: "Companies House Public Data API (REST, JSON; API key as HTTP Basic user name)",
		Docs:     "https://developer-specs.company-information.service.gov.uk/companies-house-public-data-api/reference/search/search-companies",
		BaseURL:  "https://api.company-information.service.gov.uk",
		Secrets: []upstream.Secret{{
			Name:     APIKeySecret,
			Required: true,
			Doc: "A REST API key for the Companies House Public Data API: register at " +
				"https://developer.company-information.service.gov.uk/, create an application and add a " +
				"REST key to it (live environment). It is sent as the HTTP Basic user name with an empty password.",
		}},
		Endpoints: map[string]upstream.Adapter{
			"company_registry/search": search,
		},
	}
}

// searchResponse is the search answer ("kind": "search#companies").
type searchResponse struct {
	Items        []searchItem `json:"items"`
	ItemsPerPage *json.Number `json:"items_per_page"`
	StartIndex   *json.Number `json:"start_index"`
	TotalResults *json.Number `json:"total_results"`
}

type searchItem struct {
	CompanyNumber  *string `json:"company_number"`
	Title          *string `json:"title"`
	CompanyStatus  *string `json:"company_status"`
	CompanyType    *string `json:"company_type"`
	DateOfCreation *string `json:"date_of_creation"`
	AddressSnippet *string `json:"address_snippet"`
}

// Search is the data of company_registry/search.
type Search struct {
	Items        []Company    `json:"items"`
	Count        int          `json:"count"`
	Cursor       *string      `json:"cursor"`
	HasMore      *bool        `json:"has_more"`
	TotalResults *json.Number `json:"total_results"`
	// Dropped counts the source's items left out (no company number): a
	// known count, so 0 is a real zero.
	Dropped int `json:"dropped"`
}

// Company is one register entry; every field is a string or null.
type Company struct {
	CompanyNumber  string  `json:"company_number"`
	Name           *string `json:"name"`
	Status         *string `json:"status"`
	Type           *string `json:"type"`
	IncorporatedOn *string `json:"incorporated_on"`
	Address        *string `json:"address"`
	URL            string  `json:"url"`
}

func search(ctx context.Context, c *upstream.Call) (any, error) {
	start := 0
	if cursor := c.Param("cursor"); cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || strconv.Itoa(n) != cursor {
			// Cursors are issued here as decimal offsets; anything else was changed.
			return nil, upstream.InvalidParameterFault("cursor", "invalid_cursor",
				"cursor is not one this endpoint issued; pass back the value a response gave, unchanged.")
		}
		start = n
	}
	limit, err := strconv.Atoi(c.Param("limit"))
	if err != nil || limit < 1 {
		limit = 20 // the registry's default; validation has run already
	}

	q := url.Values{}
	q.Set("q", c.Param("query"))
	q.Set("items_per_page", strconv.Itoa(limit))
	q.Set("start_index", strconv.Itoa(start))

	header := http.Header{}
	if key := c.Secret(APIKeySecret); key != "" {
		header.Set("authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(key+":")))
	}

	var body searchResponse
	resp, err := c.GetJSON(ctx, "/search/companies", q, header, &body)
	if err != nil {
		return nil, classify(resp, err, c.Now)
	}
	if body.Items == nil && body.TotalResults == nil {
		return nil, upstream.MalformedFault("search answer has neither items nor total_results")
	}
	return mapSearch(body, start, limit)
}

// mapSearch keeps items with a company number and works out the next
// offset from what the source returned (dropped items included).
func mapSearch(body searchResponse, requestedStart, limit int) (*Search, error) {
	out := &Search{Items: []Company{}, TotalResults: body.TotalResults}
	for _, it := range body.Items {
		if it.CompanyNumber == nil || strings.TrimSpace(*it.CompanyNumber) == "" {
			out.Dropped++
			continue
		}
		number := *it.CompanyNumber // exactly as sent: leading zeros and prefixes matter
		out.Items = append(out.Items, Company{
			CompanyNumber:  number,
			Name:           it.Title,
			Status:         it.CompanyStatus,
			Type:           it.CompanyType,
			IncorporatedOn: it.DateOfCreation,
			Address:        it.AddressSnippet,
			URL:            companyPageBase + url.PathEscape(number),
		})
	}
	out.Count = len(out.Items)

	start := requestedStart
	if body.StartIndex != nil {
		n, err := strconv.Atoi(body.StartIndex.String())
		if err != nil || n < 0 {
			return nil, upstream.MalformedFault("start_index is not a non-negative integer")
		}
		start = n
	}
	returned := len(body.Items)
	next := start + returned
	var total = -1
	if body.TotalResults != nil {
		n, err := strconv.Atoi(body.TotalResults.String())
		if err != nil || n < 0 {
			return nil, upstream.MalformedFault("total_results is not a non-negative integer")
		}
		total = n
	}
	pageSize := limit
	if body.ItemsPerPage != nil {
		if n, err := strconv.Atoi(body.ItemsPerPage.String()); err == nil && n > 0 && n < pageSize {
			pageSize = n // the source may serve smaller pages than asked
		}
	}

	switch {
	case total >= 0 && next >= total, returned == 0:
		out.HasMore = ptr(false)
	case returned < pageSize:
		// A short page ends the list; the total, if any, overstates it.
		out.HasMore = ptr(false)
	default:
		cursor := strconv.Itoa(next)
		out.Cursor = &cursor
		if total >= 0 {
			out.HasMore = ptr(true)
		} // total unknown and a full page: more may exist, has_more stays null
	}
	return out, nil
}

// classify reads the API's error answers. 401 ({"error": "Invalid
// Authorization", "type": "ch:service"}) stays Rejected with the error as
// reason; a 429 without Retry-After takes its wait from X-Ratelimit-Reset
// (epoch seconds), at most one rate-limit window.
func classify(resp *upstream.Response, err error, now time.Time) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil {
		return err
	}
	switch resp.Status {
	case http.StatusTooManyRequests:
		if f.RetryAfter == 0 {
			f.RetryAfter = resetWait(resp.Header.Get("x-ratelimit-reset"), now)
		}
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusBadRequest:
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(resp.Body, &e) == nil && e.Error != "" {
			f.Reason = upstream.Clip(e.Error, 200)
		}
	}
	return f
}

// resetWait turns an X-Ratelimit-Reset epoch into a wait, bounded by the
// rate-limit window (a reset further away than that is not believable).
func resetWait(reset string, now time.Time) time.Duration {
	wait := upstream.UntilUnix(reset, now)
	if wait == 0 {
		return 0
	}
	return min(max(wait, time.Second), rateWindow).Round(time.Second)
}

func ptr[T any](v T) *T { return &v }
