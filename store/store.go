// Package store is the seam between `rune server` and its database: workflows
// and their immutable versions, executions (the trigger instances users see,
// claimed atomically by dispatchers), the node-run history and its event log,
// credentials (ciphertext only) and API tokens (hashes only).
//
// store/postgres implements it on PostgreSQL (several servers may share one
// database) and store/sqlite on an embedded SQLite file (one server);
// store/storetest is the conformance suite both pass. The rules that decide
// how a status changes a node run or an execution live in this package
// (history.go), once, and both implementations call them.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/rune-org/rune/message"
)

// Errors every implementation returns (wrapped, with what was not found or
// what conflicted): test them with errors.Is.
var (
	// ErrNotFound: no such workflow, version, execution, credential or token.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write contradicts what is stored (an id that exists,
	// a cancel of a finished execution, a dispatch by an owner whose claim
	// was taken over).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: an argument is missing or malformed (the error names it).
	ErrInvalid = errors.New("invalid")
	// ErrPrecondition: a conditional write's condition no longer holds
	// (WorkflowInput.IfVersion is not the latest version).
	ErrPrecondition = errors.New("precondition failed")
)

// Execution statuses (the trigger instance's, seed 003 §1–4).
const (
	// StatusEnqueued: created, waiting for its available_at and a dispatcher.
	StatusEnqueued = "enqueued"
	// StatusProcessing: claimed by a dispatcher; running once dispatched.
	StatusProcessing = "processing"
	// StatusWaiting: every node that is not finished is waiting (a wait,
	// delay, retry backoff, merge or aggregator barrier).
	StatusWaiting   = "waiting"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusHalted    = "halted"
	// StatusCancelled: cancelled by a user, before or while it ran.
	StatusCancelled = "cancelled"
)

// Final reports whether an execution in status s has ended.
func Final(s string) bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusHalted, StatusCancelled:
		return true
	}
	return false
}

// Workflow is one version of a workflow definition. Versions are immutable:
// an update stores a new version; an execution records the version it ran.
type Workflow struct {
	ID      string
	Version int
	Name    string
	// Definition is the definition (dsl.md) exactly as it was validated.
	Definition json.RawMessage
	CreatedAt  time.Time // of this version
	// DeletedAt is set once the workflow is deleted (soft: its versions stay
	// readable for the executions that ran them).
	DeletedAt *time.Time
	// Unchanged is set by UpdateWorkflow with IfChanged when the definition
	// equals the latest version's: it stored nothing and returns that version.
	Unchanged bool
}

// WorkflowInput creates a workflow or a new version of one.
type WorkflowInput struct {
	// ID of the workflow; CreateWorkflow generates one when empty.
	ID         string
	Name       string
	Definition json.RawMessage
	At         time.Time
	// IfVersion, for UpdateWorkflow when > 0: store the new version only
	// while IfVersion is still the latest, else ErrPrecondition (two editors
	// of one version do not overwrite each other). 0: no condition.
	IfVersion int
	// IfChanged, for UpdateWorkflow: when the definition equals the latest
	// version's as JSON (key order and spacing aside), store nothing and
	// return the latest version with Unchanged set. False: always store.
	IfChanged bool
}

// Execution is a trigger instance: one run of one workflow version, from the
// moment it is enqueued until its completion.
type Execution struct {
	ID         string
	WorkflowID string
	Version    int
	Status     string
	// Input is the trigger payload ($trigger).
	Input json.RawMessage
	// IdempotencyKey, when set, is unique per workflow: a second create with
	// the same key returns this execution.
	IdempotencyKey string
	// Trigger says what started it: "api", "rerun:<execution id>", and later
	// "hook:<id>" or "schedule:<id>".
	Trigger string
	// AvailableAt is when it may be dispatched; while it runs, the next
	// attempt time of a retrying node or the resume time of a wait.
	AvailableAt time.Time
	// Attempts is the attempt number of the latest retried node (1 when no
	// node was retried), against the node's retry limit.
	Attempts int
	// Cursor lists the nodes running, retrying or waiting now (node ids,
	// sorted, each once however many branches are on it).
	Cursor []string
	// Vars holds the recorded results of notification steps
	// ("email_<node id>", "sms_<node id>").
	Vars map[string]json.RawMessage
	// Completion is the CompletionMessage as published, once there is one.
	Completion json.RawMessage
	// Unfinished counts the execution's unfinished node runs per node and
	// status (running, waiting, retrying): the bookkeeping behind Cursor and
	// Status, kept by AppendHistory (history.go). Callers need not read it.
	Unfinished map[string]map[string]int
	// CancelRequested is set by CancelExecution on a running execution.
	CancelRequested bool
	// ClaimedBy and ClaimUntil are the dispatcher's claim; DispatchedAt is
	// set once its first messages were published.
	ClaimedBy    string
	ClaimUntil   *time.Time
	DispatchedAt *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	FinishedAt   *time.Time
}

