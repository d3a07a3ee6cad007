// Package sisrequest encodes the two requests this gateway sends to the AODB
// through the outbound mailbox COUTMSGS (R-D5, sis-catalogue §8): RQFD asks
// for the daily flight data of a window and is answered by an SCHD RESP;
// RQRD asks for one reference data type and is answered by a <TYPE> RESP.
//
// Why a package of its own: the control plane builds the XML when an
// operator registers a request, and the XML is the contract with the AODB
// side, so it must be byte-for-byte the documented layout no matter who
// builds it. Keeping the encoder, the allowed request types and the routing
// IDs in one domain package (beside the SIS decoder, which never encodes
// requests) gives one place to read and test that contract.
//
// The layout follows the peer's DOM serializer: an XML declaration with
// encoding UTF-8 and the standalone pseudo-attribute the serializer writes
// by default ("no"), then the MSG element with the xsi schema reference,
// without indentation or line breaks and without a trailing newline.
package sisrequest
