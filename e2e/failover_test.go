package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rune-org/rune/internal/catcher"
)

// kill -9 during a failover (issue 36): the primary SMS provider answers
// 503, the backup takes the text, and the worker is killed after the
// backup's answer, before the send is recorded. The worker the message is
// redelivered to fails over again and hands the backup the same
// Idempotency-Key: the backup, which honours it, keeps one text, and
// $vars names the backup as the credential that sent.
func TestFailoverKilledAfterBackupSent(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "")
	primary, err := catcher.StartSMS(catcher.SMSConfig{Reply: func(int) (int, string) { return 503, "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Close() })
	backup, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{"ACbk": "tok-bk"}, Dedupe: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backup.Close() })
	creds := filepath.Join(t.TempDir(), "credentials.json")
	text := fmt.Sprintf(`{"texts-primary": {"type": "webhook", "url": %q},
		"texts-backup": {"type": "twilio", "base_url": %q, "account_sid": "ACbk", "auth_token": "tok-bk", "from": "+15550001111"}}`,
		primary.URL()+"/webhook", backup.URL())
	if err := os.WriteFile(creds, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	def := []byte(`{"id": "failover_sms", "nodes": [{"id": "start", "type": "trigger", "trigger": true},
		{"id": "send", "type": "sms", "credentials": {"ref": ["texts-primary", "texts-backup"]}, "parameters": {"to": "{{ $trigger.phone }}", "body": "hi"}}],
		"edges": [{"id": "e1", "src": "start", "dst": "send"}]}`)

	victim := c.startWorkerEnv([]string{"RUNE_TEST_KILL_AT=sent"}, "--credentials", creds)
	cs := c.collect()
	id := fmt.Sprintf("e2e_failover_%d", time.Now().UnixNano())
	c.startAll(c.compile(def), []string{id}, func(int) any { return map[string]any{"phone": "+14155550100"} })
	if code := victim.wait(t, 60*time.Second); code != -1 {
		t.Fatalf("the worker exited with status %d, want killed after the backup sent (-1)", code)
	}
	if primary.Requests() != 1 || backup.Requests() != 1 || len(backup.Messages()) != 1 {
		t.Fatalf("before the kill: primary %d requests, backup %d requests and %d texts; want 1, 1, 1",
			primary.Requests(), backup.Requests(), len(backup.Messages()))
	}
	rescuer := c.startWorker("--egress-allow", "127.0.0.0/8", "--credentials", creds)
	cs.waitDistinct(1, 60*time.Second)
	rescuer.terminate(t, 60*time.Second)
	cs.drain(c)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if p := cs.duplicateProblem([]*proc{victim, rescuer}); p != "" {
		t.Fatal(p)
	}
	comp := cs.first[id]
	if comp == nil || comp.Status != "completed" {
		t.Fatalf("completion %+v, want completed", comp)
	}
	vars, _ := comp.FinalContext["$vars"].(map[string]any)
	out, _ := vars["sms_send"].(map[string]any)
	msgs := backup.Messages()
	if len(primary.Messages()) != 0 || backup.Requests() != 2 || len(msgs) != 1 {
		t.Fatalf("primary kept %d, backup %d requests and %d texts: want 0, 2 (one key), 1", len(primary.Messages()), backup.Requests(), len(msgs))
	}
	if out["credential"] != "texts-backup" || out["message_id"] != msgs[0].ID || out["provider"] != "twilio" {
		t.Fatalf("$vars.sms_send = %v, want the backup's send of %s", out, msgs[0].ID)
	}
}
