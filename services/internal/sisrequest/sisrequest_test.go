package sisrequest

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"msgexchange/services/internal/sis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// created is 20:00 airport time on 2026-03-01 (12:00 UTC).
func created(t *testing.T) time.Time {
	t.Helper()
	zone, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).In(zone)
}

func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return string(b)
}

// TestEncode_R_D5_GoldenLayouts: both requests are encoded exactly in the
// catalogue's layout (sis-catalogue §8): declaration with UTF-8 and
// standalone, MSG with the schema reference, META in the order SNDR, SEQN,
// DTTM, TYPE, STYP, no indentation, no line breaks.
func TestEncode_R_D5_GoldenLayouts(t *testing.T) {
	t.Parallel()
	env := Envelope{Seqn: 42, Created: created(t)}
	t.Run("RQRD", func(t *testing.T) {
		t.Parallel()
		got, err := EncodeRQRD(env, "GLST")
		require.NoError(t, err)
		require.Equal(t, golden(t, "rqrd-glst.golden.xml"), string(got))
	})
	t.Run("RQFD", func(t *testing.T) {
		t.Parallel()
		got, err := EncodeRQFD(Envelope{Sender: Sender, Seqn: 7, Created: created(t)}, "20260302", "20260303")
		require.NoError(t, err)
		require.Equal(t, golden(t, "rqfd.golden.xml"), string(got))
	})
	t.Run("NoWhitespaceBetweenElements", func(t *testing.T) {
		t.Parallel()
		got, err := EncodeRQFD(env, "a", "b")
		require.NoError(t, err)
		require.NotContains(t, string(got), "\n")
		require.NotContains(t, string(got), "> <")
		require.True(t, strings.HasPrefix(string(got), `<?xml version="1.0" encoding="UTF-8" standalone="no"?><MSG `))
		require.True(t, strings.HasSuffix(string(got), "</MSG>"))
	})
}

// TestEncode_R_D5_DecodesAsOwnRequest: the encoded requests are read back
// by the SIS decoder as our own request types, with the identity
// VIEW|TYPE|STYP|SEQN, so the two packages agree on the layout.
func TestEncode_R_D5_DecodesAsOwnRequest(t *testing.T) {
	t.Parallel()
	env := Envelope{Seqn: 42, Created: created(t)}
	rqrd, err := EncodeRQRD(env, "SLST")
	require.NoError(t, err)
	rqfd, err := EncodeRQFD(env, "23JAN21", "24JAN21 & <later>")
	require.NoError(t, err)
	tests := []struct {
		name     string
		raw      []byte
		identity string
		check    func(*testing.T, *sis.Message)
	}{
		{"RQRD", rqrd, "VIEW|RQRD|SLST|000042", func(t *testing.T, m *sis.Message) {
			require.Equal(t, "SLST", m.Root.Child("RQRD").Child("RTYP").Value())
		}},
		{"RQFD", rqfd, "VIEW|RQFD|NONE|000042", func(t *testing.T, m *sis.Message) {
			require.Equal(t, "23JAN21", m.Root.Child("RQFD").Child("STDB").Value())
			require.Equal(t, "24JAN21 & <later>", m.Root.Child("RQFD").Child("STDE").Value(), "escaped text reads back verbatim")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := sis.Decode(tc.raw)
			require.NoError(t, err)
			require.Equal(t, "20260301200000", m.Meta.DTTM, "DTTM in the airport zone")
			cls, err := sis.Classify(m, sis.IdentityOptions{})
			require.NoError(t, err)
			require.Equal(t, sis.KindRequest, cls.Kind)
			require.Equal(t, tc.identity, cls.IdentityKey)
			tc.check(t, m)
		})
	}
}

// TestEncode_R_D5_EscapesVerbatimWindow: STDB/STDE are passed through
// verbatim; only markup characters are escaped.
func TestEncode_R_D5_EscapesVerbatimWindow(t *testing.T) {
	t.Parallel()
	got, err := EncodeRQFD(Envelope{Seqn: 1, Created: created(t)}, " 2026-03-02 ", "a&b<c>d\re\"f'")
	require.NoError(t, err)
	require.Contains(t, string(got), "<STDB> 2026-03-02 </STDB><STDE>a&amp;b&lt;c&gt;d&#13;e\"f'</STDE>")
	require.Contains(t, string(got), "<SEQN>000001</SEQN>")
}

