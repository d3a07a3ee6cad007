package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestShiftDays_DemoDataDatedFromToday: the sample messages, written for
// 1 Dec 2026, load as if sent for any day: every DDMMMYY[HHMM] and
// YYYYMMDDHHMMSS value moves by the same days across month and year ends,
// the time of day stays, and other values are left alone.
func TestShiftDays_DemoDataDatedFromToday(t *testing.T) {
	t.Parallel()
	in := `<DTTM>20261130220015</DTTM><SODT>01DEC260745</SODT><SDAT>01DEC26</SDAT><TEL>13900001111</TEL><FLNO>CA1234</FLNO>`
	require.Equal(t, `<DTTM>20261231220015</DTTM><SODT>01JAN270745</SODT><SDAT>01JAN27</SDAT><TEL>13900001111</TEL><FLNO>CA1234</FLNO>`, shiftDays(in, 31))
	require.Equal(t, `<DTTM>20260227220015</DTTM><SODT>28FEB260745</SODT><SDAT>28FEB26</SDAT><TEL>13900001111</TEL><FLNO>CA1234</FLNO>`, shiftDays(in, -276))
	require.Equal(t, in, shiftDays(in, 0))

	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	// 17:30 UTC on 2 Jan is already 3 Jan at the airport.
	n, err := dayShift("2026-12-01", "today", shanghai, time.Date(2027, 1, 2, 17, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, 33, n)
	n, err = dayShift("", "today", shanghai, time.Now())
	require.NoError(t, err)
	require.Zero(t, n, "no base day: no shift")
	_, err = dayShift("1.12.2026", "today", shanghai, time.Now())
	require.Error(t, err)
}
