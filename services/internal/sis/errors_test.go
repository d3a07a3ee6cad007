package sis

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// msg builds a message with the given META children and body.
func msg(meta, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><MSG><META>` + meta + `</META>` + body + `</MSG>`
}

const (
	flopMeta = `<SNDR>AODB</SNDR><SEQN>77</SEQN><DTTM>20261201090000</DTTM><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`
	flopBody = `<FLOP><FLID>1003</FLID><FFID>3U-3U8963-D-01DEC261015-D</FFID><ACFT>320</ACFT></FLOP>`
)

func metaWith(typ, styp string) string {
	return `<SNDR>AODB</SNDR><SEQN>77</SEQN><DTTM>20261201090000</DTTM><TYPE>` + typ + `</TYPE><STYP>` + styp + `</STYP>`
}

// TestDecodeErrorClasses pins the class of every Decode failure (R-B3):
// MALFORMED is final, CODEC_ERROR is retryable.
func TestDecodeErrorClasses(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("<A>", 130) + strings.Repeat("</A>", 130)
	tests := []struct {
		name   string
		input  string
		class  Class
		reason string
	}{
		{"EmptyInput", "", ClassMalformed, "empty input"},
		{"BlankInput", " \r\n\t ", ClassMalformed, "only white space"},
		{"BOMOnly", "\ufeff\n", ClassMalformed, "only white space"},
		{"DeclarationOnly", `<?xml version="1.0"?>`, ClassMalformed, "no root element"},
		{"NotXML", "AODB FLOP ACFT", ClassMalformed, "before the root"},
		{"Unclosed", `<MSG><META>`, ClassMalformed, "not closed"},
		{"MismatchedEndTag", `<MSG><META></MSG></META>`, ClassMalformed, "does not match"},
		{"BrokenTag", `<MSG><META</MSG>`, ClassMalformed, "not well-formed"},
		{"UnknownEntity", msg(flopMeta, `<FLOP><REMC>&nbsp;</REMC></FLOP>`), ClassMalformed, "not well-formed"},
		{"UnquotedAttribute", `<MSG a=1/>`, ClassMalformed, "not well-formed"},
		{"RepeatedAttribute", `<MSG a="1" a="2"/>`, ClassMalformed, "repeated"},
		{"IllegalCharacter", "<MSG>\x01</MSG>", ClassMalformed, "not well-formed"},
		{"IllegalCharacterReference", "<MSG>&#0;</MSG>", ClassMalformed, "not well-formed"},
		{"UnterminatedDeclaration", `<?xml version="1.0" <MSG/>`, ClassMalformed, "unterminated"},
		{"BrokenDeclaration", `<?xml version=1.0?><MSG/>`, ClassMalformed, "malformed XML declaration"},
		{"UnknownDeclarationAttribute", `<?xml version="1.0" charset="GBK"?><MSG/>`, ClassMalformed, "malformed XML declaration"},
		{"MisplacedDeclaration", `<MSG><?xml version="1.0"?></MSG>`, ClassMalformed, "only allowed at the start"},
		{"MisplacedDeclarationWithEncoding", `<MSG><?xml version="1.0" encoding="GBK"?></MSG>`, ClassMalformed, "only allowed at the start"},
		{"TextAfterRoot", msg(flopMeta, flopBody) + "junk", ClassMalformed, "after the root"},
		{"ElementAfterRoot", msg(flopMeta, flopBody) + "<MSG/>", ClassMalformed, "after the end of the root"},
		{"BrokenMarkupAfterRoot", msg(flopMeta, flopBody) + "</MSG><", ClassMalformed, "not well-formed"},
		{"EndTagWithoutStart", `</MSG>`, ClassMalformed, "without a start tag"},
		{"RootNotMSG", `<MESSAGE><META/></MESSAGE>`, ClassMalformed, "root element is <MESSAGE>"},
		{"MissingMETA", `<MSG><FLOP/></MSG>`, ClassMalformed, "missing META"},
		{"RepeatedMETA", `<MSG><META>` + flopMeta + `</META><META>` + flopMeta + `</META></MSG>`, ClassMalformed, "META appears 2 times"},
		{"MissingSNDR", msg(`<SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "missing META/SNDR"},
		{"EmptySNDR", msg(`<SNDR> </SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "META/SNDR is empty"},
		{"MissingSEQN", msg(`<SNDR>AODB</SNDR><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "missing META/SEQN"},
		{"EmptyTYPE", msg(`<SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE/><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "META/TYPE is empty"},
		{"EmptySTYP", msg(`<SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP></STYP>`, flopBody), ClassMalformed, "META/STYP is empty"},
		{"RepeatedTYPE", msg(flopMeta+`<TYPE>SCHD</TYPE>`, flopBody), ClassMalformed, "META/TYPE appears more than once"},
		{"STYPWithElements", msg(`<SNDR>AODB</SNDR><SEQN>1</SEQN><TYPE>FLOP</TYPE><STYP><X>ACFT</X></STYP>`, flopBody), ClassMalformed, "must hold text"},
		{"SEQNNotDecimal", msg(`<SNDR>AODB</SNDR><SEQN>12a</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "not a decimal integer"},
		{"SEQNNegative", msg(`<SNDR>AODB</SNDR><SEQN>-5</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "not a decimal integer"},
		{"SEQNFraction", msg(`<SNDR>AODB</SNDR><SEQN>1.0</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody), ClassMalformed, "not a decimal integer"},
		{"TooDeep", `<MSG>` + deep + `</MSG>`, ClassMalformed, "depth limit 128 exceeded"},

		{"UnknownEncoding", `<?xml version="1.0" encoding="x-klingon"?><MSG/>`, ClassCodec, "unknown or not supported"},
		{"ReplacementEncoding", `<?xml version="1.0" encoding="ISO-2022-KR"?><MSG/>`, ClassCodec, "not supported"},
		{"NotASCIICompatibleEncoding", `<?xml version="1.0" encoding="IBM037"?><MSG/>`, ClassCodec, "not ASCII-compatible"},
		{"InvalidUTF8Declared", "<?xml version=\"1.0\" encoding=\"UTF-8\"?><MSG>\xff\xfe</MSG>", ClassCodec, "not valid UTF-8"},
		{"InvalidUTF8Default", "<MSG>caf\xe9</MSG>", ClassCodec, "not valid UTF-8"},
		{"InvalidGBK", "<?xml version=\"1.0\" encoding=\"GBK\"?><MSG>\x81\x20</MSG>", ClassCodec, "not valid in the declared encoding GBK"},
		{"InvalidGB18030", "<?xml version=\"1.0\" encoding=\"GB18030\"?><MSG>\x81\x30\x81</MSG>", ClassCodec, "not valid in the declared encoding GB18030"},
		{"UndefinedWindows1252Byte", "<?xml version=\"1.0\" encoding=\"windows-1252\"?><MSG>\x81</MSG>", ClassCodec, "not valid in the declared encoding"},
		{"BOMContradictsDeclaration", "\ufeff<?xml version=\"1.0\" encoding=\"GBK\"?><MSG/>", ClassCodec, "byte order mark says UTF-8"},
		{"UTF16DeclaredWithoutBOM", `<?xml version="1.0" encoding="UTF-16"?><MSG/>`, ClassCodec, "no UTF-16 byte order mark"},
		{"UTF16BOMContradictsDeclaration", string(utf16LE("\ufeff<?xml version=\"1.0\" encoding=\"GBK\"?><MSG/>")), ClassCodec, "byte order mark says UTF-16"},
		{"UnpairedSurrogate", string(append(utf16LE("\ufeff<MSG>"), 0x00, 0xD8, '<', 0)), ClassCodec, "not valid UTF-16"},
		{"OddLengthUTF16", string(append(utf16LE("\ufeff<MSG/>"), 0x00)), ClassCodec, "odd length"},
		{"UTF32", "\x00\x00\xfe\xff\x00\x00\x00<", ClassCodec, "UTF-32"},
		{"XML11", `<?xml version="1.1"?><MSG/>`, ClassCodec, "version \"1.1\""},
		{"DOCTYPE", `<?xml version="1.0"?><!DOCTYPE MSG [<!ENTITY x "y">]><MSG>&x;</MSG>`, ClassCodec, "DOCTYPE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Decode([]byte(tc.input))
			require.Nil(t, m)
			requireClass(t, err, tc.class, tc.reason)
		})
	}
}

