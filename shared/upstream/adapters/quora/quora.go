// Package quora serves qa_site/question (a question page with its
// answers, topics and related questions) from the Q&A site's public
// question page, read logged out through the page-fetch routes (the site
// directly, then the unblocking services).
//
// # The page
//
// The site publishes no data API. Its question page is a React shell whose
// server response carries the results of the page's own GraphQL queries:
// each inline script pushes one result into the front end's store as a
// JavaScript string literal holding JSON text,
//
//	window.ansFrontendGlobals.data.inlineQueryResults.results["<hash>"]
//	    .push("{\"data\":{\"question\":{…}}}");
//
// (older pages assign it: results["<hash>"] = "…";), so the payload is
// decoded twice, and the question's title, an answer's content and a
// credential are themselves JSON documents in strings ({"sections":
// [{"spans": [{"text"}]}]}), a third level. Scripts are found with the
// HTML tokenizer (htmldata.Scripts); inside a script the literal is read
// as JavaScript reads it (jsstring.go), never with regular expressions.
//
// The results describe a Question (qid, url, title, answerCount,
// followerCount, asker, topics, pagedListDataConnection), its first
// answers as edges of pagedListDataConnection (QuestionAnswerHeaderItem
// with numAnswers and numMachineAnswers; QuestionAnswerItem2 holding an
// Answer: aid, url, content, creationTime and updatedTime in epoch
// microseconds, numUpvotes, numViews, numShares, numDisplayComments,
// isMachineAnswer, author {uid, isAnon, names, profileUrl,
// profileImageUrl, isMachineAnswerBot, bestCredential}, authorCredential
// {translatedString}, question {qid}); QuestionMachineAnswerItem holding
// the site's machine answer; QuestionRelevantAnswerItem2 holding another
// question's answer, returned (marked from_equivalent_question) when its
// isEquivalentAnswer says the site merged that question with this one,
// else a related question's and left out; and related questions
// themselves. 2026 pages send the list as question.answers.edges, later
// edges streamed in pushes of their own. The results are walked by shape (a
// Question is an object with a qid, an Answer one with an aid), not by
// path, since the same objects sit under different query names.
//
// Pages of earlier years carried a schema.org QAPage as JSON-LD instead;
// it is read when the page has no query results (ids, views, shares and
// flags are then null, with a warning).
//
// # Answers
//
// The page carries only its first answers (about five). The rest come
// from the site's paged GraphQL query (QuestionPagedListPaginationQuery),
// which needs the page session's form key and cookies and the query hash
// from the site's script bundle. Meridian does not make those calls: the
// unblocking services keep no session between requests, and no key or
// form key is ever shipped or reused. answers_note says how many answers
// were returned of how many.
//
// # Faults
//
// A 404 or 410 page, or a question the results mark deleted, is NotFound.
// A challenge page, a login or sign-up wall (a redirect to the login page
// or the home page, or a page whose root component is one of those) is
// Rejected, so the next route tries. A page whose results and JSON-LD
// hold no question is Malformed: the reason gives the page's size, never
// its content. No cookie, form key or key is sent: only what a logged-out
// browser sends.
package quora

import (
	"net/url"
	"slices"
	"strings"

	"github.com/meridian-data/meridian/shared/upstream"
	"github.com/meridian-data/meridian/shared/upstream/htmldata"
	"github.com/meridian-data/meridian/shared/upstream/pages"
)

// Name is the direct route's provider name (MERIDIAN_UPSTREAM_QUORA_URL,
// testdata/upstream/quora/).
const Name = "quora"

// Origin is the site's public origin.
const Origin = "https://www.quora.com"

// Endpoint is the operation's endpoint key.
const Endpoint = "qa_site/question"

// Platform is the neutral platform id in the data.
const Platform = "qa_site"

// Hosts are the hosts a question URL may name (the registry's OnHosts
// list): the site's domain and its subdomains.
var Hosts = []string{"quora.com"}

// LanguageHosts are the site's language editions besides www: each has
// its own questions. Japanese is jp, not ja.
var LanguageHosts = []string{
	"ar.quora.com", "bn.quora.com", "da.quora.com", "de.quora.com", "es.quora.com", "fi.quora.com",
	"fr.quora.com", "gu.quora.com", "he.quora.com", "hi.quora.com", "id.quora.com", "it.quora.com",
	"jp.quora.com", "kn.quora.com", "ml.quora.com", "mr.quora.com", "nl.quora.com", "no.quora.com",
	"pl.quora.com", "pt.quora.com", "sv.quora.com", "ta.quora.com", "te.quora.com",
}

