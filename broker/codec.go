package broker

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/rune-org/rune/message"
)

// Validate checks what every broker requires of a message before publishing
// it: a topic that can be published to (not DeadLetter, which only brokers
// write), a non-nil body of the type the topic carries, and a Delay only on
// Execution and Timeout, never negative. It does not validate the body's
// fields; consumers do that when they decode.
func (m Message) Validate() error {
	var ok bool
	switch m.Topic {
	case Execution:
		var b *message.NodeExecution
		b, ok = m.Body.(*message.NodeExecution)
		ok = ok && b != nil
	case Status:
		ok = len(message.StatusesOf(m.Body)) > 0
	case Completion:
		var b *message.Completion
		b, ok = m.Body.(*message.Completion)
		ok = ok && b != nil
	case Timeout:
		var b *message.Timeout
		b, ok = m.Body.(*message.Timeout)
		ok = ok && b != nil
	case DeadLetter:
		return fmt.Errorf("broker: message %q: topic %s is written by the broker, not published", m.ID, m.Topic)
	default:
		return fmt.Errorf("broker: message %q: unknown topic %q", m.ID, m.Topic)
	}
	if !ok {
		return fmt.Errorf("broker: message %q: body %T does not belong on topic %s", m.ID, m.Body, m.Topic)
	}
	if m.Delay < 0 {
		return fmt.Errorf("broker: message %q: negative delay %v", m.ID, m.Delay)
	}
	if m.Delay > 0 && m.Topic != Execution && m.Topic != Timeout {
		return fmt.Errorf("broker: message %q: delay %v on topic %s (only %s and %s are delayed)", m.ID, m.Delay, m.Topic, Execution, Timeout)
	}
	return nil
}

// Encode returns the wire form of m's body: its JSON. It fails when m does
// not pass Validate.
func Encode(m Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(m.Body)
	if err != nil {
		return nil, fmt.Errorf("broker: encode message %q on %s: %w", m.ID, m.Topic, err)
	}
	return data, nil
}

// Decode parses and validates the wire form of a body published on topic:
// *message.NodeExecution for Execution, *message.NodeStatus or
// *message.Statuses for Status,
// *message.Completion for Completion and *message.Timeout for Timeout. Every
// error wraps ErrReject: a body that cannot be decoded can never be processed,
// so consumers dead-letter it rather than retry it.
func Decode(topic Topic, data []byte) (any, error) {
	var (
		body any
		err  error
	)
	switch topic {
	case Execution:
		body, err = message.DecodeExecution(data)
	case Status:
		body, err = message.DecodeStatusBody(data)
	case Completion:
		body, err = message.DecodeCompletion(data)
	case Timeout:
		body, err = message.DecodeTimeout(data)
	default:
		return nil, fmt.Errorf("%w: no body type for topic %q", ErrReject, topic)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: decode %s body: %w", ErrReject, topic, err)
	}
	return body, nil
}

// IDs returns the message id and execution id (the Key) of a decoded body,
// for messages that arrive without them (published raw).
func IDs(body any) (id, key string) {
	switch v := body.(type) {
	case *message.NodeExecution:
		return v.MessageID, v.ExecutionID
	case *message.NodeStatus:
		return "", v.ExecutionID
	case *message.Statuses:
		return "", v.ExecutionID
	case *message.Completion:
		return "", v.ExecutionID
	case *message.Timeout:
		return "", v.ExecutionID
	}
	return "", ""
}

// Unbatch returns m as followers see it: a *message.Statuses body becomes
// one message per status, in order (with ids derived from m's, so that a
// redelivery is recognised); any other message is itself. Brokers' Follow
// hands out unbatched messages, so every follower reads one status at a time
// whichever form was published.
func Unbatch(m Message) []Message {
	b, ok := m.Body.(*message.Statuses)
	if !ok {
		return []Message{m}
	}
	out := make([]Message, len(b.Statuses))
	for i, s := range b.Statuses {
		out[i] = m
		out[i].Body = s
		if m.ID != "" {
			out[i].ID = m.ID + "/" + strconv.Itoa(i)
		}
	}
	return out
}

// ExecutionPriority is the priority a broker with priorities gives m, an
// Execution message (issue 35): m.Priority, else its body's
// (message.NodeExecution.Priority, as on a replay), 1 (lowest) to 10
// (highest), 5 when neither says.
func ExecutionPriority(m *Message) int {
	p := m.Priority
	if ne, ok := m.Body.(*message.NodeExecution); ok && p == 0 {
		p = ne.Priority
	}
	if p < 1 || p > 10 {
		return 5
	}
	return p
}
