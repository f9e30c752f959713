package quora_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/meridian-data/meridian/shared/schemas"
	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/adapters/quora"
	"github.com/meridian-data/meridian/shared/upstream/adaptertest"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

const endpoint = quora.Endpoint

// Service keys: they must reach the services and never a fault's reason.
const (
	zyteKey    = "zk-quora-test-7a1d"
	scraperKey = "sk-quora-test-3f0c"
)

const goURL = "https://www.quora.com/What-is-the-best-way-to-learn-Go-programming"

func options() upstream.Options {
	o := adaptertest.Options
	o.Timeout = 20 * o.AttemptTimeout // room for the services' own attempt timeout
	return o
}

func direct(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Direct(quora.Site()), nil, options())
}

func zyte(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.Zyte(quora.Site()), map[string]string{pages.ZyteKeySecret: zyteKey}, options())
}

func scraperAPI(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	return adaptertest.StartWith(t, pages.ScraperAPI(quora.Site()), map[string]string{pages.ScraperAPIKeySecret: scraperKey}, options())
}

func all(t *testing.T) *adaptertest.Upstream {
	t.Helper()
	site := quora.Site()
	providers := []*upstream.Provider{pages.Direct(site), pages.Zyte(site), pages.ScraperAPI(site)}
	secrets := map[string]string{pages.ZyteKeySecret: zyteKey, pages.ScraperAPIKeySecret: scraperKey}
	return adaptertest.StartRoutes(t, providers, secrets, options())
}

func q(u string) string { return "url=" + url.QueryEscape(u) }

func answers(t *testing.T, data map[string]any) []map[string]any {
	t.Helper()
	raw, ok := data["answers"].([]any)
	if !ok {
		t.Fatalf("answers %T", data["answers"])
	}
	out := make([]map[string]any, len(raw))
	for i, v := range raw {
		out[i] = v.(map[string]any)
	}
	return out
}

func warnings(data map[string]any) []string {
	var out []string
	for _, w := range data["_warnings"].([]any) {
		out = append(out, w.(string))
	}
	return out
}

func TestQuestion(t *testing.T) {
	u := direct(t)
	// An answer's link names its question; tracking parameters are dropped.
	data := u.Data(t, endpoint, q(goURL+"/answer/Ada-Sample?ch=10&share=1a2b3c"), "question-go")
	r := u.LastRequest(t)
	if r.Method != "GET" || r.Path != "/What-is-the-best-way-to-learn-Go-programming" || len(r.Query) != 0 {
		t.Fatalf("request %s %s %v", r.Method, r.Path, r.Query)
	}
	// Logged out: no cookie, no form key, a browser's headers.
	if r.Header.Get("cookie") != "" || !strings.Contains(r.Header.Get("user-agent"), "Chrome/") || r.Header.Get("sec-fetch-mode") != "navigate" {
		t.Errorf("headers %v", r.Header)
	}
	if data["id"] != "147025839" || data["title"] != "What is the best way to learn Go programming?" || data["url"] != goURL ||
		data["answer_count"] != 57.0 || data["follower_count"] != 1204.0 || data["type"] != "question" || data["platform"] != "qa_site" {
		t.Fatalf("question %v", data)
	}
	if asker := data["asker"].(map[string]any); asker["anonymous"] != false || len(asker) != 2 {
		t.Errorf("asker %v (only whether it was anonymous)", asker)
	}
	// The question's own topics, not a credential's company.
	topics := data["topics"].([]any)
	if len(topics) != 3 || topics[0].(map[string]any)["url"] != "https://www.quora.com/topic/Go-programming-language" {
		t.Errorf("topics %v", topics)
	}
	as := answers(t, data)
	// The deleted answer and the related question's answer are not this
	// question's answers.
	if len(as) != 3 {
		t.Fatalf("%d answers", len(as))
	}
	a := as[0]
	if a["id"] != "298174653" || a["upvotes"] != 412.0 || a["views"] != 28411.0 || a["shares"] != 9.0 || a["comments"] != 14.0 ||
		a["collapsed"] != false || a["machine_answer"] != false || a["created_at"] != "2025-05-16T11:50:45Z" ||
		a["updated_at"] != "2025-05-17T11:50:45Z" || a["author_credential"] != "Software Engineer at Example Corp (2015–present)" ||
		a["url"] != goURL+"/answer/Ada-Sample" || !strings.HasPrefix(a["text"].(string), "Start with the Tour of Go") {
		t.Errorf("first answer %v", a)
	}
	if au := a["author"].(map[string]any); au["name"] != "Ada Sample" || au["handle"] != "Ada-Sample" || au["anonymous"] != false ||
		au["url"] != "https://www.quora.com/profile/Ada-Sample" || au["avatar_url"] == nil {
		t.Errorf("author %v", au)
	}
	if qr := a["question"].(map[string]any); qr["id"] != "147025839" || qr["answer_count"] != 57.0 || qr["url"] != goURL {
		t.Errorf("answer's question %v", qr)
	}
	// An anonymous author has no page; shares the page does not carry stay null.
	if au := as[1]["author"].(map[string]any); au["anonymous"] != true || au["handle"] != nil || au["url"] != nil || as[1]["shares"] != nil {
		t.Errorf("anonymous answer %v", as[1])
	}
	// The machine answer: its id beyond 2^53 keeps its digits.
	if as[2]["id"] != "9007199254740993" || as[2]["machine_answer"] != true || as[2]["text"] != "Here is a short path to learning Go:\nWork through the official tour.\nBuild a small web service with net/http.\nThen read the standard library source." {
		t.Errorf("machine answer %v", as[2])
	}
	related := data["related_questions"].([]any)
	if len(related) != 3 {
		t.Fatalf("related %v", related)
	}
	if r0 := related[0].(map[string]any); r0["id"] != "88012345" || r0["answer_count"] != 23.0 || r0["url"] != "https://www.quora.com/How-long-does-it-take-to-learn-Go" {
		t.Errorf("related %v", r0)
	}
	if data["answers_note"] != "3 of 57 answers are returned: the page carries only its first answers, and the rest come from the site's own paged queries, which need the page's session and are not called." {
		t.Errorf("note %q", data["answers_note"])
	}
	if w := warnings(data); len(w) != 1 || w[0] != quora.WarnShares {
		t.Errorf("warnings %v", w)
	}
}

