package flight

import (
	"slices"
	"strings"

	"msgexchange/services/internal/sis"
)

// timeSubtypes set one DDMMMYYHHMM element named like the subtype; an empty
// element (either form) clears it, an absent one changes nothing.
var timeSubtypes = map[string]bool{
	"APPT": true, "BOTM": true, "CNCL": true, "EGSR": true, "EGST": true,
	"FINT": true, "LACL": true, "PEDT": true, "NEAT": true, "PADT": true,
	"NAAT": true, "COBT": true, "CTOT": true, "EOBT": true, "TOBT": true,
	"IEST": true,
}

// codeSubtypes set one code or number element named like the subtype.
// requiredCodes cannot be cleared: every flight must keep them.
var (
	codeSubtypes = map[string]bool{
		"ACFT": true, "RENO": true, "STND": true, "TRML": true, "MAXP": true,
		"FLIN": true, "FLTY": true, "FTSS": true, "REMC": true, "RUNW": true,
	}
	requiredCodes = map[string]bool{"ACFT": true, "FLIN": true, "FLTY": true}
)

// provisionalSubtypes are the FLOP subtypes only the interface's XSD names
// (sis.XSDFLOPSubtypes; the catalogue describes none of them): each sets
// one element named like the subtype under the single-value rule — absent
// keeps, empty clears, a value sets, stored as sent with no format
// checked. The rule is provisional until the AODB's owner documents their
// content; until then a message of theirs is applied rather than parked
// (R-L7, G-FLOP-UNMAPPED).
var provisionalSubtypes = func() map[string]bool {
	out := map[string]bool{}
	for _, s := range sis.XSDFLOPSubtypes() {
		out[s] = true
	}
	return out
}()

// codeDomains are the elements whose value is one of a fixed set of codes
// (catalogue §3, §5): a value outside it is rejected, wherever the element
// is set.
var codeDomains = map[string][]string{
	"FLIN": {"D", "I", "M"},
	"MVIN": {"A", "D"},
	"POID": {"O", "C"},
}

// independentSubtypes set several elements, each cleared on its own.
var independentSubtypes = map[string][]string{
	"HNAG": {"FHAG", "PHAG", "MHAG"},
	"VIPP": {"VIPP", "VIPR"},
}

// replaceLists are replaced as a whole by the subtype's elements.
var replaceLists = map[string]bool{
	"PSDT": true, "GTDT": true, "CKDT": true, "CHDT": true, "CLDT": true,
	"CHOT": true, "ABTM": true,
}

// listRule is what the catalogue (§5.5) says about the entries of a list
// subtype: its sequence attribute (the entry's position in the list), the
// child that identifies an entry in a merge, the children that must carry
// a value, and the children that hold DDMMMYYHHMM times.
type listRule struct {
	// seq is the sequence attribute ("" when the list has none). Entries
	// must carry it as a positive integer, and the stored list is ordered
	// by it, not by arrival.
	seq string
	// key is the child that identifies an entry of a merged list; "" when
	// the list is keyed by seq (or is replaced as a whole).
	key string
	// required children must be present with a value.
	required []string
	// times are children whose value, when not empty, is DDMMMYYHHMM.
	times []string
	// bareClears: a single bare element removes the whole list (merged
	// lists only).
	bareClears bool
}

var listRules = map[string]listRule{
	"PSDT": {seq: "PSNO", times: []string{"STST", "STET"}},
	"GTDT": {seq: "GTNO", times: []string{"PGOT", "PGCT", "GOTM", "GCTM"}},
	"CKDT": {seq: "CKNO", times: []string{"PCOT", "PCCT", "COTM", "CCTM"}},
	"CHDT": {seq: "CHNO", times: []string{"PCBT", "PCET", "CBTM", "CETM"}},
	"CLDT": {seq: "CLNO", times: []string{"PCOT", "PCCT", "FBAG", "LBAG"}},
	"CHOT": {seq: "CSNO", times: []string{"CHTM"}},
	"ABTM": {seq: "ASNO", times: []string{"AOTM"}},
	"ERUT": {seq: "RTNO", required: []string{"APCD"}, times: []string{"SCAT", "SCDT"}, bareClears: true},
	"SRVT": {key: "SRTC", required: []string{"SRTC", "SRQT"}, times: []string{"SRST", "SRET"}, bareClears: true},
	"VIPF": {key: "VPCD", required: []string{"VPCD"}},
	"PSHT": {seq: "PSHN", times: []string{"PSTM"}},
	"TIPT": {key: "TRST", required: []string{"TRST"}, times: []string{"TRTM"}},
	"PORT": {key: "POID", required: []string{"POID"}, times: []string{"POTM"}},
}

