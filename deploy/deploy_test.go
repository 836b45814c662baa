package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// runeBin is the rune binary built from the repository for these tests:
// its --help is the truth about flags, `rune permissions` about users.
var runeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rune-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runeBin = filepath.Join(dir, "rune")
	build := exec.Command("go", "build", "-o", runeBin, "./cmd/rune")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build rune: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// help is what `rune <cmd> --help` says: each flag's name with its default
// (empty when it has none), and the whole text (for "env X" mentions).
type help struct {
	flags map[string]string
	text  string
}

var flagLine = regexp.MustCompile(`^  --?([a-z0-9-]+)`)
var flagDefault = regexp.MustCompile(`\(default "?([^")]*)"?\)`)

func runeHelp(t *testing.T, cmd string) help {
	t.Helper()
	var out bytes.Buffer
	c := exec.Command(runeBin, cmd, "--help")
	c.Stdout, c.Stderr = &out, &out
	_ = c.Run() // --help exits non-zero; the text is what counts
	h := help{flags: map[string]string{}, text: out.String()}
	lines := strings.Split(out.String(), "\n")
	for i, l := range lines {
		m := flagLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		// The flag's text, wrapped onto the indented lines after it.
		desc := l
		for _, next := range lines[i+1:] {
			if !strings.HasPrefix(next, "    ") {
				break
			}
			desc += " " + strings.TrimSpace(next)
		}
		def := ""
		if d := flagDefault.FindStringSubmatch(desc); d != nil {
			def = d[1]
		}
		h.flags[m[1]] = def
	}
	if len(h.flags) == 0 {
		t.Fatalf("rune %s --help lists no flags:\n%s", cmd, out.String())
	}
	return h
}

// argFlags splits --name=value arguments; anything else fails the test.
func argFlags(t *testing.T, where string, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			t.Errorf("%s: argument %q: want --flag=value", where, a)
			continue
		}
		out[name] = value
	}
	return out
}

// manifests holds every object of deploy/kubernetes, decoded strictly.
type manifests struct {
	deployments   map[string]*appsv1.Deployment
	pdbs          []*policyv1.PodDisruptionBudget
	configMaps    map[string]*corev1.ConfigMap
	secrets       map[string]*corev1.Secret
	services      map[string]*corev1.Service
	scaledObjects []*ScaledObject
	triggerAuths  map[string]*TriggerAuthentication
	kustomization *Kustomization
	files         map[string]bool
}

