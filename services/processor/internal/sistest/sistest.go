// Package sistest builds SIS messages in the documented layouts
// (sis-catalogue §1, §3, §5, §6) for the processor's tests: the domain
// rules' tests in decide and the pipeline's tests write the same messages
// with the same builders, read the same samples and hold reference-data
// documents to the same catalogue shapes (refshape.go).
package sistest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"msgexchange/services/internal/sisrequest"
)

// Operation days of the FLTR records, in Asia/Shanghai.
const (
	Day23 = "23JAN210535" // operation day 2021-01-23
	Day24 = "24JAN211200" // operation day 2021-01-24
)

// Zone is the airport zone of the tests (operation-day.zone).
var Zone = func() *time.Location {
	zone, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		panic(err)
	}
	return zone
}()

// T0 is when the tests' clocks start: 2021-01-23 08:00:00 airport time.
var T0 = time.Date(2021, 1, 23, 0, 0, 0, 0, time.UTC)

// DTTM is the META/DTTM of T0+d: airport time, to the second.
func DTTM(d time.Duration) string {
	return T0.Add(d).In(Zone).Format(sisrequest.DTTMLayout)
}

// Envelope wraps a body in MSG/META with SNDR AODB.
func Envelope(seqn int64, typ, styp, body string) string {
	return EnvelopeAt(seqn, typ, styp, "20210123053000", body)
}

// EnvelopeAt is Envelope with a chosen DTTM: a response is placed after
// the requests sent by its DTTM (C-23).
func EnvelopeAt(seqn int64, typ, styp, dttm, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<MSG xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="unisysaodbsis.xsd">` +
		fmt.Sprintf("<META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>%s</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>", seqn, dttm, typ, styp) +
		body + "</MSG>"
}

// FLTR is a daily flight record with every required element plus extra;
// its FLNO is YG(9000+flid).
func FLTR(flid int64, sodt string, extra ...string) string {
	return fmt.Sprintf("<FLTR><FLID>%d</FLID><ALCD>YG</ALCD><FLNO>YG%d</FLNO><MVIN>A</MVIN><SODT>%s</SODT>"+
		"<FLTY>W</FLTY><FLIN>D</FLIN><ACFT>733</ACFT>%s</FLTR>", flid, 9000+flid, sodt, strings.Join(extra, ""))
}

// FLTRs returns records of day Day23 for flights from..to, each with
// extra.
func FLTRs(from, to int64, extra ...string) []string {
	var out []string
	for f := from; f <= to; f++ {
		out = append(out, FLTR(f, Day23, extra...))
	}
	return out
}

// Window23 is an SCHD RESP's echo of the RQFD window of 23JAN21 alone.
const Window23 = "<STDB>23JAN21</STDB><STDE>23JAN21</STDE>"

// SCHD is an SCHD message whose RECS matches its records.
func SCHD(seqn int64, styp string, fltrs ...string) string {
	return SCHDRecs(seqn, styp, strconv.Itoa(len(fltrs)), fltrs...)
}

// SCHDRecs is an SCHD message with a chosen RECS value.
func SCHDRecs(seqn int64, styp, recs string, fltrs ...string) string {
	return Envelope(seqn, "SCHD", styp, "<SCHD><RECS>"+recs+"</RECS>"+strings.Join(fltrs, "")+"</SCHD>")
}

// SCHDResp is an SCHD RESP of DTTM dttm; echo (optional) is inserted into
// the SCHD wrapper, e.g. "<STDB>a</STDB><STDE>b</STDE>".
func SCHDResp(seqn int64, dttm, echo string, fltrs ...string) string {
	return EnvelopeAt(seqn, "SCHD", "RESP", dttm,
		"<SCHD>"+echo+"<RECS>"+strconv.Itoa(len(fltrs))+"</RECS>"+strings.Join(fltrs, "")+"</SCHD>")
}

// FLOPMsg is a FLOP message with the given records.
func FLOPMsg(seqn int64, styp string, recs ...string) string {
	return Envelope(seqn, "FLOP", styp, strings.Join(recs, ""))
}

// FLOPRec is one FLOP record of flid with payload.
func FLOPRec(flid int64, payload string) string {
	return fmt.Sprintf("<FLOP><FLID>%d</FLID><FFID>YG-YG%d-A-23JAN210535-D</FFID>%s</FLOP>", flid, 9000+flid, payload)
}

// RefMsg is a reference-data message: RECS and the records under MSG.
func RefMsg(seqn int64, typ, styp string, recs ...string) string {
	return Envelope(seqn, typ, styp, fmt.Sprintf("<RECS>%d</RECS>", len(recs))+strings.Join(recs, ""))
}

// RefResp is a reference RESP of type typ and DTTM dttm with the given
// records.
func RefResp(seqn int64, typ, dttm string, recs ...string) string {
	return EnvelopeAt(seqn, typ, "RESP", dttm, fmt.Sprintf("<RECS>%d</RECS>", len(recs))+strings.Join(recs, ""))
}

// GLST is one gate record (key GCOD).
func GLST(code, name string) string {
	return "<GLST><GCOD>" + code + "</GCOD><GTNM>" + name + "</GTNM><GNMC></GNMC><GCAT>D</GCAT><GTML>T1</GTML><PIER>P1</PIER></GLST>"
}

// GLSTDoc is the stored document of GLST(code, name).
func GLSTDoc(code, name string) map[string]any {
	return map[string]any{"GCOD": code, "GTNM": name, "GNMC": nil, "GCAT": "D", "GTML": "T1", "PIER": "P1"}
}

// SeasonPattern is one seasonal FLTR of flno starting stdt.
func SeasonPattern(flno, stdt string) string {
	return "<FLTR><ALCD>" + flno[:2] + "</ALCD><FLNO>" + flno + "</FLNO><MVIN>D</MVIN><STDT>" + stdt + "</STDT><EDDT>14MAR21</EDDT>" +
		"<DYOP>1234567</DYOP><SCHT>1023</SCHT><FLTY>P</FLTY><FLIN>I</FLIN><ACFT>747</ACFT>" +
		`<ROUT RTNO="1"><APCD>HKG</APCD><SCAT>1125</SCAT></ROUT></FLTR>`
}

// SCHS is a season schedule message for the window name/CTU/10SEP20-10JUN21.
func SCHS(seqn int64, styp, name string, patterns ...string) string {
	return Envelope(seqn, "SCHS", styp, "<SCHS><SNAM>"+name+"</SNAM><APCD>CTU</APCD><SDAT>10SEP20</SDAT><EDAT>10JUN21</EDAT>"+
		"<RECS>"+strconv.Itoa(len(patterns))+"</RECS>"+strings.Join(patterns, "")+"</SCHS>")
}
