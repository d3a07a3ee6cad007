// Package flight holds the flight domain rules of msgexchange as pure
// functions: how a daily snapshot record (SCHD/FLTR) becomes a flight
// document, how each FLOP subtype changes one, how the operation day is
// derived, and how a document is compared so that state_version moves only on
// a real change (INV-13, INV-20b).
//
// A flight document (Doc) is the lossless JSON form of the FLTR element: each
// child element becomes a key named like the element; a leaf without
// attributes is a string (empty string for an element that was present but
// empty); any other element is an object whose attributes are keys prefixed
// with "@", whose character data is "#text", and whose children follow the
// same rules. Repeated structures (ROUT, ERUT, PSDT, GTDT, CKDT, CHDT, CLDT,
// CHOT, ABTM, DELY, SRVT, VIPF, PORT, TIPT, PSHT, and any element that occurs
// more than once) are arrays in input order, so source sequence numbers
// (PSNO, RTNO, …) and order are both kept. Nothing of the input is dropped.
package flight
