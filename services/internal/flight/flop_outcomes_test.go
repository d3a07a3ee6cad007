package flight

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"msgexchange/services/internal/sis"
)

// updateDocs rewrites the FLOP outcome table of docs/message-types.md from
// the code instead of comparing it (golden-file style, like the decoder's
// -update in services/internal/sis).
var updateDocs = flag.Bool("update", false, "rewrite the FLOP outcome table of docs/message-types.md")

// The table lives between these markers in docs/message-types.md; the
// text outside them is written by hand.
const (
	outcomeDoc   = "../../../docs/message-types.md"
	outcomeBegin = "<!-- flop-outcome-table:begin (generated: go test ./services/internal/flight -run TestFlopOutcomeTable -update) -->"
	outcomeEnd   = "<!-- flop-outcome-table:end -->"
)

// outcomeForms are the inputs the table probes for one FLOP subtype, as
// the payload of one record (after FLID and FFID).
type outcomeForms struct {
	// valid sets the subtype on the flight the forms are applied to, so a
	// clearing form has something to clear.
	valid string
	// emptyAttr is the payload element(s) with every catalogue attribute
	// empty and no content; X="" where the catalogue defines no attribute.
	emptyAttr string
	// bad carries one value outside the element's format or code domain,
	// or an arbitrary text where the catalogue gives none.
	bad string
	// checked: the catalogue gives bad's element a format or code domain,
	// so the bad form must be rejected (DEAD(PROTOCOL), nothing written).
	checked bool
}

// Probe values of the family rules; a subtype added to timeSubtypes,
// codeSubtypes or listRules gets its row from them, any other new subtype
// fails TestFlopOutcomeTable until it has forms here.
const (
	probeTime    = "23JAN210535"
	probeBadTime = "32JAN210535" // day 32
	probeNoCode  = "#?"          // not a code of any domain
)

var codeForms = map[string]outcomeForms{
	"ACFT": {valid: "<ACFT>358</ACFT>", bad: "<ACFT>" + probeNoCode + "</ACFT>"},
	"RENO": {valid: "<RENO>T5561</RENO>", bad: "<RENO>" + probeNoCode + "</RENO>"},
	"STND": {valid: "<STND>S209</STND>", bad: "<STND>" + probeNoCode + "</STND>"},
	"TRML": {valid: "<TRML>T3</TRML>", bad: "<TRML>" + probeNoCode + "</TRML>"},
	// MAXP is a number (catalogue §2.9) but its format is not checked.
	"MAXP": {valid: "<MAXP>130</MAXP>", bad: "<MAXP>many</MAXP>"},
	"FLIN": {valid: "<FLIN>I</FLIN>", bad: "<FLIN>Q</FLIN>", checked: true},
	"FLTY": {valid: "<FLTY>C</FLTY>", bad: "<FLTY>" + probeNoCode + "</FLTY>"},
	"FTSS": {valid: "<FTSS>DELY</FTSS>", bad: "<FTSS>" + probeNoCode + "</FTSS>"},
	"REMC": {valid: "<REMC>Bag loading Delay</REMC>", bad: "<REMC>" + probeNoCode + "</REMC>"},
	"RUNW": {valid: "<RUNW>02L</RUNW>", bad: "<RUNW>" + probeNoCode + "</RUNW>"},
}

