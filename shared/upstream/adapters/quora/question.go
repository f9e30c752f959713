package quora

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Question is the data of qa_site/question (spec 2.7).
type Question struct {
	Warnings         []string      `json:"_warnings,omitempty"`
	AnswerCount      *int64        `json:"answer_count"`
	Answers          []Answer      `json:"answers"`
	AnswersNote      string        `json:"answers_note"`
	Asker            *Asker        `json:"asker"`
	FollowerCount    *int64        `json:"follower_count"`
	ID               *string       `json:"id"`
	Platform         string        `json:"platform"`
	RelatedQuestions []QuestionRef `json:"related_questions"`
	Title            *string       `json:"title"`
	Topics           []Topic       `json:"topics"`
	Type             string        `json:"type"`
	URL              string        `json:"url"`
}

// Answer is one answer (spec 2.7), with the source's comment count and
// whether it comes from an equivalent question as additional fields.
type Answer struct {
	Author           *Author `json:"author"`
	AuthorCredential *string `json:"author_credential"`
	Collapsed        *bool   `json:"collapsed"`
	Comments         *int64  `json:"comments"`
	CreatedAt        *string `json:"created_at"`
	// FromEquivalentQuestion: the answer was written for another question
	// the site merged with this one or holds equivalent, and the page shows
	// it among this question's answers; question then names that one.
	FromEquivalentQuestion *bool        `json:"from_equivalent_question"`
	ID                     *string      `json:"id"`
	MachineAnswer          *bool        `json:"machine_answer"`
	Platform               string       `json:"platform"`
	Question               *QuestionRef `json:"question"`
	Shares                 *int64       `json:"shares"`
	Text                   *string      `json:"text"`
	Type                   string       `json:"type"`
	UpdatedAt              *string      `json:"updated_at"`
	Upvotes                *int64       `json:"upvotes"`
	URL                    *string      `json:"url"`
	Views                  *int64       `json:"views"`
}

// Author is an answer's author; an anonymous one has no name, handle or
// link.
type Author struct {
	Anonymous *bool   `json:"anonymous"`
	AvatarURL *string `json:"avatar_url"`
	Handle    *string `json:"handle"`
	Name      *string `json:"name"`
	Platform  string  `json:"platform"`
	URL       *string `json:"url"`
}

// Asker says only whether the question was asked anonymously.
type Asker struct {
	Anonymous *bool  `json:"anonymous"`
	Platform  string `json:"platform"`
}

// QuestionRef is a question an answer belongs to, or a related one.
type QuestionRef struct {
	AnswerCount *int64  `json:"answer_count"`
	ID          *string `json:"id"`
	Title       *string `json:"title"`
	URL         *string `json:"url"`
}

// Topic is one of the question's topics.
type Topic struct {
	Name *string `json:"name"`
	URL  *string `json:"url"`
}

// The _warnings sentences, fixed so that callers can match them.
const (
	WarnUpvotes    = "Some answers' upvote counts are not on the page; their upvotes are null."
	WarnViews      = "Some answers' view counts are not on the page; their views are null."
	WarnShares     = "Some answers' share counts are not on the page; their shares are null."
	WarnFollowers  = "The page does not carry the question's follower count; follower_count is null."
	WarnRestricted = "Some answers are shown to the site's subscribers only; their text is null."
	WarnNoTopics   = "The page carried no topics for this question; topics is empty."
	WarnSummary    = "The page carried only its search-engine summary (no query results): answer ids, views, shares, " +
		"collapsed and machine-answer flags, topics and related questions are not available."
	WarnUnknownItem = "The page's answer list holds items of a kind not known to Meridian: their answers to this question " +
		"are returned (collapsed may be null), their answers to other questions are left out."
)

