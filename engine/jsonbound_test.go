package engine

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestJSONBound: jsonBound never says less than the encoded size, so that
// externalize never skips a value that reaches the threshold; and it is
// budget once the value reaches budget.
func TestJSONBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "a", "<>&", "\\u2028\u2028", "\x00\x1f\"\\", "\xff\xfe", "日本語", strings.Repeat("é", 40)}
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(9); {
		case k == 0:
			return nil
		case k == 1:
			return r.IntN(2) == 0
		case k == 2:
			return []float64{0, math.Copysign(0, -1), 1e21, 1e-7, -math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.123456789}[r.IntN(7)]
		case k == 3:
			return int64(math.MinInt64)
		case k < 6 || depth > 4:
			return strs[r.IntN(len(strs))]
		case k == 6:
			m := map[string]any{}
			for range r.IntN(5) {
				m[strs[r.IntN(len(strs))]] = value(depth + 1)
			}
			return m
		default:
			a := make([]any, r.IntN(5))
			for i := range a {
				a[i] = value(depth + 1)
			}
			return a
		}
	}
	for range 20000 {
		v := value(0)
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if b := jsonBound(v, math.MaxInt32); b < len(raw) {
			t.Fatalf("jsonBound of %s is %d, under its %d encoded bytes", raw, b, len(raw))
		}
		if budget := len(raw)/2 + 1; jsonBound(v, budget) < len(raw) && jsonBound(v, budget) < budget {
			t.Fatalf("jsonBound of %s with budget %d says %d, under both", raw, budget, jsonBound(v, budget))
		}
	}
	if got := jsonBound(struct{}{}, 100); got != 100 {
		t.Errorf("jsonBound of a struct: %d, want the budget", got)
	}
}
