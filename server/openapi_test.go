package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/node"
	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/workflow"
)

// TestOpenAPIMatchesRoutes checks the served OpenAPI document against the
// route table in both directions: every route is documented, and every
// documented path and method is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	var routes, documented []string
	for _, r := range Endpoints() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	methods := []string{"get", "put", "post", "delete", "patch", "head", "options"}
	for path, item := range doc.Paths {
		for key, op := range item {
			if !slices.Contains(methods, key) {
				continue // parameters, summary
			}
			documented = append(documented, strings.ToUpper(key)+" "+path)
			var o struct {
				OperationID string                     `json:"operationId"`
				Responses   map[string]json.RawMessage `json:"responses"`
				Security    *[]any                     `json:"security"`
			}
			if err := json.Unmarshal(op, &o); err != nil || o.OperationID == "" || len(o.Responses) == 0 {
				t.Errorf("%s %s: want an operationId and responses (%v)", key, path, err)
			}
		}
	}
	slices.Sort(routes)
	slices.Sort(documented)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("openapi.json documents %s, which the server does not have", d)
		}
	}
	// Open routes are exactly those the document exempts from security.
	for _, r := range Endpoints() {
		var o struct {
			Security *[]any `json:"security"`
		}
		_ = json.Unmarshal(doc.Paths[r.Path][strings.ToLower(r.Method)], &o)
		exempt := o.Security != nil && len(*o.Security) == 0
		if exempt != r.Open {
			t.Errorf("%s %s: open %v in the route table, security-exempt %v in openapi.json", r.Method, r.Path, r.Open, exempt)
		}
	}
}

// TestOpenAPINodeTypes checks the document's typed definition against the
// validator's node types, the code the document is written from: the Node
// oneOf maps exactly the registered types, and each type's parameters
// schema names exactly the parameters its Check knows (read from the
// problem Check reports for an unknown one, which lists them).
func TestOpenAPINodeTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Discriminator struct {
					PropertyName string            `json:"propertyName"`
					Mapping      map[string]string `json:"mapping"`
				} `json:"discriminator"`
				Properties           map[string]json.RawMessage `json:"properties"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
				AllOf                []struct {
					Properties struct {
						Parameters struct {
							Ref string `json:"$ref"`
						} `json:"parameters"`
					} `json:"properties"`
				} `json:"allOf"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	node := schemas["Node"]
	if node.Discriminator.PropertyName != "type" {
		t.Fatalf("Node: discriminator %q, want type", node.Discriminator.PropertyName)
	}
	reg := engine.WithControls(nodes.NewRegistry(nodes.Options{}))
	var documented []string
	for name := range node.Discriminator.Mapping {
		documented = append(documented, name)
	}
	slices.Sort(documented)
	if !slices.Equal(documented, reg.Names()) {
		t.Fatalf("Node maps types %v, the validator knows %v", documented, reg.Names())
	}
	for name, ref := range node.Discriminator.Mapping {
		typeSchema := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		var paramsRef string
		for _, a := range typeSchema.AllOf {
			if r := a.Properties.Parameters.Ref; r != "" {
				paramsRef = r
			}
		}
		params, ok := schemas[strings.TrimPrefix(paramsRef, "#/components/schemas/")]
		if !ok || params.AdditionalProperties == nil || *params.AdditionalProperties {
			t.Errorf("node type %s: parameters schema %q missing or open to unknown parameters", name, paramsRef)
			continue
		}
		var inDoc []string
		for p := range params.Properties {
			inDoc = append(inDoc, p)
		}
		slices.Sort(inDoc)
		if known := knownParameters(t, reg, name); !slices.Equal(inDoc, known) {
			t.Errorf("node type %s: openapi.json has parameters %v, its Check knows %v", name, inDoc, known)
		}
	}
}

// knownParameters asks node type name's Check which parameters it knows, by
// giving it one it does not.
func knownParameters(t *testing.T, reg *node.Registry, name string) []string {
	n := &workflow.Node{ID: "probe", Type: name, Parameters: map[string]any{"zz_probe": 1}}
	var ps workflow.Problems
	reg.CheckNode(workflow.NewNodeCheck(n, "nodes[0]", nil, &ps))
	for _, p := range ps {
		if p.Path != "nodes[0].parameters.zz_probe" {
			continue
		}
		if strings.Contains(p.Message, "take no parameters") {
			return nil
		}
		_, list, ok := strings.Cut(p.Message, "(known: [")
		if ok {
			return slices.Sorted(slices.Values(strings.Fields(strings.TrimSuffix(list, "])"))))
		}
	}
	t.Fatalf("node type %s: no unknown-parameter problem listing the known ones: %v", name, ps)
	return nil
}
