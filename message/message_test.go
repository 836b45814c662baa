package message

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 10, 9, 12, 34, 56, 0, time.UTC)

func validExecution() *NodeExecution {
	return &NodeExecution{
		MessageID:          "m1",
		WorkflowID:         "wf_email_notification",
		ExecutionID:        "exec_20251009_123456",
		CurrentNode:        "http_fetch_user",
		FromNode:           "start",
		Attempt:            1,
		StartedAt:          t0,
		WorkflowDefinition: json.RawMessage(`{"id":"wf_email_notification","nodes":[],"edges":[]}`),
		AccumulatedContext: map[string]any{"$trigger": map[string]any{"user_id": "user_123"}},
		LineageStack: []Frame{
			{SplitNodeID: "split_users", BranchID: "b5", ItemIndex: 5, TotalItems: 100},
			{SplitNodeID: "split_orders", BranchID: "b2", ItemIndex: 2, TotalItems: 5},
		},
	}
}

func validStatus() *NodeStatus {
	return &NodeStatus{
		WorkflowID: "wf_email_notification", ExecutionID: "exec_1", NodeID: "http_fetch_user",
		Status: StatusFailed, Error: &Error{Message: "Connection timeout after 30s", Code: "HTTP_TIMEOUT"},
		ExecutedAt: t0, DurationMS: 30000, Attempt: 1,
		LineageStack: []Frame{{SplitNodeID: "s", ItemIndex: 0, TotalItems: 1}},
	}
}

func validCompletion() *Completion {
	return &Completion{
		WorkflowID: "wf_email_notification", ExecutionID: "exec_1", Status: CompletionHalted,
		FinalContext: map[string]any{"$trigger": nil, "$http_fetch_user": 1.0},
		CompletedAt:  t0, TotalDurationMS: 4523,
		FailureReason: &Failure{NodeID: "http_fetch_user", Error: Error{Message: "boom", Code: "X"}},
	}
}

func validTimeout() *Timeout {
	return &Timeout{
		ExecutionID: "exec_1", WorkflowID: "wf", NodeID: "merge_1", Deadline: t0, Key: "exec_1:merge_1",
		LineageStack: []Frame{{SplitNodeID: "s", ItemIndex: 1, TotalItems: 2}},
		Message:      validExecution(),
	}
}