// The kinds (GraphQL __typename) of the answer list's items that hold an
// answer. An answer in a list item of another kind is returned when it
// answers the page's question, with WarnUnknownItem.
const (
	itemAnswer   = "QuestionAnswerItem2"         // one of the question's answers
	itemMachine  = "QuestionMachineAnswerItem"   // the site's machine-written answer to it
	itemRelevant = "QuestionRelevantAnswerItem2" // another question's answer: equivalent (shown as this one's) or related
)

// otherItems are the list's known items that hold no answer of this
// question (a header, inline related questions, an ad).
var otherItems = map[string]bool{
	"QuestionAnswerHeaderItem": true, "QuestionInlineRelatedQuestionsItem": true, "QuestionAdItem": true,
}

// parseQuestion maps a question page.
func parseQuestion(c *upstream.Call, p *pages.Page) (any, error) {
	host, path, err := QuestionPage(c.Param("url"))
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(p.URL)
	if base == nil || base.Host == "" {
		base = &url.URL{Scheme: "https", Host: host, Path: path}
	}
	size := len(p.Body)
	results, bad := payloads(p.Body)
	col := newCollector()
	for _, v := range results {
		col.walk(v, walkCtx{})
	}
	root := rootComponent(p.Body)
	if page := col.page(pageOid(p.Body), path); page != nil {
		if page.bool("isDeleted") {
			return nil, upstream.NotFoundFault("the question was deleted")
		}
		out := col.question(page, base)
		if out.Title == nil {
			// The results named no title: the page's own, for the answers too.
			out.Title = pageTitle(p.Body)
			for _, a := range out.Answers {
				if a.Question != nil && a.Question.Title == nil {
					a.Question.Title = out.Title
				}
			}
		}
		return out, nil
	}
	if out, ok := fromJSONLD(p.Body, base); ok {
		return out, nil
	}
	switch {
	case wall(root):
		return nil, &upstream.Fault{Kind: upstream.Rejected, Status: p.Status, Reason: "a login wall (the page is the login or sign-up page)"}
	case strings.Contains(strings.ToLower(root), "notfound"):
		return nil, upstream.NotFoundFault("the site's page-not-found page")
	case len(results) == 0 && bad == 0:
		return nil, upstream.MalformedFault("no inline query results and no question JSON-LD in a %d-byte page", size)
	case len(results) == 0:
		return nil, upstream.MalformedFault("%d inline query results did not decode in a %d-byte page", bad, size)
	}
	return nil, upstream.MalformedFault("no question in the %d inline query results of a %d-byte page", len(results), size)
}

// record is one object the results describe, its fields merged across
// the results that mention it (each query asks for some of them).
type record struct {
	fields map[string]any
	// item is the kind (__typename) of the answer list's item holding an
	// answer, "" outside a list; equivalent is the item's isEquivalentAnswer;
	// collapsed says an enclosing object's type is a collapsed list's.
	item       string
	equivalent bool
	collapsed  bool
	// qid is the question an answer sits under (the list's question), when
	// it names none itself.
	qid    string
	topics []Topic
	seen   map[string]bool // topics already kept, by id or name
}

func (r *record) merge(m map[string]any) {
	for k, v := range m {
		if old, ok := r.fields[k]; !ok || old == nil {
			r.fields[k] = v
		}
	}
}

func (r *record) get(k string) any { return r.fields[k] }

func (r *record) bool(k string) bool { return r.fields[k] == true }

// collector gathers questions, answers and the answer list's header from
// the results, in the order they appear.
type collector struct {
	questions map[string]*record
	qorder    []string
	answers   map[string]*record
	aorder    []string
	// pagedOwner is the question whose answer list the results hold.
	pagedOwner string
	numAnswers *int64
	nodes      int
}

func newCollector() *collector {
	return &collector{questions: map[string]*record{}, answers: map[string]*record{}}
}

type walkCtx struct {
	qid        string
	item       string
	equivalent bool
	collapsed  bool
	node       bool // the object is a connection edge's node
}

// maxNodes bounds the walk over a page's results.
const maxNodes = 2_000_000

