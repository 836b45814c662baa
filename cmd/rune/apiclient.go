package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/client/api"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/workflow"
)

// apiClient is the typed API client (client/api) with the flags that
// point it at a server.
type apiClient struct {
	api.Client
}

func (c *apiClient) flags(fs *flag.FlagSet, env *cliEnv) {
	def := env.getenv("RUNE_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	fs.StringVar(&c.Base, "server", def, "the server's URL (env RUNE_SERVER)")
	fs.StringVar(&c.Token, "token", env.getenv("RUNE_TOKEN"), "API token (env RUNE_TOKEN; `rune token create NAME` makes one)")
}

// printTable writes rows under a header, in aligned columns.
func printTable(env *cliEnv, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(env.stdout, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func timeText(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printJSON(env *cliEnv, v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdWorkflows(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("workflows", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c apiClient
	c.flags(fs, env)
	asJSON := fs.Bool("json", false, "list: print the workflows as JSON")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune workflows push FILE.json... | list [--json] | pause ID | resume ID   [--server URL] [--token T]\n\npush creates each workflow, or stores a new version of an existing one (none when its definition is\nunchanged); it skips, with a note, the .input.json and .credentials.json files of examples/.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a subcommand: push FILE... or list")
	}
	// pause, resume (issue 34, pause.go).
	if handled, err := workflowControl(ctx, env, &c, pos); handled {
		return err
	}
	switch pos[0] {
	case "push":
		if len(pos) < 2 {
			return usagef("push: want at least one workflow file")
		}
		for _, path := range pos[1:] {
			if kind := notWorkflow(path); kind != "" {
				fmt.Fprintf(env.stderr, "%s: skipped: %s, not a workflow\n", path, kind)
				continue
			}
			if err := pushWorkflow(ctx, env, &c, path); err != nil {
				return err
			}
		}
		return nil
	case "list":
		if len(pos) != 1 {
			return usagef("list takes no arguments")
		}
		items := []api.Workflow{}
		for cursor := ""; ; {
			page, err := c.ListWorkflows(ctx, 500, cursor)
			if err != nil {
				return err
			}
			items = append(items, page.Items...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if *asJSON {
			return printJSON(env, items)
		}
		rows := make([][]string, 0, len(items))
		for _, w := range items {
			rows = append(rows, []string{w.ID, "v" + strconv.Itoa(w.Version), timeText(&w.CreatedAt), w.Name})
		}
		return printTable(env, []string{"ID", "VERSION", "CREATED", "NAME"}, rows)
	}
	return usagef("unknown subcommand %q: want push or list", pos[0])
}

func pushWorkflow(ctx context.Context, env *cliEnv, c *apiClient, path string) error {
	raw, err := readFileLimited(path, workflow.MaxDefinitionSize)
	if err != nil {
		return usagef("%v", err)
	}
	out, err := c.PushWorkflow(ctx, raw)
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == api.CodeInvalidWorkflow {
		fmt.Fprintf(env.stderr, "%s: %d problem(s):\n", path, len(ae.Problems))
		for _, p := range ae.Problems {
			fmt.Fprintf(env.stderr, "  %s\n", p)
		}
		env.exit = exitInvalid
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if out.Unchanged {
		fmt.Fprintf(env.stdout, "%s: workflow %s unchanged (version %d)\n", path, out.ID, out.Version)
		return nil
	}
	fmt.Fprintf(env.stdout, "%s: workflow %s version %d\n", path, out.ID, out.Version)
	return nil
}

// notWorkflow says what a file named on `workflows push` is when it is not
// a workflow, as examples/ names them: a trigger payload (NAME.input.json)
// or credentials (NAME.credentials.json); "" for anything else.
func notWorkflow(path string) string {
	switch {
	case strings.HasSuffix(path, ".input.json"):
		return "a trigger payload (.input.json)"
	case strings.HasSuffix(path, ".credentials.json"):
		return "credentials (.credentials.json)"
	}
	return ""
}

func cmdExecutions(ctx context.Context, env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("executions", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	var c apiClient
	c.flags(fs, env)
	wfID := fs.String("workflow", "", "list: only this workflow's executions")
	status := fs.String("status", "", "list: only executions in this status")
	limit := fs.Int("limit", 50, "list: how many (newest first)")
	asJSON := fs.Bool("json", false, "list: print the page as JSON; follow: print exactly the CompletionMessage JSON on stdout")
	quiet := fs.Bool("quiet", false, "follow: do not show node progress")
	from := fs.String("from", "", "rerun: the node to re-run from (default: the whole execution)")
	rerunCtx := fs.String("context", "", "rerun --from: the context JSON to start with (default: the one the node saw)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune executions list [--workflow ID] [--status S] | get ID | follow ID | cancel ID\n       | rerun ID [--from NODE [--context JSON]] | pause ID | resume ID   [--server URL] [--token T]\n\nfollow shows the live table of rune run until the completion; exit status 0 completed, 1 otherwise.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a subcommand: list, get ID, follow ID or cancel ID")
	}
	if pos[0] != "list" && len(pos) != 2 {
		return usagef("%s takes one execution id", pos[0])
	}
	// rerun, pause, resume (issue 34, pause.go).
	if handled, err := executionControl(ctx, env, &c, pos, *from, *rerunCtx); handled {
		return err
	}
	switch pos[0] {
	case "list":
		page, err := c.ListExecutions(ctx, api.ExecutionFilter{WorkflowID: *wfID, Status: *status, Limit: *limit})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(env, page)
		}
		rows := make([][]string, 0, len(page.Items))
		for _, x := range page.Items {
			cursor := strings.Join(x.Cursor, ",")
			if cursor == "" {
				cursor = "-"
			}
			rows = append(rows, []string{x.ID, x.WorkflowID, "v" + strconv.Itoa(x.Version), x.Status, timeText(&x.CreatedAt), cursor})
		}
		return printTable(env, []string{"ID", "WORKFLOW", "VERSION", "STATUS", "CREATED", "CURSOR"}, rows)
	case "get":
		// As the server sent it: every field, in its order.
		var x json.RawMessage
		if _, _, err := c.Do(ctx, "GET", "/v1/executions/"+url.PathEscape(pos[1]), nil, nil, &x); err != nil {
			return err
		}
		return printJSON(env, x)
	case "cancel":
		x, err := c.CancelExecution(ctx, pos[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "execution %s: cancel requested (status %s)\n", x.ID, x.Status)
		return nil
	case "follow":
		prog := newProgress(env.stderr, *quiet)
		comp, err := follow(ctx, &c, pos[1], prog.status)
		return prog.report(env, comp, err, *asJSON)
	}
	return usagef("unknown subcommand %q: want list, get, follow or cancel", pos[0])
}

// errCancelledBeforeRun ends a follow of an execution cancelled before it ran.
var errCancelledBeforeRun = errors.New("the execution was cancelled before it ran")

// follow reads an execution's event stream to its completion, calling
// onStatus for each status; a dropped connection is resumed from the last
// event id, so no status is seen twice or missed.
func follow(ctx context.Context, c *apiClient, id string, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	last := ""
	for attempt := 0; ; attempt++ {
		body, err := c.ExecutionEvents(ctx, id, last)
		var ae *api.Error
		if errors.As(err, &ae) {
			return nil, err
		}
		if err != nil {
			if ctx.Err() != nil || attempt >= 5 {
				return nil, err
			}
			time.Sleep(time.Second)
			continue
		}
		comp, err := readEvents(body, &last, onStatus)
		body.Close()
		var dl *client.DeadLetteredError
		if comp != nil || errors.Is(err, errCancelledBeforeRun) || errors.As(err, &dl) {
			return comp, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		attempt = 0 // the stream worked: reconnect at once
	}
}

// readEvents parses Server-Sent Events until the end of the stream (which
// the server closes after the completion and its last statuses), keeping
// the last event id in *last; it returns the completion, or a
// *client.DeadLetteredError at a dead-lettered message's status.
func readEvents(r io.Reader, last *string, onStatus func(*message.NodeStatus)) (*message.Completion, error) {
	var comp *message.Completion
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id, event string
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if event != "" || len(data) > 0 {
				if id != "" {
					*last = id
				}
				switch event {
				case "status":
					var st message.NodeStatus
					if json.Unmarshal(data, &st) == nil && onStatus != nil {
						onStatus(&st)
					}
					if st.DeadLetter() {
						// The server shows the execution failed; a replay
						// from the dead-letter queue would take it up again.
						return nil, &client.DeadLetteredError{ExecutionID: st.ExecutionID, NodeID: st.NodeID, Reason: st.Error.Message}
					}
				case "completion":
					var c message.Completion
					if err := json.Unmarshal(data, &c); err != nil {
						return nil, fmt.Errorf("decode the completion: %w", err)
					}
					comp = &c
				case "execution":
					var ch struct {
						Change string `json:"change"`
					}
					if json.Unmarshal(data, &ch) == nil && ch.Change == "cancelled" {
						return nil, errCancelledBeforeRun
					}
				}
			}
			id, event, data = "", "", nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "event":
			event = value
		case "data":
			data = append(data, value...)
		}
	}
	if comp != nil {
		return comp, nil
	}
	return nil, sc.Err()
}
