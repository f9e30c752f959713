package registry

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// professionalNetworkHosts are the hosts of professional_network's pages
// (linkedin.com; www. and the country subdomains such as uk. are
// subdomains): the OnHosts list of search-people's search_url.
var professionalNetworkHosts = []string{"linkedin.com"}

// PeopleSearch is a people-search URL of professional_network read into
// what it asks for: its keywords, the one value selected in each filter it
// uses, its free-text fields and its page. Spec 4.6 accepts such a URL only
// with keywords and one selected value per filter, so that is all a
// PeopleSearch can hold; adapters decompose it into their source's
// parameters from here, so the rule and the sources read a URL the same way.
type PeopleSearch struct {
	Keywords string
	// Filters maps a filter (FilterLocation, ...) to its selected value:
	// an id for locations, companies, schools and industries, a language
	// code for the profile language.
	Filters map[string]string
	// Text maps a free-text field (TextFirstName, ...) to its text.
	Text map[string]string
	// Page is the URL's page number, 0 when it has none.
	Page int
}

// The filters a people-search URL may select, one value each (spec 4.6).
const (
	FilterLocation       = "location"
	FilterCurrentCompany = "current_company"
	FilterPastCompany    = "past_company"
	FilterSchool         = "school"
	FilterIndustry       = "industry"
	FilterLanguage       = "language"
)

// The free-text fields of the site's "all filters" panel: typed text, not
// selections, so they are kept as they are.
const (
	TextFirstName = "first_name"
	TextLastName  = "last_name"
	TextTitle     = "title"
	TextCompany   = "company"
	TextSchool    = "school"
)

// The reasons a search_url is refused (details.reason of the 422).
const (
	ReasonNotPeopleSearch = "not_a_people_search"
	ReasonPremiumSearch   = "premium_search"
	ReasonNetworkFilter   = "network_filter"
	ReasonPremiumFilter   = "premium_filter"
	ReasonUnsupported     = "unsupported_filter"
	ReasonInvalidValue    = "invalid_filter_value"
	ReasonMultipleValues  = "multiple_filter_values"
	ReasonMissingKeywords = "missing_keywords"
)

// reasonOrder ranks the reasons: when a URL has several problems, the
// caller hears of the most fundamental first (the wrong kind of URL before
// its filters, its filters before its missing keywords).
var reasonOrder = []string{
	ReasonNotPeopleSearch, ReasonPremiumSearch, ReasonNetworkFilter, ReasonPremiumFilter,
	ReasonUnsupported, ReasonInvalidValue, ReasonMultipleValues, ReasonMissingKeywords,
}

// selectFilter is one selection filter of the site's people search: the
// URL parameter, the filter it selects, its name in messages and the shape
// of one value (ids are numeric; a language is a short code).
type selectFilter struct {
	filter, label string
	value         *regexp.Regexp
	hint          string
}

var (
	numericID    = regexp.MustCompile(`^[0-9]{1,19}$`)
	languageCode = regexp.MustCompile(`^[A-Za-z]{2,3}$`)
)

// selectFilters are the selections spec 4.6 accepts, by URL parameter. The
// site writes each as a JSON array of strings, URL-encoded:
// geoUrn=%5B%22103644278%22%5D is geoUrn=["103644278"].
var selectFilters = map[string]selectFilter{
	"geoUrn":          {FilterLocation, "location", numericID, "a numeric location id"},
	"currentCompany":  {FilterCurrentCompany, "current company", numericID, "a numeric company id"},
	"pastCompany":     {FilterPastCompany, "past company", numericID, "a numeric company id"},
	"schoolFilter":    {FilterSchool, "school", numericID, "a numeric school id"},
	"industry":        {FilterIndustry, "industry", numericID, "a numeric industry id"},
	"profileLanguage": {FilterLanguage, "profile language", languageCode, "a language code such as en"},
}

// textFields are the free-text fields, by URL parameter.
var textFields = map[string]string{
	"firstName": TextFirstName, "lastName": TextLastName, "titleFreeText": TextTitle,
	"company": TextCompany, "schoolFreetext": TextSchool,
}

