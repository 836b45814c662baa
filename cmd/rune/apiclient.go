package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rune-org/rune/client"
	"github.com/rune-org/rune/message"
	"github.com/rune-org/rune/workflow"
)

// apiClient talks to a rune server's HTTP API (docs/api.md).
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func (c *apiClient) flags(fs *flag.FlagSet, env *cliEnv) {
	def := env.getenv("RUNE_SERVER")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	fs.StringVar(&c.base, "server", def, "the server's URL (env RUNE_SERVER)")
	fs.StringVar(&c.token, "token", env.getenv("RUNE_TOKEN"), "API token (env RUNE_TOKEN; `rune token create NAME` makes one)")
}

// apiErrorBody is the server's problem details (docs/api.md, "Errors").
type apiErrorBody struct {
	Error struct {
		Code     string             `json:"code"`
		Message  string             `json:"detail"`
		Problems []workflow.Problem `json:"problems"`
	}
}

func (b *apiErrorBody) UnmarshalJSON(data []byte) error { return json.Unmarshal(data, &b.Error) }

// callError is an error answer of the server.
type callError struct {
	status int
	body   apiErrorBody
}

func (e *callError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d %s: %s", e.status, e.body.Error.Code, e.body.Error.Message)
	for _, p := range e.body.Error.Problems {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return b.String()
}

func (c *apiClient) request(ctx context.Context, method, path string, body []byte, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, rd)
	if err != nil {
		return nil, usagef("--server: %v", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	hc := c.http
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w (is `rune server` running? see --server)", method, path, err)
	}
	return resp, nil
}

// call sends a request and decodes a JSON answer into out (when not nil).
func (c *apiClient) call(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	resp, err := c.request(ctx, method, path, body, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		ce := &callError{status: resp.StatusCode}
		if json.Unmarshal(data, &ce.body) != nil {
			ce.body.Error.Message = strings.TrimSpace(string(data))
		}
		return resp.StatusCode, ce
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
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
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune workflows push FILE.json... | list [--json]   [--server URL] [--token T]\n\npush creates each workflow, or stores a new version of an existing one (none when its definition is\nunchanged); it skips, with a note, the .input.json and .credentials.json files of examples/.")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a subcommand: push FILE... or list")
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
		var page struct {
			Items []struct {
				ID        string    `json:"id"`
				Version   int       `json:"version"`
				Name      string    `json:"name"`
				CreatedAt time.Time `json:"created_at"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		cursor := ""
		for {
			if _, err := c.call(ctx, "GET", "/v1/workflows?limit=500&cursor="+url.QueryEscape(cursor), nil, &page); err != nil {
				return err
			}
			for _, w := range page.Items {
				fmt.Fprintf(env.stdout, "%-32s v%-4d %s  %s\n", w.ID, w.Version, w.CreatedAt.UTC().Format(time.RFC3339), w.Name)
			}
			if page.NextCursor == "" {
				return nil
			}
			cursor = page.NextCursor
		}
	}
	return usagef("unknown subcommand %q: want push or list", pos[0])
}

func pushWorkflow(ctx context.Context, env *cliEnv, c *apiClient, path string) error {
	raw, err := readFileLimited(path, workflow.MaxDefinitionSize)
	if err != nil {
		return usagef("%v", err)
	}
	var head struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &head)
	var out struct {
		ID        string `json:"id"`
		Version   int    `json:"version"`
		Unchanged bool   `json:"unchanged"`
	}
	_, err = c.call(ctx, "POST", "/v1/workflows", raw, &out)
	var ce *callError
	if errors.As(err, &ce) && ce.status == http.StatusConflict && head.ID != "" {
		_, err = c.call(ctx, "PUT", "/v1/workflows/"+url.PathEscape(head.ID), raw, &out)
	}
	if errors.As(err, &ce) && ce.status == http.StatusUnprocessableEntity {
		fmt.Fprintf(env.stderr, "%s: %d problem(s):\n", path, len(ce.body.Error.Problems))
		for _, p := range ce.body.Error.Problems {
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
	asJSON := fs.Bool("json", false, "follow: print exactly the CompletionMessage JSON on stdout")
	quiet := fs.Bool("quiet", false, "follow: do not show node progress")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: rune executions list [--workflow ID] [--status S] | get ID | follow ID | cancel ID   [--server URL] [--token T]\n\nfollow shows the live table of rune run until the completion; exit status 0 completed, 1 otherwise.")
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
	switch pos[0] {
	case "list":
		q := url.Values{}
		for k, v := range map[string]string{"workflow_id": *wfID, "status": *status} {
			if v != "" {
				q.Set(k, v)
			}
		}
		q.Set("limit", fmt.Sprint(*limit))
		var page struct {
			Items []struct {
				ID         string    `json:"id"`
				WorkflowID string    `json:"workflow_id"`
				Version    int       `json:"version"`
				Status     string    `json:"status"`
				Cursor     []string  `json:"cursor"`
				CreatedAt  time.Time `json:"created_at"`
			} `json:"items"`
		}
		if _, err := c.call(ctx, "GET", "/v1/executions?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, x := range page.Items {
			fmt.Fprintf(env.stdout, "%-40s %-24s v%-3d %-10s %s %s\n", x.ID, x.WorkflowID, x.Version, x.Status,
				x.CreatedAt.UTC().Format(time.RFC3339), strings.Join(x.Cursor, ","))
		}
		return nil
	case "get":
		var x json.RawMessage
		if _, err := c.call(ctx, "GET", "/v1/executions/"+url.PathEscape(pos[1]), nil, &x); err != nil {
			return err
		}
		return printJSON(env, x)
	case "cancel":
		var x struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if _, err := c.call(ctx, "POST", "/v1/executions/"+url.PathEscape(pos[1])+"/cancel", nil, &x); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "execution %s: cancel requested (status %s)\n", x.ID, x.Status)
		return nil
	case "follow":
		prog := newProgress(env.stderr, *quiet)
		comp, err := follow(ctx, &c, pos[1], prog.status)
		prog.finish(comp)
		if err != nil {
			return err
		}
		return reportCompletion(env, comp, *asJSON)
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
		h := http.Header{"Accept": {"text/event-stream"}}
		if last != "" {
			h.Set("Last-Event-ID", last)
		}
		resp, err := c.request(ctx, "GET", "/v1/executions/"+url.PathEscape(id)+"/events", nil, h)
		if err != nil {
			if ctx.Err() != nil || attempt >= 5 {
				return nil, err
			}
			time.Sleep(time.Second)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			ce := &callError{status: resp.StatusCode}
			_ = json.Unmarshal(data, &ce.body)
			return nil, ce
		}
		comp, err := readEvents(resp.Body, &last, onStatus)
		resp.Body.Close()
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