// expectInvalid checks that err is an *Invalid whose problems are exactly
// those wanted, each given as a prefix.
func expectInvalid(t *testing.T, err error, kind string, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var inv *Invalid
	if !errors.As(err, &inv) {
		t.Fatalf("error is %T (%v), want *Invalid", err, err)
	}
	if inv.Kind != kind {
		t.Errorf("Kind = %q, want %q", inv.Kind, kind)
	}
	if len(inv.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(inv.Problems), len(want), strings.Join(inv.Problems, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range inv.Problems {
			found = found || strings.HasPrefix(p, w)
		}
		if !found {
			t.Errorf("missing problem %q in:\n%s", w, strings.Join(inv.Problems, "\n"))
		}
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "invalid "+kind+" message: ") || !strings.Contains(msg, want[len(want)-1]) {
		t.Errorf("Error() = %q", msg)
	}
}

func TestValidMessages(t *testing.T) {
	for _, m := range []interface{ Validate() error }{validExecution(), validStatus(), validCompletion(), validTimeout()} {
		if err := m.Validate(); err != nil {
			t.Errorf("%T: %v", m, err)
		}
	}
}

func TestNodeExecutionValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(m *NodeExecution)
		want []string
	}{
		{"valid", func(m *NodeExecution) {}, nil},
		{"no from_node", func(m *NodeExecution) { m.FromNode = "" }, nil},
		{"execution id of 128", func(m *NodeExecution) { m.ExecutionID = strings.Repeat("e", 128) }, nil},
		{"missing message id", func(m *NodeExecution) { m.MessageID = "" }, []string{"message_id: missing"}},
		{"missing workflow id", func(m *NodeExecution) { m.WorkflowID = "" }, []string{"workflow_id: missing"}},
		{"bad workflow id", func(m *NodeExecution) { m.WorkflowID = "wf/1" }, []string{`workflow_id: "wf/1" is not valid`}},
		{"workflow id of 65", func(m *NodeExecution) { m.WorkflowID = strings.Repeat("w", 65) }, []string{"workflow_id: "}},
		{"execution id of 129", func(m *NodeExecution) { m.ExecutionID = strings.Repeat("e", 129) }, []string{"execution_id: "}},
		{"bad execution id", func(m *NodeExecution) { m.ExecutionID = "exec 1" }, []string{`execution_id: "exec 1" is not valid`}},
		{"missing current node", func(m *NodeExecution) { m.CurrentNode = "" }, []string{"current_node: missing"}},
		{"bad current node", func(m *NodeExecution) { m.CurrentNode = "9lives" }, []string{`current_node: "9lives" is not a node id`}},
		{"bad from node", func(m *NodeExecution) { m.FromNode = "a-b" }, []string{`from_node: "a-b" is not a node id`}},
		{"attempt 0", func(m *NodeExecution) { m.Attempt = 0 }, []string{"attempt: 0, want 1 or more"}},
		{"missing definition", func(m *NodeExecution) { m.WorkflowDefinition = nil }, []string{"workflow_definition: missing"}},
		{"null definition", func(m *NodeExecution) { m.WorkflowDefinition = json.RawMessage(" null") }, []string{"workflow_definition: missing"}},
		{"definition not an object", func(m *NodeExecution) { m.WorkflowDefinition = json.RawMessage(`[1]`) },
			[]string{"workflow_definition: want a JSON object, got array"}},
		{"missing context", func(m *NodeExecution) { m.AccumulatedContext = nil }, []string{"accumulated_context: missing"}},
		{"context key without $", func(m *NodeExecution) {
			m.AccumulatedContext["trigger"] = 1
			m.AccumulatedContext["$"] = 2
		}, []string{`accumulated_context: keys must be "$" followed by a name ("$trigger", "$<node_id>"), got "$", "trigger"`}},
		{"frame without split node", func(m *NodeExecution) { m.LineageStack[1].SplitNodeID = "" },
			[]string{"lineage_stack[1].split_node_id: missing"}},
		{"frame index too big", func(m *NodeExecution) { m.LineageStack[0].ItemIndex = 100 },
			[]string{"lineage_stack[0].item_index: 100 is out of range [0, 100)"}},
		{"frame index negative", func(m *NodeExecution) { m.LineageStack[1].ItemIndex = -1 },
			[]string{"lineage_stack[1].item_index: -1 is out of range [0, 5)"}},
		{"frame with no items", func(m *NodeExecution) { m.LineageStack[1].TotalItems = 0 },
			[]string{"lineage_stack[1].total_items: 0, want 1 or more"}},
		{"everything at once", func(m *NodeExecution) { *m = NodeExecution{LineageStack: []Frame{{}}} },
			[]string{"message_id: missing", "workflow_id: missing", "execution_id: missing", "current_node: missing",
				"attempt: 0", "workflow_definition: missing", "accumulated_context: missing",
				"lineage_stack[0].split_node_id: missing", "lineage_stack[0].total_items: 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validExecution()
			tt.edit(m)
			expectInvalid(t, m.Validate(), "NodeExecution", tt.want...)
		})
	}
}

func TestNodeStatusValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *NodeStatus)
		want []string
	}{
		{"valid", func(s *NodeStatus) {}, nil},
		{"every status", func(s *NodeStatus) {
			for _, st := range []string{StatusRunning, StatusSuccess, StatusWaiting, StatusRetrying, StatusSkipped, StatusFailed} {
				s.Status = st
				if err := s.Validate(); err != nil {
					t.Errorf("status %s: %v", st, err)
				}
			}
		}, nil},
		{"unknown status", func(s *NodeStatus) { s.Status = "done" },
			[]string{`status: "done" is not a status: want one of running, success, failed, waiting, retrying, skipped`}},
		{"missing status", func(s *NodeStatus) { s.Status = "" }, []string{"status: missing"}},
		{"ids", func(s *NodeStatus) { s.WorkflowID, s.ExecutionID, s.NodeID = "", "a b", "1" },
			[]string{"workflow_id: missing", "execution_id: ", "node_id: "}},
		{"failed without error", func(s *NodeStatus) { s.Error = nil }, []string{"error: missing"}},
		{"error without code and message", func(s *NodeStatus) { s.Error = &Error{} },
			[]string{"error.code: missing", "error.message: missing"}},
		{"negative duration", func(s *NodeStatus) { s.DurationMS = -1 }, []string{"duration_ms: -1"}},
		{"negative attempt", func(s *NodeStatus) { s.Attempt = -1 }, []string{"attempt: -1"}},
		{"bad frame", func(s *NodeStatus) { s.LineageStack[0].ItemIndex = 1 }, []string{"lineage_stack[0].item_index: 1 is out of range [0, 1)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validStatus()
			tt.edit(s)
			expectInvalid(t, s.Validate(), "NodeStatus", tt.want...)
		})
	}
}

func TestCompletionValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Completion)
		want []string
	}{
		{"valid", func(c *Completion) {}, nil},
		{"no context, no reason", func(c *Completion) { c.Status, c.FinalContext, c.FailureReason = CompletionCompleted, nil, nil }, nil},
		{"unknown status", func(c *Completion) { c.Status = "success" },
			[]string{`status: "success" is not a completion status: want one of completed, failed, halted`}},
		{"missing status", func(c *Completion) { c.Status = "" }, []string{"status: missing"}},
		{"ids", func(c *Completion) { c.WorkflowID, c.ExecutionID = "w!", "" }, []string{"workflow_id: ", "execution_id: missing"}},
		{"context key", func(c *Completion) { c.FinalContext["x"] = 1 }, []string{`final_context: keys must be "$"`}},
		{"negative duration", func(c *Completion) { c.TotalDurationMS = -5 }, []string{"total_duration_ms: -5"}},
		{"bad failure reason", func(c *Completion) { c.FailureReason = &Failure{NodeID: "a.b"} },
			[]string{"failure_reason.node_id: ", "failure_reason.code: missing", "failure_reason.message: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validCompletion()
			tt.edit(c)
			expectInvalid(t, c.Validate(), "Completion", tt.want...)
		})
	}
}

func TestTimeoutValidate(t *testing.T) {
	expectInvalid(t, validTimeout().Validate(), "Timeout")
	expectInvalid(t, (&Timeout{LineageStack: []Frame{{SplitNodeID: "s", TotalItems: -1}}}).Validate(), "Timeout",
		"workflow_id: missing", "execution_id: missing", "node_id: missing", "deadline: missing", "lineage_stack[0].total_items: -1", "message: missing")
}

func TestContextKeysListIsBounded(t *testing.T) {
	m := validExecution()
	for i := 0; i < 1000; i++ {
		m.AccumulatedContext[strings.Repeat("k", 1000)+string(rune('a'+i%26))+strings.Repeat("x", i)] = i
	}
	err := m.Validate()
	if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), "and 995 more") {
		t.Fatalf("error (%d bytes) = %.300v", len(err.Error()), err)
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	check := func(name string, v any, decode func([]byte) (any, error)) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%s: round trip gave %+v, want %+v", name, got, v)
		}
	}
	check("execution", validExecution(), func(b []byte) (any, error) { return DecodeExecution(b) })
	check("status", validStatus(), func(b []byte) (any, error) { return DecodeStatus(b) })
	check("completion", validCompletion(), func(b []byte) (any, error) { return DecodeCompletion(b) })
	check("timeout", validTimeout(), func(b []byte) (any, error) { return DecodeTimeout(b) })
}

