package bench

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The campaign bench, with 200 subscribers on each channel: the catcher
// receives exactly one message per subscriber not opted out with
// preferences on, and one per subscriber bare (the bench fails otherwise).
func TestCampaignBench(t *testing.T) {
	t.Parallel()
	for _, channel := range []string{"email", "sms"} {
		t.Run(channel, func(t *testing.T) {
			t.Parallel()
			var stdout strings.Builder
			env := &Env{Stdout: &stdout, Stderr: io.Discard, Getenv: func(string) string { return "" }, Logger: slog.New(slog.DiscardHandler)}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const n = 200
			if err := benchCampaign(ctx, env, campaignBench{subscribers: n, optedOut: 10, channel: channel, clients: 4, data: t.TempDir(), asJSON: true}); err != nil {
				t.Fatal(err)
			}
			var res CampaignResult
			if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
				t.Fatalf("result: %v in %q", err, stdout.String())
			}
			if len(res.Rows) != 2 || res.Rows[0].Variant != "preferences" || res.Rows[0].OptedOut != 20 || res.Rows[0].Received != n-20 ||
				res.Rows[1].Variant != "bare" || res.Rows[1].Received != n || res.PreferencesSet != 40 {
				t.Fatalf("result %+v", res)
			}
		})
	}
}
