package sis

import "slices"

// The message catalogue (the SIS catalogue document, §3–§8) reduced to what
// routing needs: which TYPEs exist and which STYPs each of them has.

// referenceTypes are the 23 reference data types (catalogue §6); each is
// also a valid RQRD subtype (catalogue §8).
var referenceTypes = []string{
	"ABDG", "ABNR", "AIRC", "AIRL", "ARPT", "BLST", "CHLT", "CITY", "CLST",
	"COUL", "DLYL", "FLTL", "GLST", "HLTR", "ORGN", "PLST", "REGL", "REGN",
	"SLST", "STTS", "TLST", "VIPL", "VIPS",
}

// referenceSubtypes apply to every reference type. Catalogue §6 states the
// five operations as common rules for all types, and an RQRD request may ask
// for any type, so a RESP can come for each; the per-type lists in §6 and §7
// only say which pairs have samples.
var referenceSubtypes = []string{"DNLD", "RESP", "ADD", "UPD", "DEL"}

// flopSubtypes is the FLOP whitelist (catalogue §5 and §7), FDEL included.
var flopSubtypes = []string{
	"ABTM", "ACFT", "APPT", "BOTM", "CHDT", "CHOT", "CKDT", "CLDT", "CNCL", "COBT",
	"CTOT", "DELY", "EGSR", "EGST", "EOBT", "ERUT", "EXSS", "FDEL", "FDIV", "FINT",
	"FLAB", "FLIN", "FLTY", "FRET", "FTSS", "GTDT", "HNAG", "IEST", "LACL", "MAXP",
	"NAAT", "NEAT", "PADT", "PEDT", "PORT", "PSDT", "PSHT", "REMC", "RENO", "RUNW",
	"SRVT", "STND", "TAOP", "TIPT", "TOBT", "TRML", "VIPF", "VIPP",
}

// snapshotSubtypes are the SCHS subtypes (catalogue §4) and the SCHD
// snapshot subtypes (catalogue §3).
var snapshotSubtypes = []string{"DNLD", "RESP"}

// schdSubtypes are the SCHD subtypes: the snapshots DNLD and RESP; ADFT,
// the ad-hoc flight (R-C9), which creates or merges single flights; and
// ADD, UPD and DEL (catalogue §3), which upsert flights without deleting
// others or delete flights by FLID.
var schdSubtypes = []string{"DNLD", "RESP", "ADFT", "ADD", "UPD", "DEL"}

// Message TYPEs with their own layout.
const (
	typeSCHD = "SCHD"
	typeSCHS = "SCHS"
	typeFLOP = "FLOP"
	typeRQFD = "RQFD"
	typeRQRD = "RQRD"
	// rqfdSubtype is the only STYP of an RQFD request.
	rqfdSubtype = "NONE"
)

// ReferenceTypes returns the 23 reference data TYPEs of the catalogue
// (ABDG … VIPS) in alphabetical order. The slice is a fresh copy.
func ReferenceTypes() []string { return slices.Clone(referenceTypes) }

// FLOPSubtypes returns the whitelist of FLOP STYPs (FDEL included) in
// alphabetical order. The slice is a fresh copy.
func FLOPSubtypes() []string { return slices.Clone(flopSubtypes) }

// IsReferenceType reports whether typ (upper case) is one of the 23
// reference data TYPEs.
func IsReferenceType(typ string) bool { return slices.Contains(referenceTypes, typ) }
