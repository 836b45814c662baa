package suggest

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	cmds := []string{"name", "run", "validate", "worker", "scheduler", "start", "server", "executions", "workflows"}
	for _, c := range []struct{ word, want string }{
		{"valdiate", "validate"},
		{"serve", "server"},
		{"executoins", "executions"},
		{"Workflow", "workflows"},
		{"rn", "run"},
		{"xyz", ""},          // nothing near
		{"stat", "start"},    // one edit
		{"sxxxxxer", ""},     // too far for its length
		{"run", ""},          // the word itself is no suggestion
		{"wroker", "worker"}, // a swap of neighbours is one edit
		{"nmae", "name"},
	} {
		if got := Closest(c.word, cmds); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	// Two candidates as near: no guess.
	if got := Closest("fetch_2", []string{"fetch_1", "fetch_3"}); got != "" {
		t.Errorf("a tie gave %q", got)
	}
}
