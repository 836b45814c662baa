package secrets_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rune-org/rune/secrets"
)

const (
	keyA = "3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	keyB = "0000000000000000000000000000000000000000000000000000000000000001"
)

// TestKeyringRotation: a value sealed with the old key still opens once a
// new key is put first, and new values are sealed with the new key.
func TestKeyringRotation(t *testing.T) {
	old, err := secrets.ParseKeys(keyA)
	if err != nil {
		t.Fatal(err)
	}
	id, sealed, err := old.Seal("crm", []byte(`{"token":"s3cr3t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("s3cr3t")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	rotated, err := secrets.ParseKeys(keyB + "," + keyA)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rotated.Open("crm", id, sealed)
	if err != nil || string(plain) != `{"token":"s3cr3t"}` {
		t.Fatalf("open with the rotated keyring: %q %v", plain, err)
	}
	newID, _, _ := rotated.Seal("crm", []byte("x"))
	if newID == id || newID != rotated.CurrentID() {
		t.Fatalf("sealed with key %s after rotation, want the new key %s", newID, rotated.CurrentID())
	}
	onlyNew, _ := secrets.ParseKeys(keyB)
	if _, err := onlyNew.Open("crm", id, sealed); err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("open without the old key: %v, want an error naming key %s", err, id)
	}
}

// TestKeyringRejectsTampering: a ciphertext moved to another credential
// name, or changed, does not open; errors never show a value.
func TestKeyringRejectsTampering(t *testing.T) {
	k, _ := secrets.ParseKeys(keyA)
	id, sealed, _ := k.Seal("crm", []byte("s3cr3t"))
	if _, err := k.Open("billing", id, sealed); err == nil {
		t.Fatal("a ciphertext opened under another credential's name")
	}
	sealed[len(sealed)-1] ^= 1
	_, err := k.Open("crm", id, sealed)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("tampered: %v", err)
	}
}

func TestParseKeysErrors(t *testing.T) {
	for _, bad := range []string{"", "not-base64!!", "AAAA", keyA + ",short"} {
		_, err := secrets.ParseKeys(bad)
		if err == nil {
			t.Fatalf("ParseKeys(%q) accepted", bad)
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Fatalf("error %q shows the key text", err)
		}
	}
}

// TestLoadKeysCreatesFile: the embedded default creates its key file once,
// mode 0600, and reads the same key on the next start; RUNE_SECRET_KEY wins.
func TestLoadKeysCreatesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	k1, err := secrets.LoadKeys("", path, true)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, st.Mode())
	}
	k2, _ := secrets.LoadKeys("", path, true)
	if k1.CurrentID() != k2.CurrentID() {
		t.Fatal("a second start read another key")
	}
	env, _ := secrets.LoadKeys(keyA, path, true)
	if env.CurrentID() == k1.CurrentID() {
		t.Fatal("RUNE_SECRET_KEY did not win over the key file")
	}
	if k, err := secrets.LoadKeys("", "", false); k != nil || err != nil {
		t.Fatalf("no key: %v %v, want nil, nil", k, err)
	}
}