// ExecutionInput enqueues an execution.
type ExecutionInput struct {
	ID             string // required: the engine's execution id
	WorkflowID     string
	Version        int
	Input          json.RawMessage
	IdempotencyKey string
	Trigger        string
	// AvailableAt defaults to At.
	AvailableAt time.Time
	At          time.Time
}

// Claim asks for due executions.
type Claim struct {
	// Owner names the claiming dispatcher (server id).
	Owner string
	Now   time.Time
	// Lease is how long the claim holds before another dispatcher may take
	// an execution whose dispatch was never marked done.
	Lease time.Duration
	Limit int
}

// ExecutionFilter selects executions to list. Zero fields select all.
type ExecutionFilter struct {
	WorkflowID     string
	Status         string
	IdempotencyKey string
	CreatedAfter   time.Time
	CreatedBefore  time.Time
	// Limit defaults to 50 and is at most 500 (ListLimitDefault, ListLimitMax).
	Limit int
	// Cursor is a Page.Next from the previous call.
	Cursor string
	// Trigger selects by what started an execution (issue 38): a kind
	// ("api", "hook", "schedule", "rerun") selects every trigger of it,
	// anything else ("hook:h1") exactly that trigger.
	Trigger string
	// Input selects executions whose input holds each match's value at
	// its path ($trigger.user_id = 42 is {Path: ["user_id"], Value: 42}).
	Input []InputMatch
}

// InputMatch is one condition on an execution's input: the JSON scalar
// Value at Path (object keys from the input's root).
type InputMatch struct {
	Path  []string
	Value json.RawMessage
}

// Page is one page of a list, newest first; Next is empty on the last page.
type Page[T any] struct {
	Items []T
	Next  string
}

// NodeRun is the history of one node on one branch of an execution.
type NodeRun struct {
	ExecutionID string
	NodeID      string
	// Branch is the lineage key ("" outside splits; see BranchKey).
	Branch  string
	Lineage []message.Frame
	Status  string // a message.Status*
	Attempt int
	Output  json.RawMessage
	Error   json.RawMessage // *message.Error
	Details json.RawMessage // barrier progress
	// StartedAt is the first running status's time; FinishedAt the final one's.
	StartedAt     *time.Time
	FinishedAt    *time.Time
	NextAttemptAt *time.Time
	ResumeAt      *time.Time
	DurationMS    int64
	// ReportedAt is the executed_at of the status the run is in.
	ReportedAt time.Time
	UpdatedAt  time.Time
}

// SplitProgress is a split's fan-out progress on one branch.
type SplitProgress struct {
	SplitNodeID string
	Branch      string // the split's own branch key
	Total       int
	Done        int // branches finished with success
	Failed      int
	Skipped     int
}

// HistoryEvent is one status or completion consumed from the broker.
// Exactly one of Status and Completion is set.
type HistoryEvent struct {
	ExecutionID string
	// DedupeKey identifies the event: a second event with the same key for
	// the same execution is the same event and changes nothing.
	DedupeKey  string
	Status     *message.NodeStatus
	Completion *message.Completion
	// Body is the message as received; stored in the event log verbatim.
	Body json.RawMessage
	// Vars are notification results this event records (see Execution.Vars).
	Vars       map[string]json.RawMessage
	ReceivedAt time.Time
}

// Event is one entry of the event log that live streams replay.
type Event struct {
	// ID ascends in commit order across the whole store; SSE uses it as the
	// event id (Last-Event-ID).
	ID          int64
	ExecutionID string
	// Kind is "status" (Body: the NodeStatusMessage), "completion" (the
	// CompletionMessage) or "execution" (an ExecutionChange: a cancel).
	// Creating and dispatching an execution record no event: ids ascend in
	// commit order because event writers take turns up to their commit, and
	// one turn per trigger would cap triggers per second.
	Kind string
	Body json.RawMessage
	At   time.Time
}

// ExecutionChange is the Body of an "execution" event, written by the store
// in the transaction that makes the change.
type ExecutionChange struct {
	// Change is "cancel_requested" or "cancelled".
	Change      string    `json:"change"`
	ExecutionID string    `json:"execution_id"`
	WorkflowID  string    `json:"workflow_id"`
	Version     int       `json:"version"`
	Status      string    `json:"status"`
	AvailableAt time.Time `json:"available_at"`
	At          time.Time `json:"at"`
}

// Changes of ExecutionChange.
const (
	ChangeCancelRequested = "cancel_requested"
	ChangeCancelled       = "cancelled"
)

// EventFilter selects events after an id, oldest first.
type EventFilter struct {
	ExecutionID string // "" for every execution
	AfterID     int64
	// Limit defaults to 500 and is at most 5,000.
	Limit int
}

