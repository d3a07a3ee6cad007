package flight

import (
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

// ApplyFLOP applies one FLOP record of subtype styp to a copy of cur and
// returns the result. FDEL is not handled here (the processor deletes).
func ApplyFLOP(cur Doc, styp string, rec *sis.Node) (Doc, error) {
	d := cur.Clone()
	switch {
	case timeSubtypes[styp]:
		return d, applyTime(d, styp, rec)
	case codeSubtypes[styp]:
		return d, applyCode(d, styp, rec)
	case independentSubtypes[styp] != nil:
		for _, name := range independentSubtypes[styp] {
			setOrClear(d, rec.Child(name))
		}
		return d, nil
	case replaceLists[styp]:
		items := rec.ChildrenNamed(styp)
		if len(items) == 0 || (len(items) == 1 && isBare(items[0])) {
			return d, reject("FLOP %s: the list is absent or empty; %s lists can only be replaced, not cleared", styp, styp)
		}
		arr := make([]any, 0, len(items))
		for _, it := range items {
			arr = append(arr, nodeValue(it))
		}
		d[styp] = arr
		return d, nil
	}
	switch styp {
	case "EXSS":
		exsc := rec.Child("EXSC")
		if exsc != nil && exsc.Value() == "" {
			delete(d, "EXSC")
			delete(d, "EXSR")
			return d, nil
		}
		setOrClear(d, exsc)
		setOrClear(d, rec.Child("EXSR"))
		return d, nil
	case "TAOP":
		names := []string{"TAOP", "TAFL", "TAID"}
		for _, n := range names {
			if c := rec.Child(n); c != nil && c.Value() == "" {
				for _, m := range names {
					delete(d, m)
				}
				return d, nil
			}
		}
		for _, n := range names {
			setOrClear(d, rec.Child(n))
		}
		return d, nil
	case "FDIV":
		return d, applyFDIV(d, rec.Child("FDIV"))
	case "FRET":
		return d, applyAttrText(d, rec.Child("FRET"), "REID", []string{"A", "G"})
	case "FLAB":
		return d, applyAttrText(d, rec.Child("FLAB"), "ARES", []string{"O", "G"})
	case "DELY":
		return d, applyDELY(d, rec.ChildrenNamed("DELY"))
	case "ERUT":
		return d, mergeList(d, "ERUT", rec.ChildrenNamed("ERUT"), attrKey("RTNO"), true)
	case "SRVT":
		return d, mergeList(d, "SRVT", rec.ChildrenNamed("SRVT"), childKey("SRTC"), true)
	case "VIPF":
		return d, mergeList(d, "VIPF", rec.ChildrenNamed("VIPF"), childKey("VPCD"), false)
	case "PSHT":
		return d, mergeList(d, "PSHT", rec.ChildrenNamed("PSHT"), attrKey("PSHN"), false)
	case "TIPT":
		return d, mergeList(d, "TIPT", rec.ChildrenNamed("TIPT"), childKey("TRST"), false)
	case "PORT":
		return d, mergeList(d, "PORT", rec.ChildrenNamed("PORT"), childKey("POID"), false)
	}
	return d, reject("FLOP subtype %s has no rule", styp)
}

func applyTime(d Doc, name string, rec *sis.Node) error {
	n := rec.Child(name)
	if n == nil {
		return nil
	}
	if v := n.Value(); v != "" {
		if _, err := ParseDateTime(v, timeZoneless); err != nil {
			return reject("FLOP %s: %v", name, err)
		}
	}
	setOrClear(d, n)
	return nil
}

func applyCode(d Doc, name string, rec *sis.Node) error {
	n := rec.Child(name)
	if n == nil {
		return nil
	}
	if n.Value() == "" && requiredCodes[name] {
		return reject("FLOP %s: the value cannot be empty", name)
	}
	setOrClear(d, n)
	return nil
}

// setOrClear sets d[n.Name] from n, or deletes it when n is present but
// empty; an absent element (nil) changes nothing (R-C4).
func setOrClear(d Doc, n *sis.Node) {
	if n == nil {
		return
	}
	if isBare(n) {
		delete(d, n.Name)
		return
	}
	d[n.Name] = nodeValue(n)
}

// isBare reports an element with no text, no attributes with a value and no
// children: the "present but empty" form.
func isBare(n *sis.Node) bool {
	if n.Value() != "" || len(n.Children) > 0 {
		return false
	}
	for _, a := range n.Attrs {
		if strings.TrimSpace(a.Value) != "" {
			return false
		}
	}
	return true
}

func applyFDIV(d Doc, n *sis.Node) error {
	if n == nil {
		return nil
	}
	if isBare(n) {
		delete(d, "FDIV")
		return nil
	}
	ddes, _ := n.AttrValue("DDES")
	if strings.TrimSpace(ddes) == "" {
		delete(d, "FDIV")
		return nil
	}
	ddir, _ := n.AttrValue("DDIR")
	if ddir = strings.TrimSpace(ddir); ddir != "TO" && ddir != "FROM" {
		return reject("FLOP FDIV: DDIR %q must be TO or FROM", ddir)
	}
	d["FDIV"] = nodeValue(n)
	return nil
}

func applyAttrText(d Doc, n *sis.Node, attr string, allowed []string) error {
	if n == nil {
		return nil
	}
	if isBare(n) {
		delete(d, n.Name)
		return nil
	}
	v, _ := n.AttrValue(attr)
	v = strings.TrimSpace(v)
	ok := false
	for _, a := range allowed {
		ok = ok || v == a
	}
	if !ok {
		return reject("FLOP %s: %s %q must be one of %s", n.Name, attr, v, strings.Join(allowed, "/"))
	}
	d[n.Name] = nodeValue(n)
	return nil
}

func applyDELY(d Doc, items []*sis.Node) error {
	if len(items) == 0 {
		return nil
	}
	if len(items) == 1 && isBare(items[0]) {
		delete(d, "DELY")
		return nil
	}
	for _, it := range items {
		if code, _ := it.AttrValue("CODE"); strings.TrimSpace(code) == "" {
			return reject("FLOP DELY: a delay without CODE")
		}
	}
	return mergeList(d, "DELY", items, attrKey("CODE"), false)
}

type keyFn func(v any) string

func attrKey(name string) keyFn {
	return func(v any) string {
		m, _ := v.(map[string]any)
		s, _ := m["@"+name].(string)
		return strings.TrimSpace(s)
	}
}

func childKey(name string) keyFn {
	return func(v any) string {
		m, _ := v.(map[string]any)
		s, _ := m[name].(string)
		return strings.TrimSpace(s)
	}
}

// mergeList merges items into the list name by key: an entry with a known
// key is replaced in place, a new key is appended, order is kept. With
// bareClears, a single bare element removes the whole list.
func mergeList(d Doc, name string, items []*sis.Node, key keyFn, bareClears bool) error {
	if len(items) == 0 {
		return nil
	}
	if len(items) == 1 && isBare(items[0]) {
		if bareClears {
			delete(d, name)
		}
		return nil
	}
	cur, _ := d[name].([]any)
	out := append([]any(nil), cur...)
	for _, it := range items {
		v := nodeValue(it)
		k := key(v)
		replaced := false
		if k != "" {
			for i := range out {
				if key(out[i]) == k {
					out[i] = v
					replaced = true
					break
				}
			}
		}
		if !replaced {
			out = append(out, v)
		}
	}
	d[name] = out
	return nil
}