// The Spanish edition, the older assignment of results (with JavaScript's
// own escapes), every answer returned, an anonymous asker and an answer
// for subscribers only.
func TestLanguageEdition(t *testing.T) {
	u := direct(t)
	data := u.Data(t, endpoint, q("https://es.quora.com/Cu%C3%A1l-es-la-mejor-manera-de-aprender-Go"), "question-es")
	if r := u.LastRequest(t); r.Header.Get(pages.ForwardedHostHeader) != "es.quora.com" {
		t.Errorf("host %q", r.Header.Get(pages.ForwardedHostHeader))
	}
	if data["id"] != "31122047" || data["title"] != "¿Cuál es la mejor manera de aprender Go?" || data["url"] != "https://es.quora.com/Cu%C3%A1l-es-la-mejor-manera-de-aprender-Go" ||
		data["answers_note"] != "All 2 answers are returned." || data["follower_count"] != nil {
		t.Fatalf("question %v", data)
	}
	if data["asker"].(map[string]any)["anonymous"] != true {
		t.Errorf("asker %v", data["asker"])
	}
	as := answers(t, data)
	if as[0]["id"] != "412000001" || as[0]["text"] != "Empieza por el tour oficial; l'apprendimento va más rápido con proyectos pequeños." ||
		as[0]["created_at"] != "2025-01-01T00:00:00Z" || as[0]["author"].(map[string]any)["handle"] != "Lucía-Ejemplo" {
		t.Errorf("first %v", as[0])
	}
	if as[1]["text"] != nil || as[1]["author"].(map[string]any)["name"] != "Sample Kenji" || as[1]["author_credential"] != "Ingeniero de software" {
		t.Errorf("second %v", as[1])
	}
	if w := warnings(data); len(w) != 3 || w[0] != quora.WarnFollowers || w[1] != quora.WarnRestricted || w[2] != quora.WarnNoTopics {
		t.Errorf("warnings %v", w)
	}
}

func TestUnanswered(t *testing.T) {
	data := direct(t).Data(t, endpoint, q("https://www.quora.com/unanswered/Why-does-Go-have-no-ternary-operator"), "question-unanswered")
	if len(answers(t, data)) != 0 || data["answer_count"] != 0.0 || data["answers_note"] != "The question has no answers yet." {
		t.Errorf("data %v", data)
	}
	// The results name no title here: the page's own title stands in.
	if data["title"] != "Why does Go have no ternary operator?" {
		t.Errorf("title %v", data["title"])
	}
	if w := warnings(data); len(w) != 1 || w[0] != quora.WarnNoTopics {
		t.Errorf("warnings %v", w)
	}
}

// A page of earlier years carries a schema.org QAPage only.
func TestJSONLD(t *testing.T) {
	data := direct(t).Data(t, endpoint, q("https://quora.com/How-do-I-install-Go-on-Windows"), "question-jsonld")
	as := answers(t, data)
	if data["title"] != "How do I install Go on Windows?" || data["answer_count"] != 14.0 || len(as) != 2 || data["id"] != nil {
		t.Fatalf("data %v", data)
	}
	if as[0]["upvotes"] != 31.0 || as[1]["upvotes"] != nil || as[1]["created_at"] != "2020-05-11T06:30:00Z" ||
		as[0]["author"].(map[string]any)["url"] != "https://www.quora.com/profile/Ada-Sample" {
		t.Errorf("answers %v", as)
	}
	if w := warnings(data); len(w) != 5 || w[0] != quora.WarnSummary {
		t.Errorf("warnings %v", w)
	}
}

