package deploy

import (
	"bufio"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// unit reads a systemd unit's settings (the last value of a key wins, as
// systemd's for single-valued ones; EnvironmentFile accumulates).
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "[") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not key=value", path, l)
		}
		out[k] = append(out[k], v)
	}
	return out
}

func last(u map[string][]string, k string) string {
	if v := u[k]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// envFile reads an example environment file's variables.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		out[k] = v
	}
	return out
}

// The systemd units run each role with flags the binary has, give the
// drain the same time as the Kubernetes manifests, restart on failure
// only, read environment files whose examples hold variables the command
// reads and the role's own users, and serve metrics where
// prometheus/prometheus.yml scrapes them; systemd-analyze verify accepts
// them where it is installed.
func TestSystemdUnits(t *testing.T) {
	m := loadManifests(t)
	drain := drainOf(t, m)
	prom, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	docs := readDocs(t)
	for _, r := range roles {
		t.Run(r.command, func(t *testing.T) {
			path := filepath.Join("systemd", r.deployment+".service")
			u := unit(t, path)
			h := runeHelp(t, r.command)
			exec := strings.Fields(last(u, "ExecStart"))
			if len(exec) < 2 || filepath.Base(exec[0]) != "rune" || exec[1] != r.command {
				t.Fatalf("%s: ExecStart %v, want rune %s", path, exec, r.command)
			}
			flags := argFlags(t, path, exec[2:])
			for f := range flags {
				if _, ok := h.flags[f]; !ok {
					t.Errorf("%s: --%s is not a flag of rune %s", path, f, r.command)
				}
			}
			if v, ok := flags["drain-timeout"]; ok && duration(t, path, v) != drain {
				t.Errorf("%s: --drain-timeout %s, the Kubernetes worker drains %v", path, v, drain)
			}
			stop := duration(t, path+" TimeoutStopSec", last(u, "TimeoutStopSec")+"s")
			if d := m.deployments[r.deployment]; d != nil && d.Spec.Template.Spec.TerminationGracePeriodSeconds != nil {
				if k8s := time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second; stop != k8s {
					t.Errorf("%s: TimeoutStopSec %v, the Deployment's grace period %v", path, stop, k8s)
				}
			}
			if stop < drain+5*time.Second {
				t.Errorf("%s: TimeoutStopSec %v, want at least the drain (%v) + 5 s", path, stop, drain)
			}
			for k, want := range map[string]string{"Restart": "on-failure", "KillSignal": "SIGTERM", "KillMode": "mixed", "RestartPreventExitStatus": "2", "User": "rune", "NoNewPrivileges": "yes"} {
				if got := last(u, k); got != want {
					t.Errorf("%s: %s=%q, want %q", path, k, got, want)
				}
			}
			env := map[string]string{}
			for _, f := range u["EnvironmentFile"] {
				example := filepath.Join("systemd", strings.TrimSuffix(filepath.Base(f), ".env")+".env.example")
				for k, v := range envFile(t, example) {
					env[k] = v
					if !h.reads(k, docs) {
						t.Errorf("%s: %s is neither read by rune %s (--help) nor a documented environment-only variable", example, k, r.command)
					}
				}
			}
			p := permissionsOf(t, r.permissionsRole)
			for k, want := range map[string]string{"RUNE_AMQP_URL": p.amqpUser, "RUNE_REDIS_URL": p.redisUser} {
				pu, err := url.Parse(env[k])
				if err != nil || pu.User == nil || pu.User.Username() != want {
					t.Errorf("%s: %s %q, want user %s (rune permissions --role %s)", path, k, env[k], want, r.permissionsRole)
				}
			}
			_, port, err := net.SplitHostPort(flags[r.addrFlag])
			if err != nil {
				t.Fatalf("%s: --%s: %v", path, r.addrFlag, err)
			}
			job := regexp.MustCompile(`(?s)job_name: ` + r.deployment + `\n.*?targets: \[([^\]]*)\]`).FindSubmatch(prom)
			if job == nil || !strings.Contains(string(job[1]), ":"+port+`"`) {
				t.Errorf("prometheus/prometheus.yml: job %s does not scrape port %s (--%s)", r.deployment, port, r.addrFlag)
			}
			verify(t, path)
		})
	}
}

// verify runs systemd-analyze verify on the unit, its binary replaced by
// the one built here (verify wants an executable).
func verify(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze not installed: the unit's syntax is not verified")
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(strings.ReplaceAll(string(raw), "/usr/local/bin/rune", runeBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("systemd-analyze", "verify", tmp).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}
