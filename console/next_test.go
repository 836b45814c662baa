package console

import "testing"

// A post-login redirect stays on the server: tabs, line breaks and other
// controls (which browsers drop), backslashes (which they read as '/') and
// "//" (another host) give "/".
func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/executions?status=failed": "/executions?status=failed",
		"/workflows/a%2Fb":          "/workflows/a%2Fb",
		"":                          "/",
		"executions":                "/",
		"https://evil.example/":     "/",
		"//evil.example/":           "/",
		"/\\evil.example/":          "/",
		"/\t/evil.example/":         "/",
		"/\n/evil.example/":         "/",
		"/\r\n/evil.example":        "/",
		"/\x00/evil.example":        "/",
		"/\u0085/evil.example":      "/",
		"/a\\b":                     "/",
		"/%":                        "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
