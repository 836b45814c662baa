package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// ruleFile is Prometheus's rule file format, as far as rules.yml uses it.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func loadRules(t *testing.T) (alerts []rule, recorded map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("prometheus/rules.yml: %v", err)
	}
	recorded = map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = r.Expr
			} else {
				alerts = append(alerts, r)
			}
		}
	}
	return alerts, recorded
}

// slug is GitHub's anchor of a heading.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = regexp.MustCompile("[^a-z0-9 _-]").ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

const runbookBase = "https://github.com/rune-org/rune/blob/main/docs/operations.md#"

// Every alert of rules.yml has a `for:`, a severity and a runbook pointing
// at a section of docs/operations.md, and the docs' table of alerts says
// exactly what the file does: one row per alert with its expression, `for`
// and severity.
func TestAlertsMatchDocs(t *testing.T) {
	alerts, recorded := loadRules(t)
	docs := readDocs(t)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(docs, -1) {
		anchors[slug(m[1])] = true
	}
	rows := map[string][]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(Rune[A-Za-z]+)` \\| (.*)$").FindAllStringSubmatch(docs, -1) {
		rows[m[1]] = splitRow(m[2])
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts in rules.yml")
	}
	seen := map[string]bool{}
	for _, a := range alerts {
		seen[a.Alert] = true
		if a.For == "" {
			t.Errorf("%s: no for:", a.Alert)
		}
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, s)
		}
		frag, ok := strings.CutPrefix(a.Annotations["runbook_url"], runbookBase)
		if !ok || !anchors[frag] {
			t.Errorf("%s: runbook_url %q is not a section of docs/operations.md (%s<anchor>)", a.Alert, a.Annotations["runbook_url"], runbookBase)
		}
		if a.Annotations["summary"] == "" {
			t.Errorf("%s: no summary", a.Alert)
		}
		row, ok := rows[a.Alert]
		if !ok {
			t.Errorf("%s: not in docs/operations.md's table of alerts", a.Alert)
			continue
		}
		want := []string{"`" + a.Expr + "`", a.For, a.Labels["severity"]}
		if len(row) < 5 || !slices.Equal(row[:3], want) {
			t.Errorf("%s: docs say %q, rules.yml %q", a.Alert, row[:min(3, len(row))], want)
		}
		for _, name := range regexp.MustCompile(`rune:[a-z0-9_:]+`).FindAllString(a.Expr, -1) {
			if _, ok := recorded[name]; !ok {
				t.Errorf("%s: %s is not recorded in rules.yml", a.Alert, name)
			}
		}
	}
	for name := range rows {
		if !seen[name] {
			t.Errorf("docs/operations.md lists alert %s, which rules.yml does not have", name)
		}
	}
}

// splitRow splits a markdown table row's cells (after the first), on
// pipes not escaped as \|, and unescapes them.
func splitRow(s string) []string {
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '|':
			cur.WriteByte('|')
			i++
		case s[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return cells
}

// dashboard is the part of Grafana's dashboard model the checks read.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// The dashboard: one row per process role, the panels issue 39 asks for
// under them, unique ids, every query on the dashboard's Prometheus
// variable, every recorded series recorded by rules.yml, and every
// expression valid PromQL (promtool checks them as recording rules).
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/rune.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana/rune.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	_, recorded := loadRules(t)
	want := map[string][]string{
		"Workers (rune-worker)": {"Node executions by type and outcome", "Queue depths", "In flight vs concurrency",
			"Completions by status", "Dead letters", "Redeliveries", "HTTP node latency"},
		"Schedulers (rune-scheduler)": {"Timer lateness", "Timers overdue"},
		"Server (rune-server)":        {"Dispatch lag", "History write lag"},
	}
	ids := map[int]bool{}
	row := ""
	under := map[string][]string{}
	var exprs []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside Grafana's 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			row = p.Title
			continue
		}
		if row == "" {
			t.Errorf("panel %q comes before any row", p.Title)
		}
		under[row] = append(under[row], p.Title)
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no queries", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
			for _, name := range regexp.MustCompile(`rune:[a-z0-9_:]+`).FindAllString(q.Expr, -1) {
				if _, ok := recorded[name]; !ok {
					t.Errorf("panel %q: %s is not recorded in rules.yml", p.Title, name)
				}
			}
		}
	}
	for r, titles := range want {
		for _, title := range titles {
			if !slices.Contains(under[r], title) {
				t.Errorf("no panel %q under row %q (rows: %v)", title, r, slices.Collect(maps.Keys(under)))
			}
		}
	}
	promtoolCheck(t, exprs)
}

// promtoolCheck checks exprs as PromQL with `promtool check rules`, with
// Grafana's $__rate_interval made 5m. Without promtool it skips, unless
// CI is set: CI installs it.
func promtoolCheck(t *testing.T, exprs []string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found (Debian's prometheus package); CI must have it")
		}
		t.Skip("promtool not found (Debian's prometheus package)")
	}
	var f ruleFile
	f.Groups = append(f.Groups, struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	}{Name: "dashboard"})
	for i, e := range exprs {
		f.Groups[0].Rules = append(f.Groups[0].Rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: strings.ReplaceAll(e, "$__rate_interval", "5m")})
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err := exec.Command("promtool", "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries are not valid PromQL: %v\n%s", err, res)
	}
}