// networkFilters depend on the signed-in viewer's own network (1st, 2nd,
// 3rd+ connections; connections of a member), so no source can run them
// for another account; facetNetwork is the older spelling of network.
var networkFilters = map[string]string{
	"network": "connections (network)", "facetNetwork": "connections (network)",
	"connectionOf": "connections of",
}

// premiumFilters are the lead filters the site documents for its premium
// sales tool (Sales Navigator help, "lead filters": company headcount and
// type, function, seniority level, years of experience, years in current
// company and position, groups, changed jobs, posted recently, following
// your company, viewed your profile, TeamLink, past colleague, shared
// experiences, personas, account and lead lists), under the names they
// take in a search URL. The free people search has none of them.
var premiumFilters = map[string]bool{
	"companyHeadcount": true, "companySize": true, "companyType": true, "function": true,
	"seniorityLevel": true, "seniority": true, "yearsOfExperience": true, "yearsAtCurrentCompany": true,
	"yearsInCurrentCompany": true, "yearsInCurrentPosition": true, "groups": true, "changedJobs": true,
	"recentlyChangedJobs": true, "postedOnLinkedIn": true, "followingYourCompany": true, "followsYourCompany": true,
	"viewedYourProfile": true, "teamLink": true, "teamLinkIntroductions": true, "pastColleague": true,
	"sharedExperiences": true, "persona": true, "personas": true, "accountList": true, "leadList": true,
	"savedLeads": true,
}

// ignoredParams are what the site adds to a search URL for its own
// bookkeeping (where the search started, a session id, spell correction,
// tracking): they select nothing. page is read separately.
var ignoredParams = map[string]bool{
	"origin": true, "sid": true, "spellCorrectionEnabled": true, "searchId": true, "position": true,
	"heroEntityKey": true, "trk": true, "trackingId": true, "lipi": true, "midToken": true, "midSig": true,
	"refId": true,
}

// maxSearchPage is the highest page the site's people search serves (100
// pages of 10 results).
const maxSearchPage = 100

// peopleSearchURLRule is search_url's rule of meaning (spec 4.6), run by
// validation before any charge or source call: a people-search URL of the
// site's free search, with keywords, selecting at most one value in each of
// its location, company (current, past), school, industry and language
// filters. Several values of one filter, the network filters, the premium
// sales and recruiting tools and their filters, any other filter, and a
// search without keywords are refused, each with its own reason.
func peopleSearchURLRule(value string) (reason, message string) {
	_, reason, message = ReadPeopleSearchURL(value)
	return reason, message
}