func (c *collector) walk(v any, x walkCtx) {
	if c.nodes > maxNodes {
		return
	}
	c.nodes++
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			c.walk(e, x)
		}
	case map[string]any:
		typename, _ := t["__typename"].(string)
		if qid := idText(t["qid"]); qid != "" {
			r := c.questions[qid]
			if r == nil {
				r = &record{fields: map[string]any{}, seen: map[string]bool{}}
				c.questions[qid] = r
				c.qorder = append(c.qorder, qid)
			}
			r.merge(t)
			for k, fv := range t {
				if k != "pagedListDataConnection" {
					r.addTopics(fv, 0)
				}
			}
			if _, ok := t["pagedListDataConnection"]; ok && c.pagedOwner == "" {
				c.pagedOwner = qid
			}
			x.qid = qid
		}
		aid := idText(t["aid"])
		if aid != "" {
			r := c.answers[aid]
			if r == nil {
				r = &record{fields: map[string]any{}}
				c.answers[aid] = r
				c.aorder = append(c.aorder, aid)
			}
			r.merge(t)
			// An answer seen in and out of the list keeps what its list item
			// says, whichever sighting came first.
			if r.item == "" {
				r.item, r.equivalent = x.item, x.equivalent
			}
			if r.qid == "" {
				r.qid = x.qid
			}
			r.collapsed = r.collapsed || x.collapsed
		}
		if typename == "QuestionAnswerHeaderItem" && c.numAnswers == nil {
			c.numAnswers = count(t["numAnswers"])
		}
		if _, listed := t["__isQuestionPagedListItem"]; typename != "" && aid == "" && (listed || x.node) {
			// A list item: its kind and the question whose list it is in
			// (streamed items arrive without the question around them).
			x.item, x.equivalent = typename, t["isEquivalentAnswer"] == true
			if q, ok := t["question"].(map[string]any); ok && idText(q["qid"]) != "" {
				x.qid = idText(q["qid"])
			}
		}
		if typename != "" {
			x.collapsed = x.collapsed || strings.Contains(typename, "Collapsed")
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys) // a deterministic order where the results give none
		for _, k := range keys {
			child := x
			child.node = k == "node"
			c.walk(t[k], child)
		}
	}
}

// addTopics keeps the topics under a question's field: objects typed
// Topic (or carrying a tid), not looking inside other questions, answers
// or users (a credential names its company as a topic).
func (r *record) addTopics(v any, depth int) {
	if depth > 12 {
		return
	}
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			r.addTopics(e, depth+1)
		}
	case map[string]any:
		if _, ok := t["qid"]; ok && depth > 0 {
			return
		}
		if _, ok := t["aid"]; ok {
			return
		}
		if _, ok := t["uid"]; ok {
			return
		}
		if t["__typename"] == "Topic" || t["tid"] != nil {
			name := richText(t["name"])
			key := idText(t["tid"])
			if key == "" && name != nil {
				key = "name:" + *name
			}
			if key != "" && !r.seen[key] && name != nil {
				r.seen[key] = true
				r.topics = append(r.topics, Topic{Name: name, URL: text(t["url"])})
			}
			return
		}
		for _, e := range t {
			r.addTopics(e, depth+1)
		}
	}
}

// page is the record of the question the page is about: the one its
// settings name, else the one at the requested path, else the one whose
// answer list the page holds, else the only question with a title.
func (c *collector) page(oid, path string) *record {
	if r := c.questions[oid]; oid != "" && r != nil {
		return r
	}
	for _, qid := range c.qorder {
		if u := text(c.questions[qid].get("url")); u != nil && samePath(*u, path) {
			return c.questions[qid]
		}
	}
	if r := c.questions[c.pagedOwner]; c.pagedOwner != "" && r != nil {
		return r
	}
	var only *record
	for _, qid := range c.qorder {
		if richText(c.questions[qid].get("title")) != nil {
			if only != nil {
				return nil
			}
			only = c.questions[qid]
		}
	}
	return only
}