// Every route maps the same page to the same data.
func TestServices(t *testing.T) {
	z := zyte(t)
	adaptertest.MatchesGolden(t, endpoint, z.Serve(t, endpoint, q(goURL)), quora.Name, "question-go")
	r := z.LastRequest(t)
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["url"] != goURL || body["httpResponseBody"] != true || body["requestCookies"] != nil || body["customHttpRequestHeaders"] != nil {
		t.Errorf("Zyte request %s", r.Body)
	}
	adaptertest.MatchesGolden(t, endpoint, z.Serve(t, endpoint, q("https://es.quora.com/Cu%C3%A1l-es-la-mejor-manera-de-aprender-Go")), quora.Name, "question-es")
	s := scraperAPI(t)
	adaptertest.MatchesGolden(t, endpoint, s.Serve(t, endpoint, q("https://m.quora.com/What-is-the-best-way-to-learn-Go-programming")), quora.Name, "question-go")
	if qv := url.Values(s.LastRequest(t).Query); qv.Get("url") != goURL || qv.Get("api_key") != scraperKey {
		t.Errorf("ScraperAPI query %v", qv)
	}
}

// A challenge on the direct route fails over to Zyte, which serves it.
func TestChallengeFailsOver(t *testing.T) {
	d := direct(t)
	out := d.Fault(t, endpoint, q("https://www.quora.com/How-do-goroutines-work"), upstream.Rejected)
	if !strings.Contains(strings.ToLower(out.Fault.Reason), "cloudflare") {
		t.Errorf("reason %q", out.Fault.Reason)
	}
	res := all(t).Serve(t, endpoint, q("https://www.quora.com/How-do-goroutines-work"))
	if res.Fault != nil {
		t.Fatalf("fault %v", res.Fault)
	}
	if err := schemas.Validate(endpoint, res.Data); err != nil {
		t.Fatal(err)
	}
	qd := res.Data.(*quora.Question)
	if *qd.ID != "50312777" || len(qd.Answers) != 1 || *qd.Answers[0].AuthorCredential != "MSc Computer Science, Example University" ||
		qd.AnswersNote != "All 1 answers are returned." {
		t.Errorf("question %+v", qd)
	}
	if res.Trace.ServedBy != pages.ZyteName || len(res.Trace.Legs) != 2 || res.Trace.Legs[0].ServedBy != quora.Name ||
		res.Trace.Legs[0].Fault != upstream.Rejected || !res.Trace.Legs[1].OK {
		t.Errorf("trace %+v", res.Trace)
	}
}

// A login wall is Rejected (another route may get through): served as
// the login page, or as a redirect to the home page the services report.
func TestLoginWall(t *testing.T) {
	wall := "https://www.quora.com/What-is-a-question-behind-the-login-wall"
	out := direct(t).Fault(t, endpoint, q(wall), upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "login") {
		t.Errorf("reason %q", out.Fault.Reason)
	}
	out = zyte(t).Fault(t, endpoint, q(wall), upstream.Rejected)
	if !strings.Contains(out.Fault.Reason, "home page") || strings.Contains(out.Fault.Reason, zyteKey) {
		t.Errorf("reason %q", out.Fault.Reason)
	}
}

// A removed question is a definitive 404 on every route; over all routes
// the direct 404 ends the call.
func TestRemoved(t *testing.T) {
	removed := "https://www.quora.com/What-was-a-removed-question-about-Go"
	d := direct(t)
	d.Fault(t, endpoint, q(removed), upstream.NotFound)
	d.Fault(t, endpoint, q("https://www.quora.com/What-is-a-deleted-question-about-Go"), upstream.NotFound)
	d.Fault(t, endpoint, q("https://www.quora.com/What-is-a-question-shown-as-not-found"), upstream.NotFound)
	zyte(t).Fault(t, endpoint, q(removed), upstream.NotFound)
	scraperAPI(t).Fault(t, endpoint, q(removed), upstream.NotFound)
	a := all(t)
	before := len(a.Replay.Requests())
	res := a.Serve(t, endpoint, q(removed))
	if res.Fault == nil || res.Fault.Kind != upstream.NotFound || len(a.Replay.Requests()) != before+1 {
		t.Errorf("fault %v, %d requests", res.Fault, len(a.Replay.Requests())-before)
	}
	if e := res.Error(); e.Status != 404 || e.Type != "RESOURCE_NOT_FOUND" {
		t.Errorf("error %d %s", e.Status, e.Type)
	}
}

