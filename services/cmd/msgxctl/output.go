package main

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// embeddedJSONSuffix marks a string field that carries a JSON document
// (a flight's doc_json, a replay's selector_json): -o json and -o yaml
// show the document itself, not an escaped string.
const embeddedJSONSuffix = "_json"

// structured reports whether the output is JSON or YAML rather than a
// table.
func (a *app) structured() bool { return a.output != formatTable }

// printStructured writes m in the -o format: every field under its proto
// name, present even when empty, in the .proto file's order; 64-bit
// integers as numbers (protojson writes them as strings); enums by name;
// times in RFC 3339; embedded JSON documents as objects.
func (a *app) printStructured(m proto.Message) error {
	v, err := messageValue(m.ProtoReflect())
	if err != nil {
		return err
	}
	return a.printValue(v)
}

// printValue writes v (a tree of objects, slices and scalars) as JSON or
// YAML.
func (a *app) printValue(v any) error {
	if a.output == formatYAML {
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = a.stdout.Write(b)
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = a.stdout.Write(append(b, '\n'))
	return err
}

// object is a JSON object or YAML mapping that keeps its keys in order.
type object []member

type member struct {
	key   string
	value any
}

// MarshalJSON writes the members in order.
func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", m.key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// MarshalYAML returns a mapping node with the members in order.
func (o object) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, m := range o {
		var v yaml.Node
		if err := v.Encode(m.value); err != nil {
			return nil, fmt.Errorf("field %s: %w", m.key, err)
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: m.key}, &v)
	}
	return n, nil
}

// messageValue turns a message into an object with every field.
// Well-known types (Timestamp, Duration, Struct, ...) take protojson's
// form: a time is an RFC 3339 string, a duration "1.5s".
func messageValue(m protoreflect.Message) (any, error) {
	md := m.Descriptor()
	if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		b, err := protojson.Marshal(m.Interface())
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", md.FullName(), err)
		}
		return decodeOrdered(b)
	}
	out := object{}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() && !m.Has(fd) {
			continue // an unset oneof member is not a field of this message
		}
		v, err := fieldValue(fd, m)
		if err != nil {
			return nil, err
		}
		out = append(out, member{key: string(fd.Name()), value: v})
	}
	return out, nil
}

func fieldValue(fd protoreflect.FieldDescriptor, m protoreflect.Message) (any, error) {
	switch {
	case fd.IsList():
		l := m.Get(fd).List()
		out := make([]any, 0, l.Len())
		for i := range l.Len() {
			v, err := scalarValue(fd, l.Get(i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case fd.IsMap():
		mp := m.Get(fd).Map()
		out := object{}
		var err error
		mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			var vv any
			vv, err = scalarValue(fd.MapValue(), v)
			out = append(out, member{key: k.String(), value: vv})
			return err == nil
		})
		// Map order is random; sorted keys keep the output stable, as
		// protojson does.
		slices.SortFunc(out, func(x, y member) int { return cmp.Compare(x.key, y.key) })
		return out, err
	case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
		if !m.Has(fd) {
			return nil, nil
		}
	}
	return scalarValue(fd, m.Get(fd))
}

func scalarValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return messageValue(v.Message())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return int32(v.Enum()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int(), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return v.Uint(), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprint(f), nil // as protojson: JSON has no such number
		}
		return f, nil
	case protoreflect.BoolKind:
		return v.Bool(), nil
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes()), nil
	case protoreflect.StringKind:
		s := v.String()
		if strings.HasSuffix(string(fd.Name()), embeddedJSONSuffix) && s != "" {
			doc, err := decodeOrdered([]byte(s))
			if err == nil {
				return doc, nil
			}
		}
		return s, nil
	}
	return nil, fmt.Errorf("field %s: unsupported kind %v", fd.FullName(), fd.Kind())
}

// decodeOrdered parses a JSON document keeping the keys' order and the
// numbers' text.
func decodeOrdered(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeToken(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON document")
	}
	return v, nil
}

func decodeToken(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			out := object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeToken(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, member{key: kt.(string), value: v})
			}
			_, err := dec.Token()
			return out, err
		case '[':
			out := []any{}
			for dec.More() {
				v, err := decodeToken(dec)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		f, err := t.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", t, err)
		}
		return f, nil
	default:
		return t, nil
	}
}

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes one tab-separated table row.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprint(w, "\n")
}

// ts formats a timestamp in the local zone with its offset; "-" if absent.
func (a *app) ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().In(a.loc).Format(time.RFC3339)
}

// orDash shows an empty value as "-" so that table columns stay aligned.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// enumName strips the enum's type prefix: MESSAGE_STATE_DEAD → DEAD;
// UNSPECIFIED → "-".
func enumName(e fmt.Stringer, prefix string) string {
	n := strings.TrimPrefix(e.String(), prefix)
	if n == "UNSPECIFIED" {
		return "-"
	}
	return n
}

// cell makes free text safe for a table cell: one line, at most max runes.
func cell(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return orDash(s)
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// int64Str shows 0 (an absent ID) as "-".
func int64Str(v int64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprint(v)
}