// samePath compares a question URL (absolute or not) with a path,
// unescaped and case-insensitively, as the site's slugs are.
func samePath(raw, path string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	a, _ := url.PathUnescape(strings.TrimSuffix(u.EscapedPath(), "/"))
	b, _ := url.PathUnescape(strings.TrimSuffix(path, "/"))
	return a != "" && strings.EqualFold(a, b)
}

// question maps the page's question and its answers.
func (c *collector) question(page *record, base *url.URL) *Question {
	qid := idText(page.get("qid"))
	out := &Question{
		ID:               &qid,
		Platform:         Platform,
		Type:             "question",
		Title:            richText(page.get("title")),
		AnswerCount:      count(page.get("answerCount")),
		FollowerCount:    count(page.get("followerCount")),
		Answers:          []Answer{},
		RelatedQuestions: []QuestionRef{},
		Topics:           []Topic{},
	}
	for _, t := range page.topics {
		out.Topics = append(out.Topics, Topic{Name: t.Name, URL: absolute(base, t.URL)})
	}
	out.URL = base.String()
	if u := absolute(base, text(page.get("url"))); u != nil {
		out.URL = *u
	}
	if out.AnswerCount == nil {
		out.AnswerCount = c.numAnswers
	}
	if a, ok := page.get("asker").(map[string]any); ok {
		out.Asker = &Asker{Platform: Platform, Anonymous: boolean(a["isAnon"])}
	}
	self := c.ref(qid, base)
	var missing [3]bool
	restricted, unknown := false, false
	for _, aid := range c.aorder {
		r := c.answers[aid]
		if r.bool("isDeleted") {
			continue
		}
		owner := ""
		if q, ok := r.get("question").(map[string]any); ok {
			owner = idText(q["qid"])
			if owner == "" {
				owner = relayID(q["id"], "Question")
			}
		}
		equivalent := false
		switch {
		case r.item == itemRelevant:
			// Another question's answer: shown as this question's when the
			// site holds that question equivalent (merged), else a related
			// question's answer.
			if !r.equivalent || r.qid != qid {
				continue
			}
			equivalent = owner != "" && owner != qid
		case otherItems[r.item]:
			continue
		case r.item != "" && r.item != itemAnswer && r.item != itemMachine && !r.collapsed:
			unknown = true
		}
		if owner == "" {
			owner = r.qid // the question it sits under
		}
		if owner != qid && !equivalent {
			continue // an answer to a related question
		}
		a := answer(r, aid, base)
		a.Question = self
		a.FromEquivalentQuestion = ptr(equivalent)
		if equivalent {
			a.Question = c.ref(owner, base)
		}
		if r.get("viewerHasAccess") == false && a.Text == nil {
			restricted = true
		}
		missing[0] = missing[0] || a.Upvotes == nil
		missing[1] = missing[1] || a.Views == nil
		missing[2] = missing[2] || a.Shares == nil
		out.Answers = append(out.Answers, a)
	}
	for _, id := range c.qorder {
		if id == qid || richText(c.questions[id].get("title")) == nil {
			continue
		}
		out.RelatedQuestions = append(out.RelatedQuestions, *c.ref(id, base))
	}
	out.AnswersNote = answersNote(len(out.Answers), out.AnswerCount)
	if out.FollowerCount == nil {
		out.Warnings = append(out.Warnings, WarnFollowers)
	}
	for i, w := range []string{WarnUpvotes, WarnViews, WarnShares} {
		if missing[i] {
			out.Warnings = append(out.Warnings, w)
		}
	}
	if restricted {
		out.Warnings = append(out.Warnings, WarnRestricted)
	}
	if unknown {
		out.Warnings = append(out.Warnings, WarnUnknownItem)
	}
	if len(out.Topics) == 0 {
		out.Warnings = append(out.Warnings, WarnNoTopics)
	}
	return out
}

