// Package github serves the code_host endpoints over the GitHub REST API
// (API version 2022-11-28): GET /users/{username} for code_host/profile,
// GET /users/{username}/repos for code_host/profile/repos and
// GET /repos/{owner}/{repo}/issues for code_host/repo/issues.
//
// Lists page by page number. The cursor this package returns is the next
// page number, read from the page parameter of the Link header's
// rel="next" URL and handed out as an opaque string; it is null on the last
// page (no rel="next").
package github

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// TokenSecret is the optional access token variable.
const TokenSecret = "MERIDIAN_GITHUB_TOKEN"

const (
	platform   = "code_host"
	apiVersion = "2022-11-28"
)

// Provider is the GitHub REST API provider. It works without a token, at
// the public limit of 60 requests an hour per IP address.
func Provider() *upstream.Provider {
	return &upstream.Provider{
		Name:     "github_rest",
		Protocol: "GitHub REST API (JSON, X-GitHub-Api-Version " + apiVersion + "), page-number pagination with Link headers",
		Docs:     "https://docs.github.com/en/rest",
		BaseURL:  "https://api.github.com",
		Secrets: []upstream.Secret{{
			Name:     TokenSecret,
			Required: false,
			Doc: "Optional access token, sent as Authorization: Bearer. Without it the public limit of 60 requests " +
				"an hour per IP address applies; with it, 5,000 an hour. Create a fine-grained personal access token " +
				"at github.com > Settings > Developer settings > Personal access tokens > Fine-grained tokens, with " +
				"\"Public repositories (read-only)\" access and no other permission.",
		}},
		Endpoints: map[string]upstream.Adapter{
			"code_host/profile":       profile,
			"code_host/profile/repos": repos,
			"code_host/repo/issues":   issues,
		},
	}
}

// headers are the documented request headers, and the token when one is
// configured.
func headers(c *upstream.Call) http.Header {
	h := http.Header{}
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", apiVersion)
	if token := c.Secret(TokenSecret); token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// getJSON fetches path and decodes a 2xx body into out; failures are
// classified with the upstream's rate-limit headers and error bodies.
func getJSON(ctx context.Context, c *upstream.Call, path string, query url.Values, out any) (*upstream.Response, error) {
	resp, err := c.GetJSON(ctx, path, query, headers(c), out)
	if err != nil {
		return resp, classify(resp, err, c.Now)
	}
	return resp, nil
}

// apiError is the error body of the REST API.
type apiError struct {
	Message string `json:"message"`
}

// secondaryWait is how long to wait after a rate-limit refusal that names
// no time: the documentation says at least one minute.
const secondaryWait = time.Minute

// classify applies the documented error semantics. The rate limits answer
// 403 or 429: with retry-after (wait that long), with x-ratelimit-remaining
// 0 (wait until x-ratelimit-reset, epoch seconds), or with a message about
// a secondary rate limit (wait a minute). Any other 403 is a refusal.
func classify(resp *upstream.Response, err error, now time.Time) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil || f.Status == 0 {
		return err
	}
	var body apiError
	_ = upstream.DecodeJSON(resp.Body, &body) // an unreadable error body keeps the status classification
	message := body.Message
	if len(message) > 200 {
		message = message[:200]
	}
	switch f.Status {
	case http.StatusForbidden, http.StatusTooManyRequests:
		h := resp.Header
		retryAfter := secondsHeader(h.Get("retry-after"))
		switch {
		case retryAfter > 0:
			f.Kind, f.RetryAfter = upstream.RateLimited, time.Duration(retryAfter)*time.Second
			f.Reason = "rate limited, retry-after given"
		case strings.TrimSpace(h.Get("x-ratelimit-remaining")) == "0":
			f.Kind, f.RetryAfter = upstream.RateLimited, max(upstream.UntilUnix(h.Get("x-ratelimit-reset"), now), time.Second)
			f.Reason = "primary rate limit exhausted (resource " + h.Get("x-ratelimit-resource") + ")"
		case strings.Contains(strings.ToLower(message), "rate limit") || f.Status == http.StatusTooManyRequests:
			f.Kind = upstream.RateLimited
			if f.RetryAfter <= 0 { // no HTTP-date retry-after either
				f.RetryAfter = secondaryWait
			}
			f.Reason = "rate limited without a wait in seconds; waiting the documented minute"
		default:
			f.Kind = upstream.Rejected
			f.Reason = "forbidden: " + message
		}
	case http.StatusUnauthorized:
		f.Reason = "authentication refused (is the token valid?): " + message
	default:
		if message != "" {
			f.Reason = http.StatusText(f.Status) + ": " + message
		}
	}
	return f
}

