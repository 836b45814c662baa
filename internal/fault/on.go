//go:build fault

package fault

// Enabled reports whether this binary was built with the fault tag, so
// that FromEnv reads the variables.
const Enabled = true

// FromEnv returns the hooks the environment asks for (see Parse): this is a
// build with the fault tag, for crash tests.
func FromEnv(getenv func(string) string) (Hooks, error) { return Parse(getenv) }
