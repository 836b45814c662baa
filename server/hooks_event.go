package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/rune-org/rune/engine"
	"github.com/rune-org/rune/store"
)

// hookEventSettings turns a hook's deliveries into events (issue 34):
// each request sends event Name with the key read from its payload at Key,
// and the request's body as the event's data, instead of starting an
// execution of the hook's workflow.
type hookEventSettings struct {
	// Name is the event's name, e.g. "order.paid".
	Name string `json:"name"`
	// Key is a dotted path into the hook's payload (the execution input a
	// hook otherwise starts: body, headers, query, delivery_id), e.g.
	// "body.order_id" or "headers.x-order-id".
	Key string `json:"key"`
}

func (s *Server) checkHookEvent(cfg *hookSettings) error {
	ev := cfg.Event
	if ev == nil {
		return nil
	}
	switch {
	case ev.Name == "" || len(ev.Name) > engine.MaxEventName:
		return badRequest("field event.name: want an event name of 1 to %d bytes", engine.MaxEventName)
	case ev.Key == "" || len(ev.Key) > 200:
		return badRequest("field event.key: want a dotted path into the payload such as \"body.order_id\"")
	case cfg.Reply != nil:
		return badRequest("fields event and reply: a hook that sends events starts no execution to reply with")
	}
	return nil
}

// hookEvent sends the event of a delivery of hook h (its payload as
// input): 202 {"event_id","matched"}. The delivery id (or, without one,
// the request's own id) is the event's idempotency key.
func (s *Server) hookEvent(w http.ResponseWriter, r *http.Request, h *store.Hook, ev *hookEventSettings, input []byte, delivery, xid string) error {
	var payload any
	if err := json.Unmarshal(input, &payload); err != nil {
		return err
	}
	v := payload
	for _, part := range strings.Split(ev.Key, ".") {
		m, _ := v.(map[string]any)
		v = m[part]
	}
	var key string
	switch k := v.(type) {
	case string:
		key = k
	case float64:
		key = strconv.FormatFloat(k, 'f', -1, 64)
	}
	if key == "" {
		return errorf(http.StatusUnprocessableEntity, CodeInvalidInput, "hook %s: the payload has no string or number at %q, the event's key", h.ID, ev.Key)
	}
	var body struct {
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(input, &body); err != nil {
		return err
	}
	idem := "hook:" + h.ID + ":" + xid
	if delivery != "" {
		idem = "hook:" + h.ID + ":" + delivery
	}
	sent, err := s.deliverEvent(r, engine.EventSend{Name: ev.Name, Key: key, Data: body.Body, IdempotencyKey: idem})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, sent)
	return nil
}
