package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
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