// secondsHeader reads a header of whole seconds; 0 when absent or not a
// positive number.
func secondsHeader(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// pageParam turns the cursor back into the page number to send: empty for
// the first page. A cursor this package did not hand out is refused.
func pageParam(cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	n, err := strconv.Atoi(cursor)
	if err != nil || n < 1 || strconv.Itoa(n) != cursor {
		return "", upstream.InvalidParameterFault("cursor", "invalid_cursor",
			"cursor "+strconv.Quote(cursor)+" is not a page number from a previous response; pass it back unchanged.")
	}
	return cursor, nil
}

// nextCursor reads the page number of the Link header's rel="next" URL:
// nil when there is none (the last page).
func nextCursor(h http.Header) (*string, error) {
	for _, value := range h.Values("Link") {
		for rest := value; ; {
			open := strings.IndexByte(rest, '<')
			if open < 0 {
				break
			}
			end := strings.IndexByte(rest[open:], '>')
			if end < 0 {
				return nil, upstream.MalformedFault("unreadable Link header")
			}
			target := rest[open+1 : open+end]
			rest = rest[open+end+1:]
			params := rest
			if next := strings.IndexByte(rest, '<'); next >= 0 {
				params = rest[:next]
			}
			if !relIsNext(params) {
				continue
			}
			u, err := url.Parse(target)
			if err != nil {
				return nil, upstream.MalformedFault("unreadable rel=next URL in the Link header")
			}
			page := u.Query().Get("page")
			if n, err := strconv.Atoi(page); err != nil || n < 1 {
				return nil, upstream.MalformedFault("the Link header's rel=next URL has no page number")
			}
			return &page, nil
		}
	}
	return nil, nil
}

// relIsNext reports whether a link's parameters (`; rel="next"`) include
// the relation next.
func relIsNext(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
			continue
		}
		v = strings.Trim(strings.TrimRight(strings.TrimSpace(v), ", "), `"`)
		for _, rel := range strings.Fields(v) { // rel may list several relations
			if strings.EqualFold(rel, "next") {
				return true
			}
		}
	}
	return false
}

// pageQuery is per_page and page for a list request.
func pageQuery(c *upstream.Call) (url.Values, error) {
	q := url.Values{}
	if n := c.Param("limit"); n != "" {
		q.Set("per_page", n)
	}
	page, err := pageParam(c.Param("cursor"))
	if err != nil {
		return nil, err
	}
	if page != "" {
		q.Set("page", page)
	}
	return q, nil
}

// text is a string the source may send as null or "": both are unknown.
func text(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}

// ---- code_host/profile ----

type user struct {
	Login       *string     `json:"login"`
	ID          json.Number `json:"id"`
	HTMLURL     *string     `json:"html_url"`
	AvatarURL   *string     `json:"avatar_url"`
	Type        *string     `json:"type"`
	Name        *string     `json:"name"`
	Company     *string     `json:"company"`
	Blog        *string     `json:"blog"`
	Location    *string     `json:"location"`
	Bio         *string     `json:"bio"`
	PublicRepos *int64      `json:"public_repos"`
	Followers   *int64      `json:"followers"`
	Following   *int64      `json:"following"`
	CreatedAt   *string     `json:"created_at"`
}

// Profile is the data of code_host/profile.
type Profile struct {
	ID         *string  `json:"id"`
	Handle     *string  `json:"handle"`
	Name       *string  `json:"name"`
	URL        *string  `json:"url"`
	Type       *string  `json:"type"`
	Bio        *string  `json:"bio"`
	AvatarURL  *string  `json:"avatar_url"`
	Company    *string  `json:"company"`
	Location   *string  `json:"location"`
	WebsiteURL *string  `json:"website_url"`
	Followers  *int64   `json:"followers"`
	Following  *int64   `json:"following"`
	ReposCount *int64   `json:"repos_count"`
	CreatedAt  *string  `json:"created_at"`
	Warnings   []string `json:"_warnings,omitempty"`
}

func profile(ctx context.Context, c *upstream.Call) (any, error) {
	var u user
	if _, err := getJSON(ctx, c, "/users/"+url.PathEscape(c.Param("handle")), nil, &u); err != nil {
		return nil, err
	}
	if u.Login == nil && u.ID == "" {
		return nil, upstream.MalformedFault("the user record has neither login nor id")
	}
	p := Profile{
		ID: upstream.NumberID(u.ID), Handle: text(u.Login), Name: text(u.Name), URL: text(u.HTMLURL), Type: accountType(u.Type),
		Bio: text(u.Bio), AvatarURL: text(u.AvatarURL), Company: text(u.Company), Location: text(u.Location),
		WebsiteURL: text(u.Blog), Followers: u.Followers, Following: u.Following, ReposCount: u.PublicRepos,
		CreatedAt: text(u.CreatedAt),
	}
	if u.Followers == nil || u.Following == nil || u.PublicRepos == nil {
		p.Warnings = append(p.Warnings, "The source did not report every counter; followers, following or repos_count are null (unknown), not zero.")
	}
	return p, nil
}

