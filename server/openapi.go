package server

import (
	_ "embed"
	"net/http"
)

// openapiJSON is the API's OpenAPI 3.1 document, written by hand;
// TestOpenAPIMatchesRoutes checks it against the route table both ways.
//
//go:embed openapi.json
var openapiJSON []byte

// OpenAPI returns the OpenAPI document served at /v1/openapi.json.
func OpenAPI() []byte { return openapiJSON }

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, err := w.Write(openapiJSON)
	return err
}
