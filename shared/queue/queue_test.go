package queue

import (
	"testing"
)

func TestEncodedIsTheBodyOrTheDecodedValueAsJSON(t *testing.T) {
	type value struct {
		Kind string `json:"kind"`
	}
	cases := []struct {
		m    Message
		want string
	}{
		{Message{Body: []byte(`{"kind":"sent"}`), Decoded: value{"ignored"}}, `{"kind":"sent"}`},
		{Message{Decoded: value{"usage"}}, `{"kind":"usage"}`},
		{Message{}, ``},
		{Message{Decoded: func() {}}, ``}, // cannot be encoded: an empty body, refused downstream
	}
	for i, c := range cases {
		if got := string(c.m.Encoded()); got != c.want {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
}

func TestWithBodiesFillsACopy(t *testing.T) {
	msgs := []Message{{ID: "a", Body: []byte("1")}, {ID: "b", Decoded: 2}}
	out := WithBodies(msgs)
	if string(out[0].Body) != "1" || string(out[1].Body) != "2" || out[1].ID != "b" {
		t.Fatalf("%+v", out)
	}
	if msgs[1].Body != nil {
		t.Fatal("WithBodies changed its argument")
	}
	complete := []Message{{ID: "a", Body: []byte("1")}}
	if got := WithBodies(complete); &got[0] != &complete[0] {
		t.Fatal("messages that all have bodies were copied")
	}
}