// listForms are the valid and bad entries of the list subtypes; the empty
// attribute form is derived from the rule's sequence attribute.
var listForms = map[string]outcomeForms{
	"PSDT": {
		valid: `<PSDT PSNO="1"><PSST>504</PSST><STST>23JAN210500</STST><STET>23JAN210700</STET></PSDT>`,
		bad:   `<PSDT PSNO="1"><PSST>504</PSST><STST>23JAN212400</STST></PSDT>`, checked: true,
	},
	"GTDT": {
		valid: `<GTDT GTNO="1"><GATE>G1</GATE><PGOT>23JAN210500</PGOT><PGCT>23JAN210530</PGCT><GTYP>D</GTYP></GTDT>`,
		bad:   `<GTDT GTNO="1"><GATE>G1</GATE><PGOT>23JAN21-500</PGOT></GTDT>`, checked: true,
	},
	"CKDT": {
		valid: `<CKDT CKNO="1"><CHKC>C01</CHKC><CCLS>Y</CCLS><PCOT>23JAN210300</PCOT><PCCT>23JAN210450</PCCT><CTYP>D</CTYP></CKDT>`,
		bad:   `<CKDT CKNO="1"><CHKC>C01</CHKC><PCOT>31FEB210300</PCOT></CKDT>`, checked: true,
	},
	"CHDT": {
		valid: `<CHDT CHNO="1"><CHUT>CH1</CHUT><CCLS>Y</CCLS><PCBT>23JAN210300</PCBT><PCET>23JAN210450</PCET><CTYP>D</CTYP></CHDT>`,
		bad:   `<CHDT CHNO="1"><CHUT>CH1</CHUT><PCBT>2021-01-23</PCBT></CHDT>`, checked: true,
	},
	"CLDT": {
		valid: `<CLDT CLNO="1"><BELT>B1</BELT><BCLS>Y</BCLS><PCOT>23JAN210600</PCOT><PCCT>23JAN210700</PCCT><BTYP>D</BTYP></CLDT>`,
		bad:   `<CLDT CLNO="1"><BELT>B1</BELT><FBAG>23JAN211299</FBAG></CLDT>`, checked: true,
	},
	"CHOT": {
		valid: `<CHOT CSNO="1"><CHTM>23JAN210540</CHTM><CHID>ON</CHID><CHST>504</CHST></CHOT>`,
		bad:   `<CHOT CSNO="1"><CHTM>23JAN2105</CHTM><CHID>ON</CHID></CHOT>`, checked: true,
	},
	"ABTM": {
		valid: `<ABTM ASNO="1"><ABDG>AB1</ABDG><ABOP>D</ABOP><AOTM>23JAN210545</AOTM></ABTM>`,
		bad:   `<ABTM ASNO="1"><ABDG>AB1</ABDG><AOTM>soon</AOTM></ABTM>`, checked: true,
	},
	"ERUT": {
		valid: `<ERUT RTNO="1"><APCD>XIY</APCD><SCDT>23JAN210300</SCDT></ERUT><ERUT RTNO="2"><APCD>PEK</APCD><SCAT>23JAN210535</SCAT></ERUT>`,
		bad:   `<ERUT RTNO="2"><APCD>PEK</APCD><SCAT>23JAN21+535</SCAT></ERUT>`, checked: true,
	},
	"SRVT": {
		valid: `<SRVT><SRTC>WATER</SRTC><SRQT>1</SRQT><SRST>23JAN210600</SRST><SRET>23JAN210610</SRET><SRPR></SRPR></SRVT>`,
		bad:   `<SRVT><SRTC>WATER</SRTC><SRQT>1</SRQT><SRST>x</SRST></SRVT>`, checked: true,
	},
	// VFES is an entourage size (a number) but its format is not checked.
	"VIPF": {
		valid: `<VIPF><VPCD>V1</VPCD><VFES>3</VFES></VIPF>`,
		bad:   `<VIPF><VPCD>V1</VPCD><VFES>many</VFES></VIPF>`,
	},
	"PSHT": {
		valid: `<PSHT PSHN="1"><PSTM>23JAN210600</PSTM><PSID>IN</PSID><PUST>504</PUST></PSHT>`,
		bad:   `<PSHT PSHN="1"><PSTM>x</PSTM></PSHT>`, checked: true,
	},
	"TIPT": {
		valid: `<TIPT><TRTM>23JAN210450</TRTM><TRST>504</TRST></TIPT>`,
		bad:   `<TIPT><TRTM>23JAN211260</TRTM><TRST>504</TRST></TIPT>`, checked: true,
	},
	"PORT": {
		valid: `<PORT><POTM>23JAN210550</POTM><POID>O</POID></PORT>`,
		bad:   `<PORT><POTM>23JAN210550</POTM><POID>X</POID></PORT>`, checked: true,
	},
}

