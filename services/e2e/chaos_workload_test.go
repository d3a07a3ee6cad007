package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
)

// The chaos workload: a stream of SIS messages of every kind the pipeline
// handles, generated from a seed. Its expected outcome is not predicted by
// the test: the same stream runs once without faults (the reference run)
// and the chaos run must end exactly as that one did.

// chaosFlights is the number of flights of the opening snapshot (with the
// chaos run's snapshot batch of 8, five batches); chaosFirstFLID the first
// of their FLIDs. Every tenth flight is a code-share master and the two
// after it are its children. FLOPs for FLIDs from chaosMissingFLID on target
// flights that never exist. chaosAdhocFLID and on are created by ADFT, and
// chaosRespFLID and on by the SCHD RESP that answers the run's RQFD.
const (
	chaosFlights     = 40
	chaosFirstFLID   = 7001
	chaosAdhocFLID   = 7101
	chaosRespFLID    = 7201
	chaosRespFlights = 8
	chaosMissingFLID = 9001
	chaosFirstSEQN   = 500000
	chaosDay         = "15MAR26"
	chaosRespDay     = "16MAR26"
	chaosRespWindow  = "20260316"
)

// Workload actions, done by the feeder just before it inserts the message
// that carries them.
const (
	actionReplay = "replay" // replay message ReplayOf through the control plane, once it is DEAD
	actionRQFD   = "rqfd"   // send an RQFD through the control plane, insert this RESP once it is in COUTMSGS
)

// chaosMsg is one mailbox row of the workload.
type chaosMsg struct {
	Body     string
	Kind     string // what the message is, for the log: snapshot, change, fdel, ref, adft, resp, …
	Action   string // "" or actionReplay or actionRQFD
	ReplayOf int    // for actionReplay: the index of the message to replay
}

// chaosWorkload is the generated stream.
type chaosWorkload struct {
	Msgs []chaosMsg
}

func chaosMeta(seqn int, typ, styp string) string {
	return fmt.Sprintf("<META><SNDR>AODB</SNDR><SEQN>%d</SEQN><DTTM>20260315080000</DTTM><TYPE>%s</TYPE><STYP>%s</STYP></META>", seqn, typ, styp)
}