// accountType is user or organization (the source's User, Organization);
// other kinds (Bot) are lower-cased.
func accountType(t *string) *string {
	if t == nil || *t == "" {
		return nil
	}
	v := strings.ToLower(*t)
	return &v
}

// ---- code_host/profile/repos ----

type repository struct {
	ID              json.Number `json:"id"`
	Name            *string     `json:"name"`
	FullName        *string     `json:"full_name"`
	HTMLURL         *string     `json:"html_url"`
	Description     *string     `json:"description"`
	Language        *string     `json:"language"`
	StargazersCount *int64      `json:"stargazers_count"`
	ForksCount      *int64      `json:"forks_count"`
	OpenIssuesCount *int64      `json:"open_issues_count"`
	Fork            *bool       `json:"fork"`
	Archived        *bool       `json:"archived"`
	Topics          []string    `json:"topics"`
	CreatedAt       *string     `json:"created_at"`
	UpdatedAt       *string     `json:"updated_at"`
	PushedAt        *string     `json:"pushed_at"`
}

// Repos is the data of code_host/profile/repos.
type Repos struct {
	Items    []Repo   `json:"items"`
	Count    int      `json:"count"`
	Cursor   *string  `json:"cursor"`
	HasMore  bool     `json:"has_more"`
	Warnings []string `json:"_warnings,omitempty"`
}

// Repo is one repository.
type Repo struct {
	ID          *string  `json:"id"`
	Platform    string   `json:"platform"`
	Type        string   `json:"type"`
	Name        *string  `json:"name"`
	FullName    *string  `json:"full_name"`
	URL         *string  `json:"url"`
	Description *string  `json:"description"`
	Language    *string  `json:"language"`
	Stars       *int64   `json:"stars"`
	Forks       *int64   `json:"forks"`
	OpenIssues  *int64   `json:"open_issues"`
	IsFork      *bool    `json:"is_fork"`
	IsArchived  *bool    `json:"is_archived"`
	Topics      []string `json:"topics"`
	CreatedAt   *string  `json:"created_at"`
	UpdatedAt   *string  `json:"updated_at"`
	PushedAt    *string  `json:"pushed_at"`
}

func repos(ctx context.Context, c *upstream.Call) (any, error) {
	q, err := pageQuery(c)
	if err != nil {
		return nil, err
	}
	var list []repository
	resp, err := getJSON(ctx, c, "/users/"+url.PathEscape(c.Param("handle"))+"/repos", q, &list)
	if err != nil {
		return nil, err
	}
	if list == nil { // null: no list at all, not an empty one
		return nil, upstream.MalformedFault("the repository list is null")
	}
	out := Repos{Items: make([]Repo, 0, len(list))}
	missingCounters := false
	for _, r := range list {
		missingCounters = missingCounters || r.StargazersCount == nil || r.ForksCount == nil || r.OpenIssuesCount == nil
		out.Items = append(out.Items, Repo{
			ID: upstream.NumberID(r.ID), Platform: platform, Type: "repository", Name: text(r.Name), FullName: text(r.FullName),
			URL: text(r.HTMLURL), Description: text(r.Description), Language: text(r.Language),
			Stars: r.StargazersCount, Forks: r.ForksCount, OpenIssues: r.OpenIssuesCount,
			IsFork: r.Fork, IsArchived: r.Archived, Topics: r.Topics,
			CreatedAt: text(r.CreatedAt), UpdatedAt: text(r.UpdatedAt), PushedAt: text(r.PushedAt),
		})
	}
	out.Count = len(out.Items)
	if out.Cursor, err = nextCursor(resp.Header); err != nil {
		return nil, err
	}
	out.HasMore = out.Cursor != nil
	if out.Count > 0 {
		out.Warnings = append(out.Warnings, "open_issues is the source's count of open issues and open pull requests together.")
	}
	if missingCounters {
		out.Warnings = append(out.Warnings, "The source did not report every counter; missing stars, forks or open_issues are null (unknown), not zero.")
	}
	return out, nil
}

// ---- code_host/repo/issues ----

type issue struct {
	ID          json.Number     `json:"id"`
	Number      *int64          `json:"number"`
	Title       *string         `json:"title"`
	Body        *string         `json:"body"`
	HTMLURL     *string         `json:"html_url"`
	State       *string         `json:"state"`
	Labels      []label         `json:"labels"`
	Comments    *int64          `json:"comments"`
	PullRequest json.RawMessage `json:"pull_request"`
	User        *struct {
		Login   *string     `json:"login"`
		ID      json.Number `json:"id"`
		HTMLURL *string     `json:"html_url"`
	} `json:"user"`
	CreatedAt *string `json:"created_at"`
	UpdatedAt *string `json:"updated_at"`
	ClosedAt  *string `json:"closed_at"`
}

