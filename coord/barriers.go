package coord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Barriers are the join points of fan-in (RFC 004 aggregators) and merges
// (RFC 005). A barrier of one execution, named by key, expects Total
// arrivals, one per slot 0..Total-1 (an item index, or a merge's parent), and
// completes when Need of them have arrived (Need = Total for an aggregator or
// wait_for_all, 1 for wait_for_any).
//
// Arrivals are idempotent per slot: a redelivered arrival never counts twice
// and never blocks the barrier. Exactly one arrival completes a barrier; a
// repeated arrival of that same slot gets the same completed Arrival again
// while the barrier is retained, so a caller that crashed after completing it
// can finish the work. Every key of a barrier lives only as long as the
// execution's state (TTL refreshed on arrival) and is released when it
// completes or is cancelled, but for a small closed marker (see
// ErrBarrierClosed).
type Barriers interface {
	// Open creates barrier key expecting total arrivals, needing need of
	// them, and stores state (for an aggregator: the context the split saw).
	// Opening an existing barrier changes nothing. A barrier can also be
	// created by its first Arrive.
	Open(ctx context.Context, exec, key string, spec BarrierSpec) error
	// Arrive records value at slot. It creates the barrier from spec when it
	// does not exist yet (spec.State is then ignored). A slot outside
	// 0..Total-1, or an invalid spec (Total < 1, Need outside 1..Total), is
	// an error.
	Arrive(ctx context.Context, exec, key string, spec BarrierSpec, slot int, value []byte) (Arrival, error)
	// Cancel closes an open barrier for good (a timeout): later arrivals get
	// ErrBarrierClosed. It reports whether the barrier was still open, so
	// exactly one canceller acts on it. A barrier that does not exist yet
	// (never opened, nothing arrived) counts as open: Cancel closes it and
	// reports true, so a wait_for_any that nobody reached still times out.
	Cancel(ctx context.Context, exec, key string) (wasOpen bool, err error)
}

// BarrierSpec describes a barrier.
type BarrierSpec struct {
	Total int
	Need  int
	// State is opaque bytes returned with the completing Arrival.
	State []byte
	// TTL bounds how long an open barrier lives without arrivals. Default 24h.
	TTL time.Duration
}

// DefaultBarrierTTL is a BarrierSpec's TTL when it gives none.
const DefaultBarrierTTL = 24 * time.Hour

// Check validates s for Open and Arrive and returns its TTL
// (DefaultBarrierTTL when 0).
func (s BarrierSpec) Check() (time.Duration, error) {
	if s.Total < 1 {
		return 0, fmt.Errorf("spec.Total is %d, want at least 1", s.Total)
	}
	if s.Need < 1 || s.Need > s.Total {
		return 0, fmt.Errorf("spec.Need is %d, want 1..Total (%d)", s.Need, s.Total)
	}
	if s.TTL < 0 {
		return 0, fmt.Errorf("spec.TTL is negative (%v)", s.TTL)
	}
	if s.TTL == 0 {
		return DefaultBarrierTTL, nil
	}
	return s.TTL, nil
}

// Arrival is the answer to Arrive.
type Arrival struct {
	// Duplicate is set when slot had arrived before.
	Duplicate bool
	// Arrived counts distinct slots arrived so far (for progress statuses).
	Arrived int
	// Complete is set for the arrival that completed the barrier (and its
	// repeats). Values then holds each slot's value in slot order (nil for
	// slots that never arrived, with wait_for_any), and State the Open state.
	// Values and State may be shared with the repeats: do not modify them.
	Complete bool
	Values   [][]byte
	State    []byte
}

// ErrBarrierClosed is returned by Arrive on a barrier that was cancelled, or
// that completed, when the slot is not the one that completed it (or is, but
// the completed values are no longer retained). A closed barrier is
// remembered for its TTL, so late arrivals cannot open it anew; coord/redis
// keeps the marker with its execution's state instead (refreshed while the
// execution runs, gone Retain after it ended, when no arrival can come).
var ErrBarrierClosed = errors.New("barrier closed")

// Blobs store large context values once per execution, content-addressed, so
// messages carry a short reference instead (RFC 001 §11.1).
type Blobs interface {
	// Put stores data for exec and returns its reference (a hash of data);
	// storing the same data twice stores it once.
	Put(ctx context.Context, exec string, data []byte) (ref string, err error)
	// Get returns the data stored under ref, or ErrBlobNotFound.
	Get(ctx context.Context, exec, ref string) ([]byte, error)
	// Release deletes every blob of exec (when it completes).
	Release(ctx context.Context, exec string) error
}

// BlobRef is the reference a Blobs gives data: the first 128 bits of its
// SHA-256 in hex, the same in every implementation. 128 bits keep a second
// preimage (a stranger's definition made to take another's place) out of
// reach; a frozen waiting message holds one, so each byte counts a million
// times (docs/benchmarks.md, "Timers").
func BlobRef(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16])
}

// ErrBlobNotFound is returned by Get for an unknown or released reference.
var ErrBlobNotFound = errors.New("blob not found")
