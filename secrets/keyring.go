package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Keyring encrypts credential values with AES-256-GCM. The first key
// encrypts; every key decrypts what it encrypted, found by the key id stored
// with the ciphertext, so keys can rotate: put the new key first and keep the
// old ones after it until every credential has been written again.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
	// macKeys are keys derived from each key for Sign, never the key
	// itself: a MAC must not be usable to attack the encryption.
	macKeys map[string][]byte
}

// KeyID names a key without revealing it: the first 8 bytes of the SHA-256
// of "rune-key:" and the key, in hex.
func KeyID(key []byte) string {
	h := sha256.Sum256(append([]byte("rune-key:"), key...))
	return hex.EncodeToString(h[:8])
}

// ParseKeys reads a keyring from text: keys of 32 bytes, base64 (standard or
// URL alphabet) or 64 hex digits, separated by commas, spaces or newlines;
// the first one encrypts. Errors give the key's position, never its text.
func ParseKeys(text string) (*Keyring, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
	if len(fields) == 0 {
		return nil, errors.New("secret key: none given (want 32 bytes, base64 or hex; `openssl rand -base64 32` makes one)")
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}, macKeys: map[string][]byte{}}
	for i, f := range fields {
		key, err := decodeKey(f)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secret key %d: %w", i+1, err)
		}
		id := KeyID(key)
		if i == 0 {
			k.current = id
		}
		k.aeads[id] = aead
		m := hmac.New(sha256.New, key)
		m.Write([]byte("rune-mac-key"))
		k.macKeys[id] = m.Sum(nil)
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	if len(s) == 64 {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("decodes to %d bytes, want 32 (AES-256)", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("is neither base64 nor 64 hex digits")
}

// LoadKeys returns the keyring of RUNE_SECRET_KEY's value when it is set,
// else of the key file at path; with create, a missing file is created
// with a new random key (mode 0600). It returns nil, nil when neither is
// given.
func LoadKeys(envValue, path string, create bool) (*Keyring, error) {
	if envValue != "" {
		return ParseKeys(envValue)
	}
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		var key [32]byte
		if _, err := rand.Read(key[:]); err != nil {
			return nil, err
		}
		text := base64.StdEncoding.EncodeToString(key[:]) + "\n"
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			return nil, fmt.Errorf("secret key file %s: %w", path, err)
		}
		return ParseKeys(text)
	}
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	k, err := ParseKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("secret key file %s: %w", path, err)
	}
	return k, nil
}

// CurrentID is the id of the key that encrypts.
func (k *Keyring) CurrentID() string { return k.current }

// Seal encrypts plaintext with the current key, bound to name (a
// ciphertext moved to another credential does not decrypt), and returns the
// key id and nonce||ciphertext.
func (k *Keyring) Seal(name string, plaintext []byte) (keyID string, sealed []byte, err error) {
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, err
	}
	return k.current, aead.Seal(nonce, nonce, plaintext, []byte(name)), nil
}

// Open decrypts what Seal returned for name with key keyID.
func (k *Keyring) Open(name, keyID string, sealed []byte) ([]byte, error) {
	aead, ok := k.aeads[keyID]
	if !ok {
		return nil, fmt.Errorf("credential %q: encrypted with key %s, which is not configured (keep old keys after the new one in RUNE_SECRET_KEY)", name, keyID)
	}
	n := aead.NonceSize()
	if len(sealed) < n+aead.Overhead() {
		return nil, fmt.Errorf("credential %q: ciphertext is too short", name)
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(name))
	if err != nil {
		return nil, fmt.Errorf("credential %q: does not decrypt with key %s (tampered, or a different key with that id)", name, keyID)
	}
	return plain, nil
}

// Sign returns the id of the current key and the HMAC-SHA256 of msg under
// a key derived from it for purpose (one-click unsubscribe tokens, issue
// 36): a signature for one purpose is not one for another.
func (k *Keyring) Sign(purpose string, msg []byte) (keyID string, mac []byte) {
	return k.current, k.mac(k.current, purpose, msg)
}

// Verify reports whether mac is what Sign returned for purpose and msg
// under key keyID (an old key still verifies while it is configured).
func (k *Keyring) Verify(purpose, keyID string, msg, mac []byte) bool {
	if _, ok := k.macKeys[keyID]; !ok {
		return false
	}
	return hmac.Equal(mac, k.mac(keyID, purpose, msg))
}

func (k *Keyring) mac(keyID, purpose string, msg []byte) []byte {
	m := hmac.New(sha256.New, k.macKeys[keyID])
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(msg)
	return m.Sum(nil)
}