// seqAttrs are the sequence attributes of the repeated structures of a
// flight document (FLOP lists and ROUT of a daily flight record): the
// stored order of such a list follows them.
var seqAttrs = map[string]string{"ROUT": "RTNO"}

func init() {
	for name, r := range listRules {
		if r.seq != "" {
			seqAttrs[name] = r.seq
		}
	}
}

// payloadNames returns the elements of a FLOP record that are the payload
// of subtype styp; ok is false for a subtype without a rule.
func payloadNames(styp string) (names []string, ok bool) {
	switch {
	case timeSubtypes[styp], codeSubtypes[styp], provisionalSubtypes[styp], replaceLists[styp]:
		return []string{styp}, true
	case independentSubtypes[styp] != nil:
		return independentSubtypes[styp], true
	}
	switch styp {
	case "EXSS":
		return []string{"EXSC", "EXSR"}, true
	case "TAOP":
		return []string{"TAOP", "TAFL", "TAID"}, true
	case "FDIV", "FRET", "FLAB", "DELY", "ERUT", "SRVT", "VIPF", "PSHT", "TIPT", "PORT":
		return []string{styp}, true
	}
	return nil, false
}

// ApplyFLOP applies one FLOP record of subtype styp to a copy of cur and
// returns the result; cur is not modified, and on a rejection nothing is
// returned. FDEL is not handled here (the processor deletes).
//
// Besides its payload, the record's FFID and every element outside FLID,
// FFID and the payload are kept under VERBATIM (see keepRecordVerbatim),
// so nothing of the record is lost (R-C1).
func ApplyFLOP(cur Doc, styp string, rec *sis.Node) (Doc, error) {
	payload, ok := payloadNames(styp)
	if !ok {
		return nil, reject("FLOP subtype %s has no rule", styp)
	}
	d := cur.Clone()
	if err := applyPayload(d, styp, rec); err != nil {
		return nil, err
	}
	keepRecordVerbatim(d, styp, rec, payload)
	return d, nil
}

func applyPayload(d Doc, styp string, rec *sis.Node) error {
	switch {
	case timeSubtypes[styp]:
		return applyTime(d, styp, rec)
	case codeSubtypes[styp], provisionalSubtypes[styp]:
		return applyCode(d, styp, rec)
	case independentSubtypes[styp] != nil:
		names := independentSubtypes[styp]
		vals, err := scalars(styp, rec, names)
		if err != nil {
			return err
		}
		setPresent(d, vals)
		return nil
	case replaceLists[styp]:
		return replaceList(d, styp, rec.ChildrenNamed(styp))
	}
	switch styp {
	case "EXSS":
		vals, err := scalars(styp, rec, []string{"EXSC", "EXSR"})
		if err != nil {
			return err
		}
		if v, ok := vals["EXSC"]; ok && v == "" {
			delete(d, "EXSC")
			delete(d, "EXSR")
			return nil
		}
		setPresent(d, vals)
		return nil
	case "TAOP":
		names := []string{"TAOP", "TAFL", "TAID"}
		vals, err := scalars(styp, rec, names)
		if err != nil {
			return err
		}
		for _, n := range names {
			if v, ok := vals[n]; ok && v == "" {
				for _, m := range names {
					delete(d, m)
				}
				return nil
			}
		}
		setPresent(d, vals)
		return nil
	case "FDIV":
		n, err := single(styp, rec, "FDIV")
		if err != nil {
			return err
		}
		return applyFDIV(d, n)
	case "FRET":
		n, err := single(styp, rec, "FRET")
		if err != nil {
			return err
		}
		return applyAttrText(d, n, "REID", []string{"A", "G"})
	case "FLAB":
		n, err := single(styp, rec, "FLAB")
		if err != nil {
			return err
		}
		return applyAttrText(d, n, "ARES", []string{"O", "G"})
	case "DELY":
		return applyDELY(d, rec.ChildrenNamed("DELY"))
	}
	return mergeList(d, styp, rec.ChildrenNamed(styp))
}

