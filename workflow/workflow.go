// Package workflow holds the workflow definition of ../docs/dsl.md: its types,
// decoding, validation and the graph queries the engine needs.
package workflow

import (
	"encoding/json"
)

// Definition is a workflow: a DAG of nodes joined by edges.
type Definition struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
	// Settings tune how the workflow runs; nil means the defaults.
	Settings *Settings `json:"settings,omitempty"`
}

// Settings tune how a workflow runs without changing what it does.
type Settings struct {
	// Fuse, when false, runs every node in a hop of its own. Default true:
	// a worker runs a pure successor (set, conditional, switch, log) in the
	// same hop as the node before it (docs/architecture.md, "Throughput
	// (issue 11)").
	Fuse *bool `json:"fuse,omitempty"`
	// Flow control (issue 35, flow.go): Concurrency caps the executions
	// running per key, Debounce collapses triggers per key, Priority (1…10,
	// default 5) orders a backlog.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Debounce    *Debounce    `json:"debounce,omitempty"`
	Priority    *int         `json:"priority,omitempty"`
}

// Fused says whether the workflow's pure nodes may run fused.
func (d *Definition) Fused() bool {
	return d.Settings == nil || d.Settings.Fuse == nil || *d.Settings.Fuse
}

// Node is one step of a workflow.
type Node struct {
	ID          string          `json:"id"`
	Name        string          `json:"name,omitempty"`
	Type        string          `json:"type"`
	Trigger     bool            `json:"trigger,omitempty"`
	Parameters  map[string]any  `json:"parameters,omitempty"`
	Credentials *CredentialRef  `json:"credentials,omitempty"`
	Error       *ErrorPolicy    `json:"error,omitempty"`
	Retry       *RetryPolicy    `json:"retry,omitempty"`
	Timeout     string          `json:"timeout,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"` // accepted for RFC examples; unused
	// RateLimit and Throttle are flow control by key (flow.go).
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
	Throttle  *Throttle  `json:"throttle,omitempty"`
}

// CredentialRef names a stored credential; the secret itself never appears in a definition.
type CredentialRef struct {
	Ref string `json:"ref"`
	// Failover are the credentials tried after Ref, in order, within one
	// attempt (email and sms: docs/notifications.md). In JSON, "ref" is
	// then a list: ["primary", "backup"].
	Failover []string `json:"-"`
}

// Error strategies (RFC 001 §9.1).
const (
	ErrorHalt   = "halt"
	ErrorIgnore = "ignore"
	ErrorBranch = "branch"
)

// ErrorPolicy says what happens when a node fails after its retries.
type ErrorPolicy struct {
	// Type is halt (the default), ignore or branch.
	Type string `json:"type,omitempty"`
	// ErrorEdge, with Type branch, is the outgoing edge followed only on failure.
	ErrorEdge string `json:"error_edge,omitempty"`
}

// RetryPolicy says how a failing node is retried before its error strategy applies.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included. Default 4; 1 means no retry.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// InitialDelay is the wait before the first retry (Go or ISO 8601 duration). Default 5s.
	InitialDelay string `json:"initial_delay,omitempty"`
	// Multiplier grows each later wait. Default 5 (5 s, 25 s, 125 s).
	Multiplier float64 `json:"multiplier,omitempty"`
	// On says which failures are retried: RetryRetryable (the default)
	// only those the node marks retryable, RetryAny every failure.
	On string `json:"on,omitempty"`
}

// Edge joins two nodes.
type Edge struct {
	ID    string `json:"id"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Label string `json:"label,omitempty"`
}

// Strategy returns the node's error strategy, halt when none is set.
func (n *Node) Strategy() string {
	if n.Error == nil || n.Error.Type == "" {
		return ErrorHalt
	}
	return n.Error.Type
}

// ErrorEdge returns the node's error edge id, or "" when it has none.
func (n *Node) ErrorEdge() string {
	if n.Error == nil || n.Error.Type != ErrorBranch {
		return ""
	}
	return n.Error.ErrorEdge
}
