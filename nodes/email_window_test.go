package nodes

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/rune-org/rune/coord"
	coordredis "github.com/rune-org/rune/coord/redis"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/internal/testinfra"
)

// timedEffects notes when each Record was called and when it returned,
// through the connection a send holds (coord.Holder) as in a worker.
type timedEffects struct {
	coord.Effects
	times *recordTimes
}

type recordTimes struct {
	mu               sync.Mutex
	called, recorded map[string]time.Time
}

func (e *timedEffects) Hold(ctx context.Context, key string) (coord.Effects, func()) {
	held, release := e.Effects.(coord.Holder).Hold(ctx, key)
	return &timedEffects{Effects: held, times: e.times}, release
}

func (e *timedEffects) Record(ctx context.Context, key string, result []byte) error {
	called := time.Now()
	err := e.Effects.Record(ctx, key, result)
	e.times.mu.Lock()
	e.times.called[key], e.times.recorded[key] = called, time.Now()
	e.times.mu.Unlock()
	return err
}

// The one window of a send (docs/dsl.md, "Sending exactly once") runs from
// the final "." of the mail's data written to the socket to the Record
// command written to Redis's: a worker killed there sends the mail again
// (same Message-ID). A worker killed later leaves a record, and the server, which
// has the whole mail, accepts it: the redelivery sends nothing. This test
// sends 64 mails at once, as a worker's default concurrency on one core
// would, records on the real Redis, and measures per mail that window, the
// record's round trip, and when the server accepted; it fails if a mail
// went out twice or was not recorded.
func TestEmailSendWindow(t *testing.T) {
	t.Parallel()
	opts, err := goredis.ParseURL(testinfra.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	// When the Record of each mail is written to Redis: its result holds
	// the Message-ID, key@rune.test.
	written := map[string]time.Time{}
	var mu sync.Mutex
	ids := regexp.MustCompile(`(key[0-9]+)@rune\.test`)
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return tappedConn{Conn: c, onWrite: func(p []byte) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			for _, m := range ids.FindAllSubmatch(p, -1) {
				if _, seen := written[string(m[1])]; !seen {
					written[string(m[1])] = now
				}
			}
		}}, nil
	}
	const n = 64
	// As coordredis.OpenPool makes a worker's records' pool: its
	// concurrency, maintenance notifications off.
	opts.PoolSize = n
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	rc := goredis.NewClient(opts)
	t.Cleanup(func() { rc.Close() })
	prefix := testinfra.Name(t)
	t.Cleanup(func() {
		iter := rc.Scan(context.Background(), 0, prefix+":*", 1000).Iterator()
		for iter.Next(context.Background()) {
			rc.Del(context.Background(), iter.Val())
		}
	})
	accepted, handed := map[string]time.Time{}, map[string]time.Time{} // by idempotency key
	s := startSMTP(t, catcher.SMTPConfig{OnMail: func(m catcher.Mail) {
		key, _, _ := strings.Cut(strings.Trim(m.Header.Get("Message-Id"), "<>"), "@")
		mu.Lock()
		accepted[key] = time.Now()
		mu.Unlock()
	}})
	times := &recordTimes{called: map[string]time.Time{}, recorded: map[string]time.Time{}}
	ef := &timedEffects{Effects: coordredis.NewEffects(rc, coordredis.EffectOptions{Prefix: prefix}), times: times}
	fault := func(point, key string) {
		if point == FaultSent {
			mu.Lock()
			handed[key] = time.Now()
			mu.Unlock()
		}
	}
	params := map[string]any{"from": "a@rune.test", "to": "ada@example.com", "subject": "x", "text": "y"}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := runEmail(t, Options{Effects: ef, Fault: fault}, smtpCred(s, "none"), params, welcomeEnv, fmt.Sprintf("key%02d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := len(s.Mails()); got != n {
		t.Fatalf("%d mails, want %d", got, n)
	}
	var window, redis, accept []time.Duration
	for i := range n {
		key := fmt.Sprintf("key%02d", i)
		acc, ok1 := accepted[key]
		rec, ok2 := times.recorded[key]
		h, ok3 := handed[key]
		w, ok4 := written[key]
		if !ok1 || !ok2 || !ok3 || !ok4 {
			t.Fatalf("%s: accepted %v, recorded %v, handed over %v, record written %v", key, ok1, ok2, ok3, ok4)
		}
		window = append(window, w.Sub(h))
		redis = append(redis, rec.Sub(times.called[key]))
		accept = append(accept, acc.Sub(h))
	}
	for _, d := range []struct {
		what string
		ds   []time.Duration
	}{{"final \".\" written → Record written to Redis (the window)", window}, {"Record's round trip", redis}, {"final \".\" written → server accepted", accept}} {
		slices.Sort(d.ds)
		t.Logf("%d sends at once: %s: p50 %v, p90 %v, max %v", n, d.what,
			d.ds[n/2].Round(time.Microsecond), d.ds[n*9/10].Round(time.Microsecond), d.ds[n-1].Round(time.Microsecond))
	}
}

// tappedConn calls onWrite with what each Write wrote, once written.
type tappedConn struct {
	net.Conn
	onWrite func([]byte)
}

func (c tappedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.onWrite(p[:n])
	return n, err
}
