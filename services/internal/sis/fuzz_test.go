package sis

import (
	"errors"
	"os"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode: it must never panic, fail only
// with a typed *Error of a Decode class, and whatever it accepts must
// survive Encode → Decode unchanged. Classify must not panic either. The
// hand-written scanner must also agree with the encoding/xml reference.
func FuzzDecode(f *testing.F) {
	for _, path := range goldenInputs(f) {
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{
		"", " ", "\ufeff", "<MSG/>", "<MSG><META></META></MSG>",
		msg(flopMeta, flopBody) + "</MSG>",
		"<?xml version=\"1.0\" encoding=\"GBK\"?><MSG>\x81\x40</MSG>",
		"<?xml version=\"1.0\" encoding=\"GB18030\"?><MSG>\x84\x31\xa4\x37</MSG>",
		"\xff\xfe<\x00M\x00S\x00G\x00/\x00>\x00",
		`<MSG a = "1" b='&#9;&#xD;'><A>x<B/>y</A><![CDATA[]]></MSG>`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range tokenizerCorners {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if diff := compareWithReference(raw); diff != "" {
			t.Fatalf("scanner and encoding/xml reference disagree: %s", diff)
		}
		m, err := Decode(raw)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if e.Class != ClassMalformed && e.Class != ClassCodec {
				t.Fatalf("Decode returned class %s: %v", e.Class, err)
			}
			if m != nil {
				t.Fatal("message returned with an error")
			}
			return
		}
		if _, err := Classify(m, IdentityOptions{IncludeDayBoundary: true}); err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Class != ClassMalformed && e.Class != ClassUnsupported) {
				t.Fatalf("Classify returned %v", err)
			}
		}
		out, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode of a decoded message failed: %v", err)
		}
		again, err := Decode(out)
		if err != nil {
			t.Fatalf("re-decoding failed: %v\n%q", err, out)
		}
		out2, err := Encode(again)
		if err != nil {
			t.Fatalf("re-encoding failed: %v", err)
		}
		if string(out) != string(out2) || !equalMessages(m, again) {
			t.Fatalf("round trip changed the message:\n%q\n%q", out, out2)
		}
	})
}

func equalMessages(a, b *Message) bool {
	return a.Meta == b.Meta && equalNodes(a.Root, b.Root)
}

func equalNodes(a, b *Node) bool {
	if a.Name != b.Name || a.Text != b.Text || a.Empty != b.Empty ||
		len(a.Attrs) != len(b.Attrs) || len(a.Children) != len(b.Children) {
		return false
	}
	for i := range a.Attrs {
		if a.Attrs[i] != b.Attrs[i] {
			return false
		}
	}
	for i := range a.Children {
		if !equalNodes(a.Children[i], b.Children[i]) {
			return false
		}
	}
	return true
}
