package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/rune-org/rune/store"
)

// Issue 38: every delivery of a hook, accepted or refused, is recorded
// with what it was answered (status, error code, execution or event id,
// size) — never its body, a header value, a secret or a signature — and
// GET /v1/workflows/{id}/hooks/{hook}/deliveries lists the newest.

// receiveHook is POST /v1/hooks/{secret}: receiveDelivery answers it, and
// the answer of a known hook is recorded. A request whose secret finds no
// hook is not recorded (it belongs to no hook).
func (s *Server) receiveHook(w http.ResponseWriter, r *http.Request) error {
	var d store.HookDelivery
	d.ReceivedAt = s.cfg.Now()
	rec := &deliveryRecorder{ResponseWriter: w}
	var body *countingBody
	if r.Body != nil {
		body = &countingBody{ReadCloser: r.Body}
		r.Body = body
	}
	err := s.receiveDelivery(rec, r, &d)
	if d.HookID == "" {
		return err
	}
	if err != nil {
		d.Status, d.Code = errorAnswer(err)
	} else {
		d.Status = rec.status
		if d.Status == 0 {
			d.Status = http.StatusOK
		}
		d.ExecutionID, d.EventID = answerIDs(rec.head.Bytes())
	}
	d.Size = max(r.ContentLength, 0)
	if body != nil {
		d.Size = max(d.Size, body.n)
	}
	// The answer does not wait for or depend on the record: a failure to
	// keep it is logged, the sender's answer stands.
	if rerr := s.store.RecordHookDelivery(context.WithoutCancel(r.Context()), &d, store.HookDeliveriesKept); rerr != nil {
		s.log.Warn("hook delivery not recorded", "hook", d.HookID, "status", d.Status, "err", rerr)
	}
	return err
}

// errorAnswer is the status and code writeError answers err with.
func errorAnswer(err error) (int, string) {
	var ae *apiError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Code
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, CodeTooLarge
	}
	return http.StatusInternalServerError, CodeInternal
}

// answerIDs reads execution_id and event_id from the start of an answer
// (both come before any result, which may be long).
func answerIDs(head []byte) (execution, event string) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return
		}
		switch k {
		case "execution_id":
			_ = json.Unmarshal(v, &execution)
		case "event_id":
			_ = json.Unmarshal(v, &event)
		}
	}
	return
}

// deliveryRecorder keeps the status and the first bytes of an answer.
type deliveryRecorder struct {
	http.ResponseWriter
	status int
	head   bytes.Buffer
}

// answerHead bounds what is kept of an answer: its ids come first.
const answerHead = 512

func (d *deliveryRecorder) WriteHeader(status int) {
	if d.status == 0 {
		d.status = status
	}
	d.ResponseWriter.WriteHeader(status)
}

func (d *deliveryRecorder) Write(b []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	if n := answerHead - d.head.Len(); n > 0 {
		d.head.Write(b[:min(n, len(b))])
	}
	return d.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (d *deliveryRecorder) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// countingBody counts the bytes read of a request body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// hookDeliveryView is a delivery as the API shows it.
type hookDeliveryView struct {
	ReceivedAt time.Time `json:"received_at"`
	// Status is the HTTP status answered; Accepted when below 400.
	Status   int  `json:"status"`
	Accepted bool `json:"accepted"`
	// Code is the error code of a refusal (errors.go).
	Code        string `json:"code,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	EventID     string `json:"event_id,omitempty"`
	// Size is the request body's size in bytes.
	Size int64 `json:"size"`
}

func viewHookDelivery(d *store.HookDelivery) hookDeliveryView {
	return hookDeliveryView{ReceivedAt: d.ReceivedAt, Status: d.Status, Accepted: d.Status < 400, Code: d.Code,
		ExecutionID: d.ExecutionID, EventID: d.EventID, Size: d.Size}
}

// listHookDeliveries is GET /v1/workflows/{id}/hooks/{hook}/deliveries:
// the hook's newest deliveries first (?limit, at most
// store.HookDeliveriesKept, the number kept).
func (s *Server) listHookDeliveries(w http.ResponseWriter, r *http.Request) error {
	h, err := s.hook(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1, store.HookDeliveriesKept)
	if err != nil {
		return err
	}
	if limit == 0 {
		limit = store.HookDeliveriesKept
	}
	ds, err := s.store.ListHookDeliveries(r.Context(), h.ID, limit)
	if err != nil {
		return err
	}
	writeList(w, ds, "", viewHookDelivery)
	return nil
}