// A changed page is Malformed (502, refunded), never an empty success; the
// reason names what is missing and the page's size, never its content.
func TestChangedShape(t *testing.T) {
	d := direct(t)
	for path, want := range map[string]string{
		"What-is-a-page-whose-shape-changed":       "no inline query results and no question JSON-LD",
		"What-is-a-page-cut-short":                 "1 inline query results did not decode",
		"What-is-a-page-with-other-questions-only": "no question in the 1 inline query results",
	} {
		out := d.Fault(t, endpoint, q("https://www.quora.com/"+path), upstream.Malformed)
		if !strings.Contains(out.Fault.Reason, want) || !strings.Contains(out.Fault.Reason, "-byte page") ||
			strings.Contains(out.Fault.Reason, "What is") {
			t.Errorf("%s: reason %q", path, out.Fault.Reason)
		}
	}
	d.Fault(t, endpoint, q("https://www.quora.com/What-is-a-question-while-the-site-is-down"), upstream.ServerError)
}

// An unusable URL is the caller's 422, before any request.
func TestInvalidURLNotFetched(t *testing.T) {
	d := direct(t)
	for _, raw := range []string{"https://www.quora.com/profile/Ada-Sample", "https://www.quora.com/topic/Go-programming-language", "https://myspace.quora.com/Some-post"} {
		before := len(d.Replay.Requests())
		out := d.Runner.Serve(context.Background(), endpoint, map[string]string{"url": raw})
		if out.Fault == nil || out.Fault.Kind != upstream.InvalidParameter || out.Fault.Field != "url" {
			t.Fatalf("%s: fault %v", raw, out.Fault)
		}
		if e := out.Error(); e.Status != 422 {
			t.Errorf("%s: status %d", raw, e.Status)
		}
		if len(d.Replay.Requests()) != before {
			t.Errorf("%s: the site was asked", raw)
		}
	}
}

func TestQuestionPage(t *testing.T) {
	for raw, want := range map[string]string{
		"https://www.quora.com/What-is-Go":                               "www.quora.com /What-is-Go",
		"http://quora.com/What-is-Go/":                                   "www.quora.com /What-is-Go",
		"https://QUORA.com./What-is-Go?ch=10&share=abc#answers":          "www.quora.com /What-is-Go",
		"https://m.quora.com/What-is-Go":                                 "www.quora.com /What-is-Go",
		"https://www.quora.com/What-is-Go/answer/Ada-Sample":             "www.quora.com /What-is-Go",
		"https://www.quora.com/What-is-Go/answers/298174653":             "www.quora.com /What-is-Go",
		"https://www.quora.com/unanswered/What-is-Go":                    "www.quora.com /unanswered/What-is-Go",
		"https://jp.quora.com/Go%E8%A8%80%E8%AA%9E%E3%81%A8%E3%81%AF":    "jp.quora.com /Go%E8%A8%80%E8%AA%9E%E3%81%A8%E3%81%AF",
		"https://es.quora.com/¿Qué-es-Go":                                "es.quora.com /%C2%BFQu%C3%A9-es-Go",
		" https://www.quora.com/What-is-Go-2 ":                           "www.quora.com /What-is-Go-2",
		"https://www.quora.com/What-is-the-difference-between-C++-and-C": "www.quora.com /What-is-the-difference-between-C++-and-C",
	} {
		host, path, err := quora.QuestionPage(raw)
		if err != nil || host+" "+path != want {
			t.Errorf("%q: %q %q %v; want %q", raw, host, path, err, want)
		}
	}
	for raw, code := range map[string]string{
		"https://www.quora.com/":                         "not_a_question",
		"https://www.quora.com/profile/Ada-Sample":       "not_a_question",
		"https://www.quora.com/topic/Go":                 "not_a_question",
		"https://www.quora.com/search?q=go":              "not_a_question",
		"https://www.quora.com/What-is-Go/log":           "not_a_question",
		"https://www.quora.com/a/b/c/d":                  "not_a_question",
		"https://golang.quora.com/What-is-Go":            "not_a_question",
		"https://quora.com.evil.example/What-is-Go":      "not_a_question",
		"https://www.quora.com/What-is-Go%2F..%2Fsecret": "not_a_question",
		"https://user@www.quora.com/What-is-Go":          "invalid_url",
		"ftp://www.quora.com/What-is-Go":                 "invalid_url",
		"What-is-Go":                                     "invalid_url",
	} {
		_, _, err := quora.QuestionPage(raw)
		f, ok := err.(*upstream.Fault)
		if !ok || f.Kind != upstream.InvalidParameter || f.Field != "url" || f.Code != code {
			t.Errorf("%q: %v; want invalid_parameter %s", raw, err, code)
			continue
		}
		if strings.Contains(strings.ToLower(f.Reason), "quora") {
			t.Errorf("%q: the message names the platform: %q", raw, f.Reason)
		}
	}
}
