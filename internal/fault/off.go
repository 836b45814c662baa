//go:build !fault

package fault

// Enabled reports whether this binary was built with the fault tag, so
// that FromEnv reads the variables.
const Enabled = false

// FromEnv returns no hooks: a production build (without the fault tag)
// reads no fault variable, so none can make it crash.
func FromEnv(func(string) string) (Hooks, error) { return Hooks{}, nil }
