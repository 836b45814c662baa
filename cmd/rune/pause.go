package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/rune-org/rune/client/api"
)

// Re-run from a node, pause and resume (issue 34): `rune executions rerun
// ID [--from NODE] [--context JSON]`, `rune executions pause|resume ID`,
// `rune workflows pause|resume ID`.

// executionControl runs the executions subcommands of issue 34; handled is
// false for the others.
func executionControl(ctx context.Context, env *cliEnv, c *apiClient, pos []string, from, acc string) (handled bool, err error) {
	switch pos[0] {
	case "rerun":
		var body []byte
		if from != "" || acc != "" {
			req := map[string]any{"from_node": from}
			if acc != "" {
				if !json.Valid([]byte(acc)) {
					return true, usagef("--context: not JSON")
				}
				req["context"] = json.RawMessage(acc)
			}
			if body, err = json.Marshal(req); err != nil {
				return true, err
			}
		}
		var x api.Execution
		if _, _, err := c.Do(ctx, "POST", "/v1/executions/"+url.PathEscape(pos[1])+"/rerun", body, nil, &x); err != nil {
			return true, err
		}
		where := "from the start"
		if from != "" {
			where = "from node " + from
		}
		fmt.Fprintf(env.stdout, "execution %s: re-run of %s %s (status %s)\n", x.ID, pos[1], where, x.Status)
		return true, nil
	case "pause", "resume":
		var x api.Execution
		if _, _, err := c.Do(ctx, "POST", "/v1/executions/"+url.PathEscape(pos[1])+"/"+pos[0], nil, nil, &x); err != nil {
			return true, err
		}
		fmt.Fprintf(env.stdout, "execution %s: %s requested (status %s)\n", x.ID, pos[0], x.Status)
		return true, nil
	}
	return false, nil
}

// workflowControl runs `rune workflows pause|resume ID`; handled is false
// for the other subcommands.
func workflowControl(ctx context.Context, env *cliEnv, c *apiClient, pos []string) (handled bool, err error) {
	if pos[0] != "pause" && pos[0] != "resume" {
		return false, nil
	}
	if len(pos) != 2 {
		return true, usagef("%s takes one workflow id", pos[0])
	}
	var p struct {
		WorkflowID string `json:"workflow_id"`
		Paused     bool   `json:"paused"`
	}
	if _, _, err := c.Do(ctx, "POST", "/v1/workflows/"+url.PathEscape(pos[1])+"/"+pos[0], nil, nil, &p); err != nil {
		return true, err
	}
	if p.Paused {
		fmt.Fprintf(env.stdout, "workflow %s: paused (its executions stay enqueued until it resumes)\n", p.WorkflowID)
	} else {
		fmt.Fprintf(env.stdout, "workflow %s: resumed\n", p.WorkflowID)
	}
	return true, nil
}
