package nodes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rune-org/rune/coord"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/internal/testinfra"
)

// timedEffects notes when each Record was called and when it returned.
type timedEffects struct {
	coord.Effects
	mu               sync.Mutex
	called, recorded map[string]time.Time
}

func (e *timedEffects) Record(ctx context.Context, key string, result []byte) error {
	called := time.Now()
	err := e.Effects.Record(ctx, key, result)
	e.mu.Lock()
	e.called[key], e.recorded[key] = called, time.Now()
	e.mu.Unlock()
	return err
}

// The one window of a send (docs/dsl.md, "Sending exactly once") runs from
// the SMTP server accepting a mail to the record of its result in Redis: a
// worker killed there sends it again (same Message-ID). This test sends 64
// mails at once, as a worker's default concurrency on one core would, with
// the record on the real Redis, and measures that window per mail; it fails
// if a record ever came before its mail was accepted (a crash there would
// lose the mail) or a mail went out twice.
func TestEmailSendWindow(t *testing.T) {
	t.Parallel()
	opts, err := goredis.ParseURL(testinfra.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	prefix := testinfra.Name(t)
	t.Cleanup(func() {
		iter := rc.Scan(context.Background(), 0, prefix+":*", 1000).Iterator()
		for iter.Next(context.Background()) {
			rc.Del(context.Background(), iter.Val())
		}
	})
	var mu sync.Mutex
	accepted := map[string]time.Time{} // by idempotency key
	s := startSMTP(t, catcher.SMTPConfig{OnMail: func(m catcher.Mail) {
		key, _, _ := strings.Cut(strings.Trim(m.Header.Get("Message-Id"), "<>"), "@")
		mu.Lock()
		accepted[key] = time.Now()
		mu.Unlock()
	}})
	ef := &timedEffects{Effects: coordredis.NewEffects(rc, coordredis.EffectOptions{Prefix: prefix}), called: map[string]time.Time{}, recorded: map[string]time.Time{}}
	params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := runEmail(t, Options{Effects: ef}, smtpCred(s, "none"), params, welcomeEnv, fmt.Sprintf("key%02d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := len(s.Mails()); got != n {
		t.Fatalf("%d mails, want %d", got, n)
	}
	var window, reply, redis []time.Duration
	for i := range n {
		key := fmt.Sprintf("key%02d", i)
		acc, ok1 := accepted[key]
		rec, ok2 := ef.recorded[key]
		if !ok1 || !ok2 {
			t.Fatalf("%s: accepted %v, recorded %v", key, ok1, ok2)
		}
		if rec.Before(acc) {
			t.Fatalf("%s: recorded %v before the server accepted it", key, acc.Sub(rec))
		}
		window = append(window, rec.Sub(acc))
		reply = append(reply, ef.called[key].Sub(acc))
		redis = append(redis, rec.Sub(ef.called[key]))
	}
	for _, d := range []struct {
		what string
		ds   []time.Duration
	}{{"server accepted → recorded in Redis (the window)", window}, {"of which server accepted → Record called", reply}, {"and Record's round trip", redis}} {
		slices.Sort(d.ds)
		t.Logf("%d sends at once: %s: p50 %v, p90 %v, max %v", n, d.what,
			d.ds[n/2].Round(10*time.Microsecond), d.ds[n*9/10].Round(10*time.Microsecond), d.ds[n-1].Round(10*time.Microsecond))
	}
}
