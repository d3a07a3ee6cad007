package kafka

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Operation is what a Kafka-related span does with its record, in the
// terms of OpenTelemetry's messaging semantic conventions: the operation
// type (send, receive, process) and the operation's own name.
type Operation struct {
	typ  attribute.KeyValue
	name string
}

// The operations of the services' spans (R-N2).
var (
	// OpSend is a record produced (the dispatcher's relay, the scanner's
	// publish, franz-go's publish span).
	OpSend = Operation{typ: semconv.MessagingOperationTypeSend, name: "send"}
	// OpReceive is a record fetched (franz-go's receive span, the
	// processor's registration of an inbox record).
	OpReceive = Operation{typ: semconv.MessagingOperationTypeReceive, name: "poll"}
	// OpProcess is a record's content processed (the processor's
	// execution, the projector's write to Redis).
	OpProcess = Operation{typ: semconv.MessagingOperationTypeProcess, name: "process"}
)

// MessagingAttributes returns the messaging semantic-convention
// attributes of a span about record r: messaging.system=kafka, the
// operation type and name, the destination (topic, when the record names
// it), the message key, and for a fetched record (receive, process) the
// partition and the offset. A send span adds the topic, partition and
// offset with SentAttributes once the produce returned: a record left to
// the client's default topic has its topic only then, and its partition
// and offset only once the broker acknowledged it. group is the consumer
// group, "" for none.
//
// Why the spans carry them: tracing backends (Jaeger, Tempo, Honeycomb)
// group, search and draw service graphs by these names, and an operator
// goes from a span to the record on the broker (kcat -t topic -p
// partition -o offset).
func MessagingAttributes(op Operation, r *kgo.Record, group string) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.MessagingSystemKafka, op.typ, semconv.MessagingOperationName(op.name))
	if r.Topic != "" {
		attrs = append(attrs, semconv.MessagingDestinationName(r.Topic))
	}
	if r.Key != nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(string(r.Key)))
	}
	if op != OpSend {
		attrs = append(attrs, placement(r)...)
	}
	if group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(group))
	}
	return attrs
}

// SentAttributes returns what a send span learns when the produce of r
// returned: the topic, and unless the produce failed (err), the partition
// and offset the broker gave the record.
func SentAttributes(r *kgo.Record, err error) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.MessagingDestinationName(r.Topic)}
	if err == nil {
		attrs = append(attrs, placement(r)...)
	}
	return attrs
}

func placement(r *kgo.Record) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.MessagingDestinationPartitionID(strconv.FormatInt(int64(r.Partition), 10)),
		semconv.MessagingKafkaOffset(int(r.Offset)),
	}
}