// single returns the only element name of rec (nil when absent); the
// element twice in one record is ambiguous and rejected.
func single(styp string, rec *sis.Node, name string) (*sis.Node, error) {
	items := rec.ChildrenNamed(name)
	if len(items) > 1 {
		return nil, reject("FLOP %s: %s occurs %d times in one record; it is a single value", styp, name, len(items))
	}
	if len(items) == 0 {
		return nil, nil
	}
	return items[0], nil
}

// scalarValue reads a text-only element: its stored text ("" when it has
// none). An element with attributes or child elements is not a single
// value and is rejected rather than guessed at.
func scalarValue(styp string, n *sis.Node) (string, error) {
	if len(n.Attrs) > 0 || len(n.Children) > 0 {
		return "", reject("FLOP %s: %s carries attributes or child elements; it is a single value", styp, n.Name)
	}
	v := text(n)
	if allowed, ok := codeDomains[n.Name]; ok && v != "" && !slices.Contains(allowed, v) {
		return "", reject("FLOP %s: %s %q must be one of %s", styp, n.Name, v, strings.Join(allowed, "/"))
	}
	return v, nil
}

// scalars reads the single-value elements names of rec, each at most once:
// name → value for the elements present ("" for an empty one).
func scalars(styp string, rec *sis.Node, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range names {
		n, err := single(styp, rec, name)
		if err != nil || n == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		v, err := scalarValue(styp, n)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// setScalar sets d[name] to v, or deletes it when v is empty (R-C4: a
// present-but-empty element clears; the key's absence is the one
// representation of "no value", the same a daily flight record leaves).
func setScalar(d Doc, name, v string) {
	if v == "" {
		delete(d, name)
		return
	}
	d[name] = v
}

// setPresent sets or clears each element read by scalars; elements the
// record does not carry are not in vals and change nothing.
func setPresent(d Doc, vals map[string]string) {
	for name, v := range vals {
		setScalar(d, name, v)
	}
}

func applyTime(d Doc, name string, rec *sis.Node) error {
	vals, err := scalars(name, rec, []string{name})
	if err != nil {
		return err
	}
	v, ok := vals[name]
	if !ok {
		return nil
	}
	if v != "" {
		if _, err := ParseDateTime(v, timeZoneless); err != nil {
			return reject("FLOP %s: %v", name, err)
		}
	}
	setScalar(d, name, v)
	return nil
}

func applyCode(d Doc, name string, rec *sis.Node) error {
	vals, err := scalars(name, rec, []string{name})
	if err != nil {
		return err
	}
	v, ok := vals[name]
	if !ok {
		return nil
	}
	if v == "" && requiredCodes[name] {
		return reject("FLOP %s: the value cannot be empty", name)
	}
	setScalar(d, name, v)
	return nil
}

// isBare reports the "present but empty" form of an element: no
// attributes at all, no text and no children (<X/>, <X></X>, <X> </X>).
// An element with an attribute, even an empty one (<FLAB ARES="">), is
// not bare: it says something, and the subtype's rules judge what.
func isBare(n *sis.Node) bool {
	return len(n.Attrs) == 0 && n.Blank()
}

// attrValue returns an attribute's value trimmed; a missing attribute and
// an empty one are both "" (catalogue §2.5).
func attrValue(n *sis.Node, name string) string {
	v, _ := n.AttrValue(name)
	return strings.TrimSpace(v)
}

// attrTextShape rejects an attribute-plus-text element with child
// elements: its value is its attributes and its text only.
func attrTextShape(n *sis.Node) error {
	if len(n.Children) > 0 {
		return reject("FLOP %s: the element carries child elements; it holds attributes and a text only", n.Name)
	}
	return nil
}

func applyFDIV(d Doc, n *sis.Node) error {
	if n == nil {
		return nil
	}
	if isBare(n) {
		delete(d, "FDIV")
		return nil
	}
	if err := attrTextShape(n); err != nil {
		return err
	}
	if ddir := attrValue(n, "DDIR"); ddir != "TO" && ddir != "FROM" {
		return reject("FLOP FDIV: DDIR %q must be TO or FROM", ddir)
	}
	if attrValue(n, "DDES") == "" {
		// Catalogue §5.4: an empty diversion airport clears the diversion
		// (airport, direction and reason).
		delete(d, "FDIV")
		return nil
	}
	d["FDIV"] = nodeValue(n)
	return nil
}

// applyAttrText applies FRET or FLAB: a bare element clears it; otherwise
// attr must be one of allowed — an empty attribute is not "bare" but a
// missing code, and is rejected (catalogue §5.4: "ARES empty ⇒ rejected",
// "REID missing/other ⇒ rejected").
func applyAttrText(d Doc, n *sis.Node, attr string, allowed []string) error {
	if n == nil {
		return nil
	}
	if isBare(n) {
		delete(d, n.Name)
		return nil
	}
	if err := attrTextShape(n); err != nil {
		return err
	}
	if v := attrValue(n, attr); !slices.Contains(allowed, v) {
		return reject("FLOP %s: %s %q must be one of %s", n.Name, attr, v, strings.Join(allowed, "/"))
	}
	d[n.Name] = nodeValue(n)
	return nil
}

// applyDELY merges delays by CODE. One bare <DELY/> removes all delays; a
// delay whose CODE is missing or empty is rejected — also when its other
// attributes are given (catalogue §5.4) — and STRT (DDMMMYYHHMM) and DURA
// (HHMM) are checked when given.
func applyDELY(d Doc, items []*sis.Node) error {
	if len(items) == 0 {
		return nil
	}
	if len(items) == 1 && isBare(items[0]) {
		delete(d, "DELY")
		return nil
	}
	for _, it := range items {
		if err := attrTextShape(it); err != nil {
			return err
		}
		if attrValue(it, "CODE") == "" {
			return reject("FLOP DELY: a delay without CODE")
		}
		if v := attrValue(it, "STRT"); v != "" {
			if _, err := ParseDateTime(v, timeZoneless); err != nil {
				return reject("FLOP DELY %s: STRT: %v", attrValue(it, "CODE"), err)
			}
		}
		if v := attrValue(it, "DURA"); v != "" {
			if err := CheckDuration(v); err != nil {
				return reject("FLOP DELY %s: DURA: %v", attrValue(it, "CODE"), err)
			}
		}
	}
	merged := mergeByKey(d["DELY"], items, func(v any) string { return attrOf(v, "CODE") })
	d["DELY"] = merged
	return nil
}

// checkEntry validates one entry of list name against its rule: its
// sequence attribute, its required children, its times and codes.
func checkEntry(name string, r listRule, it *sis.Node) error {
	if r.seq != "" {
		v := attrValue(it, r.seq)
		if _, ok := seqNumber(v); !ok {
			return reject("FLOP %s: an entry without a valid %s (%q); entries are ordered by it", name, r.seq, v)
		}
	}
	for _, c := range r.required {
		if it.Child(c).Value() == "" {
			return reject("FLOP %s: an entry without %s", name, c)
		}
	}
	for _, c := range r.times {
		if v := it.Child(c).Value(); v != "" {
			if _, err := ParseDateTime(v, timeZoneless); err != nil {
				return reject("FLOP %s %s: %v", name, c, err)
			}
		}
	}
	for _, c := range it.Children {
		if allowed, ok := codeDomains[c.Name]; ok {
			if v := c.Value(); v != "" && !slices.Contains(allowed, v) {
				return reject("FLOP %s: %s %q must be one of %s", name, c.Name, v, strings.Join(allowed, "/"))
			}
		}
	}
	return nil
}

// replaceList replaces list name by the record's entries, ordered by their
// sequence numbers. An absent or bare list is rejected: these lists can
// only be replaced (catalogue §5.5); so is a sequence number twice.
func replaceList(d Doc, name string, items []*sis.Node) error {
	if len(items) == 0 || (len(items) == 1 && isBare(items[0])) {
		return reject("FLOP %s: the list is absent or empty; %s lists can only be replaced, not cleared", name, name)
	}
	r := listRules[name]
	seen := map[int]bool{}
	arr := make([]any, 0, len(items))
	for _, it := range items {
		if err := checkEntry(name, r, it); err != nil {
			return err
		}
		n, _ := seqNumber(attrValue(it, r.seq))
		if seen[n] {
			return reject("FLOP %s: %s %d occurs twice", name, r.seq, n)
		}
		seen[n] = true
		arr = append(arr, nodeValue(it))
	}
	d[name] = sortBySeq(arr, r.seq)
	return nil
}

// mergeList merges the record's entries into list name by the entry key
// (R-C4, INV-14b): an entry with a known key replaces the stored one in
// place, a new key is added; a list with a sequence attribute is then
// ordered by it. Every entry must carry its key, so merging the same
// content twice leaves the list as it was (R-C3, INV-20b). A single bare
// element clears the list when the rule says so and is otherwise ignored.
func mergeList(d Doc, name string, items []*sis.Node) error {
	if len(items) == 0 {
		return nil
	}
	r := listRules[name]
	if len(items) == 1 && isBare(items[0]) {
		if r.bareClears {
			delete(d, name)
		}
		return nil
	}
	for _, it := range items {
		if err := checkEntry(name, r, it); err != nil {
			return err
		}
	}
	key := func(v any) string { return childOf(v, r.key) }
	if r.seq != "" {
		key = func(v any) string {
			if n, ok := seqNumber(attrOf(v, r.seq)); ok {
				return "#" + itoa(n)
			}
			return ""
		}
	}
	merged := mergeByKey(d[name], items, key)
	if r.seq != "" {
		merged = sortBySeq(merged, r.seq)
	}
	d[name] = merged
	return nil
}

// mergeByKey merges items into the stored list cur: an entry whose key
// equals a stored entry's replaces it in place, any other is appended.
func mergeByKey(cur any, items []*sis.Node, key func(any) string) []any {
	stored, _ := cur.([]any)
	out := append([]any(nil), stored...)
	for _, it := range items {
		v := nodeValue(it)
		k := key(v)
		replaced := false
		for i := range out {
			if k != "" && key(out[i]) == k {
				out[i] = v
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, v)
		}
	}
	return out
}

func attrOf(v any, name string) string {
	m, _ := v.(map[string]any)
	s, _ := m["@"+name].(string)
	return strings.TrimSpace(s)
}

func childOf(v any, name string) string {
	m, _ := v.(map[string]any)
	s, _ := m[name].(string)
	return strings.TrimSpace(s)
}

// keepRecordVerbatim keeps what a FLOP record carries besides FLID and its
// payload (R-C1), as sent, under VERBATIM:
//
//   - VERBATIM.FFID is the record's FFID (the readable flight id, which
//     drives nothing); an empty FFID removes it, an absent one keeps it;
//   - VERBATIM.FLOP.<STYP> holds the record's other elements (and
//     attributes of the FLOP element, "@NAME") that are not the subtype's
//     payload, mapped like the flight document — e.g. a TOBT element inside
//     an APPT record. It is replaced by each record of that subtype and
//     removed when a record carries nothing extra.
//
// A repeated FLID or FFID, and a repeated payload element a subtype reads
// once, are not extras: they are rejected or merged by the subtype rules.
func keepRecordVerbatim(d Doc, styp string, rec *sis.Node, payload []string) {
	if f := rec.Child("FFID"); f != nil {
		if isBare(f) {
			dropVerbatim(d, "FFID")
		} else {
			setVerbatim(d, "FFID", nodeValue(f))
		}
	}
	var extra []*sis.Node
	firstFLID, firstFFID := true, true
	for _, c := range rec.Children {
		switch {
		case c.Name == "FLID" && firstFLID:
			firstFLID = false
			continue
		case c.Name == "FFID" && firstFFID:
			firstFFID = false
			continue
		case slices.Contains(payload, c.Name):
			continue
		}
		extra = append(extra, c)
	}
	byType, _ := verbatimValue(d, "FLOP").(map[string]any)
	if byType == nil {
		byType = map[string]any{}
	}
	if len(extra) == 0 && len(rec.Attrs) == 0 {
		delete(byType, styp)
	} else {
		obj := map[string]any{}
		for _, a := range rec.Attrs {
			obj["@"+a.Name] = a.Value
		}
		addChildren(obj, extra)
		byType[styp] = obj
	}
	if len(byType) == 0 {
		dropVerbatim(d, "FLOP")
		return
	}
	setVerbatim(d, "FLOP", byType)
}

// flopVerbatim are the VERBATIM entries only FLOP records write.
var flopVerbatim = []string{"FFID", "FLOP"}

// KeepFLOPVerbatim returns next with the FLOP-owned VERBATIM entries
// (VERBATIM.FFID, VERBATIM.FLOP) of cur. A daily flight record (snapshot,
// ADFT) never carries them, so replacing a flight by its snapshot record
// keeps what the FLOPs sent verbatim: otherwise every snapshot after a
// FLOP would bump the version with a change that changes no state. next
// is not modified.
func KeepFLOPVerbatim(cur, next Doc) Doc {
	out := next.Clone()
	for _, name := range flopVerbatim {
		if v, ok := verbatim(cur, name); ok {
			setVerbatim(out, name, v)
		} else {
			dropVerbatim(out, name)
		}
	}
	return out
}

func verbatimValue(d Doc, name string) any {
	v, _ := verbatim(d, name)
	return v
}
