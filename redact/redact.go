// Package redact removes known secret values from text and JSON values
// before they leave a worker: statuses, completions, stored outputs, errors
// and log lines. A secret is matched as it is and in the forms it commonly
// travels in: base64 (standard and URL alphabets, padded or not), URL query
// and path escaping, JSON string escaping (a secret holding '"' or '\'
// echoed inside a JSON body, once or twice escaped), and HTTP Basic's base64
// of "a:b" for two values that were resolved together.
package redact

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Mask replaces every secret found.
const Mask = "[redacted]"

// MinLen is the shortest value redacted: shorter ones would mask ordinary
// text everywhere ("a", "1"), and are no secret worth the name.
const MinLen = 4

// Set is a set of secret values. Its zero value is empty and ready to use;
// it is safe for concurrent use.
type Set struct {
	mu       sync.Mutex
	forms    []string
	replacer *strings.Replacer // built on first use after an Add
}

// Add records values resolved together (the fields of one credential) as
// secrets, with their encoded forms.
func (s *Set) Add(values ...string) { s.add(values, nil) }

// add records secrets with their encoded forms, and HTTP Basic's base64 of
// "a:b" for any two values resolved together of which at least one is a
// secret (others are the non-secret ones, a user name say).
func (s *Set) add(secrets, others []string) {
	var forms []string
	for _, v := range secrets {
		if len(v) >= MinLen {
			forms = append(forms, encodings(v)...)
		}
	}
	basic := func(a, b string) {
		if a != "" && b != "" && len(a)+len(b) >= MinLen {
			forms = append(forms, base64.StdEncoding.EncodeToString([]byte(a+":"+b)))
		}
	}
	for _, a := range secrets {
		for _, b := range secrets {
			basic(a, b)
		}
		for _, b := range others {
			basic(a, b)
			basic(b, a)
		}
	}
	if len(forms) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range forms {
		if len(f) >= MinLen && !slices.Contains(s.forms, f) {
			s.forms = append(s.forms, f)
			s.replacer = nil
		}
	}
}

func encodings(v string) []string {
	b := []byte(v)
	forms := []string{
		v,
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		url.QueryEscape(v), url.PathEscape(v),
	}
	// An API echoing the secret in a JSON error body escapes it; a JSON
	// document carried in a JSON string (a body snippet in an error's
	// details) escapes it twice. The forms equal to v add nothing.
	for _, html := range []bool{true, false} {
		once := jsonEscape(v, html)
		forms = append(forms, once, jsonEscape(once, html))
	}
	return forms
}

// jsonEscape is v as it appears between the quotes of a JSON string, with
// <, > and & escaped as encoding/json does by default (html) or not.
func jsonEscape(v string, html bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(v) // a string always encodes
	out := strings.TrimSuffix(b.String(), "\n")
	return out[1 : len(out)-1]
}

// Empty reports whether the set holds no secret.
func (s *Set) Empty() bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.forms) == 0
}

func (s *Set) rep() *strings.Replacer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replacer == nil {
		// Longest first, so a secret's base64 is not cut by a shorter
		// secret it happens to contain.
		forms := slices.Clone(s.forms)
		slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
		pairs := make([]string, 0, 2*len(forms))
		for _, f := range forms {
			pairs = append(pairs, f, Mask)
		}
		s.replacer = strings.NewReplacer(pairs...)
	}
	return s.replacer
}

// String returns text with every secret replaced by Mask.
func (s *Set) String(text string) string {
	if s.Empty() {
		return text
	}
	return s.rep().Replace(text)
}

// Value returns v (a JSON-compatible value) with every secret in its
// strings and object keys replaced by Mask. v is not modified: containers
// holding a secret are copied.
func (s *Set) Value(v any) any {
	if s.Empty() {
		return v
	}
	out, _ := s.value(s.rep(), v)
	return out
}

// value returns the redacted v and whether it differs from v.
func (s *Set) value(r *strings.Replacer, v any) (any, bool) {
	switch x := v.(type) {
	case string:
		y := r.Replace(x)
		return y, y != x
	case []any:
		var out []any
		for i, e := range x {
			if y, changed := s.value(r, e); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = y
			}
		}
		if out == nil {
			return x, false
		}
		return out, true
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			y, changed := s.value(r, e)
			k2 := r.Replace(k)
			if changed || k2 != k {
				if out == nil {
					out = make(map[string]any, len(x))
					for k, e := range x {
						out[k] = e
					}
				}
				if k2 != k {
					delete(out, k)
				}
				out[k2] = y
			}
		}
		if out == nil {
			return x, false
		}
		return out, true
	}
	return v, false
}

// Handler returns a slog.Handler that redacts the set's secrets from the
// message and every string attribute before passing records to h.
func (s *Set) Handler(h slog.Handler) slog.Handler { return &handler{set: s, next: h} }

type handler struct {
	set  *Set
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if h.set.Empty() {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, h.set.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.set.String(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.set.String(x.Error()))
		case map[string]any, []any:
			return slog.Any(a.Key, h.set.Value(x))
		default:
			return slog.String(a.Key, h.set.String(v.String()))
		}
	}
	return a
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &handler{set: h.set, next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{set: h.set, next: h.next.WithGroup(name)}
}