// ref is a question as an answer or the related list names it.
func (c *collector) ref(qid string, base *url.URL) *QuestionRef {
	r := c.questions[qid]
	id := qid
	out := &QuestionRef{ID: &id}
	if r != nil {
		out.Title = richText(r.get("title"))
		out.URL = absolute(base, text(r.get("url")))
		out.AnswerCount = count(r.get("answerCount"))
	}
	return out
}

// answer maps one answer.
func answer(r *record, aid string, base *url.URL) Answer {
	id := aid
	a := Answer{
		ID:        &id,
		Platform:  Platform,
		Type:      "answer",
		Text:      richText(r.get("content")),
		Upvotes:   count(r.get("numUpvotes")),
		Views:     count(r.get("numViews")),
		Shares:    count(r.get("numShares")),
		Comments:  count(r.get("numDisplayComments")),
		CreatedAt: micros(r.get("creationTime")),
		UpdatedAt: micros(r.get("updatedTime")),
	}
	if a.Shares == nil {
		a.Shares = count(r.get("numSharers"))
	}
	a.URL = absolute(base, text(r.get("url")))
	if a.URL == nil {
		a.URL = absolute(base, text(r.get("permaUrl")))
	}
	// Collapsed: the source's flag (isCollapsedForViewer on 2026 pages);
	// else an answer in a collapsed list is collapsed and one in the page's
	// main answer list is not.
	switch {
	case boolean(r.get("isCollapsed")) != nil:
		a.Collapsed = boolean(r.get("isCollapsed"))
	case boolean(r.get("collapsed")) != nil:
		a.Collapsed = boolean(r.get("collapsed"))
	case boolean(r.get("isCollapsedForViewer")) != nil:
		a.Collapsed = boolean(r.get("isCollapsedForViewer"))
	case r.collapsed:
		a.Collapsed = ptr(true)
	case r.item == itemAnswer || r.item == itemMachine || r.item == itemRelevant:
		a.Collapsed = ptr(false)
	}
	author, _ := r.get("author").(map[string]any)
	a.MachineAnswer = boolean(r.get("isMachineAnswer"))
	if a.MachineAnswer == nil && author != nil {
		a.MachineAnswer = boolean(author["isMachineAnswerBot"])
	}
	if a.MachineAnswer == nil && r.item == itemMachine {
		a.MachineAnswer = ptr(true)
	}
	if author != nil {
		a.Author = authorOf(author, base)
		a.AuthorCredential = credential(r.get("authorCredential"))
		if a.AuthorCredential == nil {
			a.AuthorCredential = credential(author["bestCredential"])
		}
	}
	return a
}

func authorOf(m map[string]any, base *url.URL) *Author {
	out := &Author{Platform: Platform, Anonymous: boolean(m["isAnon"])}
	out.AvatarURL = absolute(base, text(m["profileImageUrl"]))
	out.URL = absolute(base, text(m["profileUrl"]))
	if p := text(m["profileUrl"]); p != nil {
		if u, err := url.Parse(*p); err == nil {
			if rest, ok := strings.CutPrefix(u.EscapedPath(), "/profile/"); ok && rest != "" && !strings.Contains(rest, "/") {
				handle := rest
				if unescaped, err := url.PathUnescape(rest); err == nil {
					handle = unescaped
				}
				out.Handle = &handle
			}
		}
	}
	out.Name = displayName(m["names"])
	if out.Anonymous != nil && *out.Anonymous {
		out.Handle, out.URL = nil, nil // no one's page, whatever the object holds
	}
	return out
}

// displayName joins a user's given and family names, family first when
// the site says so (names written that way).
func displayName(v any) *string {
	names, _ := v.([]any)
	for _, n := range names {
		m, ok := n.(map[string]any)
		if !ok {
			continue
		}
		given, _ := m["givenName"].(string)
		family, _ := m["familyName"].(string)
		parts := []string{given, family}
		if m["reverseOrder"] == true {
			parts = []string{family, given}
		}
		if s := strings.Join(strings.Fields(strings.Join(parts, " ")), " "); s != "" {
			return &s
		}
	}
	return nil
}

