// Package flight holds the flight domain rules of msgexchange as pure
// functions: how a daily flight record (SCHD/FLTR: snapshot and ad-hoc
// flight) becomes a flight document, how each FLOP subtype changes one, what
// the document derives (running state, code-share list), how the operation
// day is derived, how a season schedule package is validated, and how a
// document is compared so that state_version moves only on a real change
// (INV-13, INV-20b).
//
// A flight document (Doc) is the JSON form of the FLTR element: each
// child element becomes a key named like the element; a leaf without
// attributes is a string; any other element is an object whose attributes
// are keys prefixed with "@", whose character data is "#text", and whose
// children follow the same rules. Repeated structures (ROUT, ERUT, PSDT,
// GTDT, CKDT, CHDT, CLDT, CHOT, ABTM, DELY, SRVT, VIPF, VIPT, PORT, TIPT,
// PSHT, and any element that occurs more than once) are arrays; those with
// a sequence attribute (RTNO, PSNO, GTNO, CKNO, CHNO, CLNO, CSNO, ASNO,
// PSHN) are ordered by it, the others keep input order. Character data of
// codes, numbers and times is trimmed; free text (remarks, reasons,
// descriptions, names: see IsFreeText) is kept as sent.
//
// "No value" has one representation: the key is absent. A FLOP that
// clears an element removes its key, and a daily flight record that
// carries the element present but empty (no attributes, no text, no
// children) leaves the key out too, so the same state is the same
// document whichever message set it (INV-13: no version for a change that
// changes nothing).
//
// Three keys are never taken from input: MAFL (the code-share list of a
// master, derived from its ACTIVE children, R-C8) and RUNSTATE (the running
// state, derived from the status elements, R-C4) are recomputed whenever a
// document is written (Derive); VERBATIM keeps, as sent, input that is not
// state — an inbound MAFL or RUNSTATE element, the ROUT list when its
// normalisation (at most four entries per direction, no SCAT/SCDT) dropped
// something, the FFID of the last FLOP record (VERBATIM.FFID) and the
// elements of a FLOP record outside its subtype's payload
// (VERBATIM.FLOP.<STYP>). Nothing of the input is lost (R-C1).
package flight
