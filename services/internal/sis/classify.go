package sis

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the broad family of a message; it decides which part of the
// processor handles it.
type Kind string

const (
	// KindFlightSnapshot is a daily flight message with the SCHD layout:
	// TYPE SCHD, the snapshots DNLD and RESP, the ad-hoc flight ADFT and
	// the record operations ADD, UPD and DEL.
	KindFlightSnapshot Kind = "FLIGHT_SNAPSHOT"
	// KindSeasonSchedule is a season schedule: TYPE SCHS.
	KindSeasonSchedule Kind = "SEASON_SCHEDULE"
	// KindFlightOperation is a flight operation, flight delete (FDEL)
	// included: TYPE FLOP.
	KindFlightOperation Kind = "FLIGHT_OPERATION"
	// KindReference is reference data: the 23 TYPEs ABDG … VIPS.
	KindReference Kind = "REFERENCE"
	// KindRequest is one of our own outbound request types (RQFD, RQRD)
	// seen inbound.
	KindRequest Kind = "REQUEST"
)

// Classification says how a message is routed and how it is identified.
type Classification struct {
	// Kind is the family of the message.
	Kind Kind `json:"kind"`
	// Handler is the routing key, built as the AODB peer routes:
	// "FLOP_<STYP>" for FLOP, "SCHD_<STYP>", "SCHS_<STYP>", "REF_<TYPE>"
	// for reference data (the handler branches on STYP) and "REQ_<TYPE>"
	// for requests.
	Handler string `json:"handler"`
	// IdentityKey is SNDR|TYPE|STYP|SEQN, plus "|yyyyMMdd" of DTTM when
	// IdentityOptions.IncludeDayBoundary is set (R-B4).
	IdentityKey string `json:"identity_key"`
}

// IdentityOptions tunes the identity key. The zero value is the default
// (no day boundary).
type IdentityOptions struct {
	// IncludeDayBoundary appends the DTTM day (yyyyMMdd) to the identity
	// key, so that a sender restarting its SEQN counter every day does not
	// collide with yesterday's messages. Default false.
	IncludeDayBoundary bool
}

// Classify routes a decoded message and builds its identity key. It fails
// with [ClassUnsupported] for a TYPE not in the catalogue, a FLOP STYP not on
// the whitelist, or an STYP the TYPE does not have; it fails with
// [ClassMalformed] when the payload the TYPE needs is missing (see the
// package documentation for the rules) or when the envelope is incomplete.
// Errors are always *[Error].
func Classify(m *Message, opts IdentityOptions) (Classification, error) {
	if m == nil || m.Root == nil {
		return Classification{}, malformed("no message to classify")
	}
	meta := m.Meta
	if meta.SNDR == "" || meta.SEQN == "" || meta.TYPE == "" || meta.STYP == "" {
		return Classification{}, malformed("incomplete META: SNDR, SEQN, TYPE and STYP are required")
	}
	c, err := route(meta)
	if err != nil {
		return Classification{}, err
	}
	if err := checkPayload(m, c.Kind); err != nil {
		return Classification{}, err
	}
	c.IdentityKey = strings.Join([]string{meta.SNDR, meta.TYPE, meta.STYP, meta.SEQN}, "|")
	if opts.IncludeDayBoundary {
		day, err := dttmDay(meta.DTTM)
		if err != nil {
			return Classification{}, err
		}
		c.IdentityKey += "|" + day
	}
	return c, nil
}

// route checks TYPE and STYP against the catalogue and names the handler.
func route(meta Meta) (Classification, *Error) {
	typ, styp := meta.TYPE, meta.STYP
	switch {
	case typ == typeFLOP:
		if !slices.Contains(flopSubtypes, styp) {
			return Classification{}, unsupported("FLOP subtype %q is not on the FLOP whitelist of the catalogue", truncate(styp, 40))
		}
		return Classification{Kind: KindFlightOperation, Handler: "FLOP_" + styp}, nil
	case typ == typeSCHD:
		if !slices.Contains(schdSubtypes, styp) {
			return Classification{}, unsupported("SCHD has no subtype %q", truncate(styp, 40))
		}
		return Classification{Kind: KindFlightSnapshot, Handler: "SCHD_" + styp}, nil
	case typ == typeSCHS:
		if !slices.Contains(snapshotSubtypes, styp) {
			return Classification{}, unsupported("SCHS has no subtype %q", truncate(styp, 40))
		}
		return Classification{Kind: KindSeasonSchedule, Handler: "SCHS_" + styp}, nil
	case IsReferenceType(typ):
		if !slices.Contains(referenceSubtypes, styp) {
			return Classification{}, unsupported("reference type %s has no subtype %q (expected one of %s)", typ, truncate(styp, 40), strings.Join(referenceSubtypes, ", "))
		}
		return Classification{Kind: KindReference, Handler: "REF_" + typ}, nil
	case typ == typeRQRD:
		if !IsReferenceType(styp) {
			return Classification{}, unsupported("RQRD subtype %q is not a reference type", truncate(styp, 40))
		}
		return Classification{Kind: KindRequest, Handler: "REQ_" + typ}, nil
	case typ == typeRQFD:
		if styp != rqfdSubtype {
			return Classification{}, unsupported("RQFD subtype %q is not %s", truncate(styp, 40), rqfdSubtype)
		}
		return Classification{Kind: KindRequest, Handler: "REQ_" + typ}, nil
	}
	return Classification{}, unsupported("message type %q is not in the SIS catalogue", truncate(typ, 40))
}

