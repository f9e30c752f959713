package composite

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/pipeline"
)

// searchLegTimeout bounds each platform's search in a fan-out, so the
// whole answer (and a buffered stream) arrives inside API Gateway's 28 s;
// a platform that takes longer is reported as timed out.
const searchLegTimeout = 20 * time.Second

// searchSource is how one platform is searched in a fan-out: the registry
// operation, its parameters for a query and a per-platform limit, and how
// its data becomes the fan-out's items.
type searchSource struct {
	platform string
	key      string
	params   func(query string, limit int) map[string]string
	items    func(platform string, data json.RawMessage) []map[string]any
}

// SearchAll is search/all: the query on every searchable platform's own
// search operation, at most limit results from each.
func SearchAll() pipeline.Composite {
	return fanOut(searchAllSources)
}

// SearchCreators is search/creators: the creator platforms' people and
// channel searches; platforms without one contribute the distinct authors
// of their post search (found_by says which).
func SearchCreators() pipeline.Composite {
	return fanOut(searchCreatorSources)
}

var (
	queryOnly = func(q string, _ int) map[string]string { return map[string]string{"query": q} }
	withLimit = func(q string, n int) map[string]string {
		return map[string]string{"query": q, "limit": strconv.Itoa(n)}
	}
)

var searchAllSources = []searchSource{
	{"marketplace_a", "marketplace_a/search", queryOnly, platformItems},
	{"retailer_a", "retailer_a/search", withLimit, platformItems},
	{"company_registry", "company_registry/search", withLimit, platformItems},
	{"microblog_a", "microblog_a/search", withLimit, platformItems},
	{"microblog_b", "microblog_b/search-posts", queryOnly, platformItems},
	{"social_a", "social_a/events-search", queryOnly, platformItems},
	{"professional_network", "professional_network/search-people", queryOnly, platformItems},
	{"video_platform", "video_platform/search", func(q string, n int) map[string]string {
		return map[string]string{"query": q, "max_results": strconv.Itoa(n)}
	}, platformItems},
}

var searchCreatorSources = []searchSource{
	{"microblog_a", "microblog_a/search", func(q string, n int) map[string]string {
		// Authors repeat across posts: read more posts than creators wanted.
		return map[string]string{"query": q, "limit": strconv.Itoa(min(100, n*3))}
	}, postAuthors},
	{"microblog_b", "microblog_b/search-posts", queryOnly, postAuthors},
	{"social_a", "social_a/search-people", queryOnly, people("people_search")},
	{"professional_network", "professional_network/search-people", queryOnly, people("people_search")},
	{"video_platform", "video_platform/search", func(q string, n int) map[string]string {
		return map[string]string{"query": q, "type": "channel", "max_results": strconv.Itoa(n)}
	}, channels},
}

// searchLeg is how a fan-out's answer and its events show one platform.
type searchLeg struct {
	pipeline.LegSummary
	Count *int `json:"count"`
}

// searchEvent is the data of a stream's leg event.
type searchEvent struct {
	Platform  string             `json:"platform"`
	Endpoint  string             `json:"endpoint"`
	Status    int                `json:"status"`
	OK        bool               `json:"ok"`
	RequestID string             `json:"request_id,omitempty"`
	Cached    bool               `json:"cached"`
	Count     *int               `json:"count,omitempty"`
	Items     []map[string]any   `json:"items,omitempty"`
	Error     *pipeline.LegError `json:"error,omitempty"`
	Progress  progress           `json:"progress"`
}

type progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// searchData is the data of search/all and search/creators.
type searchData struct {
	Query     string           `json:"query"`
	Platforms []string         `json:"platforms"`
	Count     int              `json:"count"`
	Items     []map[string]any `json:"items"`
	Dropped   int              `json:"dropped"`
	Legs      []searchLeg      `json:"legs"`
	Warnings  []string         `json:"_warnings,omitempty"`
}

func fanOut(sources []searchSource) pipeline.Composite {
	keys := make([]string, 0, len(sources))
	for _, s := range sources {
		keys = append(keys, s.key)
	}
	return pipeline.Composite{Legs: keys, Serve: func(ctx context.Context, c *pipeline.Call, legs pipeline.LegRunner) (any, *envelope.Error) {
		return serveFanOut(ctx, c, legs, sources)
	}}
}