// label is a label object ({"name": ...}); the schema also allows a bare
// string.
type label struct{ Name string }

func (l *label) UnmarshalJSON(raw []byte) error {
	if len(raw) > 0 && raw[0] == '"' {
		return json.Unmarshal(raw, &l.Name)
	}
	var obj struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	l.Name = obj.Name
	return nil
}

// Issues is the data of code_host/repo/issues.
type Issues struct {
	Repo     string   `json:"repo"`
	Items    []Issue  `json:"items"`
	Count    int      `json:"count"`
	Cursor   *string  `json:"cursor"`
	HasMore  bool     `json:"has_more"`
	Warnings []string `json:"_warnings,omitempty"`
}

// Issue is one issue or pull request.
type Issue struct {
	ID            *string  `json:"id"`
	Number        *int64   `json:"number"`
	Platform      string   `json:"platform"`
	Type          string   `json:"type"`
	Title         *string  `json:"title"`
	URL           *string  `json:"url"`
	Text          *string  `json:"text"`
	State         *string  `json:"state"`
	Labels        []string `json:"labels"`
	Comments      *int64   `json:"comments"`
	IsPullRequest bool     `json:"is_pull_request"`
	Author        *Author  `json:"author"`
	CreatedAt     *string  `json:"created_at"`
	UpdatedAt     *string  `json:"updated_at"`
	ClosedAt      *string  `json:"closed_at"`
}

// Author is who opened an issue.
type Author struct {
	ID     *string `json:"id"`
	Handle *string `json:"handle"`
	URL    *string `json:"url"`
}

// issuesSorts are the sort values the upstream documents.
var issuesSorts = map[string]bool{"created": true, "updated": true, "comments": true}

func issues(ctx context.Context, c *upstream.Call) (any, error) {
	repo := c.Param("repo")
	owner, name, _ := strings.Cut(repo, "/")
	if name == "." || name == ".." {
		// Not a repository name the source allows; sending it would change the path.
		return nil, upstream.NotFoundFault("no repository can be named " + strconv.Quote(name))
	}
	q, err := pageQuery(c)
	if err != nil {
		return nil, err
	}
	if s := c.Param("state"); s != "" {
		q.Set("state", s)
	}
	if l := c.Param("labels"); l != "" {
		q.Set("labels", l)
	}
	if s := c.Param("sort"); issuesSorts[s] {
		q.Set("sort", s)
	}
	var list []issue
	resp, err := getJSON(ctx, c, "/repos/"+url.PathEscape(owner)+"/"+url.PathEscape(name)+"/issues", q, &list)
	if err != nil {
		return nil, err
	}
	if list == nil { // null: no list at all, not an empty one
		return nil, upstream.MalformedFault("the issue list is null")
	}
	out := Issues{Repo: repo, Items: make([]Issue, 0, len(list))}
	pulls := 0
	for _, is := range list {
		item := Issue{
			ID: upstream.NumberID(is.ID), Number: is.Number, Platform: platform, Type: "issue", Title: text(is.Title),
			URL: text(is.HTMLURL), Text: text(is.Body), State: text(is.State),
			Comments: is.Comments, CreatedAt: text(is.CreatedAt), UpdatedAt: text(is.UpdatedAt), ClosedAt: text(is.ClosedAt),
		}
		// The issues API lists pull requests too, marked by a pull_request key.
		if len(is.PullRequest) > 0 && string(is.PullRequest) != "null" {
			item.Type, item.IsPullRequest = "pull_request", true
			pulls++
		}
		if is.Labels != nil { // absent labels are unknown (null); an empty list is none
			item.Labels = []string{}
		}
		for _, l := range is.Labels {
			if l.Name != "" {
				item.Labels = append(item.Labels, l.Name)
			}
		}
		if is.User != nil {
			item.Author = &Author{ID: upstream.NumberID(is.User.ID), Handle: text(is.User.Login), URL: text(is.User.HTMLURL)}
		}
		out.Items = append(out.Items, item)
	}
	out.Count = len(out.Items)
	if out.Cursor, err = nextCursor(resp.Header); err != nil {
		return nil, err
	}
	out.HasMore = out.Cursor != nil
	if pulls > 0 {
		out.Warnings = append(out.Warnings, "The source lists pull requests among issues; they are kept as rows with type "+
			"pull_request and is_pull_request true ("+strconv.Itoa(pulls)+" on this page) and count toward limit.")
	}
	return out, nil
}
