package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/internal/sqlitedb"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/secrets"
	"github.com/rune-org/rune/server"
	"github.com/rune-org/rune/store/sqlite"
	"github.com/rune-org/rune/subscribers"
)

// campaignBench is `rune bench --mode campaign` (issue 36): the durable
// embedded `rune server` (SQLite) in this process, the catcher's SMTP or
// SMS provider, --subscribers imported over the API and one campaign
// execution (a split over their ids into an email or sms node with
// `subscriber` and `category`), then the same campaign bare (`to` given,
// no subscriber lookup, no preferences).
type campaignBench struct {
	subscribers int
	// optedOut is the percentage of subscribers whose preferences turn the
	// campaign's category off; as many again get preferences that allow
	// it (another category off), so that lookups find preferences both ways.
	optedOut    int
	channel     string // "email" or "sms"
	concurrency int
	clients     int
	data        string
	asJSON      bool
	bareFirst   bool
}

// CampaignRow is one campaign execution of `rune bench --mode campaign`.
type CampaignRow struct {
	// Variant is "preferences" (subscriber + category) or "bare" (to).
	Variant    string `json:"variant"`
	Recipients int    `json:"recipients"`
	OptedOut   int    `json:"opted_out"`
	// Received is the distinct messages the catcher received (a message
	// sent again with the same Message-ID or idempotency key counts once);
	// Resent is the copies beyond those.
	Received int `json:"received"`
	Resent   int `json:"resent"`
	// Seconds is the trigger to the execution shown completed.
	Seconds float64 `json:"seconds"`
	// SendsPerSec is Received over the trigger → last message received.
	SendsPerSec float64 `json:"sends_per_sec"`
	// NodeRunsPerSec is the node runs (the split and one send node per
	// recipient, opted out or not) over Seconds.
	NodeRunsPerSec float64 `json:"node_runs_per_sec"`
	// FirstSendMS is the trigger → the first message received.
	FirstSendMS float64 `json:"first_send_ms"`
	PeakHeapMB  float64 `json:"peak_heap_mb"`
}

// CampaignResult is what `rune bench --mode campaign` reports.
type CampaignResult struct {
	Subscribers       int           `json:"subscribers"`
	Channel           string        `json:"channel"`
	ImportPerSec      float64       `json:"subscribers_imported_per_sec"`
	PreferencesSet    int           `json:"preferences_set"`
	PreferencesPerSec float64       `json:"preferences_set_per_sec"`
	Rows              []CampaignRow `json:"rows"`
	PeakRSSMB         float64       `json:"peak_rss_mb"`
	Data              string        `json:"data"`
}

// campaignInbox counts what the catcher receives, per recipient, keyed by
// the message's Message-ID (email) or idempotency key (sms).
type campaignInbox struct {
	mu    sync.Mutex
	keys  map[string]map[string]bool
	total int
	first time.Time
	last  time.Time
	count atomic.Int64
}

func newCampaignInbox() *campaignInbox { return &campaignInbox{keys: map[string]map[string]bool{}} }

func (c *campaignInbox) add(to, key string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys[to] == nil {
		c.keys[to] = map[string]bool{}
	}
	c.keys[to][key] = true
	c.total++
	if c.first.IsZero() {
		c.first = at
	}
	c.last = at
	c.count.Add(1)
}