// ReadPeopleSearchURL reads a people-search URL under the rule of spec 4.6:
// the search it asks for, or the reason and message to refuse it with.
func ReadPeopleSearchURL(raw string) (s PeopleSearch, reason, message string) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || !onProfessionalNetwork(u.Hostname()) {
		return s, ReasonNotPeopleSearch,
			"search_url must be the address of a people search on the professional network (…/search/results/people/?keywords=…)."
	}
	p := strings.ToLower(strings.TrimRight(u.EscapedPath(), "/"))
	switch {
	case p == "/search/results/people":
	case strings.HasPrefix(p+"/", "/sales/") || strings.HasPrefix(p+"/", "/talent/"):
		return s, ReasonPremiumSearch,
			"search_url is a search of the network's premium sales or recruiting tool, which needs a paid seat; " +
				"send a search of its free people search (…/search/results/people/?keywords=…)."
	default:
		return s, ReasonNotPeopleSearch,
			"search_url is not a people search; send the address of a people search (…/search/results/people/?keywords=…)."
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return s, ReasonInvalidValue, "search_url's query string is not valid URL encoding."
	}
	s = PeopleSearch{Filters: map[string]string{}, Text: map[string]string{}}
	problems := map[string]string{}
	note := func(reason, message string) {
		if _, seen := problems[reason]; !seen {
			problems[reason] = message
		}
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names) // the first problem of each kind is the same on every call
	for _, name := range names {
		values := q[name]
		switch f, isFilter := selectFilters[name]; {
		case name == "keywords":
			s.Keywords = strings.TrimSpace(strings.Join(values, " "))
		case name == "page":
			n, err := strconv.Atoi(strings.TrimSpace(values[len(values)-1]))
			if err != nil || n < 1 || n > maxSearchPage {
				note(ReasonInvalidValue, fmt.Sprintf("search_url's page must be a whole number from 1 to %d.", maxSearchPage))
				continue
			}
			s.Page = n
		case isFilter:
			selected, ok := selections(values)
			if !ok {
				note(ReasonInvalidValue, fmt.Sprintf("search_url's %s filter (%s) is not a list of values as the site writes it, such as [\"…\"].", f.label, name))
				continue
			}
			for _, v := range selected {
				if !f.value.MatchString(v) {
					note(ReasonInvalidValue, fmt.Sprintf("search_url's %s filter (%s) holds %q; each value must be %s.", f.label, name, clip(v, 40), f.hint))
				}
			}
			switch len(selected) {
			case 0: // a filter opened and left empty selects nothing
			case 1:
				s.Filters[f.filter] = selected[0]
			default:
				note(ReasonMultipleValues, fmt.Sprintf("search_url selects %d values in its %s filter (%s); select one %s, "+
					"or run one search per value.", len(selected), f.label, name, f.label))
			}
		case textFields[name] != "":
			if t := strings.TrimSpace(strings.Join(values, " ")); t != "" {
				s.Text[textFields[name]] = t
			}
		case networkFilters[name] != "":
			if selected, ok := selections(values); !ok || len(selected) > 0 {
				note(ReasonNetworkFilter, fmt.Sprintf("search_url uses the %s filter (%s), which depends on the signed-in viewer's own "+
					"network; remove it.", networkFilters[name], name))
			}
		case premiumFilters[name]:
			note(ReasonPremiumFilter, fmt.Sprintf("search_url uses %s, a filter of the network's premium sales tool that its free "+
				"people search does not have; remove it.", name))
		case ignoredParams[name] || strings.HasPrefix(name, "utm_"):
		default:
			note(ReasonUnsupported, fmt.Sprintf("search_url uses %s, which is not one of the filters this endpoint accepts (keywords; "+
				"one location, current company, past company, school, industry and profile language; first name, last name, "+
				"title, company and school text); remove it.", clip(name, 40)))
		}
	}
	if s.Keywords == "" {
		note(ReasonMissingKeywords, "search_url has no keywords; a search by filters alone is not accepted: add keywords (…&keywords=…), "+
			"or send query instead.")
	}
	for _, r := range reasonOrder {
		if m, ok := problems[r]; ok {
			return PeopleSearch{}, r, m
		}
	}
	return s, "", ""
}

// onProfessionalNetwork reports whether host is linkedin.com or one of its
// subdomains (the check OnHosts makes before the rule runs, repeated here
// so the rule stands on its own).
func onProfessionalNetwork(host string) bool { return HostIn(host, professionalNetworkHosts) }

// selections reads a filter's values as the site writes them: a JSON array
// of strings (numbers are read as their digits), or, in older and
// hand-written URLs, one value or a comma-separated list. Repeated values
// select once. ok is false for text that is neither.
func selections(values []string) (out []string, ok bool) {
	seen := map[string]bool{}
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, raw := range values {
		raw = strings.TrimSpace(raw)
		if !strings.HasPrefix(raw, "[") {
			for _, v := range strings.Split(raw, ",") {
				add(v)
			}
			continue
		}
		var list []json.RawMessage
		if json.Unmarshal([]byte(raw), &list) != nil {
			return nil, false
		}
		for _, item := range list {
			var str string
			var num json.Number
			switch {
			case json.Unmarshal(item, &str) == nil:
				add(str)
			case json.Unmarshal(item, &num) == nil:
				add(num.String())
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// clip shortens text quoted back to the caller.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