// Credential is a named secret, encrypted by the server before it is stored.
// The store never sees a plaintext value.
type Credential struct {
	Name       string
	Type       string
	KeyID      string // which server key encrypted it
	Ciphertext []byte // nonce included; nil in lists
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Token is an API token: its SHA-256 hash and a short visible prefix.
type Token struct {
	ID     string
	Name   string
	Prefix string
	Hash   []byte
	// Role is one of RoleAdmin, RoleEditor, RoleOperator, RoleViewer
	// (docs/api.md, "Roles"). CreateToken stores RoleAdmin when empty.
	Role string
	// Workflows, when not empty, scopes the token to the workflows whose id
	// matches one of these glob patterns ('*' any run of characters, '?'
	// one); empty means every workflow.
	Workflows []string
	CreatedAt time.Time
	// ExpiresAt, when set, ends the token's validity at that time.
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// Session is a console login (docs/api.md, "Sessions"): the SHA-256 hash
// of its id (the browser's cookie, never stored itself), the token it acts
// as, and when it ends.
type Session struct {
	Hash []byte
	// TokenID is the id of the stored token the session acts as, or a
	// binding to RUNE_API_TOKEN that the server checks ("env:…").
	TokenID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Token roles, from most to least powerful (docs/api.md, "Roles").
const (
	RoleAdmin    = "admin"
	RoleEditor   = "editor"
	RoleOperator = "operator"
	RoleViewer   = "viewer"
)

// Roles lists the token roles, most powerful first.
var Roles = []string{RoleAdmin, RoleEditor, RoleOperator, RoleViewer}

// AuditEntry records one state-changing API request: who made it, what it
// acted on, when, and how it ended. It never holds a request body, a token
// or a secret.
type AuditEntry struct {
	// ID ascends in insertion order (AppendAudit sets it).
	ID int64
	At time.Time
	// Actor is the token's name; Role its role.
	Actor string
	Role  string
	// Method and Route are the request's method and route pattern
	// ("/v1/workflows/{id}"); Objects the route's path values by name.
	Method  string
	Route   string
	Objects map[string]string
	// Status is the HTTP status of the answer.
	Status int
}

// AuditFilter selects audit entries, newest first.
type AuditFilter struct {
	// Limit defaults to 50 and is at most 500.
	Limit int
	// Cursor is a Page.Next from the previous call.
	Cursor string
}

// Store is the server's database. Every method is safe for concurrent use,
// also from several processes sharing one database where the implementation
// allows it (PostgreSQL).
type Store interface {
	// CreateWorkflow stores version 1 of a new workflow. An existing id
	// (deleted or not) is ErrConflict.
	CreateWorkflow(ctx context.Context, in WorkflowInput) (*Workflow, error)
	// UpdateWorkflow stores the next version of an existing, not deleted workflow.
	UpdateWorkflow(ctx context.Context, in WorkflowInput) (*Workflow, error)
	// GetWorkflow returns version (0: the latest) of workflow id. A deleted
	// workflow is ErrNotFound for version 0 and readable by version.
	GetWorkflow(ctx context.Context, id string, version int) (*Workflow, error)
	// ListWorkflows returns the latest version of each workflow not deleted,
	// by id.
	ListWorkflows(ctx context.Context, limit int, cursor string) (Page[*Workflow], error)
	// ListVersions returns a page of workflow id's versions, newest first,
	// without their definitions (GetWorkflow reads one): a workflow may
	// have thousands of versions of megabytes each. ErrNotFound for an
	// unknown workflow.
	ListVersions(ctx context.Context, id string, limit int, cursor string) (Page[*Workflow], error)
	// DeleteWorkflow marks workflow id deleted; its executions are unaffected.
	DeleteWorkflow(ctx context.Context, id string, at time.Time) error

	// CreateExecution enqueues an execution of in.Version (0: the latest)
	// of a workflow that is not deleted (else ErrNotFound), and returns it
	// and true. When in.IdempotencyKey is already used for in.WorkflowID it
	// returns that execution and false. A taken id is ErrConflict.
	CreateExecution(ctx context.Context, in ExecutionInput) (*Execution, bool, error)
	// ClaimExecutions atomically takes up to c.Limit executions that are
	// enqueued with AvailableAt ≤ c.Now, or processing, not dispatched and
	// whose claim ended, oldest AvailableAt first; marks them processing,
	// claimed by c.Owner until c.Now+c.Lease. Concurrent claims, from any
	// number of processes, never return one execution twice while its claim holds.
	ClaimExecutions(ctx context.Context, c Claim) ([]*Execution, error)
	// MarkDispatched records that execution id's first messages were
	// published. ErrConflict when another owner holds the claim now.
	MarkDispatched(ctx context.Context, id, owner string, at time.Time) error
	// MarkDispatchedAll is MarkDispatched of every id in one write (one
	// commit for a dispatcher's whole batch). It returns the ids it did not
	// mark: unknown ones and those whose claim another owner holds now.
	MarkDispatchedAll(ctx context.Context, ids []string, owner string, at time.Time) (notMarked []string, err error)
	// GetExecution returns execution id.
	GetExecution(ctx context.Context, id string) (*Execution, error)
	// ListExecutions lists executions newest first.
	ListExecutions(ctx context.Context, f ExecutionFilter) (Page[*Execution], error)
	// CancelExecution cancels an enqueued execution at once (status
	// cancelled) or marks a running one CancelRequested. A finished one is
	// ErrConflict (the execution is returned too).
	CancelExecution(ctx context.Context, id string, at time.Time) (*Execution, error)

	// AppendHistory applies events in one transaction: events already
	// recorded (same execution and DedupeKey) are skipped; each status
	// updates its node run and each completion its execution by the rules of
	// history.go (never regressing: a late running after success changes
	// nothing). Events of executions the store does not have (statuses of
	// runs started by `rune start` on the same broker) are ignored. It
	// returns the events it recorded, with their ids.
	AppendHistory(ctx context.Context, events []HistoryEvent) ([]Event, error)
	// PruneHistory deletes the node runs and events of up to limit
	// executions that finished before before and were not pruned yet,
	// oldest first, and marks them pruned (the executions themselves, with
	// their completion, stay). It returns how many it pruned: call it until
	// it returns 0 (retention, `rune server --retention`).
	PruneHistory(ctx context.Context, before time.Time, limit int) (int, error)
	// NodeRuns returns every node run of execution id, in the order they were
	// first reported (ErrNotFound for an unknown execution).
	NodeRuns(ctx context.Context, id string) ([]*NodeRun, error)
	// Splits returns the fan-out progress of each split of execution id.
	Splits(ctx context.Context, id string) ([]SplitProgress, error)
	// Events returns events after f.AfterID, oldest first.
	Events(ctx context.Context, f EventFilter) ([]Event, error)

	// PutCredential creates or replaces credential c.Name.
	PutCredential(ctx context.Context, c *Credential) error
	// GetCredential returns credential name with its ciphertext.
	GetCredential(ctx context.Context, name string) (*Credential, error)
	// ListCredentials returns every credential without its ciphertext.
	ListCredentials(ctx context.Context) ([]*Credential, error)
	// DeleteCredential removes credential name.
	DeleteCredential(ctx context.Context, name string) error

	// CreateToken stores a token; its name must be new (ErrConflict).
	CreateToken(ctx context.Context, t *Token) error
	// TokenByHash returns the token whose hash is h and that is not revoked.
	TokenByHash(ctx context.Context, h []byte) (*Token, error)
	// ListTokens returns every token (revoked ones too), without hashes.
	ListTokens(ctx context.Context) ([]*Token, error)
	// TokenByID returns token id when it is not revoked.
	TokenByID(ctx context.Context, id string) (*Token, error)
	// RevokeToken revokes token name and deletes its sessions.
	RevokeToken(ctx context.Context, name string, at time.Time) error

	// CreateSession stores a console session; its hash must be new
	// (ErrConflict).
	CreateSession(ctx context.Context, s *Session) error
	// SessionByHash returns the session whose id hashes to h, expired or
	// not (the caller checks ExpiresAt); ErrNotFound when there is none:
	// never created, deleted, pruned, or its token revoked.
	SessionByHash(ctx context.Context, h []byte) (*Session, error)
	// DeleteSession deletes the session whose id hashes to h (logout);
	// ErrNotFound when there is none.
	DeleteSession(ctx context.Context, h []byte) error
	// PruneSessions deletes the sessions that expired before before and
	// returns how many.
	PruneSessions(ctx context.Context, before time.Time) (int, error)

	// AppendAudit records e and sets its ID.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit lists audit entries, newest first.
	ListAudit(ctx context.Context, f AuditFilter) (Page[*AuditEntry], error)
	// PruneAudit deletes up to limit audit entries older than before,
	// oldest first, and returns how many (retention: call it until 0).
	PruneAudit(ctx context.Context, before time.Time, limit int) (int, error)

	// TriggerStore: webhooks and schedules.
	TriggerStore

	// NotifyStore: sends and their delivery status (issue 36).
	NotifyStore
	// SubscriberStore: subscribers and their preferences (issue 36).
	SubscriberStore
	// PauseStore: workflow and execution pauses, re-run starts (issue 34).
	PauseStore

	// ChildStore: the links of child executions to their parents (issue 34).
	ChildStore

	// HookDeliveryStore: the last deliveries of each hook (issue 38).
	HookDeliveryStore

	// TemplateStore: versioned message templates (issue 36).
	TemplateStore

	// Close releases the store's connections.
	Close() error
}
