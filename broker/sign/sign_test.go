package sign

import (
	"errors"
	"strings"
	"testing"
)

func TestSignVerifyAndRotation(t *testing.T) {
	old, err := Parse("k1:0123456789abcdef-old")
	if err != nil {
		t.Fatal(err)
	}
	both, err := Parse("k2:0123456789abcdef-new, k1:0123456789abcdef-old")
	if err != nil {
		t.Fatal(err)
	}
	m := Signed{Topic: "workflow.execution", ID: "m1", Key: "exec_1", Body: []byte(`{"a":1}`)}
	id, sig := old.Sign(m)
	if id != "k1" {
		t.Fatalf("signed with %q, want the first key k1", id)
	}
	if err := both.Verify(m, id, sig); err != nil {
		t.Errorf("a rotating keyring refuses the old key: %v", err)
	}
	id2, sig2 := both.Sign(m)
	if id2 != "k2" {
		t.Errorf("signed with %q, want k2", id2)
	}
	if err := old.Verify(m, id2, sig2); err == nil || !strings.Contains(err.Error(), `key "k2"`) {
		t.Errorf("a keyring without k2 accepted it: %v", err)
	}
	for name, forged := range map[string]Signed{
		"body":  {Topic: m.Topic, ID: m.ID, Key: m.Key, Body: []byte(`{"a":2}`)},
		"id":    {Topic: m.Topic, ID: "m2", Key: m.Key, Body: m.Body},
		"key":   {Topic: m.Topic, ID: m.ID, Key: "exec_2", Body: m.Body},
		"topic": {Topic: "workflow.timeout", ID: m.ID, Key: m.Key, Body: m.Body},
	} {
		if err := both.Verify(forged, id, sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("changed %s: Verify = %v", name, err)
		}
	}
	if err := both.Verify(m, "", ""); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("unsigned: %v", err)
	}
	wrong, _ := Parse("k1:another-secret-of-16+")
	wid, wsig := wrong.Sign(m)
	if err := both.Verify(m, wid, wsig); !errors.Is(err, ErrBadSignature) {
		t.Errorf("signed with a wrong secret under a known id: %v", err)
	}
}

func TestParseErrorsNeverShowTheSecret(t *testing.T) {
	for spec, want := range map[string]string{
		"nocolon-secret-value":                    "want \"id:secret\"",
		"k1:short-SECRET":                         "at least 16",
		"k1:0123456789abcdef,k1:0123456789abcdeg": "appears twice",
		":0123456789abcdef":                       "want \"id:secret\"",
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", spec, err, want)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "0123456789") || strings.Contains(err.Error(), "secret-value") {
			t.Errorf("Parse error shows the secret: %v", err)
		}
	}
}

// Errors name the key by its position in the list and its id; the limits
// are inclusive (an id of 32 characters, a secret of 16 bytes are fine).
func TestParseNamesTheKeyAndKeepsTheLimits(t *testing.T) {
	long := strings.Repeat("i", 33)
	for spec, want := range map[string]string{
		"k1:0123456789abcdef,k2":                                      `key 2: want "id:secret"`,
		"k1:0123456789abcdef," + long + ":0123456789abcdef":           `key 2: id "` + long + `": want at most 32 characters`,
		"k 1:0123456789abcdef":                                        `key 1: id "k 1": want at most 32 characters, no spaces`,
		"k1:0123456789abcdef,k2:short":                                `key 2 (id "k2"): the secret is 5 bytes, want at least 16`,
		"k1:0123456789abcdef,k2:0123456789abcdef,k1:0123456789abcdef": `key 3: id "k1" appears twice`,
	} {
		if _, err := Parse(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", spec, err, want)
		}
	}
	if _, err := Parse(strings.Repeat("i", 32) + ":0123456789abcdef"); err != nil {
		t.Errorf("a 32-character id with a 16-byte secret: %v", err)
	}
}

// BenchmarkSignVerify signs and verifies one message of the size of a
// linear workflow's node message (about 2 KB).
func BenchmarkSignVerify(b *testing.B) {
	k, err := Parse("k1:0123456789abcdef0123456789abcdef")
	if err != nil {
		b.Fatal(err)
	}
	m := Signed{Topic: "workflow.execution", ID: "0123456789abcdef0123456789abcdef", Key: "exec_20261124T000000_0123456789ab", Body: make([]byte, 2136)}
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		id, sig := k.Sign(m)
		if err := k.Verify(m, id, sig); err != nil {
			b.Fatal(err)
		}
	}
}

func TestVerifyMalformedSignatures(t *testing.T) {
	k, _ := Parse("k1:0123456789abcdef0123")
	m := Signed{Topic: "t", Body: []byte("x")}
	_, good := k.Sign(m)
	for _, sig := range []string{"", "short", good + "AAAA", strings.Repeat("A", 4096), good[:len(good)-1] + "!"} {
		if err := k.Verify(m, "k1", sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("Verify(%.20q) = %v", sig, err)
		}
	}
}