func benchCampaign(ctx context.Context, env *Env, b campaignBench) (err error) {
	if b.subscribers <= 0 || b.optedOut < 0 || b.optedOut > 50 || (b.channel != "email" && b.channel != "sms") {
		return usagef("--mode campaign wants --subscribers positive, --opted-out-percent from 0 to 50 and --channel email or sms")
	}
	dir := b.data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rune-bench-campaign-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	log := env.Logger
	st, err := sqlite.Open(ctx, filepath.Join(dir, "rune.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	keys, err := secrets.LoadKeys("", filepath.Join(dir, "secret.key"), true)
	if err != nil {
		return err
	}
	db, err := sqlitedb.Open(ctx, filepath.Join(dir, runtimeDB), sqlitedb.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	// As `rune server` wires its embedded runtime (cmd/rune/server.go); no
	// egress policy: the catcher is on loopback.
	rt, err := embedded.New(embedded.Options{Logger: log, Concurrency: b.concurrency, ConsumeEvents: true, DB: db,
		Secrets: secrets.Store{Store: st, Keys: keys}, Nodes: nodes.Options{Logger: log,
			Subscribers: subscribers.Source{Store: st, Keys: keys, PublicURL: base}}})
	if err != nil {
		ln.Close()
		return err
	}
	defer rt.Close()
	// A trigger of 100,000 ids is over the default 1 MiB.
	s, err := server.New(server.Config{Store: st, Broker: rt.Broker, Engine: rt.Engine, Keys: keys, Logger: log, PublicURL: base,
		MaxTrigger: 32 << 20, Crons: server.CronConfig{Off: true}})
	if err != nil {
		ln.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	hs := &http.Server{Handler: s.Handler()}
	defer func() { hs.Close(); stop(); wg.Wait() }()
	wg.Go(func() {
		if err := s.Run(sctx); err != nil {
			log.Error("bench server stopped", "err", err)
		}
	})
	wg.Go(func() { _ = hs.Serve(ln) })
	tok, rec, err := server.NewToken("bench", time.Now())
	if err != nil {
		return err
	}
	if err := st.CreateToken(ctx, rec); err != nil {
		return err
	}
	rig := &benchRig{tag: "campaign", base: base, tok: tok, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: b.clients * 2}}}

	// The catcher, counting into the current campaign's inbox.
	var inbox atomic.Pointer[campaignInbox]
	inbox.Store(newCampaignInbox())
	var cred string
	switch b.channel {
	case "email":
		mail, err := catcher.StartSMTP(catcher.SMTPConfig{OnMail: func(m catcher.Mail) {
			for _, to := range m.To {
				inbox.Load().add(to, m.Header.Get("Message-Id"), m.Received)
			}
		}})
		if err != nil {
			return err
		}
		defer mail.Close()
		cred = fmt.Sprintf(`{"name": "bench-out", "type": "smtp", "value": {"type": "smtp", "host": "127.0.0.1", "port": "%d", "tls": "none", "from": "bench@rune.test"}}`, mail.Port())
	case "sms":
		texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{"ACbench": "tok-bench"}, OnSMS: func(m catcher.SMS) {
			key := m.IdempotencyKey
			if key == "" {
				key = m.ID
			}
			inbox.Load().add(m.To, key, time.Now())
		}})
		if err != nil {
			return err
		}
		defer texts.Close()
		cred = fmt.Sprintf(`{"name": "bench-out", "type": "twilio", "value": {"type": "twilio", "base_url": %q, "account_sid": "ACbench", "auth_token": "tok-bench", "from": "+15550001111"}}`, texts.URL())
	}
	if _, err := rig.send(ctx, "/v1/credentials", []byte(cred), true, nil, http.StatusCreated); err != nil {
		return err
	}
	fmt.Fprintf(env.Stderr, "rune bench: campaign of %d subscribers (%d%% opted out) by %s, durable embedded server (SQLite) under %s\n", b.subscribers, b.optedOut, b.channel, dir)

	id := func(i int) string { return fmt.Sprintf("s%07d", i) }
	addr := func(i int) string {
		if b.channel == "sms" {
			return fmt.Sprintf("+1555%07d", i)
		}
		return id(i) + "@example.com"
	}
	res := CampaignResult{Subscribers: b.subscribers, Channel: b.channel, Data: dir}

	// Import, 10,000 rows a request (the route's limit).
	t0 := time.Now()
	for from := 0; from < b.subscribers; from += 10000 {
		var rows bytes.Buffer
		for i := from; i < min(from+10000, b.subscribers); i++ {
			fmt.Fprintf(&rows, `{"id": %q, "email": "%s@example.com", "phone": "+1555%07d", "timezone": "Europe/Paris", "data": {"first_name": "N%d"}}`+"\n", id(i), id(i), i, i)
		}
		if _, err := rig.sendWith(ctx, "/v1/subscribers/import", rows.Bytes(), true, nil, http.Header{"Content-Type": {"application/x-ndjson"}}, http.StatusOK); err != nil {
			return err
		}
	}
	res.ImportPerSec = float64(b.subscribers) / time.Since(t0).Seconds()
	fmt.Fprintf(env.Stderr, "rune bench: imported %d subscribers in %v\n", b.subscribers, time.Since(t0).Round(time.Millisecond))

	// Preferences: every (100/optedOut)th subscriber opts out of the
	// category, the one after it turns another category off.
	optedOut := map[int]bool{}
	var prefs []int
	if b.optedOut > 0 {
		step := 100 / b.optedOut
		for i := 0; i < b.subscribers; i += step {
			optedOut[i] = true
			prefs = append(prefs, i)
			if i+1 < b.subscribers && step > 1 {
				prefs = append(prefs, i+1)
			}
		}
	}
	t0 = time.Now()
	if err := parallel(ctx, b.clients, len(prefs), func(k int) error {
		i := prefs[k]
		body := `{"categories": {"other": false}}`
		if optedOut[i] {
			body = `{"categories": {"bench": false}}`
		}
		return rig.put(ctx, "/v1/subscribers/"+id(i)+"/preferences", body)
	}); err != nil {
		return err
	}
	res.PreferencesSet = len(prefs)
	res.PreferencesPerSec = float64(len(prefs)) / time.Since(t0).Seconds()

	retry := `"retry": {"max_attempts": 5, "initial_delay": "100ms"}`
	var params string
	switch b.channel {
	case "email":
		params = `"subject": "Sale, {{ subscriber.data.first_name }}", "text": "50% off"`
	case "sms":
		params = `"body": "Sale, {{ subscriber.data.first_name }}: 50% off"`
	}
	prefWF := fmt.Sprintf(`{"id": "bench_campaign", "nodes": [{"id": "start", "type": "trigger", "trigger": true},
		{"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.users }}"}},
		{"id": "send", "type": %q, "credentials": {"ref": "bench-out"}, %s, "parameters": {"subscriber": "{{ $item }}", "category": "bench", %s}}],
		"edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "send"}]}`, b.channel, retry, params)
	bareParams := strings.ReplaceAll(params, "{{ subscriber.data.first_name }}", "friend")
	bareWF := fmt.Sprintf(`{"id": "bench_campaign_bare", "nodes": [{"id": "start", "type": "trigger", "trigger": true},
		{"id": "each", "type": "split", "parameters": {"input_array": "{{ $trigger.users }}"}},
		{"id": "send", "type": %q, "credentials": {"ref": "bench-out"}, %s, "parameters": {"to": "{{ $item }}", %s}}],
		"edges": [{"id": "e1", "src": "start", "dst": "each"}, {"id": "e2", "src": "each", "dst": "send"}]}`, b.channel, retry, bareParams)
	for _, wf := range []string{prefWF, bareWF} {
		if _, err := rig.send(ctx, "/v1/workflows", []byte(wf), true, nil, http.StatusCreated); err != nil {
			return err
		}
	}

	run := func(variant, workflow string, item func(int) string, opted map[int]bool) (CampaignRow, error) {
		row := CampaignRow{Variant: variant, Recipients: b.subscribers, OptedOut: len(opted)}
		users := make([]string, b.subscribers)
		for i := range users {
			users[i] = item(i)
		}
		input, _ := json.Marshal(map[string]any{"users": users})
		box := newCampaignInbox()
		inbox.Store(box)
		runtime.GC()
		var peakHeap atomic.Uint64
		done := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			var ms runtime.MemStats
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > peakHeap.Load() {
					peakHeap.Store(ms.HeapAlloc)
				}
				select {
				case <-done:
					return
				case <-tick.C:
				}
			}
		})
		defer func() { close(done); sampler.Wait() }()
		start := time.Now()
		exec, err := rig.post(ctx, "/v1/workflows/"+workflow+"/executions", input, http.StatusCreated)
		if err != nil {
			return row, err
		}
		// Until the catcher has every message, the bench watches it alone:
		// GET /v1/executions/{id} lists the execution's node runs, as many
		// as recipients, a cost the platform would not have otherwise.
		want := int64(b.subscribers - len(opted))
		last, lastAt := int64(0), time.Now()
		for box.count.Load() < want {
			if n := box.count.Load(); n != last {
				last, lastAt = n, time.Now()
			} else if time.Since(lastAt) > 5*time.Minute {
				return row, fmt.Errorf("campaign %s (%s): nothing received for 5 minutes (%d so far, want %d)", exec, variant, n, want)
			}
			select {
			case <-ctx.Done():
				return row, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		fmt.Fprintf(env.Stderr, "rune bench: %s: %d received after %v\n", variant, box.count.Load(), time.Since(start).Round(time.Millisecond))
		lastAt = time.Now()
		for {
			var x struct {
				Status     string          `json:"status"`
				Completion json.RawMessage `json:"completion"`
			}
			if err := rig.get(ctx, "/v1/executions/"+exec, &x); err != nil {
				return row, err
			}
			if x.Status == "completed" {
				break
			}
			if x.Status == "failed" || x.Status == "cancelled" {
				return row, fmt.Errorf("campaign %s (%s): %s %s", exec, variant, x.Status, x.Completion)
			}
			if time.Since(lastAt) > 5*time.Minute {
				return row, fmt.Errorf("campaign %s (%s): not completed 5 minutes after the last message", exec, variant)
			}
			select {
			case <-ctx.Done():
				return row, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		row.Seconds = time.Since(start).Seconds()
		box.mu.Lock()
		defer box.mu.Unlock()
		for i := range b.subscribers {
			got := len(box.keys[addr(i)])
			if opted[i] && got != 0 || !opted[i] && got != 1 {
				return row, fmt.Errorf("campaign %s (%s): %s (opted out: %v) received %d distinct messages, want %d", exec, variant, addr(i), opted[i], got, map[bool]int{true: 0, false: 1}[opted[i]])
			}
			row.Received += got
		}
		if len(box.keys) != b.subscribers-len(opted) || row.Received != b.subscribers-len(opted) {
			return row, fmt.Errorf("campaign %s (%s): %d recipients received %d messages, want %d", exec, variant, len(box.keys), row.Received, b.subscribers-len(opted))
		}
		row.Resent = box.total - row.Received
		if row.Received > 0 {
			row.SendsPerSec = float64(row.Received) / box.last.Sub(start).Seconds()
			row.FirstSendMS = float64(box.first.Sub(start).Microseconds()) / 1000
		}
		row.NodeRunsPerSec = float64(b.subscribers+1) / row.Seconds
		row.PeakHeapMB = float64(peakHeap.Load()) / (1 << 20)
		return row, nil
	}
	// The second campaign runs on a store holding the first one's history:
	// bareFirst swaps them, to tell that from the variants' own costs.
	runs := []func() (CampaignRow, error){
		func() (CampaignRow, error) { return run("preferences", "bench_campaign", id, optedOut) },
		func() (CampaignRow, error) { return run("bare", "bench_campaign_bare", addr, nil) },
	}
	if b.bareFirst {
		runs[0], runs[1] = runs[1], runs[0]
	}
	for _, f := range runs {
		row, err := f()
		if err != nil {
			return err
		}
		res.Rows = append(res.Rows, row)
	}
	res.PeakRSSMB = float64(PeakRSS()) / (1 << 20)
	if b.asJSON {
		return json.NewEncoder(env.Stdout).Encode(res)
	}
	fmt.Fprintf(env.Stdout, "campaign of %d subscribers by %s, durable embedded server (SQLite), catcher in this process\n", b.subscribers, b.channel)
	fmt.Fprintf(env.Stdout, "import: %.0f subscribers/s; preferences: %d set, %.0f/s\n", res.ImportPerSec, res.PreferencesSet, res.PreferencesPerSec)
	fmt.Fprintf(env.Stdout, "%-12s %10s %9s %9s %7s %9s %9s %13s %10s %9s\n", "variant", "recipients", "opted out", "received", "resent", "seconds", "sends/s", "node runs/s", "first ms", "heap MB")
	for _, r := range res.Rows {
		fmt.Fprintf(env.Stdout, "%-12s %10d %9d %9d %7d %9.1f %9.0f %13.0f %10.0f %9.0f\n", r.Variant, r.Recipients, r.OptedOut, r.Received, r.Resent, r.Seconds, r.SendsPerSec, r.NodeRunsPerSec, r.FirstSendMS, r.PeakHeapMB)
	}
	fmt.Fprintf(env.Stdout, "peak RSS %.0f MB (the process: server, runtime, catcher holding every message)\n", res.PeakRSSMB)
	return nil
}

// put sends body to path with PUT and the rig's token; 200 wanted.
func (r *benchRig) put(ctx context.Context, path, body string) error {
	req, _ := http.NewRequestWithContext(ctx, "PUT", r.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.tok)
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %d %s", path, resp.StatusCode, data)
	}
	return nil
}

// get decodes path's 200 answer into out.
func (r *benchRig) get(ctx context.Context, path string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", r.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+r.tok)
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	return json.Unmarshal(data, out)
}