// checkPayload enforces the "missing payload" rules (MALFORMED):
//
//   - FLOP: at least one FLOP element under MSG with child elements. The
//     subtype element itself may be absent (the catalogue shows a TOBT
//     message without TOBT); record-level checks belong to the processor.
//   - SCHD, SCHS: exactly one wrapper element; it holds FLTR records or, for
//     an explicitly empty snapshot, RECS 0.
//   - reference ADD, UPD, DEL: at least one record element named like the
//     TYPE under MSG.
//   - reference DNLD, RESP: records, or RECS 0 for an explicitly empty
//     snapshot (a snapshot replaces the whole type, so emptiness must be
//     stated, never inferred from a truncated message).
//   - RQRD, RQFD: the element named like the TYPE.
func checkPayload(m *Message, kind Kind) *Error {
	typ, styp := m.Meta.TYPE, m.Meta.STYP
	switch kind {
	case KindFlightOperation:
		for _, f := range m.Root.ChildrenNamed(typeFLOP) {
			if len(f.Children) > 0 {
				return nil
			}
		}
		return malformed("missing payload: no FLOP record with content under MSG")
	case KindFlightSnapshot, KindSeasonSchedule:
		wrappers := m.Root.ChildrenNamed(typ)
		switch len(wrappers) {
		case 0:
			return malformed("missing payload: no %s element under MSG", typ)
		case 1:
		default:
			return malformed("%s element appears %d times under MSG; exactly one is allowed", typ, len(wrappers))
		}
		return checkSnapshotRecords(wrappers[0], "FLTR", typ+"/FLTR")
	case KindReference:
		if styp == "DNLD" || styp == "RESP" {
			return checkSnapshotRecords(m.Root, typ, typ)
		}
		if !m.Root.Has(typ) {
			return malformed("missing payload: %s/%s carries no %s record", typ, styp, typ)
		}
	case KindRequest:
		if !m.Root.Has(typ) {
			return malformed("missing payload: no %s element under MSG", typ)
		}
	}
	return nil
}

// checkSnapshotRecords accepts a snapshot with records, or without records
// when its RECS says 0.
func checkSnapshotRecords(container *Node, record, what string) *Error {
	if container.Has(record) {
		return nil
	}
	recs := container.Child("RECS")
	if recs == nil {
		return malformed("missing payload: no %s records and no RECS", what)
	}
	if n, err := strconv.ParseUint(recs.Value(), 10, 64); err != nil || n != 0 {
		return malformed("missing payload: RECS says %q but there are no %s records", truncate(recs.Value(), 20), what)
	}
	return nil
}

// dttmDay returns the yyyyMMdd day of a META/DTTM value (yyyyMMddHHmmss).
func dttmDay(dttm string) (string, *Error) {
	if len(dttm) != len("20060102150405") || !isDigits(dttm) {
		return "", malformed("META/DTTM %q is not yyyyMMddHHmmss; it is needed for the day-boundary identity", truncate(dttm, 20))
	}
	if _, err := time.Parse("20060102150405", dttm); err != nil {
		return "", &Error{Class: ClassMalformed, Reason: "META/DTTM is not a valid time; it is needed for the day-boundary identity", Err: err}
	}
	return dttm[:8], nil
}

// Records counts the records a message carries: the FLTR records of an
// SCHD or SCHS wrapper, and every other element under MSG except META and
// RECS (FLOP records, reference records, a request). The processor bounds
// it per message (pipeline.max-records, R-K4).
func Records(m *Message) int {
	if m == nil || m.Root == nil {
		return 0
	}
	n := 0
	for _, c := range m.Root.Children {
		switch c.Name {
		case "META", "RECS":
		case typeSCHD, typeSCHS:
			n += len(c.ChildrenNamed("FLTR"))
		default:
			n++
		}
	}
	return n
}
