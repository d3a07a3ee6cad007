package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The two date forms of the SIS messages: DDMMMYY with an optional HHMM
// (SODT, STOT, SCAT, ...; airport time) and YYYYMMDDHHMMSS (META/DTTM). A
// value is a whole element text, between '>' and '<'.
var (
	sisDayTime = regexp.MustCompile(`>(\d{2})(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)(\d{2})(\d{4})?<`)
	sisStamp   = regexp.MustCompile(`>(20\d{2})(\d{2})(\d{2})(\d{6})<`)
)

// shiftDays moves every date of a SIS message by days, keeping the time
// of day: the samples written for one day load as if sent for another, so
// `make run` shows a board full of today's flights on any day.
func shiftDays(body string, days int) string {
	body = sisDayTime.ReplaceAllStringFunc(body, func(m string) string {
		g := sisDayTime.FindStringSubmatch(m)
		d, err := time.Parse("02Jan06", g[1]+g[2][:1]+strings.ToLower(g[2][1:])+g[3])
		if err != nil {
			return m // not a date after all (e.g. 31FEB): left as written
		}
		return ">" + strings.ToUpper(d.AddDate(0, 0, days).Format("02Jan06")) + g[4] + "<"
	})
	return sisStamp.ReplaceAllStringFunc(body, func(m string) string {
		g := sisStamp.FindStringSubmatch(m)
		d, err := time.Parse("20060102", g[1]+g[2]+g[3])
		if err != nil {
			return m
		}
		return ">" + d.AddDate(0, 0, days).Format("20060102") + g[4] + "<"
	})
}

// dayShift is the number of days from the samples' day base to the day
// on ("today": the current day in zone), both YYYY-MM-DD; 0 when base is
// empty (no shift).
func dayShift(base, on string, zone *time.Location, now time.Time) (int, error) {
	if base == "" {
		return 0, nil
	}
	b, err := time.Parse(time.DateOnly, base)
	if err != nil {
		return 0, fmt.Errorf("-base-day %q: want YYYY-MM-DD: %w", base, err)
	}
	var o time.Time
	if on == "" || on == "today" {
		y, m, d := now.In(zone).Date()
		o = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	} else if o, err = time.Parse(time.DateOnly, on); err != nil {
		return 0, fmt.Errorf("-on-day %q: want YYYY-MM-DD or today: %w", on, err)
	}
	return int(o.Sub(b).Hours() / 24), nil
}
