package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/store/sqlite"
)

// scheduleRig runs `rune server` processes on one store: PostgreSQL (the
// distributed master, with a `rune worker`) or one SQLite file (embedded
// servers, each with its in-process worker).
type scheduleRig struct {
	t     *testing.T
	d     *deployment
	kind  string
	data  string // SQLite: the --data directory
	st    store.Store
	token string
}

func newScheduleRig(t *testing.T, kind string) *scheduleRig {
	r := &scheduleRig{t: t, d: newDeployment(t), kind: kind}
	if kind == "postgres" {
		r.d.worker()
		r.st = r.d.store()
	} else {
		r.data = t.TempDir()
		st, err := sqlite.Open(context.Background(), filepath.Join(r.data, "rune.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		r.st = st
	}
	r.token = newToken(t, r.st, "schedules")
	return r
}

func (r *scheduleRig) server() *proc {
	r.t.Helper()
	var p *proc
	if r.kind == "postgres" {
		p = r.d.server()
	} else {
		p = r.d.start(true, "server", "--addr", "127.0.0.1:0", "--data", r.data)
	}
	r.d.waitHealthy(p)
	return p
}

func (r *scheduleRig) api(p *proc) *api {
	return newAPI(r.t, &target{url: "http://" + p.addr, token: r.token, store: r.st, output: r.d.logs.String})
}

// slots returns the slot of every execution of schedule id, with how many
// executions each slot has.
func (r *scheduleRig) slots(workflowID, id string) map[time.Time]int {
	r.t.Helper()
	out := map[time.Time]int{}
	page, err := r.st.ListExecutions(context.Background(), store.ExecutionFilter{WorkflowID: workflowID, Limit: 500})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, x := range page.Items {
		if x.Trigger != "schedule:"+id {
			continue
		}
		var in struct{ Slot time.Time }
		if err := json.Unmarshal(x.Input, &in); err != nil {
			r.t.Fatal(err)
		}
		out[in.Slot.UTC()]++
	}
	return out
}

// waitSlots waits (a loaded machine: generously) until cond holds for the
// schedule's slots.
func (r *scheduleRig) waitSlots(workflowID, id, what string, within time.Duration, cond func(map[time.Time]int) bool) map[time.Time]int {
	r.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := r.slots(workflowID, id)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not within %s; slots %v", what, within, sortedSlots(s))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sortedSlots(s map[time.Time]int) []time.Time {
	var out []time.Time
	for t := range s {
		out = append(out, t)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

const tickWorkflow = `{"id":"ticker","nodes":[{"id":"start","type":"trigger","trigger":true},
	{"id":"s","type":"set","parameters":{"values":{"slot":"{{ $trigger.slot }}"}}}],"edges":[{"id":"e1","src":"start","dst":"s"}]}`

// TestScheduleTwoServers: a schedule `@every 1s` with two server processes
// sharing one store runs once per slot for 30 slots, on PostgreSQL. (Two
// servers on one SQLite data directory are refused: e2e/durable_test.go.)
func TestScheduleTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s of slots on real processes")
	}
	t.Parallel()
	for _, kind := range []string{"postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			r := newScheduleRig(t, kind)
			a, b := r.server(), r.server()
			api := r.api(a)
			api.pushWorkflow(tickWorkflow)
			start := time.Now().Add(3 * time.Second).Truncate(time.Second)
			end := start.Add(29 * time.Second)
			var sc scheduleView
			api.want(http.StatusCreated, "POST", "/v1/workflows/ticker/schedules", []byte(fmt.Sprintf(
				`{"cron":"@every 1s","start_at":%q,"end_at":%q}`, start.Format(time.RFC3339), end.Format(time.RFC3339))), &sc)
			r.waitSlots("ticker", sc.ID, "30 slots", 90*time.Second, func(s map[time.Time]int) bool { return len(s) >= 30 })
			time.Sleep(2 * time.Second) // a late second fire of a slot would show now
			slots := r.slots("ticker", sc.ID)
			got := sortedSlots(slots)
			if len(got) != 30 || !got[0].Equal(start) || !got[29].Equal(end) {
				t.Fatalf("%d slots %v … %v, want 30 from %v to %v", len(got), got[0], got[len(got)-1], start, end)
			}
			for slot, n := range slots {
				if n != 1 {
					t.Errorf("slot %v ran %d times, want once", slot, n)
				}
			}
			// Every slot's execution ran to its end, once.
			page, err := r.st.ListExecutions(context.Background(), store.ExecutionFilter{WorkflowID: "ticker", Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range page.Items {
				api.waitStatus(x.ID, store.StatusCompleted)
			}
			var after scheduleView
			api.want(http.StatusOK, "GET", "/v1/workflows/ticker/schedules/"+sc.ID, nil, &after)
			if after.NextAt != nil || len(after.NextFireTimes) != 0 {
				t.Fatalf("after its end: next %v %v, want none", after.NextAt, after.NextFireTimes)
			}
			// Which server fired which slot is the race's business; show it.
			firedBy := map[string]int{}
			for _, m := range regexp.MustCompile(`msg="schedule fired" server=(\S+) schedule=`+sc.ID).FindAllStringSubmatch(r.d.logs.String(), -1) {
				firedBy[m[1]]++
			}
			t.Logf("%s: fires by server: %v", kind, firedBy)
			b.stop()
		})
	}
}

// TestScheduleKillNine: a server killed with kill -9 and restarted after
// at least 5 missed slots runs none of them with policy skip and all of
// them with catch_up, on PostgreSQL and SQLite; slots after the restart run.
func TestScheduleKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real processes")
	}
	t.Parallel()
	for _, kind := range []string{"postgres", "sqlite"} {
		for _, policy := range []string{"skip", "catch_up"} {
			t.Run(kind+"/"+policy, func(t *testing.T) {
				t.Parallel()
				r := newScheduleRig(t, kind)
				p := r.server()
				api := r.api(p)
				api.pushWorkflow(tickWorkflow)
				var sc scheduleView
				api.want(http.StatusCreated, "POST", "/v1/workflows/ticker/schedules",
					[]byte(`{"cron":"@every 1s","policy":"`+policy+`","catch_up_max":20}`), &sc)
				r.waitSlots("ticker", sc.ID, "2 slots", 60*time.Second, func(s map[time.Time]int) bool { return len(s) >= 2 })
				p.kill()
				killed := time.Now()
				before := sortedSlots(r.slots("ticker", sc.ID))
				last := before[len(before)-1]
				time.Sleep(7 * time.Second)
				restarted := time.Now()
				p2 := r.server()
				defer p2.stop()
				// Slots that came due more than the grace (1 s) before the
				// restart were certainly missed: no server ran them.
				var missed []time.Time
				for s := last.Add(time.Second); s.Before(restarted.Add(-time.Second)); s = s.Add(time.Second) {
					missed = append(missed, s)
				}
				if len(missed) < 5 {
					t.Fatalf("only %d slots missed (last fired %v, killed %v, restarted %v)", len(missed), last, killed, restarted)
				}
				slots := r.waitSlots("ticker", sc.ID, "2 slots after the restart", 60*time.Second, func(s map[time.Time]int) bool {
					n := 0
					for slot := range s {
						if slot.After(restarted) {
							n++
						}
					}
					return n >= 2
				})
				fired := 0
				for _, s := range missed {
					fired += slots[s]
				}
				want := 0
				if policy == "catch_up" {
					want = len(missed)
				}
				if fired != want {
					t.Fatalf("policy %s: %d of the %d missed slots (%v … %v) ran, want %d; slots %v", policy, fired, len(missed),
						missed[0], missed[len(missed)-1], want, sortedSlots(slots))
				}
				for slot, n := range slots {
					if n != 1 {
						t.Errorf("slot %v ran %d times", slot, n)
					}
				}
				t.Logf("%s/%s: %d slots missed while down, %d of them ran", kind, policy, len(missed), fired)
			})
		}
	}
}