// credential is a credential's rendered line.
func credential(v any) *string {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	return richText(m["translatedString"])
}

// answersNote says how many answers were returned of how many.
func answersNote(returned int, total *int64) string {
	switch {
	case total == nil:
		return fmt.Sprintf("%d answers are returned: the first ones the page carries; the page does not say how many there are in all.", returned)
	case *total == 0 && returned == 0:
		return "The question has no answers yet."
	case int64(returned) >= *total:
		return fmt.Sprintf("All %d answers are returned.", returned)
	}
	return fmt.Sprintf("%d of %d answers are returned: the page carries only its first answers, and the rest come from the site's "+
		"own paged queries, which need the page's session and are not called.", returned, *total)
}

// ---- schema.org QAPage (pages of earlier years) ----

// fromJSONLD reads a QAPage's question and answers.
func fromJSONLD(page []byte, base *url.URL) (*Question, bool) {
	objs, err := htmldata.JSONLD(page)
	if err != nil {
		return nil, false
	}
	var q map[string]any
	for _, raw := range objs {
		v, _ := decodeJSON(string(raw))
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		switch typeOf(m) {
		case "QAPage":
			q, _ = m["mainEntity"].(map[string]any)
		case "Question":
			q = m
		}
		if q != nil {
			break
		}
	}
	if q == nil {
		return nil, false
	}
	out := &Question{
		Platform:         Platform,
		Type:             "question",
		URL:              base.String(),
		Title:            text(q["name"]),
		AnswerCount:      count(q["answerCount"]),
		Answers:          []Answer{},
		RelatedQuestions: []QuestionRef{},
		Topics:           []Topic{},
	}
	if u := absolute(base, text(q["url"])); u != nil {
		out.URL = *u
	}
	self := &QuestionRef{Title: out.Title, URL: &out.URL, AnswerCount: out.AnswerCount}
	for _, key := range []string{"acceptedAnswer", "suggestedAnswer"} {
		var list []any
		switch v := q[key].(type) {
		case []any:
			list = v
		case map[string]any:
			list = []any{v}
		}
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				continue
			}
			a := Answer{Platform: Platform, Type: "answer", Question: self, Text: text(m["text"]),
				Upvotes: count(m["upvoteCount"]), CreatedAt: isoDate(m["dateCreated"]), UpdatedAt: isoDate(m["dateModified"]),
				URL: absolute(base, text(m["url"]))}
			if au, ok := m["author"].(map[string]any); ok {
				a.Author = &Author{Platform: Platform, Name: text(au["name"]), URL: absolute(base, text(au["url"]))}
			}
			out.Answers = append(out.Answers, a)
		}
	}
	out.AnswersNote = answersNote(len(out.Answers), out.AnswerCount)
	out.Warnings = []string{WarnSummary, WarnFollowers}
	if slices.ContainsFunc(out.Answers, func(a Answer) bool { return a.Upvotes == nil }) {
		out.Warnings = append(out.Warnings, WarnUpvotes)
	}
	if len(out.Answers) > 0 {
		out.Warnings = append(out.Warnings, WarnViews, WarnShares)
	}
	return out, true
}

func typeOf(m map[string]any) string {
	switch t := m["@type"].(type) {
	case string:
		return strings.TrimPrefix(strings.TrimPrefix(t, "https://schema.org/"), "http://schema.org/")
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok && (s == "QAPage" || s == "Question") {
				return s
			}
		}
	}
	return ""
}

// ---- small readers ----

// pageTitle is the document's title without the site's " - Quora"
// suffix, read with the HTML tokenizer; nil when there is none.
func pageTitle(page []byte) *string {
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return nil
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) != "title" {
				continue
			}
			if z.Next() != html.TextToken {
				return nil
			}
			// Text has decoded the title's character references already.
			t := strings.TrimSpace(string(z.Text()))
			t = strings.TrimSpace(strings.TrimSuffix(t, " - Quora"))
			return text(t)
		}
	}
}