func requireClass(t *testing.T, err error, class Class, reason string) {
	t.Helper()
	require.Error(t, err)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, class, e.Class, "error: %v", err)
	require.Contains(t, err.Error(), reason)
}

// TestErrorWrapping shows the typed error survives wrapping and matches the
// class sentinels.
func TestErrorWrapping(t *testing.T) {
	t.Parallel()
	_, err := Decode([]byte(`<MSG><META`))
	wrapped := fmt.Errorf("processing mailbox row 42: %w", err)

	var e *Error
	require.ErrorAs(t, wrapped, &e)
	require.Equal(t, ClassMalformed, e.Class)
	require.ErrorIs(t, wrapped, ErrMalformed)
	require.NotErrorIs(t, wrapped, ErrCodec)
	require.NotNil(t, errors.Unwrap(e), "the syntax error is kept as the cause")
	class, ok := ClassOf(wrapped)
	require.True(t, ok)
	require.Equal(t, ClassMalformed, class)
	require.False(t, class.Retryable())
	require.True(t, ClassCodec.Retryable())
	require.True(t, ClassUnsupported.Retryable())

	_, ok = ClassOf(errors.New("plain"))
	require.False(t, ok)
	require.Equal(t, "sis: CODEC_ERROR: bad", (&Error{Class: ClassCodec, Reason: "bad"}).Error())
}

// TestSyntaxErrorLineNumbers keeps line numbers of the input even though the
// declaration and leading blank lines are consumed before tokenizing.
func TestSyntaxErrorLineNumbers(t *testing.T) {
	t.Parallel()
	_, err := Decode([]byte("\n\n<?xml version=\"1.0\"\n?>\n<MSG>\n<A>\n</B>\n</MSG>"))
	require.ErrorContains(t, err, "line 7")
}
