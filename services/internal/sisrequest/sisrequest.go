package sisrequest

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Request TYPEs, the sender and the COUTMSGS routing IDs (sis-catalogue §8).
const (
	// TypeRQFD is the daily schedule request, answered by SCHD/RESP.
	TypeRQFD = "RQFD"
	// TypeRQRD is the reference data request, answered by <RTYP>/RESP.
	TypeRQRD = "RQRD"
	// RQFDSubtype is the STYP of every RQFD request.
	RQFDSubtype = "NONE"
	// Sender is META/SNDR of the requests this gateway sends.
	Sender = "VIEW"
	// RoutingRQFD is COUTMSGS.ROUTINGID of an RQFD request.
	RoutingRQFD = "VIEWRQFD"
	// RoutingRQRD is COUTMSGS.ROUTINGID of an RQRD request.
	RoutingRQRD = "VIEWRQRD"
)

// Limits of the request fields.
const (
	// MinSeqn and MaxSeqn bound SEQN; the counter cycles 1…999999 and is
	// written zero-padded to six digits.
	MinSeqn = 1
	MaxSeqn = 999999
	// MaxWindowLen bounds STDB and STDE in characters. The catalogue passes
	// them through unvalidated; the bound only keeps junk out of the
	// mailbox and out of the open-request index.
	MaxWindowLen = 64
	// DTTMLayout is the Go layout of META/DTTM, yyyyMMddHHmmss.
	DTTMLayout = "20060102150405"
)

// Declaration is the XML declaration the peer's DOM serializer writes by
// default: version 1.0, encoding UTF-8 and the standalone pseudo-attribute
// (the DOM default, "no"), with no line break after it.
const Declaration = `<?xml version="1.0" encoding="UTF-8" standalone="no"?>`

// rootStart opens MSG with the schema reference of every SIS message.
const rootStart = `<MSG xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="unisysaodbsis.xsd">`

// requestTypes are the RTYP values an RQRD may ask for, in the catalogue's
// order (§8): every reference type, and not SCHD, SCHS or VIPF.
var requestTypes = []string{
	"SLST", "GLST", "BLST", "CLST", "TLST", "ABDG", "CHLT", "PLST", "AIRC", "REGN",
	"AIRL", "ARPT", "CITY", "COUL", "REGL", "ABNR", "DLYL", "HLTR", "ORGN", "STTS",
	"FLTL", "VIPL", "VIPS",
}

// RequestTypes returns the allowed RTYP values in the catalogue's order.
// The slice is a fresh copy.
func RequestTypes() []string { return slices.Clone(requestTypes) }

// NormalizeRTYP trims and upper-cases s and checks that it is an allowed
// RTYP; the result is what EncodeRQRD expects.
func NormalizeRTYP(s string) (string, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "" {
		return "", fmt.Errorf("%w: RTYP is required (one of %s)", ErrInvalid, strings.Join(requestTypes, " "))
	}
	if !slices.Contains(requestTypes, t) {
		return "", fmt.Errorf("%w: RTYP %q is not a requestable reference type (one of %s)", ErrInvalid, clip(s), strings.Join(requestTypes, " "))
	}
	return t, nil
}

