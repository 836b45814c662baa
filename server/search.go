package server

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/rune-org/rune/store"
)

// hasQueryPrefix reports whether name is of one of the route's families of
// query parameters.
func (rt *Route) hasQueryPrefix(name string) bool {
	for _, p := range rt.QueryPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// searchQuery reads the executions list's trigger and input filters
// (issue 38): trigger=hook (a kind) or trigger=hook:h1 (one), and
// input.<key>[.<key>…]=<value> for each condition on the input, the value
// a JSON scalar (42, true, null, "42") or else a string (alice).
func searchQuery(r *http.Request) (string, []store.InputMatch, error) {
	q := r.URL.Query()
	trigger := q.Get("trigger")
	if _, _, err := store.TriggerFilter(trigger); err != nil {
		return "", nil, badRequest("query parameter %v", strings.TrimPrefix(err.Error(), "invalid: "))
	}
	var names []string
	for name := range q {
		if strings.HasPrefix(name, "input.") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var ms []store.InputMatch
	for _, name := range names {
		for _, v := range q[name] {
			ms = append(ms, store.InputMatch{Path: strings.Split(strings.TrimPrefix(name, "input."), "."), Value: store.ParseInputValue(v)})
		}
	}
	if _, _, err := store.InputFilter(ms); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return "", nil, badRequest("query parameter %s", strings.TrimPrefix(err.Error(), "invalid: "))
		}
		return "", nil, err
	}
	return trigger, ms, nil
}

// previewSchedule answers a cron's next fire times from now, as a schedule
// made with it would fire (GET /v1/schedules/preview?cron=…&timezone=…):
// the console shows them while a schedule is written.
func (s *Server) previewSchedule(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	p, err := parsePlan(scheduleSettings{Cron: q.Get("cron"), Timezone: q.Get("timezone")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"cron": p.cfg.Cron, "timezone": p.cfg.Timezone,
		"next_fire_times": p.upcoming(p.first(s.cfg.Now()), nextTimesShown)})
	return nil
}
