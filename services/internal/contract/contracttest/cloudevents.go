package contracttest

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"

	"msgexchange/services/internal/contract"
)

// kafkaAttributes are the CloudEvents attributes as the Kafka protocol
// binding names them: "ce_" and the attribute's name.
var kafkaAttributes = spec.WithPrefix("ce_")

// recordMessage is one Kafka record read as a CloudEvents binding.Message
// in the binary content mode of the CloudEvents Kafka protocol binding
// 1.0: each "ce_" header an attribute or extension, the content-type header
// datacontenttype, the value the data. It follows the SDK's own Kafka
// binding (protocol/kafka_sarama), which is a module of its own that the
// Go module proxy here does not serve; the attribute names, the version
// lookup and the conversion into an event are the SDK's (spec, binding).
type recordMessage struct {
	value   []byte
	headers map[string]string
	version spec.Version
}

func (m *recordMessage) ReadEncoding() binding.Encoding {
	if m.version == nil {
		return binding.EncodingUnknown
	}
	return binding.EncodingBinary
}

func (m *recordMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *recordMessage) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	if m.version == nil {
		return binding.ErrNotBinary
	}
	for k, v := range m.headers {
		switch {
		case strings.EqualFold(k, contract.HeaderContentType):
			if err := w.SetAttribute(m.version.AttributeFromKind(spec.DataContentType), v); err != nil {
				return err
			}
		case m.version.Attribute(k) != nil:
			if err := w.SetAttribute(m.version.Attribute(k), v); err != nil {
				return err
			}
		case strings.HasPrefix(strings.ToLower(k), kafkaAttributes.Prefix()):
			if err := w.SetExtension(strings.ToLower(k[len(kafkaAttributes.Prefix()):]), v); err != nil {
				return err
			}
		}
	}
	if m.value != nil {
		return w.SetData(bytes.NewReader(m.value))
	}
	return nil
}

func (m *recordMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if k == spec.DataContentType {
		if v, ok := m.headers[contract.HeaderContentType]; ok {
			return attr, v
		}
		return attr, nil
	}
	if v, ok := m.headers[attr.PrefixedName()]; ok {
		return attr, v
	}
	return attr, nil
}

func (m *recordMessage) GetExtension(name string) any {
	if v, ok := m.headers[kafkaAttributes.Prefix()+name]; ok {
		return v
	}
	return nil
}

func (m *recordMessage) Finish(error) error { return nil }

// CloudEvent reads a record of msg or schd — its value (nil for a
// tombstone) and headers — with the CloudEvents Go SDK as a binary-mode
// CloudEvent, and validates it by the SDK's rules (R-N8).
func CloudEvent(ctx context.Context, value []byte, headers map[string]string) (*event.Event, error) {
	m := &recordMessage{value: value, headers: headers, version: kafkaAttributes.Version(headers[kafkaAttributes.PrefixedSpecVersionName()])}
	if m.ReadEncoding() != binding.EncodingBinary {
		return nil, fmt.Errorf("reading a CloudEvent: %s %q is no known CloudEvents version: %w",
			kafkaAttributes.PrefixedSpecVersionName(), headers[kafkaAttributes.PrefixedSpecVersionName()], ErrContract)
	}
	ev, err := binding.ToEvent(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("reading a CloudEvent: %w: %w", err, ErrContract)
	}
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("validating a CloudEvent: %w: %w", err, ErrContract)
	}
	return ev, nil
}