// TestValidate_R_D5_RejectsInvalidRequests: RTYP from the allowed list only,
// STDB/STDE required; every rejection wraps ErrInvalid.
func TestValidate_R_D5_RejectsInvalidRequests(t *testing.T) {
	t.Parallel()
	env := Envelope{Seqn: 1, Created: created(t)}
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"EmptyRTYP", func() error { _, err := EncodeRQRD(env, ""); return err }, "RTYP is required"},
		{"SCHDIsNoRTYP", func() error { _, err := EncodeRQRD(env, "SCHD"); return err }, `RTYP "SCHD" is not a requestable`},
		{"SCHSIsNoRTYP", func() error { _, err := NormalizeRTYP("SCHS"); return err }, `RTYP "SCHS"`},
		{"VIPFIsNoRTYP", func() error { _, err := NormalizeRTYP("vipf"); return err }, `RTYP "vipf"`},
		{"LowerCaseNotNormalized", func() error { _, err := EncodeRQRD(env, "glst"); return err }, "must be upper case"},
		{"EmptySTDB", func() error { _, err := EncodeRQFD(env, "", "x"); return err }, "STDB is required"},
		{"BlankSTDE", func() error { _, err := EncodeRQFD(env, "x", "  "); return err }, "STDE is required"},
		{"BothMissing", func() error { return ValidateWindow("", "") }, "STDB is required; STDE is required"},
		{"ControlCharacter", func() error { return ValidateWindow("a\x01", "b") }, "STDB holds characters XML cannot carry"},
		{"InvalidUTF8", func() error { return ValidateWindow("a", "\xff") }, "STDE holds characters"},
		{"TooLong", func() error { return ValidateWindow(strings.Repeat("9", MaxWindowLen+1), "b") }, "longer than 64"},
		{"SeqnZero", func() error { _, err := EncodeRQRD(Envelope{Seqn: 0, Created: created(t)}, "GLST"); return err }, "SEQN 0 outside"},
		{"SeqnTooLarge", func() error { _, err := FormatSeqn(MaxSeqn + 1); return err }, "SEQN 1000000 outside"},
		{"NoCreationTime", func() error { _, err := EncodeRQRD(Envelope{Seqn: 1}, "GLST"); return err }, "DTTM) is required"},
		{"UnknownRoutingType", func() error { _, err := RoutingID("SCHD"); return err }, "not a request type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.run()
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalid), "%v wraps ErrInvalid", err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestNormalizeRTYP_AcceptsEveryCatalogueType: the allowed list is the
// catalogue's 23 reference types, in any case and with blanks trimmed.
func TestNormalizeRTYP_AcceptsEveryCatalogueType(t *testing.T) {
	t.Parallel()
	got := RequestTypes()
	require.Len(t, got, 23)
	sort.Strings(got)
	require.Equal(t, sis.ReferenceTypes(), got, "the RQRD list equals the reference types of the decoder")
	for _, typ := range RequestTypes() {
		n, err := NormalizeRTYP(" " + strings.ToLower(typ) + " ")
		require.NoError(t, err)
		require.Equal(t, typ, n)
	}
}

// TestFormatSeqn_SixDigitsCycle: SEQN is six digits, zero-padded, 1…999999.
func TestFormatSeqn_SixDigitsCycle(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{1: "000001", 42: "000042", 999999: "999999"} {
		got, err := FormatSeqn(n)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestRoutingID_R_D5: VIEWRQFD and VIEWRQRD (sis-catalogue §8).
func TestRoutingID_R_D5(t *testing.T) {
	t.Parallel()
	id, err := RoutingID(TypeRQFD)
	require.NoError(t, err)
	require.Equal(t, "VIEWRQFD", id)
	id, err = RoutingID(TypeRQRD)
	require.NoError(t, err)
	require.Equal(t, "VIEWRQRD", id)
}

// TestParseDTTM_ReadsAirportLocalTime: DTTM is yyyyMMddHHmmss local time.
func TestParseDTTM_ReadsAirportLocalTime(t *testing.T) {
	t.Parallel()
	zone := created(t).Location()
	got, err := ParseDTTM(" 20260301200000 ", zone)
	require.NoError(t, err)
	require.True(t, got.Equal(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	for _, bad := range []string{"", "2026030120000", "2026-03-01T20:00", "20261301200000", "+0260301200000"} {
		_, err := ParseDTTM(bad, zone)
		require.Error(t, err, bad)
	}
}