func chaosEnvelope(seqn int, typ, styp, body string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>` + "\n<MSG>" + chaosMeta(seqn, typ, styp) + body + "</MSG>"
}

func chaosFLOP(seqn int, styp string, flid int64, inner string) string {
	return chaosEnvelope(seqn, "FLOP", styp, fmt.Sprintf("<FLOP><FLID>%d</FLID>%s</FLOP>", flid, inner))
}

func chaosElement(name, value string) string {
	if value == "" {
		return "<" + name + "></" + name + ">"
	}
	return "<" + name + ">" + value + "</" + name + ">"
}

var (
	chaosRemarks = []string{"Bag loading Delay", "Crew change", "Late inbound", "Catering", "Fuel check", "ATC slot", "Weather hold", "Gate swap"}
	chaosCodes   = []string{"STND", "RENO", "REMC", "TRML"}
)

func chaosValue(rng *rand.Rand, code string) string {
	switch code {
	case "STND":
		return fmt.Sprintf("S%d", 100+rng.IntN(30))
	case "RENO":
		return fmt.Sprintf("B%04d", 1000+rng.IntN(25))
	case "TRML":
		return fmt.Sprintf("T%d", 1+rng.IntN(3))
	default:
		return chaosRemarks[rng.IntN(len(chaosRemarks))]
	}
}

// chaosFLTR is a daily flight record of flight number i on day; a child
// carries its master's operator, flight number and FLID (CSOP, CSFT, MAID).
func chaosFLTR(rng *rand.Rand, flid int64, day string, i int, master int64) string {
	mvin := "A"
	if i%2 == 1 {
		mvin = "D"
	}
	var b strings.Builder
	alcd, flno := "MU", fmt.Sprintf("MU%d", 5100+i)
	if master != 0 {
		alcd, flno = "FM", fmt.Sprintf("FM%d", 9100+i)
	}
	fmt.Fprintf(&b, "<FLTR><FLID>%d</FLID><ALCD>%s</ALCD><FLNO>%s</FLNO><MVIN>%s</MVIN><SODT>%s%02d%02d</SODT>",
		flid, alcd, flno, mvin, day, 6+(i%60)/4, (i%4)*15)
	b.WriteString("<FLTY>W</FLTY><FLIN>D</FLIN><ACFT>320</ACFT>")
	for _, code := range []string{"STND", "RENO", "TRML"} {
		b.WriteString(chaosElement(code, chaosValue(rng, code)))
	}
	if master != 0 {
		fmt.Fprintf(&b, "<CSOP>MU</CSOP><CSFT>MU%d</CSFT><MAID>%d</MAID>", 5100+int(master-chaosFirstFLID), master)
	}
	b.WriteString("</FLTR>")
	return b.String()
}

// chaosMaster is the master of snapshot flight i, or 0: flights 10k are
// masters, 10k+1 and 10k+2 their children.
func chaosMaster(i int) int64 {
	if r := i % 10; r == 1 || r == 2 {
		return int64(chaosFirstFLID + i - r)
	}
	return 0
}

func chaosSCHD(seqn int, styp, echo string, fltrs []string) string {
	return chaosEnvelope(seqn, "SCHD", styp, fmt.Sprintf("<SCHD>%s<RECS>%d</RECS>%s</SCHD>", echo, len(fltrs), strings.Join(fltrs, "")))
}

// buildChaosWorkload generates n mailbox messages from rng: an SCHD DNLD
// snapshot of chaosFlights flights with code-share masters and children,
// then a stream of FLOPs (changes, repeats of the current value, clears,
// deletions, a master's deletion that takes its children along, rejected
// and malformed ones, FLOPs for missing flights, repeats of whole
// messages), reference data (GLST ADD, UPD, DEL), ADFTs (a new ad-hoc
// flight, a merge, a new code-share child), an unsupported message that
// goes DEAD and is replayed through the control plane, and an SCHD RESP
// answering an RQFD sent through the control plane.
func buildChaosWorkload(rng *rand.Rand, n int) *chaosWorkload {
	w := &chaosWorkload{}
	seqn := func(i int) int { return chaosFirstSEQN + i }

	var fltrs []string
	for i := 0; i < chaosFlights; i++ {
		fltrs = append(fltrs, chaosFLTR(rng, int64(chaosFirstFLID+i), chaosDay, i, chaosMaster(i)))
	}
	w.Msgs = append(w.Msgs, chaosMsg{Kind: "snapshot", Body: chaosSCHD(seqn(0), "DNLD", "", fltrs)})

	// Messages at fixed shares of the stream.
	fixed := map[int]chaosMsg{}
	at := func(share float64) int { return max(1, int(share*float64(n))) }
	unsupported := at(0.30)
	fixed[at(0.20)] = chaosMsg{Kind: "adft-new", Body: chaosSCHD(seqn(at(0.20)), "ADFT", "",
		[]string{chaosFLTR(rng, chaosAdhocFLID, chaosDay, 50, 0)})}
	fixed[unsupported] = chaosMsg{Kind: "unsupported", Body: chaosEnvelope(seqn(unsupported), "ZZZZ", "ADD", "<ZZZZ>1</ZZZZ>")}
	fixed[at(0.45)] = chaosMsg{Kind: "adft-merge", Body: chaosSCHD(seqn(at(0.45)), "ADFT", "",
		[]string{chaosFLTR(rng, chaosFirstFLID+5, chaosDay, 5, 0)})}
	var resp []string
	for i := 0; i < chaosRespFlights; i++ {
		resp = append(resp, chaosFLTR(rng, int64(chaosRespFLID+i), chaosRespDay, i, 0))
	}
	echo := "<STDB>" + chaosRespWindow + "</STDB><STDE>" + chaosRespWindow + "</STDE>"
	respAt := at(0.60)
	fixed[respAt] = chaosMsg{Kind: "resp", Action: actionRQFD, Body: chaosSCHD(seqn(respAt), "RESP", echo, resp)}
	fixed[at(0.70)] = chaosMsg{Kind: "adft-child", Body: chaosSCHD(seqn(at(0.70)), "ADFT", "",
		[]string{chaosFLTR(rng, chaosAdhocFLID+1, chaosDay, 21, chaosFirstFLID+20)})}
	fixed[at(0.85)] = chaosMsg{Kind: "fdel-master", Body: chaosFLOP(seqn(at(0.85)), "FDEL", chaosFirstFLID+10, "<FDEL></FDEL>")}

	flids := func(i int) []int64 {
		out := make([]int64, 0, chaosFlights+chaosRespFlights+2)
		for f := 0; f < chaosFlights; f++ {
			out = append(out, int64(chaosFirstFLID+f))
		}
		if i > at(0.20) {
			out = append(out, chaosAdhocFLID)
		}
		if i > respAt {
			for f := 0; f < chaosRespFlights; f++ {
				out = append(out, int64(chaosRespFLID+f))
			}
		}
		return out
	}
	// current holds the value each FLOP last sent per flight and code, so
	// that some FLOPs repeat it (no change, no version).
	current := map[string]string{}
	var resendable []int
	replayAt := at(0.50)
	for i := 1; i < n; i++ {
		if m, ok := fixed[i]; ok {
			w.Msgs = append(w.Msgs, m)
			continue
		}
		frac := float64(i) / float64(n)
		r := rng.Float64()
		var m chaosMsg
		targets := flids(i)
		switch {
		case r < 0.03:
			m.Kind = "malformed"
			switch rng.IntN(3) {
			case 0: // not well-formed: cut off
				m.Body = chaosFLOP(seqn(i), "STND", chaosFirstFLID, "<STND>S1</STND>")
				m.Body = m.Body[:len(m.Body)-len("</FLOP></MSG>")]
			case 1: // SEQN not decimal
				m.Body = strings.Replace(chaosFLOP(seqn(i), "STND", chaosFirstFLID, "<STND>S1</STND>"),
					fmt.Sprintf("<SEQN>%d</SEQN>", seqn(i)), fmt.Sprintf("<SEQN>X%d</SEQN>", seqn(i)), 1)
			default: // no META
				m.Body = fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n<MSG><FLOP><FLID>%d</FLID><STND>S1</STND></FLOP></MSG>", chaosFirstFLID)
			}
		case r < 0.05:
			// A required code cannot be cleared: the domain rejects it.
			m.Kind = "reject"
			m.Body = chaosFLOP(seqn(i), "ACFT", targets[rng.IntN(len(targets))], "<ACFT></ACFT>")
			resendable = append(resendable, i)
		case r < 0.08:
			code := chaosCodes[rng.IntN(len(chaosCodes))]
			m.Kind = "missing"
			m.Body = chaosFLOP(seqn(i), code, int64(chaosMissingFLID+rng.IntN(50)), chaosElement(code, chaosValue(rng, code)))
			resendable = append(resendable, i)
		case r < 0.10 && len(resendable) > 0:
			// The same message again (same SNDR|TYPE|STYP|SEQN): R-B4.
			m.Kind = "resend"
			m.Body = w.Msgs[resendable[rng.IntN(len(resendable))]].Body
		case r < 0.14:
			gcod := fmt.Sprintf("G%02d", 1+rng.IntN(8))
			styp := []string{"ADD", "ADD", "UPD", "DEL"}[rng.IntN(4)]
			m.Kind = "ref"
			m.Body = chaosEnvelope(seqn(i), "GLST", styp, fmt.Sprintf("<RECS>1</RECS><GLST><GCOD>%s</GCOD><GTNM>Gate %s %s</GTNM><GNMC></GNMC><GCAT>D</GCAT><GTML>%s</GTML><PIER>P%d</PIER></GLST>",
				gcod, gcod, chaosRemarks[rng.IntN(len(chaosRemarks))], chaosValue(rng, "TRML"), 1+rng.IntN(4)))
		case r < 0.16 && frac > 0.75:
			m.Kind = "fdel"
			m.Body = chaosFLOP(seqn(i), "FDEL", targets[rng.IntN(len(targets))], "<FDEL></FDEL>")
		default:
			flid := targets[rng.IntN(len(targets))]
			code := chaosCodes[rng.IntN(len(chaosCodes))]
			key := fmt.Sprintf("%d/%s", flid, code)
			var value string
			switch q := rng.Float64(); {
			case q < 0.2 && current[key] != "":
				value = current[key] // the same value again: no change
				m.Kind = "same"
			case q < 0.3 && code == "REMC":
				value = "" // present but empty: clears
				m.Kind = "clear"
			default:
				value = chaosValue(rng, code)
				m.Kind = "change"
			}
			current[key] = value
			m.Body = chaosFLOP(seqn(i), code, flid, chaosElement(code, value))
			resendable = append(resendable, i)
		}
		if i == replayAt {
			m.Action, m.ReplayOf = actionReplay, unsupported
		}
		w.Msgs = append(w.Msgs, m)
	}
	return w
}

// kinds counts the messages of each kind, for the log.
func (w *chaosWorkload) kinds() string {
	c := map[string]int{}
	for _, m := range w.Msgs {
		c[m.Kind]++
		if m.Action != "" {
			c["action:"+m.Action]++
		}
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

// buildChaosSchedule draws k faults for a stream of n messages: every kind
// at least once when k allows, the rest drawn at random, in a random order.
// Fault j strikes once (j+1)·n/(k+1) mailbox rows are marked, give or take
// a third of the gap, so faults are spread evenly over the whole stream
// and never bunch; the last strikes before the stream ends. The schedule
// depends on the seed, n, k and the kinds only: the same seed replays it.
func buildChaosSchedule(rng *rand.Rand, n, k int, faultKinds []string) []chaosFault {
	kinds := make([]string, 0, k)
	for len(kinds)+len(faultKinds) <= k {
		kinds = append(kinds, faultKinds...)
	}
	for len(kinds) < k {
		kinds = append(kinds, faultKinds[rng.IntN(len(faultKinds))])
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	gap := float64(n) / float64(k+1)
	out := make([]chaosFault, k)
	for j := range out {
		at := gap*float64(j+1) + (rng.Float64()*2-1)*gap/3
		out[j] = chaosFault{Kind: kinds[j], At: min(max(1, int(at)), n-1)}
	}
	return out
}
