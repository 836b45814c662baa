package console

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/rune-org/rune/store"
)

// durationsMax bounds the run times the dashboard reads for its
// percentiles: the newest of the last day's finished executions.
const durationsMax = 100_000

// failingMax is how many failing nodes the dashboard ranks.
const failingMax = 20

// dashRow is one workflow on the dashboard: executions created in the last
// day and hour by status, how many of them ended per hour, and the run
// times' p50 and p95 (of the day's finished ones).
type dashRow struct {
	WorkflowID          string
	Day, Hour           map[string]int
	DayTotal, HourTotal int
	// EndedHour counts the last hour's executions that ended; EndedPerHour
	// is the day's that ended, per hour.
	EndedHour    int
	EndedPerHour float64
	P50, P95     time.Duration
	Timed        int
}

// stats is the store's Stats, when it has them.
func (c *Console) stats() store.Stats {
	st, _ := c.cfg.Store.(store.Stats)
	return st
}

// dashboardPage shows, per workflow, counts by status and throughput over
// the last hour and day, p50/p95 run time, and the failing nodes ranked:
// from the store's own tables (store.Stats).
func (c *Console) dashboardPage(w http.ResponseWriter, r *http.Request) {
	st := c.stats()
	if st == nil {
		http.NotFound(w, r)
		return
	}
	acc := accessOf(r)
	now := c.cfg.Now()
	day, hour := now.Add(-24*time.Hour), now.Add(-time.Hour)
	counts, err := st.StatusCounts(r.Context(), day, hour)
	if err != nil {
		c.fail(w, r, "the dashboard", err)
		return
	}
	ds, err := st.Durations(r.Context(), day, durationsMax)
	if err != nil {
		c.fail(w, r, "the dashboard", err)
		return
	}
	failing, err := st.FailingNodes(r.Context(), day, failingMax)
	if err != nil {
		c.fail(w, r, "the dashboard", err)
		return
	}
	rows := map[string]*dashRow{}
	row := func(id string) *dashRow {
		if rows[id] == nil {
			rows[id] = &dashRow{WorkflowID: id, Day: map[string]int{}, Hour: map[string]int{}}
		}
		return rows[id]
	}
	endedDay := map[string]int{}
	for _, n := range counts {
		if !acc.sees(n.WorkflowID) {
			continue
		}
		d := row(n.WorkflowID)
		d.Day[n.Status] += n.Count
		d.Hour[n.Status] += n.Recent
		d.DayTotal += n.Count
		d.HourTotal += n.Recent
		if store.Final(n.Status) {
			endedDay[n.WorkflowID] += n.Count
			d.EndedHour += n.Recent
		}
	}
	times := map[string][]time.Duration{}
	for _, d := range ds {
		if acc.sees(d.WorkflowID) {
			times[d.WorkflowID] = append(times[d.WorkflowID], d.D)
		}
	}
	out := make([]*dashRow, 0, len(rows))
	for id, d := range rows {
		d.EndedPerHour = float64(endedDay[id]) / 24
		d.Timed = len(times[id])
		d.P50, d.P95 = store.Percentile(times[id], 50).Round(time.Millisecond), store.Percentile(times[id], 95).Round(time.Millisecond)
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *dashRow) int {
		return cmp.Or(cmp.Compare(b.DayTotal, a.DayTotal), cmp.Compare(a.WorkflowID, b.WorkflowID))
	})
	failing = slices.DeleteFunc(failing, func(f store.FailingNode) bool { return !acc.sees(f.WorkflowID) })
	data := map[string]any{"Title": "Dashboard", "Rows": out, "Failing": failing,
		"Statuses": statuses, "Since": day, "Capped": len(ds) == durationsMax}
	c.addDepths(r, data) // issue 38: queues and timers (depths.go)
	c.render(w, r, "dashboard", data)
}
