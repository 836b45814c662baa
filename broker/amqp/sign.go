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

// signedTopic is the topic a message is signed under: a first copy's
// (broker.Message.First) differs, so that its header cannot be added to
// another copy of a signed message without breaking the signature.
func signedTopic(topic broker.Topic, first bool) broker.Topic {
	if first {
		return topic + "+first"
	}
	return topic
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
