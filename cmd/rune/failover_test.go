package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rune-org/rune/internal/catcher"
	"github.com/rune-org/rune/message"
)

// examples/provider_failover.json on the embedded runtime (rune run): the
// primary SMS provider answers 503 and the primary SMTP server cannot be
// reached; the backups send, and $vars, the mail's subject and the log
// name the credential that sent each.
func TestRunProviderFailoverExample(t *testing.T) {
	t.Parallel()
	mail, err := catcher.StartSMTP(catcher.SMTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mail.Close()
	texts, err := catcher.StartSMS(catcher.SMSConfig{Accounts: map[string]string{"ACdev": "dev-token"}})
	if err != nil {
		t.Fatal(err)
	}
	defer texts.Close()
	failing, err := catcher.StartSMS(catcher.SMSConfig{Reply: func(int) (int, string) { return 503, "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer failing.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	raw, err := os.ReadFile("../../examples/provider_failover.credentials.json")
	if err != nil {
		t.Fatal(err)
	}
	creds := strings.NewReplacer("http://127.0.0.1:8026", failing.URL(), "http://127.0.0.1:8025", texts.URL(),
		`"port": 2526`, `"port": `+strconv.Itoa(dead), `"port": 2525`, `"port": `+strconv.Itoa(mail.Port())).Replace(string(raw))
	path := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(path, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, nil, "run", "../../examples/provider_failover.json", "--input", "@../../examples/provider_failover.input.json",
		"--credentials", path, "--json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var comp message.Completion
	if err := json.Unmarshal([]byte(stdout), &comp); err != nil {
		t.Fatal(err)
	}
	vars, _ := comp.FinalContext["$vars"].(map[string]any)
	sms, _ := vars["sms_page"].(map[string]any)
	email, _ := vars["email_notice"].(map[string]any)
	if comp.Status != "completed" || sms["credential"] != "sms-backup" || email["credential"] != "mail-backup" {
		t.Fatalf("completion %s, $vars %v", comp.Status, vars)
	}
	if failing.Requests() != 1 || len(texts.Messages()) != 1 || len(mail.Mails()) != 1 {
		t.Fatalf("primary %d requests, backup %d texts, %d mails: want 1, 1, 1", failing.Requests(), len(texts.Messages()), len(mail.Mails()))
	}
	m := mail.Mails()[0]
	if got := m.Header.Get("Subject"); got != "Paged +14155550100 through sms-backup" {
		t.Errorf("subject %q", got)
	}
	if !strings.Contains(string(m.Data), "after sms-primary failed") {
		t.Errorf("mail body %q lacks the failed primary", m.Data)
	}
	if report, _ := comp.FinalContext["$report"].(map[string]any); fmt.Sprint(report["message"]) != "text sent by sms-backup, mail by mail-backup" {
		t.Errorf("$report = %v", comp.FinalContext["$report"])
	}
}