// otherForms are the subtypes with a rule of their own.
var otherForms = map[string]outcomeForms{
	"EXSS": {
		valid:     "<EXSC>RC</EXSC><EXSR>remark</EXSR>",
		emptyAttr: `<EXSC X=""/><EXSR X=""/>`,
		bad:       "<EXSC>" + probeNoCode + "</EXSC>",
	},
	"HNAG": {
		valid:     "<FHAG>1</FHAG><PHAG>2</PHAG><MHAG>3</MHAG>",
		emptyAttr: `<FHAG X=""/><PHAG X=""/><MHAG X=""/>`,
		bad:       "<FHAG>" + probeNoCode + "</FHAG>",
	},
	// VIPP is a count (a number) but its format is not checked.
	"VIPP": {
		valid:     "<VIPP>2</VIPP><VIPR>A</VIPR>",
		emptyAttr: `<VIPP X=""/><VIPR X=""/>`,
		bad:       "<VIPP>many</VIPP>",
	},
	"TAOP": {
		valid:     "<TAOP>YG</TAOP><TAFL>YG9016</TAFL><TAID>16</TAID>",
		emptyAttr: `<TAOP X=""/><TAFL X=""/><TAID X=""/>`,
		bad:       "<TAOP>YG</TAOP><TAFL>YG9016</TAFL><TAID>" + probeNoCode + "</TAID>",
	},
	"FDIV": {
		valid:     `<FDIV DDES="HKG" DDIR="TO">INCLEMENT WEATHER</FDIV>`,
		emptyAttr: `<FDIV DDES="" DDIR=""/>`,
		bad:       `<FDIV DDES="HKG" DDIR="TOO">INCLEMENT WEATHER</FDIV>`, checked: true,
	},
	"FRET": {
		valid:     `<FRET REID="G">EXIT DOOR FAULT</FRET>`,
		emptyAttr: `<FRET REID=""/>`,
		bad:       `<FRET REID="B">EXIT DOOR FAULT</FRET>`, checked: true,
	},
	"FLAB": {
		valid:     `<FLAB ARES="G">POOR VISIBILITY</FLAB>`,
		emptyAttr: `<FLAB ARES=""/>`,
		bad:       `<FLAB ARES="A">POOR VISIBILITY</FLAB>`, checked: true,
	},
	"DELY": {
		valid:     `<DELY CODE="YY" STRT="15DEC031605" DURA="0200">YYYYYYY</DELY>`,
		emptyAttr: `<DELY CODE="" STRT="" DURA=""/>`,
		bad:       `<DELY CODE="YY" STRT="15DEC031605" DURA="0260">YYYYYYY</DELY>`, checked: true,
	},
	// FDEL has no payload to set: the processor deletes the flight when
	// CheckFDEL accepts the record.
	"FDEL": {
		emptyAttr: `<FDEL X=""/>`,
		bad:       "<FDEL>Y</FDEL>", checked: true,
	},
}

// formsFor returns the probe inputs of styp, from the family rules where
// the subtype belongs to one; ok is false for a subtype without forms.
func formsFor(styp string) (outcomeForms, bool) {
	switch {
	case timeSubtypes[styp]:
		return outcomeForms{
			valid:     "<" + styp + ">" + probeTime + "</" + styp + ">",
			emptyAttr: "<" + styp + ` X=""/>`,
			bad:       "<" + styp + ">" + probeBadTime + "</" + styp + ">",
			checked:   true,
		}, true
	case codeSubtypes[styp]:
		f, ok := codeForms[styp]
		f.emptyAttr = "<" + styp + ` X=""/>`
		return f, ok
	case provisionalSubtypes[styp]:
		// No format is known for them (R-L7): any text is stored as sent.
		return outcomeForms{
			valid:     "<" + styp + ">V1</" + styp + ">",
			emptyAttr: "<" + styp + ` X=""/>`,
			bad:       "<" + styp + ">" + probeNoCode + "</" + styp + ">",
		}, true
	}
	if r, isList := listRules[styp]; isList {
		f, ok := listForms[styp]
		attr := r.seq
		if attr == "" {
			attr = "X"
		}
		f.emptyAttr = "<" + styp + " " + attr + `=""/>`
		return f, ok
	}
	f, ok := otherForms[styp]
	return f, ok
}

// ruleSubtypes are the subtypes the flight rule tables name; each must be
// on the FLOP whitelist, or its rule could never run.
func ruleSubtypes() []string {
	var out []string
	out = slices.AppendSeq(out, maps.Keys(timeSubtypes))
	out = slices.AppendSeq(out, maps.Keys(codeSubtypes))
	out = slices.AppendSeq(out, maps.Keys(provisionalSubtypes))
	out = slices.AppendSeq(out, maps.Keys(independentSubtypes))
	out = slices.AppendSeq(out, maps.Keys(replaceLists))
	out = slices.AppendSeq(out, maps.Keys(listRules))
	slices.Sort(out)
	return slices.Compact(out)
}

