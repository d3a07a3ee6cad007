package decide

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// RefKeys is the key element of each reference TYPE (sis-catalogue §6).
var RefKeys = map[string]string{
	"ABDG": "ABCD", "ABNR": "ANRC", "AIRC": "ITAT", "AIRL": "ITOP", "ARPT": "ITCD",
	"BLST": "BCOD", "CHLT": "CCOD", "CITY": "ITCD", "CLST": "CCOD", "COUL": "COUC",
	"DLYL": "DCOD", "FLTL": "FTYP", "GLST": "GCOD", "HLTR": "HLTC", "ORGN": "OGID",
	"PLST": "PCOD", "REGL": "REGC", "REGN": "RNUM", "SLST": "SCOD", "STTS": "STTC",
	"TLST": "TCOD", "VIPL": "VPCD", "VIPS": "VSCD",
}

// Reference applies a reference-data message (R-C10): DNLD and RESP replace
// the whole type, ADD and UPD upsert by key, DEL deletes by key. Every record
// is validated first, so a failing message leaves its type untouched. The
// stored document follows the ref_data contract (RefDataContractVersion):
// one JSON shape per field, "no value" null (see RefDoc). A RESP's request
// (R-D5) is the pipeline's: this writes only its data.
func Reference(ctx context.Context, w *Writer, msg *sis.Message) (Outcome, error) {
	typ := msg.Meta.TYPE
	keyName, ok := RefKeys[typ]
	if !ok {
		return Outcome{}, &Failure{Class: "UNSUPPORTED", Reason: "no key rule for reference type " + typ}
	}
	type rec struct {
		key string
		doc []byte
	}
	var recs []rec
	seen := map[string]bool{}
	for _, n := range msg.Root.ChildrenNamed(typ) {
		key := n.Child(keyName).Value()
		if key == "" {
			return Outcome{}, &flight.RejectError{Reason: fmt.Sprintf("%s record without key %s", typ, keyName)}
		}
		if seen[key] {
			return Outcome{}, &flight.RejectError{Reason: fmt.Sprintf("%s key %s twice in one message", typ, key)}
		}
		seen[key] = true
		value, err := RefDoc(typ, key, n)
		if err != nil {
			return Outcome{}, err
		}
		doc, err := json.Marshal(value)
		if err != nil {
			return Outcome{}, fmt.Errorf("encoding %s %s: %w", typ, key, err)
		}
		recs = append(recs, rec{key: key, doc: doc})
	}
	op := func(o RefOp) error {
		o.Type, o.MsgID, o.Now = typ, w.MsgID, w.Now
		return w.Sink.Ref(ctx, o)
	}
	switch strings.ToUpper(msg.Meta.STYP) {
	case "DNLD", "RESP":
		keys := make([]string, len(recs))
		for i, r := range recs {
			keys[i] = r.key
		}
		if err := op(RefOp{Kind: RefReplace, Keys: keys}); err != nil {
			return Outcome{}, fmt.Errorf("replacing %s: %w", typ, err)
		}
		fallthrough
	case "ADD", "UPD":
		for _, r := range recs {
			if err := op(RefOp{Kind: RefUpsert, Key: r.key, Doc: r.doc}); err != nil {
				return Outcome{}, fmt.Errorf("writing %s %s: %w", typ, r.key, err)
			}
		}
	case "DEL":
		for _, r := range recs {
			if err := op(RefOp{Kind: RefDelete, Key: r.key}); err != nil {
				return Outcome{}, fmt.Errorf("deleting %s %s: %w", typ, r.key, err)
			}
		}
	default:
		return Outcome{}, &Failure{Class: "UNSUPPORTED", Reason: fmt.Sprintf("%s/%s is not handled", typ, msg.Meta.STYP)}
	}
	return Outcome{Note: fmt.Sprintf("%s %s: %d records", typ, msg.Meta.STYP, len(recs))}, nil
}
