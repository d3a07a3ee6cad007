package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"msgexchange/services/internal/flight"
	"msgexchange/services/internal/sis"
)

// refKeys is the key element of each reference TYPE (sis-catalogue §6).
var refKeys = map[string]string{
	"ABDG": "ABCD", "ABNR": "ANRC", "AIRC": "ITAT", "AIRL": "ITOP", "ARPT": "ITCD",
	"BLST": "BCOD", "CHLT": "CCOD", "CITY": "ITCD", "CLST": "CCOD", "COUL": "COUC",
	"DLYL": "DCOD", "FLTL": "FTYP", "GLST": "GCOD", "HLTR": "HLTC", "ORGN": "OGID",
	"PLST": "PCOD", "REGL": "REGC", "REGN": "RNUM", "SLST": "SCOD", "STTS": "STTC",
	"TLST": "TCOD", "VIPL": "VPCD", "VIPS": "VSCD",
}

// reference applies a reference-data message (R-C10): DNLD and RESP replace
// the whole type, ADD and UPD upsert by key, DEL deletes by key. Every record
// is validated first, so a failing message leaves its type untouched. The
// stored document follows the ref_data contract (RefDataContractVersion):
// one JSON shape per field, "no value" null (see refDoc).
func (e *Engine) reference(ctx context.Context, w *writer, msg *sis.Message) (outcome, error) {
	typ := msg.Meta.TYPE
	keyName, ok := refKeys[typ]
	if !ok {
		return outcome{}, &failure{class: ClassUnsupported, reason: "no key rule for reference type " + typ}
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
			return outcome{}, &flight.RejectError{Reason: fmt.Sprintf("%s record without key %s", typ, keyName)}
		}
		if seen[key] {
			return outcome{}, &flight.RejectError{Reason: fmt.Sprintf("%s key %s twice in one message", typ, key)}
		}
		seen[key] = true
		value, err := refDoc(typ, key, n)
		if err != nil {
			return outcome{}, err
		}
		doc, err := json.Marshal(value)
		if err != nil {
			return outcome{}, fmt.Errorf("encoding %s %s: %w", typ, key, err)
		}
		recs = append(recs, rec{key: key, doc: doc})
	}
	switch strings.ToUpper(msg.Meta.STYP) {
	case "DNLD", "RESP":
		keys := make([]string, len(recs))
		for i, r := range recs {
			keys[i] = r.key
		}
		if _, err := w.tx.Exec(ctx, `DELETE FROM ref_data WHERE type=$1 AND NOT (key = ANY($2))`, typ, keys); err != nil {
			return outcome{}, fmt.Errorf("replacing %s: %w", typ, err)
		}
		fallthrough
	case "ADD", "UPD":
		for _, r := range recs {
			if _, err := w.tx.Exec(ctx, `
				INSERT INTO ref_data (type, key, doc, last_msg_id, updated_at) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (type, key) DO UPDATE SET doc=EXCLUDED.doc, last_msg_id=EXCLUDED.last_msg_id, updated_at=EXCLUDED.updated_at
				WHERE ref_data.doc IS DISTINCT FROM EXCLUDED.doc`, typ, r.key, r.doc, w.msgID, w.now); err != nil {
				return outcome{}, fmt.Errorf("writing %s %s: %w", typ, r.key, err)
			}
		}
	case "DEL":
		for _, r := range recs {
			if _, err := w.tx.Exec(ctx, `DELETE FROM ref_data WHERE type=$1 AND key=$2`, typ, r.key); err != nil {
				return outcome{}, fmt.Errorf("deleting %s %s: %w", typ, r.key, err)
			}
		}
	default:
		return outcome{}, &failure{class: ClassUnsupported, reason: fmt.Sprintf("%s/%s is not handled", typ, msg.Meta.STYP)}
	}
	note := fmt.Sprintf("%s %s: %d records", typ, msg.Meta.STYP, len(recs))
	if strings.ToUpper(msg.Meta.STYP) == "RESP" {
		// R-D5: a RESP also closes the open RQRD request it answers, if any.
		suffix, err := e.answerRQRD(ctx, w, msg)
		if err != nil {
			return outcome{}, err
		}
		note += suffix
	}
	return outcome{note: note}, nil
}