// outcomeBase is the flight a subtype's forms are applied to: a minimal
// flight on which the subtype's valid payload is set, with its derived
// keys, as the processor's writer compares it.
func outcomeBase(t *testing.T, styp string, f outcomeForms) Doc {
	t.Helper()
	d := Doc{
		"FLID": "15", "ALCD": "YG", "FLNO": "YG9015", "MVIN": "A", "SODT": "23JAN210535",
		"FLTY": "W", "FLIN": "D", "ACFT": "733",
	}
	got, err := ApplyFLOP(d, styp, outcomeRecord(t, styp, f.valid))
	require.NoError(t, err, "%s: the valid form %s must apply", styp, f.valid)
	return Derive(got, 15, nil)
}

// outcomeRecord is a FLOP record of flight 15 without FFID, so that only
// the payload can change the flight.
func outcomeRecord(t *testing.T, styp, payload string) *sis.Node {
	t.Helper()
	m := decodeBody(t, "FLOP", styp, "<FLOP><FLID>15</FLID>"+payload+"</FLOP>")
	return m.Root.Child("FLOP")
}

// bareForm is every payload element of the subtype present and bare.
func bareForm(styp string) string {
	names, ok := payloadNames(styp)
	if !ok {
		names = []string{styp} // FDEL
	}
	var b strings.Builder
	for _, n := range names {
		b.WriteString("<" + n + "/>")
	}
	return b.String()
}

// outcome is what the processor does with one record of a form.
type outcome struct {
	rejected bool
	text     string
}

// applyForm runs payload through the code the processor runs for styp and
// describes the result: the keys it clears or sets, the running state it
// moves, "no change" (no version, R-C3), or DEAD(PROTOCOL) with the
// reason (nothing written).
func applyForm(t *testing.T, styp string, base Doc, payload string) outcome {
	t.Helper()
	rec := outcomeRecord(t, styp, payload)
	var err error
	var next Doc
	if styp == "FDEL" {
		err = CheckFDEL(rec)
	} else {
		before := base.Clone()
		next, err = ApplyFLOP(base, styp, rec)
		require.True(t, Equal(before, base), "%s %s: ApplyFLOP modified its input", styp, payload)
	}
	if err != nil {
		var rej *RejectError
		require.True(t, errors.As(err, &rej), "%s %s: want a RejectError (DEAD(PROTOCOL)), got %v", styp, payload, err)
		require.Nil(t, next, "%s %s: a rejected record returns no document", styp, payload)
		require.False(t, strings.ContainsAny(rej.Reason, "`|\n"), "%s: the reason %q cannot stand in a table cell", styp, rej.Reason)
		return outcome{rejected: true, text: "DEAD(PROTOCOL) `" + rej.Reason + "`"}
	}
	if styp == "FDEL" {
		return outcome{text: "deletes the flight"}
	}
	return outcome{text: describeChange(base, Derive(next, 15, nil))}
}

// describeChange lists the top-level keys that differ between two derived
// flight documents.
func describeChange(before, after Doc) string {
	if Equal(before, after) {
		return "no change"
	}
	keys := slices.Sorted(maps.Keys(before))
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	var run string
	for _, k := range keys {
		b, inB := before[k]
		a, inA := after[k]
		switch {
		case k == KeyRunState:
			if b != a {
				run = fmt.Sprintf("RUNSTATE %v → %v", b, a)
			}
		case inB && !inA:
			parts = append(parts, "clears "+k)
		case !inB && inA:
			parts = append(parts, "sets "+k)
		case !Equal(Doc{k: b}, Doc{k: a}):
			parts = append(parts, "sets "+k)
		}
	}
	if len(parts) == 0 {
		return run
	}
	out := joinChanges(parts)
	if run != "" {
		out += "; " + run
	}
	return out
}

// joinChanges joins "clears A", "clears B", "sets C" as "clears A, B; sets C".
func joinChanges(parts []string) string {
	var verbs []string
	byVerb := map[string][]string{}
	for _, p := range parts {
		verb, key, _ := strings.Cut(p, " ")
		if byVerb[verb] == nil {
			verbs = append(verbs, verb)
		}
		byVerb[verb] = append(byVerb[verb], key)
	}
	var out []string
	for _, v := range verbs {
		out = append(out, v+" "+strings.Join(byVerb[v], ", "))
	}
	return strings.Join(out, "; ")
}

// outcomeRow is one subtype's row: the outcome of each input form.
type outcomeRow struct {
	styp                     string
	absent, bare, empty, bad outcome
	bareIn, emptyIn, badIn   string
	badChecked               bool
}

