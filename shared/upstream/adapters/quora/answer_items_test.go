package quora_test

import (
	"slices"
	"testing"

	"github.com/meridian-data/meridian/shared/upstream/adapters/quora"
)

const rustURL = "https://www.quora.com/How-should-I-begin-learning-Rust"

// The 2026 logged-out page: the answer list under question.answers
// (streamed edges and a deferred pageInfo), with the four kinds of items
// it holds: the site's machine answer, an answer from a question merged
// into this one (QuestionRelevantAnswerItem2 with isEquivalentAnswer), an
// inline block of related questions, and plain answers.
func TestAnswerItemKinds(t *testing.T) {
	data := direct(t).Data(t, endpoint, q(rustURL), "question-2026")
	if data["id"] != "5512048" || data["title"] != "How should I begin learning Rust?" || data["url"] != rustURL ||
		data["answer_count"] != 37.0 || data["follower_count"] != 412.0 {
		t.Fatalf("question %v", data)
	}
	as := answers(t, data)
	var ids []string
	for _, a := range as {
		ids = append(ids, a["id"].(string))
	}
	if !slices.Equal(ids, []string{"1502218866401927", "287310044", "301992817", "298004512"}) {
		t.Fatalf("answers %v", ids)
	}
	// The machine answer's item says it is not collapsed (isCollapsedForViewer).
	if m := as[0]; m["machine_answer"] != true || m["collapsed"] != false || m["from_equivalent_question"] != false ||
		m["text"] != "Start with the official book, then write small command-line tools.\nLearn ownership before async." {
		t.Errorf("machine answer %v", m)
	}
	// The merged question's answer is shown on the page: returned, marked,
	// and naming the question it was written for.
	e := as[1]
	if e["from_equivalent_question"] != true || e["collapsed"] != false || e["upvotes"] != 88.0 ||
		e["url"] != "https://www.quora.com/How-do-I-learn-Rust-2/answer/Mira-Castellano-7" ||
		e["author_credential"] != "Systems programmer since 2016" {
		t.Errorf("equivalent answer %v", e)
	}
	if eq := e["question"].(map[string]any); eq["id"] != "4401" || eq["title"] != "How do I learn Rust?" ||
		eq["url"] != "https://www.quora.com/How-do-I-learn-Rust-2" || eq["answer_count"] != 58.0 {
		t.Errorf("equivalent answer's question %v", eq)
	}
	for _, a := range as[2:] {
		if a["from_equivalent_question"] != false || a["collapsed"] != false || a["question"].(map[string]any)["id"] != "5512048" {
			t.Errorf("answer %v", a)
		}
	}
	if data["answers_note"] != "4 of 37 answers are returned: the page carries only its first answers, and the rest come from the site's own paged queries, which need the page's session and are not called." {
		t.Errorf("note %q", data["answers_note"])
	}
	if w, ok := data["_warnings"]; ok {
		t.Errorf("warnings %v", w)
	}
	related := data["related_questions"].([]any)
	if len(related) != 2 {
		t.Errorf("related %v", related)
	}
}

// An answer in a kind of list item Meridian does not know is not dropped
// silently: it is returned when it answers the page's question, and a
// warning says the list held items of an unknown kind.
func TestUnknownAnswerItem(t *testing.T) {
	data := direct(t).Data(t, endpoint, q(rustURL+"-unknown-item"), "question-unknown-item")
	as := answers(t, data)
	if len(as) != 4 || as[3]["id"] != "298004512" || as[3]["from_equivalent_question"] != false {
		t.Fatalf("answers %v", as)
	}
	if w := warnings(data); len(w) != 1 || w[0] != quora.WarnUnknownItem {
		t.Errorf("warnings %v", w)
	}
}
