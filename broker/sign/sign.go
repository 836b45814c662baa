// Package sign authenticates Rune's messages: every message a process
// publishes carries an HMAC-SHA256 over its topic, id, execution key and
// body, made with a key the deployment's processes share, and consumers
// refuse (dead-letter) messages whose signature is missing or wrong.
// Someone who can publish to the broker but does not hold the key cannot
// make a worker run anything.
//
// Several keys may be configured for rotation: the first signs, all verify.
// Each signature names its key by id, so verifying costs one HMAC.
package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// EnvVar is the environment variable that holds the keys: comma-separated
// "id:secret" pairs, the first of which signs (e.g. "k2:…,k1:…" while
// rotating from k1 to k2).
const EnvVar = "RUNE_SIGNING_KEY"

// MinKeyLen is the shortest secret accepted, in bytes.
const MinKeyLen = 16

// Keyring holds the deployment's signing keys. It is read-only after
// Parse and safe for concurrent use.
type Keyring struct {
	signID string
	keys   map[string]*key
}

// key is one secret with a pool of its HMAC states: keying an HMAC costs
// more than signing a small message, so states are reset and reused.
type key struct {
	secret []byte
	pool   sync.Pool // of *macState
}

type macState struct {
	h   hash.Hash
	buf []byte
}

// Parse reads keys in the EnvVar format. Errors name the key by its
// position and id, never its secret.
func Parse(spec string) (*Keyring, error) {
	k := &Keyring{keys: map[string]*key{}}
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		id, secret, ok := strings.Cut(part, ":")
		switch {
		case !ok || id == "":
			return nil, fmt.Errorf("%s: key %d: want \"id:secret\"", EnvVar, i+1)
		case len(id) > 32 || strings.ContainsAny(id, " \t"):
			return nil, fmt.Errorf("%s: key %d: id %q: want at most 32 characters, no spaces", EnvVar, i+1, id)
		case len(secret) < MinKeyLen:
			return nil, fmt.Errorf("%s: key %d (id %q): the secret is %d bytes, want at least %d", EnvVar, i+1, id, len(secret), MinKeyLen)
		}
		if _, dup := k.keys[id]; dup {
			return nil, fmt.Errorf("%s: key %d: id %q appears twice", EnvVar, i+1, id)
		}
		sk := &key{secret: []byte(secret)}
		sk.pool.New = func() any { return &macState{h: hmac.New(sha256.New, sk.secret)} }
		k.keys[id] = sk
		if i == 0 {
			k.signID = id
		}
	}
	return k, nil
}

// Signed is what identifies a message for signing: the topic it is
// published on and the id and key (execution id) it travels under, which a
// forger could otherwise swap under a genuine body.
type Signed struct {
	Topic, ID, Key string
	Body           []byte
}

// mac appends the HMAC of m with key to dst.
func (sk *key) mac(dst []byte, m Signed) []byte {
	st := sk.pool.Get().(*macState)
	st.h.Reset()
	st.buf = append(st.buf[:0], "rune-sign-v1\x00"...)
	st.buf = append(st.buf, m.Topic...)
	st.buf = append(st.buf, 0)
	st.buf = append(st.buf, m.ID...)
	st.buf = append(st.buf, 0)
	st.buf = append(st.buf, m.Key...)
	st.buf = append(st.buf, 0)
	st.h.Write(st.buf)
	st.h.Write(m.Body)
	dst = st.h.Sum(dst)
	sk.pool.Put(st)
	return dst
}

// Sign returns the id of the signing key and the signature of m.
func (k *Keyring) Sign(m Signed) (keyID, signature string) {
	var sum [sha256.Size]byte
	return k.signID, base64.RawStdEncoding.EncodeToString(k.keys[k.signID].mac(sum[:0], m))
}

// ErrBadSignature is wrapped by every Verify error.
var ErrBadSignature = errors.New("message signature")

// Verify checks that signature, made with key keyID, is m's.
func (k *Keyring) Verify(m Signed, keyID, signature string) error {
	if keyID == "" && signature == "" {
		return fmt.Errorf("%w: the message is not signed", ErrBadSignature)
	}
	sk, ok := k.keys[keyID]
	if !ok {
		return fmt.Errorf("%w: signed with key %q, which this process does not hold", ErrBadSignature, keyID)
	}
	var got, want [sha256.Size]byte
	if len(signature) != base64.RawStdEncoding.EncodedLen(sha256.Size) {
		return fmt.Errorf("%w: malformed signature (key %q)", ErrBadSignature, keyID)
	}
	n, err := base64.RawStdEncoding.Decode(got[:], []byte(signature))
	if err != nil || !hmac.Equal(got[:n], sk.mac(want[:0], m)) {
		return fmt.Errorf("%w: does not match the message (key %q)", ErrBadSignature, keyID)
	}
	return nil
}
