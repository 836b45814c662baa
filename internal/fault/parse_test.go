//go:build fault

package fault

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scheduler, notify string
		claim, kill       bool
		err               string
	}{
		{},
		{scheduler: "exit-after-claim", claim: true},
		{scheduler: "hold-after-claim=3s", claim: true},
		{notify: "sent", kill: true},
		{notify: " recorded ", kill: true},
		{scheduler: "hold-after-claim=soon", err: `RUNE_FAULT "hold-after-claim=soon"`},
		{scheduler: "explode", err: `RUNE_FAULT "explode": want exit-after-claim`},
		{notify: "elsewhere", err: `RUNE_TEST_KILL_AT "elsewhere": want sent or recorded`},
	} {
		h, err := Parse(env(map[string]string{SchedulerEnv: c.scheduler, NotifyEnv: c.notify}))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want one containing %q", c, err, c.err)
			}
			continue
		}
		if err != nil || (h.AfterClaim != nil) != c.claim || (h.Notify != nil) != c.kill {
			t.Errorf("%+v: hooks claim %v kill %v, error %v", c, h.AfterClaim != nil, h.Notify != nil, err)
		}
	}
}