// richText renders the site's rich text (a JSON document {"sections":
// [{"spans": [{"text"}]}]}, in a string or not) as plain text: a
// section's spans joined, sections one per line, text-less images left
// out. A plain string is itself.
func richText(v any) *string {
	doc := v
	if s, ok := v.(string); ok {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil
		}
		if !strings.HasPrefix(s, "{") {
			return &s
		}
		parsed, ok := decodeJSON(s)
		if !ok {
			return &s
		}
		doc = parsed
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	sections, ok := m["sections"].([]any)
	if !ok {
		return nil
	}
	var lines []string
	for _, sec := range sections {
		sm, ok := sec.(map[string]any)
		if !ok {
			continue
		}
		spans, _ := sm["spans"].([]any)
		var b strings.Builder
		for _, sp := range spans {
			if spm, ok := sp.(map[string]any); ok {
				if t, ok := spm["text"].(string); ok {
					b.WriteString(t)
				}
			}
		}
		line := b.String()
		if sm["type"] == "image" && strings.TrimSpace(line) == "" {
			continue
		}
		lines = append(lines, line)
	}
	out := strings.TrimSpace(strings.Join(lines, "\n"))
	if out == "" {
		return nil
	}
	return &out
}

// text is a non-empty trimmed string, or nil.
func text(v any) *string {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return &s
}

// idText is an id's exact digits (a number or a string of digits), "" when
// absent: ids never pass through a float.
func idText(v any) string {
	var s string
	switch t := v.(type) {
	case json.Number:
		s = t.String()
	case string:
		s = strings.TrimSpace(t)
	default:
		return ""
	}
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return ""
	}
	return s
}

// relayID is the number in a global object id of the given type: the
// base64 of "<Type>@<shard>:<number>".
func relayID(v any, typ string) string {
	s, ok := v.(string)
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return ""
	}
	rest, ok := strings.CutPrefix(string(raw), typ+"@")
	if !ok {
		return ""
	}
	_, n, ok := strings.Cut(rest, ":")
	if !ok {
		return ""
	}
	return idText(n)
}

// count is a non-negative whole number, else nil (unknown, never 0).
func count(v any) *int64 {
	var n int64
	switch t := v.(type) {
	case json.Number:
		i, err := t.Int64()
		if err != nil {
			return nil
		}
		n = i
	default:
		return nil
	}
	if n < 0 {
		return nil
	}
	return &n
}

func boolean(v any) *bool {
	b, ok := v.(bool)
	if !ok {
		return nil
	}
	return &b
}

func ptr[T any](v T) *T { return &v }

// micros turns the site's epoch microseconds into an ISO 8601 time (UTC).
func micros(v any) *string {
	var n int64
	switch t := v.(type) {
	case json.Number:
		i, err := t.Int64()
		if err != nil {
			return nil
		}
		n = i
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
		if err != nil {
			return nil
		}
		n = i
	default:
		return nil
	}
	if n <= 0 {
		return nil
	}
	s := time.UnixMicro(n).UTC().Format(time.RFC3339)
	return &s
}

// isoDate keeps a JSON-LD date that parses as ISO 8601, normalised to UTC.
func isoDate(v any) *string {
	s := text(v)
	if s == nil {
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, *s); err == nil {
			out := t.UTC().Format(time.RFC3339)
			if layout == "2006-01-02" {
				out = t.Format("2006-01-02")
			}
			return &out
		}
	}
	return nil
}

// absolute resolves a link on the page against the page's URL.
func absolute(base *url.URL, ref *string) *string {
	if ref == nil {
		return nil
	}
	u, err := url.Parse(*ref)
	if err != nil {
		return nil
	}
	abs := base.ResolveReference(u)
	if abs.Scheme != "https" && abs.Scheme != "http" {
		return nil
	}
	s := abs.String()
	return &s
}
