package flight

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"msgexchange/services/internal/sis"
)

// requiredSeasonHeader are the SCHS header elements that identify a season
// window (catalogue §4).
var requiredSeasonHeader = []string{"SNAM", "APCD", "SDAT", "EDAT"}

// requiredSeasonFLTR are the elements every seasonal flight pattern must
// carry (catalogue §4, cardinality 1).
var requiredSeasonFLTR = []string{"ALCD", "FLNO", "MVIN", "STDT", "EDDT", "DYOP", "SCHT", "FLTY", "FLIN", "ACFT"}

// Season is a validated season schedule package (SCHS DNLD or RESP): the
// window it replaces and its flight patterns.
type Season struct {
	// SNAM, APCD, SDAT and EDAT identify the window, as sent (trimmed).
	SNAM, APCD, SDAT, EDAT string
	// Start and End are SDAT and EDAT as dates (midnight UTC).
	Start, End time.Time
	// Flights are the patterns in input order: each FLTR's lossless
	// document (the same mapping as a flight document, nothing
	// normalised).
	Flights []Doc
	// Anomalies lists values kept as sent that are not what the catalogue
	// describes (a pattern whose STDT is after its EDDT, an unreadable
	// STDT, EDDT, SCHT or DYOP). They are reported, not rejected: season
	// data never drives flight state.
	Anomalies []string
}

// ParseDate reads a SIS DDMMMYY date (e.g. 10SEP20) as midnight UTC.
func ParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) != 7 {
		return time.Time{}, fmt.Errorf("parsing SIS date %q: want DDMMMYY", s)
	}
	t, err := ParseDateTime(s+"0000", time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing SIS date %q: %w", s, err)
	}
	return t, nil
}

// ParseSeason validates a season schedule package (R-C9): the header
// elements SNAM, APCD, SDAT, EDAT must be present, SDAT and EDAT readable
// DDMMMYY dates with SDAT not after EDAT, RECS (when present) must match the
// number of FLTR records, and every FLTR must carry its required elements.
// Any violation rejects the whole package: it replaces a whole window, so a
// partial or truncated one must not.
func ParseSeason(schs *sis.Node) (Season, error) {
	var s Season
	if schs == nil {
		return s, reject("SCHS element missing")
	}
	for _, name := range requiredSeasonHeader {
		if schs.Child(name).Value() == "" {
			return s, reject("SCHS: required element %s missing or empty", name)
		}
	}
	s.SNAM, s.APCD = schs.Child("SNAM").Value(), schs.Child("APCD").Value()
	s.SDAT, s.EDAT = schs.Child("SDAT").Value(), schs.Child("EDAT").Value()
	var err error
	if s.Start, err = ParseDate(s.SDAT); err != nil {
		return Season{}, reject("SCHS SDAT: %v", err)
	}
	if s.End, err = ParseDate(s.EDAT); err != nil {
		return Season{}, reject("SCHS EDAT: %v", err)
	}
	if s.Start.After(s.End) {
		return Season{}, reject("SCHS: season start SDAT %s is after its end EDAT %s", s.SDAT, s.EDAT)
	}
	fltrs := schs.ChildrenNamed("FLTR")
	if recs := schs.Child("RECS"); recs != nil && recs.Value() != "" {
		n, err := strconv.Atoi(recs.Value())
		if err != nil || n != len(fltrs) {
			return Season{}, reject("SCHS declares RECS %q but carries %d FLTR records", recs.Value(), len(fltrs))
		}
	}
	for i, f := range fltrs {
		doc := Doc{}
		addChildren(doc, f.Children)
		for _, name := range requiredSeasonFLTR {
			if v, ok := doc[name].(string); !ok || strings.TrimSpace(v) == "" {
				return Season{}, reject("SCHS FLTR %d (%s): required element %s missing or empty", i+1, doc.String("FLNO"), name)
			}
		}
		s.Anomalies = append(s.Anomalies, seasonAnomalies(i+1, doc)...)
		s.Flights = append(s.Flights, doc)
	}
	return s, nil
}

// seasonAnomalies lists the values of one pattern that are kept as sent
// although they are not what the catalogue describes.
func seasonAnomalies(i int, doc Doc) []string {
	var out []string
	label := fmt.Sprintf("FLTR %d (%s)", i, doc.String("FLNO"))
	stdt, errS := ParseDate(doc.String("STDT"))
	eddt, errE := ParseDate(doc.String("EDDT"))
	switch {
	case errS != nil:
		out = append(out, label+": STDT "+doc.String("STDT")+" is not DDMMMYY")
	case errE != nil:
		out = append(out, label+": EDDT "+doc.String("EDDT")+" is not DDMMMYY")
	case stdt.After(eddt):
		out = append(out, label+": STDT "+doc.String("STDT")+" is after EDDT "+doc.String("EDDT"))
	}
	if v := doc.String("SCHT"); !isHHMM(v) {
		out = append(out, label+": SCHT "+v+" is not HHMM")
	}
	if v := doc.String("DYOP"); !isDayMask(v) {
		out = append(out, label+": DYOP "+v+" is not a 7-day mask")
	}
	return out
}

func isHHMM(s string) bool {
	if len(s) != 4 {
		return false
	}
	h, okH := twoDigits(s[:2])
	m, okM := twoDigits(s[2:])
	return okH && okM && h < 24 && m < 60
}

// isDayMask reports a 7-character mask whose position n is n or 0.
func isDayMask(s string) bool {
	if len(s) != 7 {
		return false
	}
	for i, c := range s {
		if c != '0' && c != rune('1'+i) {
			return false
		}
	}
	return true
}
