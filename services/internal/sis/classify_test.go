package sis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClassify covers routing, the identity key with and without the day
// boundary (R-B4), the catalogue whitelist (UNSUPPORTED, R-B9) and the
// missing-payload rules (MALFORMED, R-B3).
func TestClassify(t *testing.T) {
	t.Parallel()
	const oneABDG = `<RECS>1</RECS><ABDG><ABCD>208</ABCD></ABDG>`
	const fltr = `<FLTR><FLID>1001</FLID></FLTR>`
	tests := []struct {
		name    string
		input   string
		want    Classification
		class   Class
		reason  string
		options IdentityOptions
	}{
		{name: "FlightOperation", input: msg(flopMeta, flopBody),
			want: Classification{Kind: KindFlightOperation, Handler: "FLOP_ACFT", IdentityKey: "AODB|FLOP|ACFT|77"}},
		{name: "FlightDelete", input: msg(metaWith("FLOP", "FDEL"), `<FLOP><FLID>1004</FLID><FDEL/></FLOP>`),
			want: Classification{Kind: KindFlightOperation, Handler: "FLOP_FDEL", IdentityKey: "AODB|FLOP|FDEL|77"}},
		{name: "FlightOperationWithoutSubtypeElement", input: msg(metaWith("FLOP", "TOBT"), `<FLOP><FLID>1003</FLID><FFID>x</FFID></FLOP>`),
			want: Classification{Kind: KindFlightOperation, Handler: "FLOP_TOBT", IdentityKey: "AODB|FLOP|TOBT|77"}},
		{name: "RepeatedFlightOperations", input: msg(flopMeta, `<FLOP/>`+flopBody+flopBody),
			want: Classification{Kind: KindFlightOperation, Handler: "FLOP_ACFT", IdentityKey: "AODB|FLOP|ACFT|77"}},
		{name: "LowerCaseTypeIsNormalised", input: msg(`<SNDR>AODB</SNDR><SEQN>77</SEQN><TYPE> flop </TYPE><STYP>acft</STYP>`, flopBody),
			want: Classification{Kind: KindFlightOperation, Handler: "FLOP_ACFT", IdentityKey: "AODB|FLOP|ACFT|77"}},
		{name: "DayBoundaryIdentity", input: msg(flopMeta, flopBody), options: IdentityOptions{IncludeDayBoundary: true},
			want: Classification{Kind: KindFlightOperation, Handler: "FLOP_ACFT", IdentityKey: "AODB|FLOP|ACFT|77|20261201"}},
		{name: "Snapshot", input: msg(metaWith("SCHD", "DNLD"), `<SCHD><RECS>1</RECS>`+fltr+`</SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_DNLD", IdentityKey: "AODB|SCHD|DNLD|77"}},
		{name: "SnapshotResponse", input: msg(metaWith("SCHD", "RESP"), `<SCHD>`+fltr+`<RECS>1</RECS></SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_RESP", IdentityKey: "AODB|SCHD|RESP|77"}},
		{name: "AdHocFlight", input: msg(metaWith("SCHD", "ADFT"), `<SCHD><RECS>1</RECS>`+fltr+`</SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_ADFT", IdentityKey: "AODB|SCHD|ADFT|77"}},
		{name: "FlightAdd", input: msg(metaWith("SCHD", "ADD"), `<SCHD><RECS>1</RECS>`+fltr+`</SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_ADD", IdentityKey: "AODB|SCHD|ADD|77"}},
		{name: "FlightUpdate", input: msg(metaWith("SCHD", "UPD"), `<SCHD>`+fltr+`</SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_UPD", IdentityKey: "AODB|SCHD|UPD|77"}},
		{name: "FlightDelete", input: msg(metaWith("SCHD", "DEL"), `<SCHD><RECS>1</RECS><FLTR><FLID>15</FLID></FLTR></SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_DEL", IdentityKey: "AODB|SCHD|DEL|77"}},
		{name: "ExplicitlyEmptySnapshot", input: msg(metaWith("SCHD", "DNLD"), `<SCHD><RECS> 0 </RECS></SCHD>`),
			want: Classification{Kind: KindFlightSnapshot, Handler: "SCHD_DNLD", IdentityKey: "AODB|SCHD|DNLD|77"}},
		{name: "SeasonSchedule", input: msg(metaWith("SCHS", "RESP"), `<SCHS><SNAM>W26</SNAM><RECS>1</RECS><FLTR/></SCHS>`),
			want: Classification{Kind: KindSeasonSchedule, Handler: "SCHS_RESP", IdentityKey: "AODB|SCHS|RESP|77"}},
		{name: "Reference", input: msg(metaWith("ABDG", "UPD"), oneABDG),
			want: Classification{Kind: KindReference, Handler: "REF_ABDG", IdentityKey: "AODB|ABDG|UPD|77"}},
		{name: "ReferenceRecsAfterRecords", input: msg(metaWith("ABDG", "DNLD"), `<ABDG><ABCD>208</ABCD></ABDG><RECS>1</RECS>`),
			want: Classification{Kind: KindReference, Handler: "REF_ABDG", IdentityKey: "AODB|ABDG|DNLD|77"}},
		{name: "ReferenceWithoutRecs", input: msg(metaWith("ABDG", "ADD"), `<ABDG><ABCD>208</ABCD></ABDG>`),
			want: Classification{Kind: KindReference, Handler: "REF_ABDG", IdentityKey: "AODB|ABDG|ADD|77"}},
		{name: "ReferenceResponseForAnyType", input: msg(metaWith("AIRC", "RESP"), `<RECS>1</RECS><AIRC><ITAT>333</ITAT></AIRC>`),
			want: Classification{Kind: KindReference, Handler: "REF_AIRC", IdentityKey: "AODB|AIRC|RESP|77"}},
		{name: "ExplicitlyEmptyReferenceSnapshot", input: msg(metaWith("VIPL", "DNLD"), `<RECS>0</RECS>`),
			want: Classification{Kind: KindReference, Handler: "REF_VIPL", IdentityKey: "AODB|VIPL|DNLD|77"}},
		{name: "ReferenceRequest", input: msg(`<SNDR>VIEW</SNDR><SEQN>000042</SEQN><TYPE>RQRD</TYPE><STYP>GLST</STYP>`, `<RQRD><RTYP>GLST</RTYP></RQRD>`),
			want: Classification{Kind: KindRequest, Handler: "REQ_RQRD", IdentityKey: "VIEW|RQRD|GLST|000042"}},
		{name: "FlightRequest", input: msg(`<SNDR>VIEW</SNDR><SEQN>000043</SEQN><TYPE>RQFD</TYPE><STYP>NONE</STYP>`, `<RQFD><STDB>a</STDB><STDE>b</STDE></RQFD>`),
			want: Classification{Kind: KindRequest, Handler: "REQ_RQFD", IdentityKey: "VIEW|RQFD|NONE|000043"}},

		{name: "UnknownType", input: msg(metaWith("LDM", "ADD"), `<LDM/>`), class: ClassUnsupported, reason: `message type "LDM" is not in the SIS catalogue`},
		{name: "AdHocFlightNotInCatalogue", input: msg(metaWith("ADFT", "ADD"), `<ADFT/>`), class: ClassUnsupported, reason: "not in the SIS catalogue"},
		{name: "FLOPSubtypeNotWhitelisted", input: msg(metaWith("FLOP", "XXXX"), flopBody), class: ClassUnsupported, reason: "not on the FLOP whitelist"},
		{name: "UnsupportedWinsOverMissingPayload", input: msg(metaWith("FLOP", "FOO"), ``), class: ClassUnsupported, reason: "not on the FLOP whitelist"},
		{name: "ReferenceSubtypeUnknown", input: msg(metaWith("REGL", "FOO"), `<RECS>1</RECS><REGL><REGC>ASIA</REGC></REGL>`), class: ClassUnsupported, reason: `REGL has no subtype "FOO"`},
		{name: "FlightDeleteWithoutRecords", input: msg(metaWith("SCHD", "DEL"), `<SCHD/>`), class: ClassMalformed, reason: "no SCHD/FLTR records and no RECS"},
		{name: "AdHocFlightWithoutRecords", input: msg(metaWith("SCHD", "ADFT"), `<SCHD/>`), class: ClassMalformed, reason: "no SCHD/FLTR records and no RECS"},
		{name: "SeasonHasNoAdHocFlight", input: msg(metaWith("SCHS", "ADFT"), `<SCHS><FLTR/></SCHS>`), class: ClassUnsupported, reason: `SCHS has no subtype "ADFT"`},
		{name: "SnapshotSubtypeUnknown", input: msg(metaWith("SCHD", "NONE"), `<SCHD>`+fltr+`</SCHD>`), class: ClassUnsupported, reason: `SCHD has no subtype "NONE"`},
		{name: "SeasonSubtypeUnknown", input: msg(metaWith("SCHS", "ADD"), `<SCHS><FLTR/></SCHS>`), class: ClassUnsupported, reason: `SCHS has no subtype "ADD"`},
		{name: "RequestForNonReferenceType", input: msg(metaWith("RQRD", "SCHD"), `<RQRD/>`), class: ClassUnsupported, reason: "not a reference type"},
		{name: "FlightRequestSubtype", input: msg(metaWith("RQFD", "DNLD"), `<RQFD/>`), class: ClassUnsupported, reason: "is not NONE"},

		{name: "FLOPWithoutFLOPElement", input: msg(flopMeta, `<ACFT>320</ACFT>`), class: ClassMalformed, reason: "no FLOP record"},
		{name: "FLOPWithEmptyFLOPElement", input: msg(flopMeta, `<FLOP></FLOP><FLOP/>`), class: ClassMalformed, reason: "no FLOP record"},
		{name: "SnapshotWithoutWrapper", input: msg(metaWith("SCHD", "DNLD"), `<RECS>1</RECS>`+fltr), class: ClassMalformed, reason: "no SCHD element"},
		{name: "SnapshotWithTwoWrappers", input: msg(metaWith("SCHD", "DNLD"), `<SCHD>`+fltr+`</SCHD><SCHD>`+fltr+`</SCHD>`), class: ClassMalformed, reason: "SCHD element appears 2 times"},
		{name: "SnapshotWithoutRecords", input: msg(metaWith("SCHD", "RESP"), `<SCHD/>`), class: ClassMalformed, reason: "no SCHD/FLTR records and no RECS"},
		{name: "SnapshotRecordsMissing", input: msg(metaWith("SCHD", "DNLD"), `<SCHD><RECS>3</RECS></SCHD>`), class: ClassMalformed, reason: `RECS says "3"`},
		{name: "SeasonWithoutWrapper", input: msg(metaWith("SCHS", "DNLD"), ``), class: ClassMalformed, reason: "no SCHS element"},
		{name: "ReferenceAddWithoutRecords", input: msg(metaWith("ABDG", "ADD"), `<RECS>1</RECS>`), class: ClassMalformed, reason: "ABDG/ADD carries no ABDG record"},
		{name: "ReferenceDeleteWithoutRecords", input: msg(metaWith("ABDG", "DEL"), `<RECS>0</RECS>`), class: ClassMalformed, reason: "ABDG/DEL carries no ABDG record"},
		{name: "ReferenceSnapshotRecordsMissing", input: msg(metaWith("ABDG", "DNLD"), `<RECS>2</RECS>`), class: ClassMalformed, reason: `RECS says "2"`},
		{name: "ReferenceSnapshotWithoutAnything", input: msg(metaWith("ABDG", "RESP"), ``), class: ClassMalformed, reason: "no ABDG records and no RECS"},
		{name: "ReferenceRecordsMisnamed", input: msg(metaWith("ABDG", "DNLD"), `<RECS>1</RECS><abdg/>`), class: ClassMalformed, reason: `RECS says "1"`},
		{name: "RequestWithoutElement", input: msg(metaWith("RQRD", "GLST"), ``), class: ClassMalformed, reason: "no RQRD element"},
		{name: "DayBoundaryWithoutDTTM", input: msg(`<SNDR>AODB</SNDR><SEQN>77</SEQN><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody),
			options: IdentityOptions{IncludeDayBoundary: true}, class: ClassMalformed, reason: "needed for the day-boundary identity"},
		{name: "DayBoundaryWithImpossibleDate", input: msg(`<SNDR>AODB</SNDR><SEQN>77</SEQN><DTTM>20260230120000</DTTM><TYPE>FLOP</TYPE><STYP>ACFT</STYP>`, flopBody),
			options: IdentityOptions{IncludeDayBoundary: true}, class: ClassMalformed, reason: "not a valid time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := Decode([]byte(tc.input))
			require.NoError(t, err)
			got, err := Classify(m, tc.options)
			if tc.class != "" {
				requireClass(t, err, tc.class, tc.reason)
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestClassifyWithoutMessage(t *testing.T) {
	t.Parallel()
	_, err := Classify(nil, IdentityOptions{})
	requireClass(t, err, ClassMalformed, "no message")
	_, err = Classify(&Message{Root: &Node{Name: "MSG"}}, IdentityOptions{})
	requireClass(t, err, ClassMalformed, "incomplete META")
}

// TestClassifyCatalogueTables pins the size of the catalogue tables.
func TestClassifyCatalogueTables(t *testing.T) {
	t.Parallel()
	require.Len(t, ReferenceTypes(), 23)
	require.Len(t, FLOPSubtypes(), 59)
	require.IsNonDecreasing(t, ReferenceTypes())
	require.IsNonDecreasing(t, FLOPSubtypes())
	types := ReferenceTypes()
	types[0] = "XXXX"
	require.Equal(t, "ABDG", ReferenceTypes()[0], "callers get a copy")
	require.True(t, IsReferenceType("VIPS"))
	require.False(t, IsReferenceType("VIPF"))
}
