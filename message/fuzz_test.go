package message

import (
	"encoding/json"
	"reflect"
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

// FuzzFastDecode checks decode's fast path against its fallback, for every
// kind of message: what fastUnmarshal accepts, unmarshalStrict accepts too,
// with the same value. Then a message is accepted exactly as before the fast
// path, and decodes to the same thing.
func FuzzFastDecode(f *testing.F) {
	for _, seed := range []any{validExecution(), validStatus(), validCompletion(), validTimeout(),
		&Statuses{WorkflowID: "wf", ExecutionID: "e", Statuses: []*NodeStatus{validStatus(), validStatus()}}} {
		good, err := json.Marshal(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(good)
	}
	for _, s := range []string{
		`{"Message_ID":"m","attempt":1}`, // v1 matches names case-insensitively
		`{"attempt":1,"attempt":2}`,      // a repeated name: v1 keeps the last
		`{"attempt":1e2}`, `{"attempt":1.0}`, `{"attempt":null}`, `{"attempt":-0}`,
		`{"accumulated_context":{"$a":1e400}}`, // out of float64's range
		`{"accumulated_context":{"$a":{"b":[1,"x",null,true,{}]},"$a":2}}`,
		`{"workflow_definition": { "id" : "x" } }`, // raw JSON keeps its spaces
		`{"execution_started_at":"2025-10-09T12:34:56.123+02:00"}`,
		`{"execution_started_at":"2025-10-09t12:34:56z"}`,
		`{"execution_started_at":"2025-10-09T12:34:60Z"}`,
		`{"executed_at":"2025-10-09 12:34:56Z"}`,
		`{"completed_at":"0000-01-01T00:00:00Z","final_context":null}`,
		`{"failure_reason":{"node_id":"n","message":"m","code":"c","details":{"k":[1]}}}`,
		`{"statuses":[null,{"node_id":"n"}]}`,
		`{"message":{"current_node":"n"},"deadline":"2025-10-09T12:34:56Z"}`,
		`{"lineage_stack":[{"item_index":3,"total_items":2}]} `,
		`{"attempt":1} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if checkRaw("fuzz", data, messageDepth) != nil {
			return // decode refuses it before either
		}
		fastSameAsStrict[NodeExecution](t, data)
		fastSameAsStrict[NodeStatus](t, data)
		fastSameAsStrict[Statuses](t, data)
		fastSameAsStrict[Completion](t, data)
		fastSameAsStrict[Timeout](t, data)
	})
}

// fastSameAsStrict fails t when fastUnmarshal accepts data as a T that
// unmarshalStrict refuses or decodes differently.
func fastSameAsStrict[T any](t *testing.T, data []byte) {
	t.Helper()
	var fast, strict T
	if fastUnmarshal(data, &fast) != nil {
		return
	}
	if err := unmarshalStrict(data, &strict); err != nil {
		t.Fatalf("%T: the fast decode accepts what unmarshalStrict refuses (%v):\n%s", fast, err, data)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%T: the fast decode gives\n%#v\nunmarshalStrict gives\n%#v\nfor\n%s", fast, fast, strict, data)
	}
}
