package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rune-org/rune/apiv1"
	"github.com/rune-org/rune/store"
	"github.com/rune-org/rune/subscribers"
)

// Subscribers, their preferences and one-click unsubscribe (issue 36;
// docs/notifications.md).

// Limits of the subscriber routes.
const (
	maxSubscriberBody = 64 << 10
	// maxImportBody and maxImportRows bound one import request.
	maxImportBody = 16 << 20
	maxImportRows = 10000
	// maxUnsubscribeBody bounds the one-click POST (RFC 8058's body is
	// "List-Unsubscribe=One-Click").
	maxUnsubscribeBody = 4 << 10
)

// unsubscribeRate bounds the open unsubscribe routes on each replica.
var unsubscribeRate = rateSettings{PerSecond: 100, Burst: 500}

func subscriberView(x *store.Subscriber) apiv1.Subscriber {
	p := x.Preferences
	v := apiv1.Subscriber{ID: x.ID, Email: x.Email, Phone: x.Phone, Timezone: x.Timezone, Locale: x.Locale, Data: x.Data,
		Preferences: preferencesView(&p), CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
	return v
}

func preferencesView(p *store.Preferences) apiv1.Preferences {
	v := apiv1.Preferences{Channels: p.Channels, Categories: p.Categories, Workflows: p.Workflows}
	for _, m := range []*map[string]bool{&v.Channels, &v.Categories, &v.Workflows} {
		if *m == nil {
			*m = map[string]bool{}
		}
	}
	if q := p.QuietHours; q != nil {
		v.QuietHours = &apiv1.QuietHours{From: q.From, To: q.To}
	}
	return v
}

// storeInvalid turns a store's ErrInvalid into a 400 naming the field
// under prefix.
func storeInvalid(err error, prefix string) error {
	if !errors.Is(err, store.ErrInvalid) {
		return err
	}
	field, msg := store.InvalidField(err)
	return badRequest("%s%s: %s", prefix, field, msg)
}

func toSubscriber(id string, in *apiv1.SubscriberInput) *store.Subscriber {
	return &store.Subscriber{ID: id, Email: in.Email, Phone: in.Phone, Timezone: in.Timezone, Locale: in.Locale, Data: in.Data}
}

// putSubscriber: PUT /v1/subscribers/{id} creates (201) or replaces (200)
// a subscriber; its preferences stay.
func (s *Server) putSubscriber(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(r, maxSubscriberBody)
	if err != nil {
		return err
	}
	var in apiv1.SubscriberInput
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	created, err := s.store.PutSubscribers(r.Context(), []*store.Subscriber{toSubscriber(id, &in)}, s.cfg.Now())
	if err != nil {
		return storeInvalid(err, "")
	}
	x, err := s.store.GetSubscriber(r.Context(), id)
	if err != nil {
		return err
	}
	if created[0] {
		writeCreated(w, "/v1/subscribers/"+url.PathEscape(id), subscriberView(x))
		return nil
	}
	writeJSON(w, http.StatusOK, subscriberView(x))
	return nil
}

func (s *Server) getSubscriber(w http.ResponseWriter, r *http.Request) error {
	x, err := s.subscriber(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, subscriberView(x))
	return nil
}

func (s *Server) subscriber(r *http.Request) (*store.Subscriber, error) {
	id := r.PathValue("id")
	x, err := s.store.GetSubscriber(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("subscriber %q does not exist", id)
	}
	return x, err
}

func (s *Server) deleteSubscriber(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	err := s.store.DeleteSubscriber(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("subscriber %q does not exist", id)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getPreferences(w http.ResponseWriter, r *http.Request) error {
	x, err := s.subscriber(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, preferencesView(&x.Preferences))
	return nil
}

// putPreferences: PUT /v1/subscribers/{id}/preferences replaces them all.
func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	body, err := readBody(r, maxSubscriberBody)
	if err != nil {
		return err
	}
	var in apiv1.Preferences
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	p := &store.Preferences{Channels: in.Channels, Categories: in.Categories, Workflows: in.Workflows}
	if q := in.QuietHours; q != nil {
		p.QuietHours = &store.QuietHours{From: q.From, To: q.To}
	}
	err = s.store.PutPreferences(r.Context(), id, p, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("subscriber %q does not exist (PUT /v1/subscribers/{id} creates it)", id)
	}
	if err != nil {
		return storeInvalid(err, "")
	}
	writeJSON(w, http.StatusOK, preferencesView(p))
	return nil
}

// importSubscribers: POST /v1/subscribers/import creates or replaces many
// subscribers: a JSON array, or NDJSON (one object a line) with
// Content-Type application/x-ndjson. Valid rows are written (in one
// transaction); each refused row is reported with its index.
func (s *Server) importSubscribers(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(r, maxImportBody)
	if err != nil {
		return err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var raws []json.RawMessage
	if mt == "application/x-ndjson" || mt == "application/jsonl" {
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(make([]byte, 0, 64<<10), maxSubscriberBody)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				raws = append(raws, append(json.RawMessage(nil), line...))
			}
		}
		if err := sc.Err(); err != nil {
			return badRequest("line %d: %v (a line is at most %d bytes)", len(raws)+1, err, maxSubscriberBody)
		}
	} else if err := json.Unmarshal(body, &raws); err != nil {
		return badRequest("want a JSON array of subscribers, or NDJSON with Content-Type application/x-ndjson: %v", err)
	}
	if len(raws) > maxImportRows {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%d rows, over the limit of %d per request", len(raws), maxImportRows)
	}
	out := apiv1.SubscriberImport{Errors: []apiv1.ImportRowProblem{}}
	var subs []*store.Subscriber
	seen := map[string]int{}
	for i, raw := range raws {
		var row apiv1.SubscriberImportRow
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil {
			msg := err.Error()
			var ae *apiError
			if errors.As(jsonError(err), &ae) {
				msg = ae.Message
			}
			out.Errors = append(out.Errors, apiv1.ImportRowProblem{Index: i, Message: msg})
			continue
		}
		x := toSubscriber(row.ID, &row.SubscriberInput)
		if err := store.CheckSubscriber(x); err != nil {
			field, msg := store.InvalidField(err)
			out.Errors = append(out.Errors, apiv1.ImportRowProblem{Index: i, ID: row.ID, Field: field, Message: msg})
			continue
		}
		if j, dup := seen[row.ID]; dup {
			out.Errors = append(out.Errors, apiv1.ImportRowProblem{Index: i, ID: row.ID, Field: "id", Message: "repeats row " + strconv.Itoa(j)})
			continue
		}
		seen[row.ID] = i
		subs = append(subs, x)
	}
	if len(subs) > 0 {
		created, err := s.store.PutSubscribers(r.Context(), subs, s.cfg.Now())
		if err != nil {
			return storeInvalid(err, "")
		}
		for _, c := range created {
			if c {
				out.Created++
			} else {
				out.Replaced++
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// unsubscribeToken reads and verifies the {token} of an unsubscribe
// route, within the routes' rate limit.
func (s *Server) unsubscribeToken(w http.ResponseWriter, r *http.Request) (id, category string, err error) {
	if wait, ok := s.unsubscribeLimits.take("unsubscribe", unsubscribeRate, s.cfg.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		return "", "", errorf(http.StatusTooManyRequests, CodeRateLimited, "too many unsubscribe requests: try again shortly")
	}
	id, category, err = subscribers.ParseToken(s.cfg.Keys, r.PathValue("token"))
	if err != nil {
		return "", "", notFound("this unsubscribe link is not valid (it was altered, or the key that signed it is gone)")
	}
	return id, category, nil
}

var unsubscribePage = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Done}}Unsubscribed{{else}}Unsubscribe{{end}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}button{font:inherit;padding:.5rem 1rem}</style>
</head><body><main>
{{if .Done}}<h1>You are unsubscribed</h1>
<p>You will no longer receive <strong>{{.Category}}</strong> messages.</p>
{{else}}<h1>Unsubscribe</h1>
<p>Stop receiving <strong>{{.Category}}</strong> messages?</p>
<form method="post" action=""><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>
{{end}}</main></body></html>
`))

func writeUnsubscribePage(w http.ResponseWriter, category string, done bool) {
	var b bytes.Buffer
	_ = unsubscribePage.Execute(&b, struct {
		Category string
		Done     bool
	}{category, done})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}

// unsubscribePage: GET /v1/unsubscribe/{token} shows a confirmation page
// whose button POSTs; a GET changes nothing (mail scanners follow links).
func (s *Server) unsubscribeForm(w http.ResponseWriter, r *http.Request) error {
	_, category, err := s.unsubscribeToken(w, r)
	if err != nil {
		return err
	}
	writeUnsubscribePage(w, category, false)
	return nil
}

// unsubscribe: POST /v1/unsubscribe/{token} records the opt-out of the
// token's subscriber from its category (RFC 8058 one-click: no login, the
// signed token is the authority). A mail client's POST gets JSON, a
// browser (the page's button) the confirmation page.
func (s *Server) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	id, category, err := s.unsubscribeToken(w, r)
	if err != nil {
		return err
	}
	if _, err := readBody(r, maxUnsubscribeBody); err != nil {
		return err
	}
	err = s.store.OptOutCategory(r.Context(), id, category, s.cfg.Now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound("the subscriber of this unsubscribe link no longer exists")
	}
	if err != nil {
		return err
	}
	s.log.Info("unsubscribed", "category", category)
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Accept")); mt == "text/html" || r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		writeUnsubscribePage(w, category, true)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"unsubscribed": true, "category": category})
	return nil
}