func serveFanOut(ctx context.Context, c *pipeline.Call, legs pipeline.LegRunner, sources []searchSource) (any, *envelope.Error) {
	v := c.Params.Values
	query := v["query"]
	limit, _ := strconv.Atoi(v["limit"])
	var chosen []string
	if v["platforms"] != "" {
		chosen = strings.Split(v["platforms"], ",")
	}
	out := searchData{Query: query, Platforms: []string{}, Items: []map[string]any{}, Legs: []searchLeg{}}
	var run []searchSource
	var unavailable []string
	for _, s := range sources {
		if len(chosen) > 0 && !slices.Contains(chosen, s.platform) {
			continue
		}
		if !legs.Available(s.key) {
			unavailable = append(unavailable, s.platform)
			continue
		}
		run = append(run, s)
		out.Platforms = append(out.Platforms, s.platform)
	}
	if len(unavailable) > 0 {
		out.Warnings = append(out.Warnings, "Not searched, no source configured in this deployment: "+strings.Join(unavailable, ", ")+".")
	}
	if len(run) == 0 {
		return nil, envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"None of the platforms asked for can be searched in this deployment.",
			map[string]any{"platforms": unavailable})
	}
	reqs := make([]pipeline.LegRequest, len(run))
	for i, s := range run {
		reqs[i] = pipeline.LegRequest{Key: s.key, Params: s.params(query, limit)}
	}
	perPlatform := make([][]map[string]any, len(run))
	dropped := make([]int, len(run))
	done := 0
	legCtx, cancel := context.WithTimeout(ctx, searchLegTimeout)
	defer cancel()
	results := legs.RunAll(legCtx, reqs, func(i int, r pipeline.LegResult) {
		done++
		ev := searchEvent{Platform: run[i].platform, Endpoint: r.Endpoint, Status: r.Status, OK: r.OK(),
			RequestID: r.RequestID, Cached: r.Cached, Progress: progress{done, len(run)}}
		if r.OK() {
			items := run[i].items(run[i].platform, r.Data)
			if len(items) > limit {
				dropped[i] = len(items) - limit
				items = items[:limit]
			}
			perPlatform[i] = items
			n := len(items)
			ev.Count, ev.Items = &n, items
		} else {
			ev.Error = r.Error()
		}
		legs.Emit(pipeline.EventLeg, ev, r.OK())
	})
	var failed []string
	var failures []*pipeline.LegError
	for i, r := range results {
		leg := searchLeg{LegSummary: r.Summary()}
		leg.Platform = run[i].platform
		if r.OK() {
			n := len(perPlatform[i])
			leg.Count = &n
			out.Items = append(out.Items, perPlatform[i]...)
			out.Dropped += dropped[i]
		} else {
			e := r.Error()
			failures = append(failures, e)
			failed = append(failed, run[i].platform+" ("+e.Type+")")
		}
		out.Legs = append(out.Legs, leg)
	}
	if len(failures) == len(run) {
		return nil, allFailed(failures, failed)
	}
	if len(failed) > 0 {
		out.Warnings = append(out.Warnings, "These platforms failed or timed out, and their results are missing: "+strings.Join(failed, ", ")+".")
	}
	out.Count = len(out.Items)
	return out, nil
}

// allFailed is the call's error when no leg succeeded: the legs' own
// error when they agree (every leg refused the query as invalid, say),
// else UPSTREAM_ERROR naming each platform's failure.
func allFailed(failures []*pipeline.LegError, named []string) *envelope.Error {
	first := failures[0]
	same := true
	for _, f := range failures[1:] {
		same = same && f.Type == first.Type && f.Status == first.Status
	}
	details := map[string]any{"legs": named}
	if same {
		for k, v := range first.Details {
			if _, taken := details[k]; !taken {
				details[k] = v
			}
		}
		return envelope.New(envelope.Type(first.Type), first.Status, "Every platform failed: "+first.Message, details)
	}
	return envelope.New(envelope.UpstreamError, http.StatusBadGateway, "Every platform failed; see details.legs.", details)
}

// listItems reads data.items of a search operation.
func listItems(data json.RawMessage) []map[string]any {
	var d struct {
		Items []map[string]any `json:"items"`
	}
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	return d.Items
}

// platformItems keeps each item as its platform's search returned it,
// saying which platform it came from.
func platformItems(platform string, data json.RawMessage) []map[string]any {
	items := listItems(data)
	for _, it := range items {
		it["platform"] = platform
	}
	return items
}

// people keeps a people search's items as creators.
func people(foundBy string) func(string, json.RawMessage) []map[string]any {
	return func(platform string, data json.RawMessage) []map[string]any {
		items := listItems(data)
		for _, it := range items {
			it["platform"], it["found_by"] = platform, foundBy
			if it["type"] == nil {
				it["type"] = "person"
			}
		}
		return items
	}
}

// channels maps a video search restricted to channels to creators.
func channels(platform string, data json.RawMessage) []map[string]any {
	var out []map[string]any
	for _, it := range listItems(data) {
		if t, _ := it["type"].(string); t != "" && t != "channel" {
			continue
		}
		out = append(out, map[string]any{
			"platform": platform, "type": "channel", "found_by": "channel_search",
			"id": it["id"], "name": it["title"], "url": it["url"],
			"bio": it["description"], "avatar_url": it["thumbnail_url"],
		})
	}
	return out
}

// postAuthors lists the distinct authors of a post search, in order of
// their first matching post: creators who posted about the query.
func postAuthors(platform string, data json.RawMessage) []map[string]any {
	var out []map[string]any
	seen := map[string]bool{}
	for _, post := range listItems(data) {
		author, _ := post["author"].(map[string]any)
		handle, _ := author["handle"].(string)
		if handle == "" || seen[strings.ToLower(handle)] {
			continue
		}
		seen[strings.ToLower(handle)] = true
		c := map[string]any{"platform": platform, "type": "account", "found_by": "post_search",
			"handle": handle, "name": author["name"], "id": author["id"], "url": author["url"]}
		if post["url"] != nil {
			c["matched_post_url"] = post["url"]
		} else if post["id"] != nil {
			c["matched_post_id"] = post["id"]
		}
		out = append(out, c)
	}
	return out
}
