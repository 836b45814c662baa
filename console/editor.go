package console

// The visual workflow editor (issue 38, item 5): /editor creates a workflow
// on a canvas, /editor/{id} edits the latest version of one. The page is
// assets/editor.js; the server gives it the stored definition text (the
// JSON view shows it byte for byte), checks each edit as `rune validate`
// does (/ui/editor/validate) and lists the context paths seen in recent
// runs for the expression completion (/ui/editor/paths). The parameter
// forms come from the API's own OpenAPI document (/v1/openapi.json through
// the console's proxy), and a save is the API's POST or PUT: the console
// keeps no second copy of the node schemas or of the rules.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/workflow"
)

// Bounds of the editor's endpoints: a definition checked, the executions
// and runs read for paths, and the paths answered.
const (
	editorMaxDefinition = 4 << 20
	editorPathRuns      = 10
	editorPathsMax      = 500
	editorPathDepth     = 4
)

// editorRoutes registers the editor's pages and endpoints on c's mux.
func (c *Console) editorRoutes() {
	c.mux.HandleFunc("GET /editor", c.session(c.editorPage))
	c.mux.HandleFunc("GET /editor/{id}", c.session(c.editorPage))
	c.mux.HandleFunc("POST /ui/editor/validate", c.session(c.editorValidate))
	c.mux.HandleFunc("GET /ui/editor/paths", c.session(c.editorPaths))
}

// editorPage renders the editor: empty for /editor, with the latest
// version of the workflow for /editor/{id}.
func (c *Console) editorPage(w http.ResponseWriter, r *http.Request) {
	acc := accessOf(r)
	data := map[string]any{"Title": "New workflow", "CanCheck": c.cfg.Validate != nil}
	if id := r.PathValue("id"); id != "" {
		if !acc.sees(id) {
			c.fail(w, r, "workflow "+id, fmt.Errorf("workflow %s: %w", id, store.ErrNotFound))
			return
		}
		wf, err := c.cfg.Store.GetWorkflow(r.Context(), id, 0)
		if err != nil {
			c.fail(w, r, "workflow "+id, err)
			return
		}
		data["Title"] = "Edit workflow " + wf.ID
		data["W"] = wf
		// The stored text as it is: an unchanged definition round-trips
		// byte for byte (the JSON view shows it, a save of it stores
		// nothing new).
		data["Definition"] = string(wf.Definition)
	}
	c.render(w, r, "editor", data)
}

// editorProblem is a validation problem with the node it is about, when
// its path names one ("nodes[2].parameters.url" → the third node's id).
type editorProblem struct {
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
	Node    string `json:"node,omitempty"`
	Edge    string `json:"edge,omitempty"`
}

var problemIndex = regexp.MustCompile(`^(nodes|edges)\[(\d+)\]`)

// editorValidate checks a definition (the request body) as `rune validate`
// does and answers {"problems": [...]}, each with its node or edge id: the
// editor marks them on the graph as the user edits.
func (c *Console) editorValidate(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Validate == nil {
		http.NotFound(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, editorMaxDefinition)
	def, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, fmt.Sprintf("definition: unreadable or larger than %d bytes", editorMaxDefinition), http.StatusRequestEntityTooLarge)
		return
	}
	problems := []editorProblem{}
	if err := c.cfg.Validate(def); err != nil {
		var ps workflow.Problems
		if !errors.As(err, &ps) {
			ps = workflow.Problems{{Message: err.Error()}}
		}
		// The ids of the nodes and edges by index, to name what a path
		// points at (a definition that is not JSON has none).
		var shape struct {
			Nodes []struct {
				ID string `json:"id"`
			} `json:"nodes"`
			Edges []struct {
				ID string `json:"id"`
			} `json:"edges"`
		}
		_ = json.Unmarshal(def, &shape)
		for _, p := range ps {
			ep := editorProblem{Path: p.Path, Message: p.Message}
			if m := problemIndex.FindStringSubmatch(p.Path); m != nil {
				i, _ := strconv.Atoi(m[2])
				if m[1] == "nodes" && i < len(shape.Nodes) {
					ep.Node = shape.Nodes[i].ID
				} else if m[1] == "edges" && i < len(shape.Edges) {
					ep.Edge = shape.Edges[i].ID
				}
			}
			problems = append(problems, ep)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"problems": problems})
}

// editorPaths answers the context paths seen in the recent executions of
// workflow ?workflow= ({"paths": ["$trigger.user_id", "$fetch.body.name",
// ...]}): the trigger payloads and node outputs of its last
// editorPathRuns executions, editorPathDepth levels deep, at most
// editorPathsMax. Values are never sent, only their paths.
func (c *Console) editorPaths(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("workflow")
	paths := map[string]bool{}
	if id != "" && accessOf(r).sees(id) {
		page, err := c.cfg.Store.ListExecutions(r.Context(), store.ExecutionFilter{WorkflowID: id, Limit: editorPathRuns})
		if err != nil {
			c.log.Error("console: editor paths", "workflow", id, "err", err)
			http.Error(w, "reading the recent executions failed; see the server log", http.StatusInternalServerError)
			return
		}
		for _, x := range page.Items {
			collectPaths(paths, "$trigger", x.Input, editorPathDepth)
			runs, err := c.cfg.Store.NodeRuns(r.Context(), x.ID)
			if err != nil {
				c.log.Error("console: editor paths", "execution", x.ID, "err", err)
				continue
			}
			for _, run := range runs {
				if len(paths) >= editorPathsMax {
					break
				}
				collectPaths(paths, "$"+run.NodeID, run.Output, editorPathDepth)
			}
		}
	}
	out := make([]string, 0, len(paths))
	for p := range paths {
		out = append(out, p)
	}
	sort.Strings(out)
	if len(out) > editorPathsMax {
		out = out[:editorPathsMax]
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"paths": out})
}

// identifier is a key an expression can name with a dot.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// collectPaths adds prefix and the paths of the object keys under raw, to
// depth levels; an array adds its first element's paths as [0].
func collectPaths(into map[string]bool, prefix string, raw json.RawMessage, depth int) {
	if len(into) >= editorPathsMax*2 || len(raw) == 0 {
		return
	}
	into[prefix] = true
	if depth == 0 {
		return
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := prefix + "." + k
			if !identifier.MatchString(k) {
				p = prefix + "[" + strconv.Quote(k) + "]"
			}
			collectPaths(into, p, m[k], depth-1)
		}
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) != nil || len(a) == 0 {
			return
		}
		collectPaths(into, prefix+"[0]", a[0], depth-1)
	}
}
