package flight

import (
	"fmt"
	"strings"
	"time"
)

// OpDay derives operation days from scheduled times (R-C2): the scheduled
// time is read in Zone, moved back by CutoffHour hours, and its calendar date
// is the operation day — so with a cutoff of 4 a flight at 02:30 belongs to
// the previous day.
type OpDay struct {
	Zone       *time.Location
	CutoffHour int
}

var months = map[string]time.Month{
	"JAN": time.January, "FEB": time.February, "MAR": time.March, "APR": time.April,
	"MAY": time.May, "JUN": time.June, "JUL": time.July, "AUG": time.August,
	"SEP": time.September, "OCT": time.October, "NOV": time.November, "DEC": time.December,
}

// ParseDateTime reads a SIS DDMMMYYHHMM time (e.g. 23JAN210535) in loc.
// Every numeric field is exactly two ASCII digits: a sign, a blank or any
// other character inside the value is an error, not a number (Sscanf-style
// parsing would read "+5" or " 5" as 5 and let a malformed time through).
func ParseDateTime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) != 11 {
		return time.Time{}, fmt.Errorf("parsing SIS time %q: want DDMMMYYHHMM", s)
	}
	day, ok1 := twoDigits(s[0:2])
	yy, ok2 := twoDigits(s[5:7])
	hh, ok3 := twoDigits(s[7:9])
	mm, ok4 := twoDigits(s[9:11])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return time.Time{}, fmt.Errorf("parsing SIS time %q: day, year, hour and minute must be two digits each", s)
	}
	mon, ok := months[strings.ToUpper(s[2:5])]
	if !ok {
		return time.Time{}, fmt.Errorf("parsing SIS time %q: unknown month %q", s, s[2:5])
	}
	if day < 1 || day > 31 || hh > 23 || mm > 59 {
		return time.Time{}, fmt.Errorf("parsing SIS time %q: out of range", s)
	}
	t := time.Date(2000+yy, mon, day, hh, mm, 0, 0, loc)
	if t.Day() != day {
		return time.Time{}, fmt.Errorf("parsing SIS time %q: no such day", s)
	}
	return t, nil
}

// twoDigits reads exactly two ASCII digits.
func twoDigits(s string) (int, bool) {
	if len(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' {
		return 0, false
	}
	return int(s[0]-'0')*10 + int(s[1]-'0'), true
}

// CheckDuration validates a SIS HHMM duration (DELY @DURA, e.g. 0200): four
// digits, minutes 00-59; hours are not bounded by a day.
func CheckDuration(s string) error {
	if len(s) != 4 {
		return fmt.Errorf("parsing SIS duration %q: want HHMM", s)
	}
	_, okH := twoDigits(s[:2])
	m, okM := twoDigits(s[2:])
	if !okH || !okM || m > 59 {
		return fmt.Errorf("parsing SIS duration %q: want HHMM with two digits each and minutes 00-59", s)
	}
	return nil
}

// Of returns the operation day (midnight UTC of the calendar date, for
// storage in a date column) of a SODT value.
func (o OpDay) Of(sodt string) (time.Time, error) {
	t, err := ParseDateTime(sodt, o.Zone)
	if err != nil {
		return time.Time{}, err
	}
	t = t.Add(-time.Duration(o.CutoffHour) * time.Hour)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC), nil
}

// timeZoneless is used where only the format of a time is checked.
var timeZoneless = time.UTC
