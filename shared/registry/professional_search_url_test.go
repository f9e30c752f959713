package registry

import (
	"maps"
	"net/url"
	"strings"
	"testing"
)

// people is a people-search URL with the given query string.
func people(query string) string {
	return "https://www.linkedin.com/search/results/people/?" + query
}

// list writes values as the site does: a JSON array of strings, URL-encoded.
func list(values ...string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = `"` + v + `"`
	}
	return url.QueryEscape("[" + strings.Join(quoted, ",") + "]")
}

func TestPeopleSearchURLAccepted(t *testing.T) {
	cases := []struct {
		name, url string
		want      PeopleSearch
	}{
		{"keywords as the site writes them", people("keywords=jane%20doe&origin=SWITCH_SEARCH_VERTICAL&sid=%40%2Co"),
			PeopleSearch{Keywords: "jane doe"}},
		{"one value in every accepted filter", people("keywords=engineer&geoUrn=" + list("103644278") + "&currentCompany=" + list("1441") +
			"&pastCompany=" + list("1035") + "&schoolFilter=" + list("1792") + "&industry=" + list("4") + "&profileLanguage=" + list("en")),
			PeopleSearch{Keywords: "engineer", Filters: map[string]string{
				FilterLocation: "103644278", FilterCurrentCompany: "1441", FilterPastCompany: "1035",
				FilterSchool: "1792", FilterIndustry: "4", FilterLanguage: "en"}}},
		{"a country subdomain, http and no trailing slash", "http://uk.linkedin.com/search/results/people?keywords=jane",
			PeopleSearch{Keywords: "jane"}},
		{"bare host", "https://linkedin.com/search/results/people/?keywords=jane&page=3", PeopleSearch{Keywords: "jane", Page: 3}},
		{"free-text fields and a page", people("keywords=jane&firstName=Jane&lastName=Doe&titleFreeText=CTO&company=Acme&schoolFreetext=MIT&page=2"),
			PeopleSearch{Keywords: "jane", Page: 2, Text: map[string]string{
				TextFirstName: "Jane", TextLastName: "Doe", TextTitle: "CTO", TextCompany: "Acme", TextSchool: "MIT"}}},
		{"a value repeated selects once", people("keywords=jane&geoUrn=" + list("103644278", "103644278")),
			PeopleSearch{Keywords: "jane", Filters: map[string]string{FilterLocation: "103644278"}}},
		{"a filter opened and left empty", people("keywords=jane&network=%5B%5D&geoUrn=%5B%5D"), PeopleSearch{Keywords: "jane"}},
		{"a bare value (older, hand-written URLs)", people("keywords=jane&geoUrn=103644278"),
			PeopleSearch{Keywords: "jane", Filters: map[string]string{FilterLocation: "103644278"}}},
		{"numbers in the array", people("keywords=jane&industry=" + url.QueryEscape("[4]")),
			PeopleSearch{Keywords: "jane", Filters: map[string]string{FilterIndustry: "4"}}},
		{"tracking parameters", people("keywords=jane&utm_source=share&trk=public_profile&spellCorrectionEnabled=true"),
			PeopleSearch{Keywords: "jane"}},
		{"search operators in keywords", people("keywords=" + url.QueryEscape(`"jane doe" AND (engineer OR developer)`)),
			PeopleSearch{Keywords: `"jane doe" AND (engineer OR developer)`}},
		{"a mixed-case path", "https://www.linkedin.com/Search/Results/People/?keywords=jane", PeopleSearch{Keywords: "jane"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, message := ReadPeopleSearchURL(tc.url)
			if reason != "" || message != "" {
				t.Fatalf("refused: %s: %s", reason, message)
			}
			if r, m := peopleSearchURLRule(tc.url); r != "" || m != "" {
				t.Fatalf("the rule refuses it: %s: %s", r, m)
			}
			if got.Keywords != tc.want.Keywords || got.Page != tc.want.Page ||
				!maps.Equal(got.Filters, orEmpty(tc.want.Filters)) || !maps.Equal(got.Text, orEmpty(tc.want.Text)) {
				t.Errorf("read %+v; want %+v", got, tc.want)
			}
		})
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func TestPeopleSearchURLRefused(t *testing.T) {
	cases := []struct {
		name, url, reason string
		mentions          []string
	}{
		// Not a people search of the free search.
		{"another host", "https://www.example.com/search/results/people/?keywords=jane", ReasonNotPeopleSearch, nil},
		{"a look-alike host", "https://www.linkedin.com.evil.example/search/results/people/?keywords=jane", ReasonNotPeopleSearch, nil},
		{"the link shortener", "https://lnkd.in/abc123", ReasonNotPeopleSearch, nil},
		{"not http", "ftp://www.linkedin.com/search/results/people/?keywords=jane", ReasonNotPeopleSearch, nil},
		{"not a URL", "jane doe", ReasonNotPeopleSearch, nil},
		{"a company search", "https://www.linkedin.com/search/results/companies/?keywords=acme", ReasonNotPeopleSearch, nil},
		{"an all-results search", "https://www.linkedin.com/search/results/all/?keywords=jane", ReasonNotPeopleSearch, nil},
		{"a profile", "https://www.linkedin.com/in/janedoe/", ReasonNotPeopleSearch, nil},
		{"a look-alike path", "https://www.linkedin.com/search/results/people-extra/?keywords=jane", ReasonNotPeopleSearch, nil},
		// The premium tools.
		{"the sales tool", "https://www.linkedin.com/sales/search/people?query=(keywords%3Ajane)", ReasonPremiumSearch, []string{"premium"}},
		{"the sales tool's saved search", "https://www.linkedin.com/sales/lists/people/123", ReasonPremiumSearch, nil},
		{"the recruiting tool", "https://www.linkedin.com/talent/search?searchContextId=1&keywords=jane", ReasonPremiumSearch, nil},
		// Several values of one filter.
		{"two locations", people("keywords=jane&geoUrn=" + list("103644278", "101165590")), ReasonMultipleValues,
			[]string{"2 values", "location", "geoUrn"}},
		{"two locations, comma form", people("keywords=jane&geoUrn=103644278,101165590"), ReasonMultipleValues, []string{"location"}},
		{"two locations, repeated parameter", people("keywords=jane&geoUrn=103644278&geoUrn=101165590"), ReasonMultipleValues, nil},
		{"two current companies", people("keywords=jane&currentCompany=" + list("1441", "1035")), ReasonMultipleValues, []string{"current company"}},
		{"two past companies", people("keywords=jane&pastCompany=" + list("1441", "1035")), ReasonMultipleValues, []string{"past company"}},
		{"three schools", people("keywords=jane&schoolFilter=" + list("1792", "1503", "3173")), ReasonMultipleValues, []string{"3 values", "school"}},
		{"two industries", people("keywords=jane&industry=" + list("4", "96")), ReasonMultipleValues, []string{"industry"}},
		{"two languages", people("keywords=jane&profileLanguage=" + list("en", "de")), ReasonMultipleValues, []string{"profile language"}},
		// Network filters.
		{"1st connections", people("keywords=jane&network=" + list("F")), ReasonNetworkFilter, []string{"network"}},
		{"2nd and 3rd+ connections", people("keywords=jane&network=" + list("S", "O")), ReasonNetworkFilter, nil},
		{"the older spelling", people("keywords=jane&facetNetwork=" + list("F")), ReasonNetworkFilter, []string{"facetNetwork"}},
		{"connections of", people("keywords=jane&connectionOf=" + list("ACoAAAAB1234")), ReasonNetworkFilter, []string{"connections of"}},
		// Premium filters.
		{"seniority", people("keywords=jane&seniorityLevel=" + list("120")), ReasonPremiumFilter, []string{"seniorityLevel"}},
		{"function", people("keywords=jane&function=" + list("8")), ReasonPremiumFilter, nil},
		{"company headcount", people("keywords=jane&companyHeadcount=" + list("C")), ReasonPremiumFilter, nil},
		{"years of experience", people("keywords=jane&yearsOfExperience=" + list("3")), ReasonPremiumFilter, nil},
		// Other filters.
		{"followers of", people("keywords=jane&followerOf=" + list("ACoAAAAB1234")), ReasonUnsupported, []string{"followerOf"}},
		{"service categories", people("keywords=jane&serviceCategory=" + list("220")), ReasonUnsupported, []string{"serviceCategory"}},
		{"an older location facet", people("keywords=jane&facetGeoRegion=" + list("us:0")), ReasonUnsupported, nil},
		// Values the filters cannot hold.
		{"a location name", people("keywords=jane&geoUrn=" + list("Berlin")), ReasonInvalidValue, []string{"Berlin", "numeric location id"}},
		{"broken JSON", people("keywords=jane&geoUrn=" + url.QueryEscape(`["1`)), ReasonInvalidValue, nil},
		{"an object in the array", people("keywords=jane&industry=" + url.QueryEscape(`[{"id":4}]`)), ReasonInvalidValue, nil},
		{"a language name", people("keywords=jane&profileLanguage=" + list("english")), ReasonInvalidValue, []string{"language code"}},
		{"page zero", people("keywords=jane&page=0"), ReasonInvalidValue, []string{"page"}},
		{"page beyond the search", people("keywords=jane&page=101"), ReasonInvalidValue, nil},
		{"page not a number", people("keywords=jane&page=two"), ReasonInvalidValue, nil},
		// No keywords.
		{"no keywords", people("origin=GLOBAL_SEARCH_HEADER"), ReasonMissingKeywords, []string{"keywords"}},
		{"empty keywords", people("keywords="), ReasonMissingKeywords, nil},
		{"blank keywords", people("keywords=%20%20"), ReasonMissingKeywords, nil},
		{"filters only", people("geoUrn=" + list("103644278") + "&industry=" + list("4")), ReasonMissingKeywords, nil},
		{"free text only", people("firstName=Jane&lastName=Doe"), ReasonMissingKeywords, nil},
		// Several problems: the most fundamental is reported.
		{"network, two locations and no keywords", people("network=" + list("F") + "&geoUrn=" + list("1", "2")), ReasonNetworkFilter, nil},
		{"two locations and no keywords", people("geoUrn=" + list("1", "2")), ReasonMultipleValues, nil},
		{"the sales tool without keywords", "https://www.linkedin.com/sales/search/people", ReasonPremiumSearch, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, message := ReadPeopleSearchURL(tc.url)
			if reason != tc.reason {
				t.Fatalf("reason %q (%s); want %q", reason, message, tc.reason)
			}
			if got.Keywords != "" || len(got.Filters) > 0 {
				t.Errorf("a refused URL still reads as a search: %+v", got)
			}
			if !strings.Contains(message, "search_url") || !strings.HasSuffix(message, ".") {
				t.Errorf("message %q does not name search_url as a sentence", message)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(message, m) {
					t.Errorf("message %q does not mention %q", message, m)
				}
			}
			if r, m := peopleSearchURLRule(tc.url); r != reason || m != message {
				t.Errorf("the rule says %q %q; ReadPeopleSearchURL %q %q", r, m, reason, message)
			}
		})
	}
}

// Every reason has its place in the order the caller hears them in.
func TestPeopleSearchURLReasonsAreRanked(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range reasonOrder {
		if seen[r] {
			t.Errorf("%s ranked twice", r)
		}
		seen[r] = true
	}
	for _, r := range []string{ReasonNotPeopleSearch, ReasonPremiumSearch, ReasonNetworkFilter, ReasonPremiumFilter,
		ReasonUnsupported, ReasonInvalidValue, ReasonMultipleValues, ReasonMissingKeywords} {
		if !seen[r] {
			t.Errorf("%s is not ranked", r)
		}
	}
}

// A long value is quoted back clipped, never in full.
func TestPeopleSearchURLClipsWhatItQuotes(t *testing.T) {
	long := strings.Repeat("x", 500)
	_, reason, message := ReadPeopleSearchURL(people("keywords=jane&geoUrn=" + list(long)))
	if reason != ReasonInvalidValue || strings.Contains(message, long) || len(message) > 300 {
		t.Fatalf("%s: %q", reason, message)
	}
	_, reason, message = ReadPeopleSearchURL(people("keywords=jane&" + long + "=1"))
	if reason != ReasonUnsupported || strings.Contains(message, long) {
		t.Fatalf("%s: %q", reason, message)
	}
}

// The rule runs as search_url's Check, on the URL validation has put on
// the platform's hosts.
func TestPeopleSearchURLAsParamCheck(t *testing.T) {
	p := P("search_url", URL, "People-search URL.").OnHosts(professionalNetworkHosts...).Checked(peopleSearchURLRule)
	for host, want := range map[string]bool{
		"linkedin.com": true, "www.linkedin.com": true, "uk.linkedin.com": true, "WWW.LinkedIn.com.": true,
		"notlinkedin.com": false, "linkedin.com.evil.example": false, "lnkd.in": false, ".linkedin.com": false,
	} {
		if got := p.AllowsHost(host); got != want {
			t.Errorf("AllowsHost(%q) = %v; want %v", host, got, want)
		}
	}
	if r, m := p.Check(people("keywords=jane&geoUrn=" + list("103644278"))); r != "" {
		t.Errorf("refused: %s %s", r, m)
	}
	if r, _ := p.Check(people("keywords=jane&geoUrn=" + list("1", "2"))); r != ReasonMultipleValues {
		t.Errorf("two locations: %q", r)
	}
}
