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

// catalogueFLOPSubtypes are the FLOP subtypes of the catalogue (§5 and
// §7), FDEL included.
var catalogueFLOPSubtypes = []string{
	"ABTM", "ACFT", "APPT", "BOTM", "CHDT", "CHOT", "CKDT", "CLDT", "CNCL", "COBT",
	"CTOT", "DELY", "EGSR", "EGST", "EOBT", "ERUT", "EXSS", "FDEL", "FDIV", "FINT",
	"FLAB", "FLIN", "FLTY", "FRET", "FTSS", "GTDT", "HNAG", "IEST", "LACL", "MAXP",
	"NAAT", "NEAT", "PADT", "PEDT", "PORT", "PSDT", "PSHT", "REMC", "RENO", "RUNW",
	"SRVT", "STND", "TAOP", "TIPT", "TOBT", "TRML", "VIPF", "VIPP",
}

// xsdFLOPSubtypes are the FLOP subtypes only the interface's XSD names:
// the catalogue describes none of them and no sample carries one, but the
// predecessor decoded them, so a message of theirs is applied, never
// parked (R-L7, G-FLOP-UNMAPPED).
var xsdFLOPSubtypes = []string{
	"BDCL", "BDOP", "BDPB", "CKCL", "CKOP", "CKPB", "FLBG", "GTOP", "LCTM", "PXNO", "UNCL",
}

// flopSubtypes is the FLOP whitelist: the catalogue's and the XSD's
// subtypes, sorted.
var flopSubtypes = slices.Sorted(slices.Values(append(slices.Clone(catalogueFLOPSubtypes), xsdFLOPSubtypes...)))

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

// XSDFLOPSubtypes returns the FLOP STYPs only the interface's XSD names
// (BDCL … UNCL), whose content no document describes, in alphabetical
// order. The slice is a fresh copy.
func XSDFLOPSubtypes() []string { return slices.Clone(xsdFLOPSubtypes) }

// IsReferenceType reports whether typ (upper case) is one of the 23
// reference data TYPEs.
func IsReferenceType(typ string) bool { return slices.Contains(referenceTypes, typ) }