// Site is the question pages as a pages.Site.
func Site() *pages.Site {
	return &pages.Site{
		Name:    Name,
		Origin:  Origin,
		Hosts:   append([]string{"www.quora.com"}, LanguageHosts...),
		Header:  pages.BrowserHeader(""),
		Blocked: blocked,
		Operations: map[string]pages.Operation{
			Endpoint: {Build: questionRequest, Parse: parseQuestion},
		},
	}
}

// questionRequest fetches the question's own page, whatever form the
// caller's URL had (an answer's permalink names its question).
func questionRequest(c *upstream.Call) (pages.Request, error) {
	host, path, err := QuestionPage(c.Param("url"))
	if err != nil {
		return pages.Request{}, err
	}
	if host == "www.quora.com" {
		host = ""
	}
	return pages.Request{Path: path, Host: host}, nil
}

// reserved are first path segments that are the site's own routes, not
// question slugs.
var reserved = map[string]bool{
	"about": true, "account": true, "ads": true, "answer": true, "api": true, "ask": true, "business": true,
	"careers": true, "challenge": true, "contact": true, "contests": true, "content": true, "developers": true,
	"followers": true, "following": true, "graphql": true, "help": true, "log": true, "login": true, "logout": true,
	"messages": true, "notifications": true, "partners": true, "press": true, "privacy": true, "profile": true,
	"q": true, "qemail": true, "search": true, "settings": true, "signup": true, "sitemap": true, "spaces": true,
	"static": true, "stats": true, "topic": true, "tos": true, "unanswered": true, "webnode2": true,
}

// QuestionPage reads the page to fetch from a question URL: its host
// (www.quora.com or a language edition) and the question's path, /<slug>
// or /unanswered/<slug>. An answer's permalink (/<slug>/answer/<author>,
// /<slug>/answers/<id>) names its question. quora.com and m.quora.com
// are www. Anything else is the caller's 422 naming url.
func QuestionPage(raw string) (host, path string, err error) {
	bad := func(code, msg string) error { return upstream.InvalidParameterFault("url", code, msg) }
	u, perr := url.Parse(strings.TrimSpace(raw))
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", "", bad("invalid_url", "url must be an http(s) link to a question page of this platform")
	}
	host = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	switch {
	case host == "quora.com" || host == "www.quora.com" || host == "m.quora.com":
		host = "www.quora.com"
	case slices.Contains(LanguageHosts, host):
	default:
		return "", "", bad("not_a_question", "url must be a question page on the platform's main site or one of its language editions")
	}
	var parts []string
	for _, p := range strings.Split(u.EscapedPath(), "/") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	notQuestion := bad("not_a_question", "url must be a question page: /<question>, /unanswered/<question> or an answer's link")
	switch {
	case len(parts) == 2 && parts[0] == "unanswered" && slug(parts[1]):
		return host, "/unanswered/" + parts[1], nil
	case len(parts) == 1 && !reserved[strings.ToLower(parts[0])] && slug(parts[0]):
		return host, "/" + parts[0], nil
	case len(parts) == 3 && (parts[1] == "answer" || parts[1] == "answers") && !reserved[strings.ToLower(parts[0])] && slug(parts[0]):
		return host, "/" + parts[0], nil
	}
	return "", "", notQuestion
}

// slug: a question slug (one escaped path segment) is letters, digits,
// hyphens and percent escapes (titles in other scripts), as the site
// writes it; an escaped slash or a dot segment is no slug.
func slug(s string) bool {
	if s == "" || len(s) > 1000 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || strings.IndexByte("-%_.+", b) >= 0) {
			return false
		}
	}
	u, err := url.PathUnescape(s)
	return err == nil && u != "." && u != ".." && !strings.ContainsAny(u, "/\\")
}

// blocked recognises block pages and the site's walls: a challenge
// (htmldata.Challenge), a page that ended up on the login or sign-up page
// or the home page (the services report redirects; a question is never
// at /), or a page whose root component is the login, sign-up or
// logged-out home page. The unblocking services may get through from
// another network, so these fail over.
func blocked(p *pages.Page) (string, bool) {
	if reason, ok := htmldata.Challenge(p.Body); ok {
		return reason, true
	}
	if u, err := url.Parse(p.URL); err == nil {
		path := strings.ToLower(u.Path)
		switch {
		case path == "" || path == "/":
			return "a wall (redirected to the home page)", true
		case strings.HasPrefix(path, "/login"), strings.HasPrefix(path, "/signup"), strings.HasPrefix(path, "/challenge"):
			return "a login wall (redirected to the login page)", true
		}
	}
	if wall(rootComponent(p.Body)) {
		return "a login wall (the page is the login or sign-up page)", true
	}
	return "", false
}

// wall reports whether a root component name is a login, sign-up or
// logged-out home page rather than content.
func wall(root string) bool {
	r := strings.ToLower(root)
	return r != "" && (strings.Contains(r, "login") || strings.Contains(r, "signup") || strings.Contains(r, "loggedouthome"))
}
