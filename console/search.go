package console

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rune-org/rune/store"
)

// andWord separates the list's input conditions.
var andWord = regexp.MustCompile(`(?i)\s+and\s+`)

// parseWhere reads the list's input filter (issue 38): conditions
// "$trigger.user_id = 42" joined by "and"; the path may also start with
// "input." or nothing; the value is a JSON scalar (42, true, null, "42")
// or else a string (alice), as the API's input.<path>= reads it.
func parseWhere(s string) ([]store.InputMatch, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ms []store.InputMatch
	for _, cond := range andWord.Split(strings.TrimSpace(s), -1) {
		path, value, ok := strings.Cut(cond, "=")
		path = strings.TrimSpace(path)
		if !ok || path == "" {
			return nil, fmt.Errorf("%w: input filter %q: want $trigger.<path> = <value>", store.ErrInvalid, cond)
		}
		for _, p := range []string{"$trigger.", "input."} {
			path = strings.TrimPrefix(path, p)
		}
		ms = append(ms, store.InputMatch{Path: strings.Split(path, "."), Value: store.ParseInputValue(strings.TrimSpace(value))})
	}
	if _, _, err := store.InputFilter(ms); err != nil {
		return nil, fmt.Errorf("input filter: %w", err)
	}
	return ms, nil
}