// ValidateWindow checks STDB and STDE of an RQFD: both required (not blank),
// at most MaxWindowLen characters, and text XML can carry. They are
// otherwise passed through verbatim, as the peer does.
func ValidateWindow(stdb, stde string) error {
	var errs []string
	for _, f := range []struct{ name, v string }{{"STDB", stdb}, {"STDE", stde}} {
		switch {
		case strings.TrimSpace(f.v) == "":
			errs = append(errs, f.name+" is required")
		case !validText(f.v):
			errs = append(errs, f.name+" holds characters XML cannot carry")
		case utf8.RuneCountInString(f.v) > MaxWindowLen:
			errs = append(errs, fmt.Sprintf("%s is longer than %d characters", f.name, MaxWindowLen))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}

// RoutingID returns the COUTMSGS.ROUTINGID of a request TYPE.
func RoutingID(typ string) (string, error) {
	switch typ {
	case TypeRQFD:
		return RoutingRQFD, nil
	case TypeRQRD:
		return RoutingRQRD, nil
	}
	return "", fmt.Errorf("%w: %q is not a request type (RQFD, RQRD)", ErrInvalid, clip(typ))
}

// FormatSeqn writes a SEQN as six zero-padded digits.
func FormatSeqn(n int64) (string, error) {
	if n < MinSeqn || n > MaxSeqn {
		return "", fmt.Errorf("%w: SEQN %d outside %d…%d", ErrInvalid, n, MinSeqn, MaxSeqn)
	}
	return fmt.Sprintf("%06d", n), nil
}

// Envelope is the META of a request.
type Envelope struct {
	// Sender is META/SNDR; empty means Sender (VIEW).
	Sender string
	// Seqn is META/SEQN, MinSeqn…MaxSeqn, written as six digits.
	Seqn int64
	// Created is META/DTTM, written as yyyyMMddHHmmss in Created's own
	// location: pass airport local time.
	Created time.Time
}

// EncodeRQFD returns the RQFD request for the window stdb..stde:
//
//	<?xml …?><MSG …><META><SNDR>VIEW</SNDR><SEQN>000042</SEQN><DTTM>…</DTTM>
//	<TYPE>RQFD</TYPE><STYP>NONE</STYP></META><RQFD><STDB>…</STDB><STDE>…</STDE></RQFD></MSG>
//
// (one line; broken here for reading).
func EncodeRQFD(env Envelope, stdb, stde string) ([]byte, error) {
	if err := ValidateWindow(stdb, stde); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := writeHead(&b, env, TypeRQFD, RQFDSubtype); err != nil {
		return nil, err
	}
	b.WriteString("<RQFD>")
	element(&b, "STDB", stdb)
	element(&b, "STDE", stde)
	b.WriteString("</RQFD></MSG>")
	return b.Bytes(), nil
}

// EncodeRQRD returns the RQRD request for the reference type rtyp (which
// must already be normalized, see NormalizeRTYP); STYP and RTYP both carry
// the type:
//
//	<?xml …?><MSG …><META>…<TYPE>RQRD</TYPE><STYP>GLST</STYP></META><RQRD><RTYP>GLST</RTYP></RQRD></MSG>
func EncodeRQRD(env Envelope, rtyp string) ([]byte, error) {
	if !slices.Contains(requestTypes, rtyp) {
		if _, err := NormalizeRTYP(rtyp); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: RTYP %q must be upper case without blanks", ErrInvalid, clip(rtyp))
	}
	var b bytes.Buffer
	if err := writeHead(&b, env, TypeRQRD, rtyp); err != nil {
		return nil, err
	}
	b.WriteString("<RQRD>")
	element(&b, "RTYP", rtyp)
	b.WriteString("</RQRD></MSG>")
	return b.Bytes(), nil
}

// writeHead writes the declaration, the MSG start tag and META.
func writeHead(b *bytes.Buffer, env Envelope, typ, styp string) error {
	sender := env.Sender
	if sender == "" {
		sender = Sender
	}
	if !validText(sender) {
		return fmt.Errorf("%w: sender holds characters XML cannot carry", ErrInvalid)
	}
	seqn, err := FormatSeqn(env.Seqn)
	if err != nil {
		return err
	}
	if env.Created.IsZero() {
		return fmt.Errorf("%w: creation time (DTTM) is required", ErrInvalid)
	}
	b.Grow(len(Declaration) + len(rootStart) + 256)
	b.WriteString(Declaration)
	b.WriteString(rootStart)
	b.WriteString("<META>")
	element(b, "SNDR", sender)
	element(b, "SEQN", seqn)
	element(b, "DTTM", env.Created.Format(DTTMLayout))
	element(b, "TYPE", typ)
	element(b, "STYP", styp)
	b.WriteString("</META>")
	return nil
}

// element writes <name>text</name>, escaping the text as a DOM serializer
// does: &, < and > as entities and a carriage return as a character
// reference (it would otherwise be normalized away by any reader).
func element(b *bytes.Buffer, name, text string) {
	b.WriteByte('<')
	b.WriteString(name)
	b.WriteByte('>')
	for _, r := range text {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\r':
			b.WriteString("&#13;")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("</")
	b.WriteString(name)
	b.WriteByte('>')
}

// validText reports whether s is UTF-8 made only of XML 1.0 characters.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// clip shortens user input quoted in an error.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	return string([]rune(s)[:40]) + "…"
}

// ParseDTTM reads a META/DTTM value (yyyyMMddHHmmss) as local time in loc.
func ParseDTTM(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) != len(DTTMLayout) {
		return time.Time{}, fmt.Errorf("DTTM %q: want yyyyMMddHHmmss", clip(s))
	}
	if _, err := strconv.ParseUint(s, 10, 64); err != nil {
		return time.Time{}, fmt.Errorf("DTTM %q: want yyyyMMddHHmmss", clip(s))
	}
	t, err := time.ParseInLocation(DTTMLayout, s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("DTTM %q: %w", clip(s), err)
	}
	return t, nil
}
