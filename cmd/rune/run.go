package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/embedded"
	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

func cmdRun(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	input := fs.String("input", "", "trigger payload: inline JSON, or @file.json (default {})")
	asJSON := fs.Bool("json", false, "print exactly the CompletionMessage JSON on stdout")
	quiet := fs.Bool("quiet", false, "do not show node progress on stderr")
	creds := credentialsFlag(fs)
	// issue 34: the workflows that workflow nodes start (run_children.go)
	wfDir := fs.String("workflows", "", "directory of the workflow files that workflow nodes start as children")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune run WORKFLOW.json [--input '{\"k\":1}' | --input @payload.json] [--json] [--credentials FILE] [--workflows DIR]\n\nRuns the workflow in this process and waits for it to complete.\nEverything is in memory: stopping the process (Ctrl-C) ends the execution,\nwaits included. For work that survives a restart, use `rune server`.\nExit status: 0 completed, 1 failed (a node failed with the halt strategy) or halted (cancelled),\n2 invalid workflow, input or usage.")
		fs.PrintDefaults()
	}
	path, err := workflowArg(fs, args)
	if err != nil {
		return err
	}
	raw, in, err := readWorkflowAndInput(path, *input)
	if err != nil {
		return err
	}
	// Logs go through the live table, which draws itself again below them.
	prog := newProgress(env.stderr, *quiet)
	// log nodes speak at info level: a user running a workflow wants to see them.
	nodeLog := slog.New(slog.NewTextHandler(prog, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sec, err := resolver(*creds)
	if err != nil {
		return err
	}
	rt, err := embedded.New(embedded.Options{Logger: loggerTo(env, prog), Secrets: sec, Nodes: nodes.Options{Logger: nodeLog}})
	if err != nil {
		return err
	}
	defer rt.Close()
	kctx, stopKids := context.WithCancel(ctx)
	kids := &runChildren{ctx: kctx, rt: rt, log: loggerTo(env, prog), started: map[string]bool{}}
	defer kids.wg.Wait()
	defer stopKids() // children left running (wait false) end with the run
	if *wfDir != "" {
		if kids.defs, err = loadWorkflowDir(rt.Engine, *wfDir); err != nil {
			return err
		}
	}
	return compileThen(env, rt.Engine, path, raw, func(wf *engine.Workflow) error {
		comp, err := client.Run(ctx, rt.Broker, rt.Engine, wf, engine.NewExecutionID(time.Now()), in, kids.follow([]string{wf.Def.ID}, prog.status))
		return prog.report(env, comp, err, *asJSON)
	})
}

// compileThen compiles raw, the definition read from path, on eng (an
// invalid one: every problem, exit 2) and hands the workflow to then.
func compileThen(env *cliEnv, eng *engine.Engine, path string, raw []byte, then func(*engine.Workflow) error) error {
	wf, err := eng.Compile(raw)
	if err != nil {
		return invalidWorkflow(env, path, err)
	}
	return then(wf)
}

// readWorkflowAndInput reads the definition file and the --input payload.
func readWorkflowAndInput(path, input string) ([]byte, any, error) {
	raw, err := readFileLimited(path, workflow.MaxDefinitionSize)
	if err != nil {
		return nil, nil, usagef("%v", err)
	}
	in, err := readInput(input)
	if err != nil {
		return nil, nil, err
	}
	return raw, in, nil
}

// invalidWorkflow prints every problem of a definition and exits 2.
func invalidWorkflow(env *cliEnv, path string, err error) error {
	var ps workflow.Problems
	if errors.As(err, &ps) {
		fmt.Fprintf(env.stderr, "%s: %d problem(s):\n", path, len(ps))
		for _, p := range ps {
			fmt.Fprintf(env.stderr, "  %s\n", p)
		}
		env.exit = exitInvalid
		return nil
	}
	return usagef("%s: %v", path, err)
}

// reportCompletion prints the completion and sets the exit status from it.
func reportCompletion(env *cliEnv, comp *message.Completion, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(comp); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.stdout, "execution %s %s in %d ms\n", comp.ExecutionID, comp.Status, comp.TotalDurationMS)
		if f := comp.FailureReason; f != nil && f.NodeID != "" {
			fmt.Fprintf(env.stdout, "stopped by node %s: %s: %s\n", f.NodeID, f.Code, f.Message)
		} else if f != nil {
			fmt.Fprintf(env.stdout, "stopped: %s: %s\n", f.Code, f.Message)
		}
		out, _ := json.MarshalIndent(comp.FinalContext, "", "  ")
		fmt.Fprintf(env.stdout, "final context:\n%s\n", out)
	}
	if comp.Status != message.CompletionCompleted {
		env.exit = exitFailed
	}
	return nil
}

func cmdValidate(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune validate WORKFLOW.json...\n\nChecks each definition: prints \"FILE: valid\" on stdout, or every problem on stderr.\nExit status 0 when all are valid; 2 when any is not.")
	}
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("want one or more workflow files (rune help validate)")
	}
	rt, err := embedded.New(embedded.Options{Logger: cliLogger(env)})
	if err != nil {
		return err
	}
	defer rt.Close()
	for _, path := range paths {
		if err := validateFile(env, rt.Engine, path); err != nil {
			// One unreadable file does not stop the others' checks.
			fmt.Fprintf(env.stderr, "rune validate: %v\n", err)
			env.exit = exitInvalid
		}
	}
	return nil
}

// validateFile checks one definition file as every runtime does before it
// runs it, and reports the result.
func validateFile(env *cliEnv, eng *engine.Engine, path string) error {
	raw, err := readFileLimited(path, workflow.MaxDefinitionSize)
	if err != nil {
		return err
	}
	if _, err := eng.Compile(raw); err != nil {
		var ue usageError
		if err := invalidWorkflow(env, path, err); errors.As(err, &ue) {
			return ue
		}
		return nil
	}
	fmt.Fprintf(env.stdout, "%s: valid\n", path)
	return nil
}

// cliLogger logs warnings and errors to stderr; RUNE_LOG_LEVEL=debug|info shows more.
func cliLogger(env *cliEnv) *slog.Logger { return loggerTo(env, env.stderr) }

// loggerTo is cliLogger writing to w.
func loggerTo(env *cliEnv, w io.Writer) *slog.Logger {
	level := slog.LevelWarn
	if v := env.getenv("RUNE_LOG_LEVEL"); v != "" {
		_ = level.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
