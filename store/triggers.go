package store

import (
	"context"
	"encoding/json"
	"time"
)

// Hook is a webhook of a workflow: POST /v1/hooks/{secret} starts an
// execution. The secret in the URL is the credential, so the store keeps
// only its SHA-256; ID is the hook's public handle for management.
type Hook struct {
	ID         string
	WorkflowID string
	Name       string
	// SecretHash is the SHA-256 of the URL's secret.
	SecretHash []byte
	// Settings is the server's configuration of the hook (verification,
	// headers, limits, reply), opaque to the store.
	Settings json.RawMessage
	// SigningKeyID and SigningSecret are the request-signing secret sealed
	// by the server's keyring; both empty when requests are not verified.
	SigningKeyID  string
	SigningSecret []byte
	Disabled      bool
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Schedule is a cron schedule of a workflow. The store keeps the next slot
// to fire (NextAt); replicas fire a slot through FireSchedule, whose
// compare-and-set on NextAt lets exactly one of them fire it.
type Schedule struct {
	ID         string
	WorkflowID string
	Name       string
	// Settings is the server's configuration of the schedule (expression,
	// time zone, jitter, window, policy, input), opaque to the store.
	Settings json.RawMessage
	Paused   bool
	// NextAt is the next slot to fire; nil once the schedule has ended.
	NextAt *time.Time
	// LastSlot is the newest slot decided (fired or skipped as missed).
	LastSlot  *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Fire is one decision of a schedule's slots: the slots from From (the
// NextAt the caller read) up to LastSlot were fired (Executions, each with
// its slot as idempotency key) or skipped; Next is the slot after them.
type Fire struct {
	ScheduleID string
	From       time.Time
	Next       *time.Time
	LastSlot   time.Time
	Executions []ExecutionInput
	At         time.Time
}

// TriggerStore holds webhooks and schedules (issue 15). Every method is
// safe for concurrent use, from several processes where the implementation
// allows it.
type TriggerStore interface {
	// CreateHook stores h (ID, WorkflowID and SecretHash required; a taken
	// ID or secret hash is ErrConflict).
	CreateHook(ctx context.Context, h *Hook) error
	// GetHook returns hook id.
	GetHook(ctx context.Context, id string) (*Hook, error)
	// HookBySecret returns the hook whose secret hashes to hash.
	HookBySecret(ctx context.Context, hash []byte) (*Hook, error)
	// ListHooks returns workflow id's hooks, oldest first.
	ListHooks(ctx context.Context, workflowID string) ([]*Hook, error)
	// UpdateHook replaces hook h.ID's name, secret hash, settings, signing
	// secret and disabled flag.
	UpdateHook(ctx context.Context, h *Hook) error
	// DeleteHook removes hook id.
	DeleteHook(ctx context.Context, id string) error

	// CreateSchedule stores sc (ID and WorkflowID required; a taken ID is ErrConflict).
	CreateSchedule(ctx context.Context, sc *Schedule) error
	// GetSchedule returns schedule id.
	GetSchedule(ctx context.Context, id string) (*Schedule, error)
	// ListSchedules returns workflow id's schedules, oldest first.
	ListSchedules(ctx context.Context, workflowID string) ([]*Schedule, error)
	// UpdateSchedule replaces schedule sc.ID's name, settings, paused flag,
	// NextAt and LastSlot.
	UpdateSchedule(ctx context.Context, sc *Schedule) error
	// DeleteSchedule removes schedule id.
	DeleteSchedule(ctx context.Context, id string) error
	// ClaimSignature records that hook hookID accepted a delivery whose
	// signature hashes to sig, for execution executionID, until expires: a
	// replay of the signature is then a duplicate whatever its delivery id
	// (issue 31). When sig is recorded and not expired at now, nothing
	// changes and owner is the execution recorded with it; else it is
	// recorded and owner is executionID. The hook's expired signatures are
	// pruned on the way.
	ClaimSignature(ctx context.Context, hookID string, sig []byte, executionID string, expires, now time.Time) (owner string, err error)
	// MoveSignature gives signature sig of hook hookID, when recorded for
	// execution from, to execution to; to "" forgets it (the execution was
	// never created).
	MoveSignature(ctx context.Context, hookID string, sig []byte, from, to string) error
	// DueSchedules returns up to limit schedules that are not paused, whose
	// workflow is not deleted and whose NextAt ≤ now, earliest first.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]*Schedule, error)
	// FireSchedule applies f in one transaction: when the schedule's NextAt
	// is still f.From and it is not paused, it moves NextAt to f.Next and
	// LastSlot to f.LastSlot and enqueues f.Executions (one whose
	// idempotency key exists is skipped); it returns those it enqueued.
	// Otherwise (another replica fired the slot, or the schedule was
	// paused or changed) it is ErrConflict and nothing changes.
	FireSchedule(ctx context.Context, f Fire) ([]*Execution, error)
}
