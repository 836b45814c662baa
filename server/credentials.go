package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/rune-org/rune/nodes"
	"github.com/rune-org/rune/store"
)

// credentialView is a credential as the API shows it: never its value.
type credentialView struct {
	Name      string    `json:"name"`
	Type      string    `json:"type"`
	KeyID     string    `json:"key_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// AllowedHosts is the credential's allowed_hosts field, a public one
	// (redact.Public): the list shows where it may be sent (issue 38).
	AllowedHosts string `json:"allowed_hosts,omitempty"`
}

// credentialInput is the body of POST /v1/credentials.
type credentialInput struct {
	Name string `json:"name"`
	// Type says what the fields are for ("bearer", "basic", "api_key", …);
	// free text shown in lists.
	Type string `json:"type"`
	// Value holds the credential's fields, e.g. {"token": "…"}.
	Value map[string]string `json:"value"`
}

var credentialName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func viewCredential(c *store.Credential) credentialView {
	return credentialView{Name: c.Name, Type: c.Type, KeyID: c.KeyID, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

func (s *Server) requireKeys() error {
	if s.cfg.Keys == nil {
		return errorf(http.StatusServiceUnavailable, CodeUnavailable, "credentials need a secret key: start the server with RUNE_SECRET_KEY or --secret-key-file")
	}
	return nil
}

// putCredential creates or replaces a credential, encrypted with the
// current key before it reaches the store. Error messages name fields,
// never values.
func (s *Server) putCredential(w http.ResponseWriter, r *http.Request) error {
	if err := s.requireKeys(); err != nil {
		return err
	}
	body, err := readBody(r, 64<<10)
	if err != nil {
		return err
	}
	var in credentialInput
	if err := decodeJSON(body, &in); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			// The decoder's message may quote the offending value.
			ae.Message = "the body must be {\"name\": string, \"type\": string, \"value\": {field: string, …}}"
		}
		return err
	}
	switch {
	case !credentialName.MatchString(in.Name):
		return badRequest("field name: want 1–128 letters, digits, '_', '.' or '-', starting with a letter or digit")
	case in.Type == "" || len(in.Type) > 64:
		return badRequest("field type: want 1–64 characters (e.g. \"bearer\", \"basic\")")
	case len(in.Value) == 0:
		return badRequest("field value: want an object of at least one string field, e.g. {\"token\": \"…\"}")
	}
	plain, err := json.Marshal(in.Value)
	if err != nil {
		return err
	}
	keyID, sealed, err := s.cfg.Keys.Seal(in.Name, plain)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	c := &store.Credential{Name: in.Name, Type: in.Type, KeyID: keyID, Ciphertext: sealed, CreatedAt: now, UpdatedAt: now}
	if err := s.store.PutCredential(r.Context(), c); err != nil {
		return err
	}
	got, err := s.store.GetCredential(r.Context(), in.Name)
	if err != nil {
		return err
	}
	writeCreated(w, "/v1/credentials/"+url.PathEscape(got.Name), viewCredential(got))
	return nil
}

func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.store.ListCredentials(r.Context())
	if err != nil {
		return err
	}
	views := make([]credentialView, 0, len(cs))
	for _, c := range cs {
		v := viewCredential(c)
		v.AllowedHosts = s.allowedHosts(r, c.Name)
		views = append(views, v)
	}
	writeList(w, views, "", func(v credentialView) credentialView { return v })
	return nil
}

// allowedHosts reads credential name's allowed_hosts field ("" when it
// has none or cannot be read: the list still shows the credential). Only
// that field leaves this function.
func (s *Server) allowedHosts(r *http.Request, name string) string {
	if s.cfg.Keys == nil {
		return ""
	}
	c, err := s.store.GetCredential(r.Context(), name)
	if err != nil {
		return ""
	}
	plain, err := s.cfg.Keys.Open(c.Name, c.KeyID, c.Ciphertext)
	if err != nil {
		return ""
	}
	var fields map[string]string
	if json.Unmarshal(plain, &fields) != nil {
		return ""
	}
	return fields[nodes.AllowedHostsField]
}

func (s *Server) deleteCredential(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	err := s.store.DeleteCredential(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("credential %q does not exist", name)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