// outcomeRows computes the table from the code: one row per whitelisted
// FLOP subtype (sis.FLOPSubtypes, FDEL included).
func outcomeRows(t *testing.T) []outcomeRow {
	t.Helper()
	whitelist := sis.FLOPSubtypes()
	for _, s := range ruleSubtypes() {
		require.Contains(t, whitelist, s, "flight has a FLOP rule for %s but the sis whitelist does not route it", s)
	}
	var rows []outcomeRow
	for _, styp := range whitelist {
		if _, ok := payloadNames(styp); !ok && styp != "FDEL" {
			t.Fatalf("FLOP subtype %s is whitelisted but ApplyFLOP has no rule for it", styp)
		}
		f, ok := formsFor(styp)
		require.True(t, ok, "FLOP subtype %s has no input forms in flop_outcomes_test.go: add them, then run "+
			"go test ./services/internal/flight -run TestFlopOutcomeTable -update", styp)
		var base Doc
		if styp != "FDEL" {
			base = outcomeBase(t, styp, f)
		}
		rows = append(rows, outcomeRow{
			styp:       styp,
			absent:     applyForm(t, styp, base, ""),
			bare:       applyForm(t, styp, base, bareForm(styp)),
			empty:      applyForm(t, styp, base, f.emptyAttr),
			bad:        applyForm(t, styp, base, f.bad),
			bareIn:     bareForm(styp),
			emptyIn:    f.emptyAttr,
			badIn:      f.bad,
			badChecked: f.checked,
		})
	}
	return rows
}

// renderOutcomeTable writes the rows as the Markdown table of the doc.
func renderOutcomeTable(rows []outcomeRow) string {
	var b strings.Builder
	b.WriteString("| STYP | absent | bare | empty attributes | bad value |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range rows {
		bad := r.bad.text
		if !r.bad.rejected {
			bad = "accepted: " + bad
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` %s | `%s` %s | `%s` %s |\n", r.styp,
			r.absent.text, r.bareIn, r.bare.text, r.emptyIn, r.empty.text, r.badIn, bad)
	}
	return b.String()
}

// TestFlopOutcomeTable_R_C3_R_C4_R_C5 computes, for every FLOP subtype the
// gateway routes, what the processor does with the four input forms —
// absent, bare, empty attributes, bad value — and checks the table in
// docs/message-types.md against it (run with -update to rewrite it).
// Beside the golden comparison it holds the rules that do not depend on
// the subtype: an absent element changes nothing (R-C4) — only a
// replace-only list, which has no other way to be sent, rejects it — and a
// value outside a format or code domain the catalogue gives is rejected
// with nothing written.
func TestFlopOutcomeTable_R_C3_R_C4_R_C5(t *testing.T) {
	rows := outcomeRows(t)
	for _, r := range rows {
		switch {
		case r.styp == "FDEL":
		case replaceLists[r.styp]:
			require.True(t, r.absent.rejected, "%s: an absent replace-only list is rejected (catalogue §5.5)", r.styp)
		default:
			require.Equal(t, "no change", r.absent.text, "%s: an absent element changes nothing (R-C4)", r.styp)
		}
		if r.badChecked {
			require.True(t, r.bad.rejected, "%s: %s is outside the catalogue's domain and must be DEAD(PROTOCOL)", r.styp, r.badIn)
		}
	}
	table := renderOutcomeTable(rows)

	raw, err := os.ReadFile(outcomeDoc)
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, outcomeBegin)
	end := strings.Index(doc, outcomeEnd)
	require.True(t, start >= 0 && end > start, "%s: the markers %q and %q are missing", outcomeDoc, outcomeBegin, outcomeEnd)
	start += len(outcomeBegin) + 1
	if *updateDocs {
		doc = doc[:start] + table + doc[end:]
		require.NoError(t, os.WriteFile(filepath.Clean(outcomeDoc), []byte(doc), 0o644))
		return
	}
	if diff := lineDiff(doc[start:end], table); diff != "" {
		t.Fatalf("the FLOP outcome table in docs/message-types.md differs from what the code does "+
			"(- doc, + code):\n%s\nrun go test ./services/internal/flight -run TestFlopOutcomeTable -update, "+
			"then check the prose around the table agrees", diff)
	}
}

// lineDiff lists the lines of want missing from got ("- ") and the lines
// of got missing from want ("+ "); "" when both hold the same lines in
// the same order.
func lineDiff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			b.WriteString("+ " + l + "\n")
		}
	}
	if b.Len() == 0 {
		return "(the same rows in another order)"
	}
	return b.String()
}
