package fault

import "testing"

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// TestFromEnv: a binary built without the fault tag (the tests' default,
// and every production build) reads no fault variable, not even a bad one;
// with the tag it reads them as Parse does.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	h, err := FromEnv(env(map[string]string{SchedulerEnv: "exit-after-claim", NotifyEnv: "sent"}))
	if err != nil || (h.AfterClaim != nil) != Enabled || (h.Notify != nil) != Enabled {
		t.Fatalf("fault tag %v: hooks claim %v kill %v, error %v", Enabled, h.AfterClaim != nil, h.Notify != nil, err)
	}
	_, err = FromEnv(env(map[string]string{SchedulerEnv: "explode"}))
	if (err != nil) != Enabled {
		t.Fatalf("fault tag %v: a bad %s gives error %v", Enabled, SchedulerEnv, err)
	}
}
