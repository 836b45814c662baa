package engine

import (
	"encoding/json"
)

// The replay phase: a message that finished before publishes again the
// effects of the record its Finish stored (settle, in mode.go, plans them
// from it as from a run).

// stored decodes the record a Finish stored for the message, whose effects
// are then published again (a replay): fused nodes are replayed from it,
// not run, and a split's items are evaluated again.
func (s *step) stored(raw []byte) (*record, error) {
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, invalidf("message %s: stored record is unreadable: %v", s.m.MessageID, err)
	}
	s.items = nil
	s.replaying = true
	return &rec, nil
}
