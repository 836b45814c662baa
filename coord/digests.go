package coord

import (
	"context"
	"errors"
	"time"
)

// Digests holds the digests of the digest node (issue 36): per key (a
// subscriber, say), the digest open for it and the values of the members
// that joined it. The member that opens a digest parks until its window
// closes, then takes the values of every member, its own first, in the
// order they joined; the members that joined end at once.
//
// A digest of key is open from the Join that opened it until its Closes:
// a Join at or after Closes does not join it but opens a new digest. Take
// closes it too, even before Closes, so a Join that comes after Take
// (however the callers' clocks disagree) opens a new digest rather than
// add a value no one will take.
//
// Every method is safe for concurrent use by many processes and idempotent
// per member id (a message id): a redelivered Join returns its first
// answer and adds no second value, a repeated Take the same values.
type Digests interface {
	// Join adds m's value to the digest open for key at now (Opened
	// false), or, when none is open, opens one with m as its opener,
	// closing at closes (Opened true; m's value is its first). Joining a
	// member of key again, in any state of its digest, returns the first
	// Join's answer and changes nothing. A digest holds at most
	// MaxDigestItems values: joining a full one returns ErrDigestFull.
	Join(ctx context.Context, key string, m DigestMember, now, closes time.Time) (Digest, error)
	// Take closes the digest opener opened for key, if it is still open,
	// and returns its values in the order they joined, the opener's first.
	// Taking it again returns the same values; taking an unknown or
	// forgotten digest returns none.
	Take(ctx context.Context, key, opener string) ([][]byte, error)
	// Forget drops the values of the digest opener opened for key once
	// its opener has resumed for good. What is kept of a digest is also
	// dropped DigestGrace after its Closes, so a lost Forget costs only
	// memory for a while.
	Forget(ctx context.Context, key, opener string) error
}

// DigestMember is a branch reaching a digest node.
type DigestMember struct {
	// ID names the member: its message id, the same on a redelivery.
	ID string
	// Execution is the member's execution id.
	Execution string
	// Value is what the member contributes, a JSON value.
	Value []byte
}

// Digest is Join's answer: the digest the member opened or joined.
type Digest struct {
	// Opener is the member id of the digest's opener.
	Opener string
	// Execution is the opener's execution id.
	Execution string
	// Opened is set when the member is the opener.
	Opened bool
	// Closes is when the digest's window closes.
	Closes time.Time
}

// Limits of digests, which every Digests accepts.
const (
	// MaxDigestItems bounds the values of one digest.
	MaxDigestItems = 1_000
	// MaxDigestKey bounds a key's length in bytes.
	MaxDigestKey = 600
	// DigestGrace is how long after its Closes a digest is kept at least,
	// for an opener whose timer fired late.
	DigestGrace = 7 * 24 * time.Hour
)

// ErrDigestFull is returned by Join for a digest holding MaxDigestItems
// values.
var ErrDigestFull = errors.New("digest is full")

// ErrInvalidDigest is returned for a key, member or opener Digests cannot
// take.
var ErrInvalidDigest = errors.New("invalid digest")

// CheckDigestJoin checks the arguments of a Join.
func CheckDigestJoin(key string, m DigestMember) error {
	if err := CheckDigestKey(key, m.ID); err != nil {
		return err
	}
	if m.Execution == "" {
		return errors.Join(ErrInvalidDigest, errors.New("member's execution id is empty"))
	}
	return nil
}

// CheckDigestKey checks a key and a member or opener id.
func CheckDigestKey(key, id string) error {
	switch {
	case key == "":
		return errors.Join(ErrInvalidDigest, errors.New("digest key is empty"))
	case len(key) > MaxDigestKey:
		return errors.Join(ErrInvalidDigest, errors.New("digest key is too long"))
	case id == "":
		return errors.Join(ErrInvalidDigest, errors.New("member id is empty"))
	}
	return nil
}
