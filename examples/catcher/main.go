// Command catcher stands in for an SMTP server and an SMS provider on this
// machine, so the welcome series example runs without accounts anywhere:
//
//	go run ./examples/catcher &
//	go run ./cmd/rune run examples/welcome_series.json --input @examples/welcome_series.input.json \
//	    --credentials examples/welcome_series.credentials.json
//
// It prints every mail and text it receives, and serves the texts as JSON at
// http://127.0.0.1:8025/messages. It listens on loopback only.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rune-org/rune/internal/catcher"
)

func main() {
	smtpAddr := flag.String("smtp", "127.0.0.1:2525", "SMTP address (plain, no AUTH)")
	smsAddr := flag.String("sms", "127.0.0.1:8025", "SMS provider address (Twilio-compatible, account ACdev / dev-token; and /webhook)")
	failing := flag.String("sms-failing", "127.0.0.1:8026", "a failing SMS provider's address: it answers 503 to every text (provider_failover.json's primary); \"\" for none")
	flag.Parse()
	s, err := catcher.StartSMTP(catcher.SMTPConfig{Addr: *smtpAddr, OnMail: func(m catcher.Mail) {
		fmt.Printf("mail  %s → %s: %q (Message-ID %s)\n", m.From, strings.Join(m.To, ", "), m.Header.Get("Subject"), m.Header.Get("Message-Id"))
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "catcher:", err)
		os.Exit(1)
	}
	defer s.Close()
	t, err := catcher.StartSMS(catcher.SMSConfig{Addr: *smsAddr, Accounts: map[string]string{"ACdev": "dev-token"}, Dedupe: true,
		OnSMS: func(m catcher.SMS) { fmt.Printf("sms   %s → %s: %q (%s)\n", m.From, m.To, m.Body, m.ID) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "catcher:", err)
		os.Exit(1)
	}
	defer t.Close()
	if *failing != "" {
		f, err := catcher.StartSMS(catcher.SMSConfig{Addr: *failing, Reply: func(int) (int, string) { return 503, "" }})
		if err != nil {
			fmt.Fprintln(os.Stderr, "catcher:", err)
			os.Exit(1)
		}
		defer f.Close()
		fmt.Printf("catcher: a failing SMS provider (503) on %s\n", f.URL())
	}
	fmt.Printf("catcher: SMTP on %s, SMS provider on %s (Ctrl-C stops)\n", s.Addr(), t.URL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