func TestDecodeRFCExample(t *testing.T) {
	// RFC 001 §6.2, failure example.
	s, err := DecodeStatus([]byte(`{
	  "workflow_id": "wf_email_notification",
	  "execution_id": "exec_20251009_123456",
	  "node_id": "http_fetch_user",
	  "status": "failed",
	  "output": null,
	  "error": {"message": "Connection timeout after 30s", "code": "HTTP_TIMEOUT", "details": {"url": "https://api.example.com/users/123"}},
	  "executed_at": "2025-10-09T12:35:30Z",
	  "duration_ms": 30000
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Error.Code != "HTTP_TIMEOUT" || s.DurationMS != 30000 || !s.ExecutedAt.Equal(time.Date(2025, 10, 9, 12, 35, 30, 0, time.UTC)) {
		t.Errorf("decoded %+v", s)
	}
}

func TestDecodeMalformed(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"syntax", `{"workflow_id": }`, "malformed NodeExecution message: invalid JSON at byte 17"},
		{"truncated", `{"workflow_id": "w"`, "unexpected end of JSON input"},
		{"not an object", `[1,2]`, "want a JSON object, got array"},
		{"wrong type", `{"attempt": "1"}`, "field attempt: want a whole number within range, got string"},
		{"wrong nested type", `{"lineage_stack": [{"item_index": true}]}`, "field lineage_stack.item_index: want a whole number within range, got bool"},
		{"context not an object", `{"accumulated_context": [1]}`, "field accumulated_context: want an object, got array"},
		{"bad time", `{"execution_started_at": "yesterday"}`, `field execution_started_at: want an RFC 3339 time string such as "2025-10-09T12:34:56Z", got "yesterday"`},
		{"time not a string", `{"execution_started_at": 5}`, "field execution_started_at: want an RFC 3339 time string"},
		{"empty", ``, "unexpected end of JSON input"},
		{"valid JSON, invalid message", `{}`, "invalid NodeExecution message: message_id: missing; workflow_id: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeExecution([]byte(tt.in))
			if m != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeExecution(%s) = %v, %v; want error containing %q", tt.in, m, err, tt.want)
			}
		})
	}
	if _, err := DecodeStatus([]byte(`{"next_attempt_at": "soon"}`)); err == nil || !strings.Contains(err.Error(), "field next_attempt_at: want an RFC 3339") {
		t.Errorf("status: %v", err)
	}
	if _, err := DecodeCompletion([]byte(`{"completed_at": "x"}`)); err == nil || !strings.Contains(err.Error(), "field completed_at:") {
		t.Errorf("completion: %v", err)
	}
	if _, err := DecodeTimeout([]byte(`{"deadline": "x"}`)); err == nil || !strings.Contains(err.Error(), "field deadline:") {
		t.Errorf("timeout: %v", err)
	}
}

// bigExecution returns an encoded valid NodeExecution of about n bytes.
func bigExecution(t *testing.T, n int) []byte {
	t.Helper()
	m := validExecution()
	m.AccumulatedContext["$big"] = strings.Repeat("x", n)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSizeLimits(t *testing.T) {
	if MaxSize != 10<<20 || WarnSize != 1<<20 {
		t.Fatalf("MaxSize %d, WarnSize %d", MaxSize, WarnSize)
	}
	huge := bigExecution(t, 11_000_000)
	m, err := DecodeExecution(huge)
	if m != nil || err == nil {
		t.Fatalf("11 MB message accepted")
	}
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "over the limit of 10485760 bytes") ||
		!strings.Contains(err.Error(), "NodeExecution message is 11000") {
		t.Errorf("error = %v", err)
	}
	for _, decode := range []func([]byte) error{
		func(b []byte) error { _, err := DecodeStatus(b); return err },
		func(b []byte) error { _, err := DecodeCompletion(b); return err },
		func(b []byte) error { _, err := DecodeTimeout(b); return err },
	} {
		if err := decode(huge); !errors.Is(err, ErrTooLarge) {
			t.Errorf("huge message: %v", err)
		}
	}

	big := bigExecution(t, 2_000_000)
	if _, err := DecodeExecution(big); err != nil {
		t.Fatalf("2 MB message rejected: %v", err)
	}
	if !SizeWarning(len(big)) {
		t.Error("no size warning for a 2 MB message")
	}
	if SizeWarning(WarnSize) || !SizeWarning(WarnSize+1) || SizeWarning(len(bigExecution(t, 1000))) {
		t.Error("SizeWarning boundary wrong")
	}

	// Exactly at the limit is accepted.
	exact := bigExecution(t, 0)
	exact = bigExecution(t, MaxSize-len(exact))
	if len(exact) != MaxSize {
		t.Fatalf("built %d bytes", len(exact))
	}
	if _, err := DecodeExecution(exact); err != nil {
		t.Errorf("message of exactly MaxSize rejected: %v", err)
	}
}

// TestFastDecode: Rune's own messages take decode's fast path, with the
// value the strict decode gives; what only the strict decode accepts (a
// name in other case, a repeated name) is still accepted, as before.
func TestFastDecode(t *testing.T) {
	statuses := &Statuses{WorkflowID: "wf", ExecutionID: "exec_1", Statuses: []*NodeStatus{validStatus()}}
	for _, m := range []any{validExecution(), validStatus(), validCompletion(), validTimeout(), statuses} {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		fast := reflect.New(reflect.TypeOf(m).Elem()).Interface()
		if err := fastUnmarshal(data, fast); err != nil {
			t.Fatalf("%T: the fast decode refuses Rune's own message: %v", m, err)
		}
		if !reflect.DeepEqual(fast, m) {
			t.Fatalf("%T: the fast decode gives %+v, want %+v", m, fast, m)
		}
	}
	for _, raw := range []string{
		`{"Message_ID":"m1","workflow_id":"wf","execution_id":"e","current_node":"n","attempt":1,"execution_started_at":"2025-10-09T12:34:56Z","workflow_definition":{},"accumulated_context":{}}`,
		`{"message_id":"x","message_id":"m1","workflow_id":"wf","execution_id":"e","current_node":"n","attempt":1,"execution_started_at":"2025-10-09T12:34:56Z","workflow_definition":{},"accumulated_context":{}}`,
	} {
		if fastUnmarshal([]byte(raw), new(NodeExecution)) == nil {
			t.Fatalf("the fast decode accepts %s; this test wants a message only the strict decode accepts", raw)
		}
		m, err := DecodeExecution([]byte(raw))
		if err != nil || m.MessageID != "m1" {
			t.Fatalf("DecodeExecution(%s) = %+v, %v; want message m1, as encoding/json decodes it", raw, m, err)
		}
	}
}

// BenchmarkDecodeExecution decodes the node message of the last node of
// the bench's chain (rune bench: ten set nodes' outputs in its context).
func BenchmarkDecodeExecution(b *testing.B) {
	m := validExecution()
	m.WorkflowDefinition, m.DefinitionRef = nil, "d4bc5d70b9f398baafaa3a1a353e51a3"
	m.LineageStack = nil
	for i := 1; i <= 9; i++ {
		m.AccumulatedContext[fmt.Sprint("$step_", i)] = map[string]any{"label": fmt.Sprint("step step_", i), "value": float64(i)}
	}
	data, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeExecution(data); err != nil {
			b.Fatal(err)
		}
	}
}
