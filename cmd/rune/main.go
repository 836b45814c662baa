// Command rune runs Rune workflows: in this process (run), or on RabbitMQ,
// Redis and workers (worker, start); it also validates definitions and
// measures throughput (bench).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses shared by every subcommand.
const (
	exitOK      = 0
	exitFailed  = 1 // the execution failed or was halted (cancelled), or a server failed
	exitInvalid = 2 // invalid workflow, input or usage
)

// exitErr is an error that ends the command with its own exit status.
type exitErr struct {
	code int
	err  error
}

func (e exitErr) Error() string { return e.err.Error() }
func (e exitErr) Unwrap() error { return e.err }

// usageError is bad command-line input: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	name, summary string
	run           func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what a subcommand reads and writes; tests replace it.
type cliEnv struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// exit is set by a command that wants a status other than 0/1/2 rules.
	exit int
}

func commands() []command {
	return []command{
		{"run", "run a workflow in this process (no servers)", cmdRun},
		{"validate", "check a workflow definition and list every problem", cmdValidate},
		{"worker", "run nodes from RabbitMQ (distributed runtime)", cmdWorker},
		{"scheduler", "fire due timers of wait and delay nodes (distributed runtime)", cmdScheduler},
		{"start", "start an execution on running workers; --wait follows it", cmdStart},
		{"bench", "measure node executions per second", cmdBench},
		{"server", "the master: HTTP API, dispatcher, history, live streams (embedded default without URLs)", cmdServer},
		{"token", "create, list or revoke API tokens of a server's store", cmdToken},
		{"audit", "show a server's audit log of state-changing requests", cmdAudit},
		{"subscribers", "import, show or delete the subscribers of notifications", cmdSubscribers}, // issue 36
		{"workflows", "push or list workflows on a server", cmdWorkflows},
		{"executions", "list, get, follow, cancel, re-run, pause or resume executions on a server", cmdExecutions},
		{"hooks", "create, list, rotate, disable or delete a workflow's webhooks on a server", cmdHooks},
		{"schedules", "create, list, pause, resume or delete a workflow's cron schedules on a server", cmdSchedules},
		{"events", "send an event to waiting wait_for_event nodes; list and decide approvals", cmdEvents},                 // issue 34
		{"templates", "put, get, list, preview or delete the message templates email and sms nodes render", cmdTemplates}, // issue 36

		{"permissions", "print the RabbitMQ and Redis commands that give a role what it needs", cmdPermissions},
		{"dlq", "list, show, replay or purge dead letters (distributed runtime)", cmdDLQ},
		{"help", "show the help of a command: rune help run", cmdHelp},
		{"version", "print the version and the commit it was built from (also --version)", cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	code := runMain(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}

func runMain(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		printUsage(env.stderr)
		return exitInvalid
	}
	switch args[0] {
	case "-h", "-help", "--help":
		args = []string{"help"}
	case "-version", "--version":
		args = []string{"version"}
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		var ue usageError
		var ee exitErr
		switch {
		case err == nil:
			return env.exit
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ee):
			fmt.Fprintf(env.stderr, "rune %s: %v\n", c.name, ee.err)
			return ee.code
		case errors.As(err, &ue):
			fmt.Fprintf(env.stderr, "rune %s: %s\n", c.name, ue.msg)
			return exitInvalid
		default:
			fmt.Fprintf(env.stderr, "rune %s: %v\n", c.name, err)
			return exitFailed
		}
	}
	unknownCommand(env.stderr, args[0])
	return exitInvalid
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("rune run wf.json --json"), returning the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	helpFor(fs)
	// The flag package shows the help on every error too: only -h should.
	help := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = help }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				help()
				return nil, err
			}
			return nil, usageError{fmt.Sprintf("%v%s (rune help %s lists the flags)", err, flagSuggestion(fs, err), fs.Name())}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// workflowArg parses args and returns the one positional argument, the
// workflow file, that run, validate and start take.
func workflowArg(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef("want exactly one workflow file, got %d (see rune %s -h)", len(pos), fs.Name())
	}
	return pos[0], nil
}
