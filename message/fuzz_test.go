package message

import (
	"encoding/json"
	"testing"
)

// fuzzDecode checks that decode never panics, that it returns exactly one of
// a message and an error, and that an accepted message still validates and
// decodes again after re-encoding.
func fuzzDecode[T any, P interface {
	*T
	Validate() error
}](f *testing.F, seed P, decode func([]byte) (*T, error)) {
	good, err := json.Marshal(seed)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{good, []byte(`{}`), []byte(`null`), []byte(`[]`), []byte(`{"attempt":"1"}`),
		[]byte(`{"lineage_stack":[{"item_index":3,"total_items":2}]}`), []byte(`{"executed_at":"x","deadline":1}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decode(data)
		if (m == nil) == (err == nil) {
			t.Fatalf("decode returned %v and %v", m, err)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := P(m).Validate(); err != nil {
			t.Fatalf("accepted message does not validate: %v", err)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decode(again); err != nil {
			t.Fatalf("re-encoded message rejected: %v\n%s", err, again)
		}
	})
}

func FuzzDecodeExecution(f *testing.F)  { fuzzDecode(f, validExecution(), DecodeExecution) }
func FuzzDecodeStatus(f *testing.F)     { fuzzDecode(f, validStatus(), DecodeStatus) }
func FuzzDecodeCompletion(f *testing.F) { fuzzDecode(f, validCompletion(), DecodeCompletion) }
func FuzzDecodeTimeout(f *testing.F)    { fuzzDecode(f, validTimeout(), DecodeTimeout) }
