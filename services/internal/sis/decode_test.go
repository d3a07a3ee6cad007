package sis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeQuirks covers the decoder quirks of catalogue §2 on small
// inputs, one behaviour per case.
func TestDecodeQuirks(t *testing.T) {
	t.Parallel()
	const xsi = `xmlns:xsi = "http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation = "unisysaodbsis.xsd"`
	tests := []struct {
		name  string
		input string
		check func(t *testing.T, m *Message)
	}{
		{"SpacesAroundEquals", msg(metaWith("FLOP", "ERUT"), `<FLOP><ERUT RTNO = "1" ><APCD>CTU</APCD></ERUT></FLOP>`),
			func(t *testing.T, m *Message) {
				v, ok := m.Root.Child("FLOP").Child("ERUT").AttrValue("RTNO")
				require.True(t, ok)
				require.Equal(t, "1", v)
			}},
		{"XSIAttributesKeptVerbatim", `<?xml version="1.0" encoding="UTF-8"?><MSG ` + xsi + ` ><META>` + flopMeta + `</META>` + flopBody + `</MSG>`,
			func(t *testing.T, m *Message) {
				require.Equal(t, []Attr{
					{Name: "xmlns:xsi", Value: "http://www.w3.org/2001/XMLSchema-instance"},
					{Name: "xsi:noNamespaceSchemaLocation", Value: "unisysaodbsis.xsd"},
				}, m.Root.Attrs)
			}},
		{"TrailingWhitespaceInStartTags", "<MSG \t ><META \r\n>" + flopMeta + "</META ><FLOP ><FLID>1</FLID></FLOP\t></MSG>",
			func(t *testing.T, m *Message) {
				require.Equal(t, "FLOP", m.Meta.TYPE)
				require.Equal(t, "1", m.Root.Child("FLOP").Child("FLID").Text)
			}},
		{"TabsAndCRLF", "<?xml version=\"1.0\"?>\r\n<MSG>\r\n\t<META>\r\n\t\t<SNDR>AODB</SNDR>\r\n\t\t<SEQN>\t77\r\n</SEQN>\r\n\t\t<TYPE>FLOP</TYPE><STYP>REMC</STYP>\r\n\t</META>\r\n\t<FLOP><REMC>line one\r\nline two</REMC></FLOP>\r\n</MSG>\r\n",
			func(t *testing.T, m *Message) {
				require.Equal(t, "77", m.Meta.SEQN)
				require.Equal(t, "\t77\n", m.Root.Child("META").Child("SEQN").Text, "text kept, CR/LF normalised")
				require.Equal(t, "line one\nline two", m.Root.Child("FLOP").Child("REMC").Text)
			}},
		{"WhitespaceBeforeDeclaration", "\n \t\r\n<?xml version=\"1.0\" encoding=\"UTF-8\"?>" + msg(flopMeta, flopBody)[len(`<?xml version="1.0" encoding="UTF-8"?>`):],
			func(t *testing.T, m *Message) { require.Equal(t, "ACFT", m.Meta.STYP) }},
		{"BOMBeforeDeclaration", "\ufeff" + msg(flopMeta, flopBody),
			func(t *testing.T, m *Message) { require.Equal(t, "ACFT", m.Meta.STYP) }},
		{"BOMAndWhitespaceBeforeDeclaration", "\ufeff \r\n" + msg(flopMeta, flopBody),
			func(t *testing.T, m *Message) { require.Equal(t, "ACFT", m.Meta.STYP) }},
		{"NoDeclaration", "<MSG><META>" + flopMeta + "</META>" + flopBody + "</MSG>",
			func(t *testing.T, m *Message) { require.Equal(t, "ACFT", m.Meta.STYP) }},
		{"METAInAnyOrder", msg(`<STYP>DNLD</STYP><DTTM>20261130220015</DTTM><TYPE>SCHD</TYPE><SEQN> 604501 </SEQN><SNDR>AODB</SNDR>`, `<SCHD><RECS>0</RECS></SCHD>`),
			func(t *testing.T, m *Message) {
				require.Equal(t, Meta{SNDR: "AODB", SEQN: "604501", DTTM: "20261130220015", TYPE: "SCHD", STYP: "DNLD"}, m.Meta)
				require.Equal(t, "META", m.Root.Children[0].Name)
			}},
		{"RecsAfterRecords", msg(metaWith("GLST", "DNLD"), `<GLST><GCOD>G11</GCOD></GLST><GLST><GCOD>G12</GCOD></GLST><RECS>2</RECS>`),
			func(t *testing.T, m *Message) {
				body := m.Body()
				require.Len(t, body, 3)
				require.Equal(t, []string{"GLST", "GLST", "RECS"}, []string{body[0].Name, body[1].Name, body[2].Name})
			}},
		{"RepeatedElementsWithEmptyMembers", msg(metaWith("ABDG", "ADD"), `<ABDG><ABCD>213</ABCD><STND>212</STND><STND></STND><STND>213</STND></ABDG>`),
			func(t *testing.T, m *Message) {
				stands := m.Root.Child("ABDG").ChildrenNamed("STND")
				require.Len(t, stands, 3)
				require.Equal(t, "212", stands[0].Text)
				require.True(t, stands[1].Empty)
				require.Equal(t, "213", stands[2].Text)
			}},
		{"EmptyVersusAbsent", msg(metaWith("FLOP", "HNAG"), `<FLOP><FLID>1005</FLID><FHAG/><PHAG></PHAG><MHAG> </MHAG></FLOP>`),
			func(t *testing.T, m *Message) {
				f := m.Root.Child("FLOP")
				require.True(t, f.Child("FHAG").Empty, "self-closing")
				require.True(t, f.Child("PHAG").Empty, "open/close")
				require.False(t, f.Child("MHAG").Empty, "white space is text")
				require.True(t, f.Child("MHAG").Blank(), "but carries no value")
				require.Equal(t, "", f.Child("MHAG").Value())
				require.False(t, f.Has("TAOP"))
				require.Nil(t, f.Child("TAOP"))
				require.False(t, f.Empty)
				require.False(t, f.Child("FLID").Empty)
			}},
		{"ChineseText", msg(metaWith("TLST", "UPD"), `<TLST><TCOD>T1</TCOD><TNMC>T1航站楼============</TNMC></TLST>`),
			func(t *testing.T, m *Message) {
				require.Equal(t, "T1航站楼============", m.Root.Child("TLST").Child("TNMC").Text)
			}},
		{"AttributesPlusText", msg(metaWith("FLOP", "FDIV"), `<FLOP><FDIV DDES="" DDIR="TO">INCLEMENT WEATHER</FDIV><DELY CODE="RA" STRT="01DEC261015" DURA="0040">Late</DELY></FLOP>`),
			func(t *testing.T, m *Message) {
				fdiv := m.Root.Child("FLOP").Child("FDIV")
				require.Equal(t, []Attr{{"DDES", ""}, {"DDIR", "TO"}}, fdiv.Attrs)
				require.Equal(t, "INCLEMENT WEATHER", fdiv.Text)
				v, ok := fdiv.AttrValue("DDES")
				require.True(t, ok, "an empty attribute is present")
				require.Empty(t, v)
				_, ok = fdiv.AttrValue("REID")
				require.False(t, ok)
				require.Equal(t, "Late", m.Root.Child("FLOP").Child("DELY").Text)
			}},
		{"EntitiesAndCDATA", msg(metaWith("FLOP", "REMC"), `<FLOP><REMC>Bags &amp; cargo &lt;late&gt; &#x914D;&#39184;<![CDATA[ & <raw> ]]></REMC></FLOP>`),
			func(t *testing.T, m *Message) {
				require.Equal(t, "Bags & cargo <late> 配餐 & <raw> ", m.Root.Child("FLOP").Child("REMC").Text)
			}},
		{"FreeTextKeptAsSent", msg(metaWith("FLOP", "REMC"), "<FLOP><REMC>  two leading, one trailing </REMC></FLOP>"),
			func(t *testing.T, m *Message) {
				remc := m.Root.Child("FLOP").Child("REMC")
				require.Equal(t, "  two leading, one trailing ", remc.Text)
				require.Equal(t, "two leading, one trailing", remc.Value())
			}},
		{"BlankTextBetweenChildrenDropped", msg(metaWith("FLOP", "ACFT"), "<FLOP>\n\t<FLID>1</FLID>\n\t<!-- note -->\n</FLOP>"),
			func(t *testing.T, m *Message) { require.Empty(t, m.Root.Child("FLOP").Text) }},
		{"MixedTextKept", msg(metaWith("FLOP", "ACFT"), "<FLOP>\n\tstray <FLID>1</FLID> text\n</FLOP>"),
			func(t *testing.T, m *Message) { require.Equal(t, "\n\tstray  text\n", m.Root.Child("FLOP").Text) }},
		{"CommentsAndProcessingInstructionsIgnored", "<!-- head --><?app x?>" + msg(flopMeta, flopBody)[len(`<?xml version="1.0" encoding="UTF-8"?>`):] + "<!-- tail -->",
			func(t *testing.T, m *Message) { require.Equal(t, "ACFT", m.Meta.STYP) }},
		{"TrailingJunkEndTagIgnored", "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + "<MSG><META>" + metaWith("ABNR", "ADD") + "</META><RECS>1</RECS><ABNR><ANRC>STAFF</ANRC></ABNR>\n    </MSG>\n\t</MSG>",
			func(t *testing.T, m *Message) {
				require.Equal(t, "ABNR", m.Meta.TYPE)
				require.Len(t, m.Body(), 2)
			}},
		{"TrailingJunkMixIgnored", msg(flopMeta, flopBody) + " </MSG> <!-- x --> </FOO><?pi?>\n",
			func(t *testing.T, m *Message) { require.Equal(t, "FLOP", m.Meta.TYPE) }},
		{"SEQNWithLeadingZerosKeptAsSent", msg(`<SNDR>VIEW</SNDR><SEQN>000042</SEQN><TYPE>RQRD</TYPE><STYP>GLST</STYP>`, `<RQRD><RTYP>GLST</RTYP></RQRD>`),
			func(t *testing.T, m *Message) { require.Equal(t, "000042", m.Meta.SEQN) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Decode([]byte(tc.input))
			require.NoError(t, err)
			tc.check(t, m)
			requireRoundTrip(t, []byte(tc.input))
		})
	}
}
