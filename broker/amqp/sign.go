package amqp

import (
	"fmt"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/rune-org/rune/broker"
	"github.com/rune-org/rune/broker/sign"
)

// Headers of signed messages (see Config.Signing).
const (
	headerKeyID     = "x-rune-key-id"
	headerSignature = "x-rune-signature"
)

// signInto adds the signature of a message to its headers, when this broker
// signs. topic, id and key are what consumers see the message under.
func (b *Broker) signInto(pub *amqp091.Publishing, topic broker.Topic, id, key string) {
	if b.cfg.Signing == nil {
		return
	}
	keyID, sig := b.cfg.Signing.Sign(sign.Signed{Topic: string(topic), ID: id, Key: key, Body: pub.Body})
	if pub.Headers == nil {
		pub.Headers = amqp091.Table{}
	}
	pub.Headers[headerKeyID] = keyID
	pub.Headers[headerSignature] = sig
}

// firstTopic is what a first copy's mark signs in place of the topic.
const firstTopic = "+first"

// firstMark is the value of a first copy's x-rune-first header
// (broker.Message.First): "1", or with signing a signature of the message
// under its topic + "+first", so that the header of one message cannot be
// put on another. The message's own signature is unchanged: a Rune that
// knows no first copies reads the message as before.
func (b *Broker) firstMark(topic broker.Topic, id, key string, body []byte) string {
	if b.cfg.Signing == nil {
		return "1"
	}
	_, sig := b.cfg.Signing.Sign(sign.Signed{Topic: string(topic) + firstTopic, ID: id, Key: key, Body: body})
	return sig
}

// firstCopy reports whether d, consumed on topic, carries a valid
// first-copy mark. A mark that
// does not verify is ignored: the message is handled as any other copy.
func (b *Broker) firstCopy(d *amqp091.Delivery, topic broker.Topic) bool {
	mark, ok := d.Headers[headerFirst].(string)
	if !ok {
		return false
	}
	if b.cfg.Signing == nil {
		return true
	}
	keyID, _ := d.Headers[headerKeyID].(string)
	return b.cfg.Signing.Verify(sign.Signed{Topic: string(topic) + firstTopic, ID: d.MessageId, Key: d.CorrelationId, Body: d.Body}, keyID, mark) == nil
}

// verify checks the signature of a delivery consumed on topic, when this
// broker verifies. Its error wraps broker.ErrReject: the message is
// dead-lettered, never handled.
func (b *Broker) verify(d *amqp091.Delivery, topic broker.Topic) error {
	if b.cfg.Signing == nil {
		return nil
	}
	keyID, _ := d.Headers[headerKeyID].(string)
	sig, _ := d.Headers[headerSignature].(string)
	err := b.cfg.Signing.Verify(sign.Signed{Topic: string(topic), ID: d.MessageId, Key: d.CorrelationId, Body: d.Body}, keyID, sig)
	if err != nil {
		return fmt.Errorf("%w: %w", broker.ErrReject, err)
	}
	return nil
}
