package console_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/rune-org/rune/console"
)

// TestDashboardDepths (issue 38): the dashboard lists the server's queue
// and timer depths when it has them (the distributed server), says when
// reading some failed, and shows no such section on the embedded default.
func TestDashboardDepths(t *testing.T) {
	t.Parallel()
	plain := embeddedTarget(t).login(t)
	if _, page := plain.get("/dashboard"); strings.Contains(page, `id="depths"`) {
		t.Error("the embedded default's dashboard shows queue depths")
	}
	tg := embeddedTarget(t, func(cfg *console.Config) {
		cfg.Depths = func(context.Context) ([]console.Depth, error) {
			return []console.Depth{{Name: "workflow.execution", Count: 1234, Note: "ready messages"},
				{Name: "timers scheduled", Count: 7, Note: "next due 2026-11-27 10:00:00 UTC"}}, errors.New("redis down")
		}
	})
	_, page := tg.login(t).get("/dashboard")
	for _, want := range []string{`data-depth="workflow.execution"`, "1,234", `data-depth="timers scheduled"`, "next due 2026-11-27 10:00:00 UTC", "Reading some depths failed"} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if strings.Contains(page, "redis down") {
		t.Error("the dashboard shows the error itself (it is logged)")
	}
}