// Kustomization is the part of kustomize's Kustomization this deployment
// uses; decoding strictly into it keeps the file to those fields.
type Kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// ScaledObject mirrors the fields of KEDA's keda.sh/v1alpha1 ScaledObject
// that keda.yaml uses (KEDA's own types would pull KEDA's dependencies in);
// the HPA behavior inside it is Kubernetes' own type.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		Advanced        struct {
			HorizontalPodAutoscalerConfig struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior"`
			} `json:"horizontalPodAutoscalerConfig"`
		} `json:"advanced"`
		Triggers []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef struct {
				Name string `json:"name"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

// TriggerAuthentication mirrors KEDA's, as far as keda.yaml uses it.
type TriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}

// loadManifests decodes every document of deploy/kubernetes/*.yaml into
// its API type with unknown and duplicate fields refused.
func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{deployments: map[string]*appsv1.Deployment{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, services: map[string]*corev1.Service{},
		triggerAuths: map[string]*TriggerAuthentication{}, files: map[string]bool{}}
	paths, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in kubernetes/: %v", err)
	}
	for _, path := range paths {
		m.files[filepath.Base(path)] = true
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
			where := fmt.Sprintf("%s, document %d", path, i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if tm.Kind == "" {
				if strings.TrimSpace(stripComments(doc)) != "" {
					t.Errorf("%s: no kind", where)
				}
				continue
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				d := &appsv1.Deployment{}
				obj, m.deployments[name(t, where, doc)] = d, d
			case "policy/v1 PodDisruptionBudget":
				p := &policyv1.PodDisruptionBudget{}
				obj, m.pdbs = p, append(m.pdbs, p)
			case "v1 ConfigMap":
				c := &corev1.ConfigMap{}
				obj, m.configMaps[name(t, where, doc)] = c, c
			case "v1 Secret":
				s := &corev1.Secret{}
				obj, m.secrets[name(t, where, doc)] = s, s
			case "v1 Service":
				s := &corev1.Service{}
				obj, m.services[name(t, where, doc)] = s, s
			case "v1 Namespace":
				obj = &corev1.Namespace{}
			case "keda.sh/v1alpha1 ScaledObject":
				s := &ScaledObject{}
				obj, m.scaledObjects = s, append(m.scaledObjects, s)
			case "keda.sh/v1alpha1 TriggerAuthentication":
				a := &TriggerAuthentication{}
				obj, m.triggerAuths[name(t, where, doc)] = a, a
			case "kustomize.config.k8s.io/v1beta1 Kustomization":
				m.kustomization = &Kustomization{}
				obj = m.kustomization
			default:
				t.Errorf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
				continue
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Errorf("%s (%s): %v", where, tm.Kind, err)
			}
		}
	}
	return m
}

func name(t *testing.T, where, doc string) string {
	t.Helper()
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &o); err != nil || o.Metadata.Name == "" {
		t.Fatalf("%s: no metadata.name (%v)", where, err)
	}
	return o.Metadata.Name
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// roles are Rune's long-running processes: the Deployment (and unit) of
// each, its subcommand, the flag its probes' port comes from, and its role
// in `rune permissions`.
var roles = []struct {
	deployment, command, addrFlag, permissionsRole string
}{
	{"rune-worker", "worker", "metrics-addr", "worker"},
	{"rune-scheduler", "scheduler", "metrics-addr", "scheduler"},
	{"rune-server", "server", "addr", "master"},
}

// Every manifest decodes strictly into its API type, and kustomization.yaml
// lists every one of them but the Secrets' example.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	if m.kustomization == nil {
		t.Fatal("no kustomization.yaml")
	}
	var want []string
	for f := range m.files {
		if f != "kustomization.yaml" && f != "secrets.example.yaml" {
			want = append(want, f)
		}
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(m.kustomization.Resources))
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v, want every manifest but the example Secrets: %v", got, want)
	}
}

// Each role's Deployment runs its subcommand with flags the binary has,
// probes /healthz (liveness) and /readyz (readiness) on the port its
// address flag listens on, requests resources, gives the drain its time,
// reads settings the binary knows, and connects as the role's own user
// from `rune permissions`; a PodDisruptionBudget covers it.
func TestDeployments(t *testing.T) {
	m := loadManifests(t)
	workerDrain := drainOf(t, m)
	for _, r := range roles {
		t.Run(r.command, func(t *testing.T) {
			d := m.deployments[r.deployment]
			if d == nil {
				t.Fatalf("no Deployment %s", r.deployment)
			}
			h := runeHelp(t, r.command)
			spec := d.Spec.Template.Spec
			if len(spec.Containers) != 1 {
				t.Fatalf("%s: %d containers, want 1", r.deployment, len(spec.Containers))
			}
			c := spec.Containers[0]
			if len(c.Args) == 0 || c.Args[0] != r.command {
				t.Fatalf("%s: args %v, want the %q subcommand first", r.deployment, c.Args, r.command)
			}
			flags := argFlags(t, r.deployment, c.Args[1:])
			for f := range flags {
				if _, ok := h.flags[f]; !ok {
					t.Errorf("%s: --%s is not a flag of rune %s", r.deployment, f, r.command)
				}
			}
			addr, ok := flags[r.addrFlag]
			if !ok {
				t.Fatalf("%s: no --%s: the probes would have nothing to reach", r.deployment, r.addrFlag)
			}
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatalf("%s: --%s=%s: %v", r.deployment, r.addrFlag, addr, err)
			}
			for _, p := range []struct {
				kind  string
				probe *corev1.Probe
				path  string
			}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil {
					t.Errorf("%s: no HTTP %s probe", r.deployment, p.kind)
					continue
				}
				if p.probe.HTTPGet.Path != p.path {
					t.Errorf("%s: %s probe path %q, want %q", r.deployment, p.kind, p.probe.HTTPGet.Path, p.path)
				}
				if got := containerPort(c, p.probe.HTTPGet.Port.String()); strconv.Itoa(int(got)) != port {
					t.Errorf("%s: %s probe port %s is %d, but --%s listens on %s", r.deployment, p.kind, p.probe.HTTPGet.Port.String(), got, r.addrFlag, port)
				}
				if p.probe.TimeoutSeconds < 3 {
					t.Errorf("%s: %s probe timeout %ds: /readyz takes up to 2 s to say a dependency is down", r.deployment, p.kind, p.probe.TimeoutSeconds)
				}
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("%s: resource requests %v, want cpu and memory", r.deployment, c.Resources.Requests)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: no memory limit", r.deployment)
			}
			// The Go collector's soft limit must sit below the container's
			// hard one, or the kernel kills the worker before Go collects.
			if soft, ok := h.flags["memory-limit-mib"]; ok {
				if v, set := flags["memory-limit-mib"]; set {
					soft = v
				}
				mib, err := strconv.ParseInt(soft, 10, 64)
				if err != nil {
					t.Fatalf("%s: --memory-limit-mib %q: %v", r.deployment, soft, err)
				}
				if hard := c.Resources.Limits.Memory().Value(); mib<<20 >= hard {
					t.Errorf("%s: --memory-limit-mib %d is not below the memory limit %s", r.deployment, mib, c.Resources.Limits.Memory())
				}
			}
			drain := workerDrain
			if v, ok := flags["drain-timeout"]; ok {
				drain = duration(t, r.deployment+" --drain-timeout", v)
			}
			if g := spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < drain+5*time.Second {
				t.Errorf("%s: terminationGracePeriodSeconds %v, want at least the drain (%v) + 5 s", r.deployment, g, drain)
			}
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("%s: mounts a service account token it never uses", r.deployment)
			}
			checkEnv(t, m, r.deployment, c, h)
			checkUsers(t, m, r.deployment, r.permissionsRole, c)
			if !coveredByPDB(m, d) {
				t.Errorf("%s: no PodDisruptionBudget selects its pods", r.deployment)
			}
		})
	}
}

// drainOf is the workers' drain: their --drain-timeout, else the flag's
// default.
func drainOf(t *testing.T, m *manifests) time.Duration {
	t.Helper()
	h := runeHelp(t, "worker")
	def, ok := h.flags["drain-timeout"]
	if !ok {
		t.Fatal("rune worker has no --drain-timeout")
	}
	if d := m.deployments["rune-worker"]; d != nil && len(d.Spec.Template.Spec.Containers) == 1 {
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--drain-timeout="); ok {
				return duration(t, "rune-worker --drain-timeout", v)
			}
		}
	}
	return duration(t, "rune worker --drain-timeout's default", def)
}

func duration(t *testing.T, what, v string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s %q: %v", what, v, err)
	}
	return d
}

func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// envOnly are variables a process reads from its environment only (never
// a flag, so they do not show in process listings): docs/operations.md
// documents them.
var envOnly = []string{"RUNE_SIGNING_KEY", "RUNE_SECRET_KEY"}

// reads reports whether the command reads variable k: its --help names
// it, or docs documents it as environment-only.
func (h help) reads(k, docs string) bool {
	return strings.Contains(h.text, "env "+k) || strings.Contains(h.text, k+" ") ||
		slices.Contains(envOnly, k) && strings.Contains(docs, "`"+k+"`")
}

// checkEnv: every variable the container gets from a ConfigMap or Secret is
// one the command reads (its --help names it), or documented as
// environment-only.
func checkEnv(t *testing.T, m *manifests, deployment string, c corev1.Container, h help) {
	t.Helper()
	docs := readDocs(t)
	for _, src := range c.EnvFrom {
		var keys []string
		switch {
		case src.ConfigMapRef != nil:
			cm := m.configMaps[src.ConfigMapRef.Name]
			if cm == nil {
				t.Errorf("%s: no ConfigMap %s", deployment, src.ConfigMapRef.Name)
				continue
			}
			keys = slices.Collect(maps.Keys(cm.Data))
		case src.SecretRef != nil:
			s := m.secrets[src.SecretRef.Name]
			if s == nil {
				t.Errorf("%s: no Secret %s in secrets.example.yaml", deployment, src.SecretRef.Name)
				continue
			}
			keys = slices.Collect(maps.Keys(s.StringData))
		}
		for _, k := range keys {
			if h.reads(k, docs) {
				continue
			}
			t.Errorf("%s: %s is neither read by its command (--help) nor a documented environment-only variable", deployment, k)
		}
	}
}

// checkUsers: the container's RabbitMQ and Redis URLs name the user that
// `rune permissions --role R` creates, in its vhost.
func checkUsers(t *testing.T, m *manifests, deployment, role string, c corev1.Container) {
	t.Helper()
	p := permissionsOf(t, role)
	var env map[string]string
	for _, src := range c.EnvFrom {
		if src.SecretRef != nil && m.secrets[src.SecretRef.Name] != nil {
			env = m.secrets[src.SecretRef.Name].StringData
		}
	}
	for _, v := range []struct{ key, user, path string }{
		{"RUNE_AMQP_URL", p.amqpUser, "/" + p.vhost},
		{"RUNE_REDIS_URL", p.redisUser, ""},
	} {
		u, err := url.Parse(env[v.key])
		if err != nil || u.User == nil {
			t.Errorf("%s: %s %q: want a URL with a user", deployment, v.key, env[v.key])
			continue
		}
		if u.User.Username() != v.user {
			t.Errorf("%s: %s connects as %q, want %q (rune permissions --role %s)", deployment, v.key, u.User.Username(), v.user, role)
		}
		if v.path != "" && u.Path != v.path {
			t.Errorf("%s: %s vhost %q, want %q", deployment, v.key, u.Path, v.path)
		}
	}
}

// permissions is what `rune permissions --role R` creates.
type permissions struct{ amqpUser, vhost, redisUser string }

func permissionsOf(t *testing.T, role string) permissions {
	t.Helper()
	out, err := exec.Command(runeBin, "permissions", "--role", role).Output()
	if err != nil {
		t.Fatalf("rune permissions --role %s: %v", role, err)
	}
	var got [3]string
	for i, re := range []string{`rabbitmqctl add_user '?([^' ]+)`, `set_permissions -p '?([^' ]+)`, `ACL SETUSER '?([^' ]+)`} {
		m := regexp.MustCompile(re).FindSubmatch(out)
		if m == nil {
			t.Fatalf("rune permissions --role %s: nothing matches %s in:\n%s", role, re, out)
		}
		got[i] = string(m[1])
	}
	return permissions{got[0], got[1], got[2]}
}

func coveredByPDB(m *manifests, d *appsv1.Deployment) bool {
	for _, p := range m.pdbs {
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || sel.Empty() {
			continue
		}
		if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			return true
		}
	}
	return false
}

// readDocs returns docs/operations.md.
func readDocs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The KEDA ScaledObject scales the worker Deployment on the depth of the
// execution queue of the topology (docs/operations.md, "RabbitMQ
// topology", with the deployment's prefix), with the target and bounds
// docs/operations.md documents, through a TriggerAuthentication whose
// Secret exists.
func TestKEDAScaledObject(t *testing.T) {
	m := loadManifests(t)
	docs := readDocs(t)
	if len(m.scaledObjects) != 1 {
		t.Fatalf("%d ScaledObjects, want 1", len(m.scaledObjects))
	}
	so := m.scaledObjects[0]
	if so.Spec.ScaleTargetRef.Name != "rune-worker" || m.deployments["rune-worker"] == nil {
		t.Errorf("ScaledObject scales %q, want the worker Deployment rune-worker", so.Spec.ScaleTargetRef.Name)
	}
	if !regexp.MustCompile("(?m)^\\| `workflow\\.execution` \\| queue \\|").MatchString(docs) {
		t.Fatal("docs/operations.md's topology has no queue workflow.execution")
	}
	cm := m.configMaps["rune-config"]
	if cm == nil {
		t.Fatal("no ConfigMap rune-config")
	}
	if n := cm.Data["RUNE_EXECUTION_QUEUES"]; n != "1" {
		t.Errorf("RUNE_EXECUTION_QUEUES %q: keda.yaml has one trigger, for one execution queue", n)
	}
	// docs: "target: **500** ready messages of `workflow.execution` per worker, **2** to **20** workers"
	target := regexp.MustCompile("target: \\*\\*(\\d+)\\*\\* ready messages of `workflow\\.execution` per worker, \\*\\*(\\d+)\\*\\* to \\*\\*(\\d+)\\*\\* workers").FindStringSubmatch(docs)
	if target == nil {
		t.Fatal("docs/operations.md documents no autoscaling target (\"target: **N** ready messages of `workflow.execution` per worker, **MIN** to **MAX** workers\")")
	}
	if len(so.Spec.Triggers) != 1 {
		t.Fatalf("%d triggers, want 1", len(so.Spec.Triggers))
	}
	tr := so.Spec.Triggers[0]
	want := map[string]string{"protocol": "amqp", "mode": "QueueLength", "queueName": cm.Data["RUNE_PREFIX"] + "workflow.execution", "value": target[1]}
	if tr.Type != "rabbitmq" {
		t.Errorf("trigger type %q, want rabbitmq", tr.Type)
	}
	for k, v := range want {
		if tr.Metadata[k] != v {
			t.Errorf("trigger %s = %q, want %q", k, tr.Metadata[k], v)
		}
	}
	if got := fmt.Sprint(deref(so.Spec.MinReplicaCount), "-", deref(so.Spec.MaxReplicaCount)); got != target[2]+"-"+target[3] {
		t.Errorf("replicas %s, docs say %s-%s", got, target[2], target[3])
	}
	if b := so.Spec.Advanced.HorizontalPodAutoscalerConfig.Behavior; b == nil || b.ScaleDown == nil || b.ScaleDown.StabilizationWindowSeconds == nil || *b.ScaleDown.StabilizationWindowSeconds < 60 {
		t.Errorf("no scale-down stabilization window: a drained backlog reads as 0 and would drop workers at once")
	}
	// The target assumes a worker of one core (docs: "`cpu` request and limit 1").
	if !strings.Contains(docs, "(`cpu` request and limit 1,") {
		t.Error("docs/operations.md no longer says what worker the target assumes (`cpu` request and limit 1)")
	}
	if d := m.deployments["rune-worker"]; d != nil && len(d.Spec.Template.Spec.Containers) == 1 {
		res := d.Spec.Template.Spec.Containers[0].Resources
		if res.Requests.Cpu().String() != "1" || res.Limits.Cpu().String() != "1" {
			t.Errorf("worker cpu request %s, limit %s: the autoscaling target assumes 1 and 1", res.Requests.Cpu(), res.Limits.Cpu())
		}
	}
	auth := m.triggerAuths[tr.AuthenticationRef.Name]
	if auth == nil {
		t.Fatalf("no TriggerAuthentication %q", tr.AuthenticationRef.Name)
	}
	for _, ref := range auth.Spec.SecretTargetRef {
		s := m.secrets[ref.Name]
		if s == nil || s.StringData[ref.Key] == "" {
			t.Errorf("TriggerAuthentication %s: Secret %s has no %s", auth.Name, ref.Name, ref.Key)
		}
	}
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}
