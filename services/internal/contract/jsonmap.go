package contract

import (
	"encoding/json"
	"slices"
)

// StringMapJSON returns what json.Marshal gives for m (keys sorted, HTML
// characters escaped): the encoding of record headers as the outbox stores
// them and of a value's times. Why not json.Marshal: the processor encodes
// four such maps per flight change, and reflection and sorting through
// reflect.Values cost as much as the rest of a change's payloads
// (docs/performance.md, R-J1). Strings of plain printable ASCII, which
// headers and times are, are copied as they are; any other string goes
// through json.Marshal, so the bytes stay the same whatever m holds.
func StringMapJSON(m map[string]string) []byte {
	if m == nil {
		return []byte("null")
	}
	keys := make([]string, 0, len(m))
	n := 2
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 6
	}
	slices.Sort(keys)
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, k)
		out = append(out, ':')
		out = appendJSONString(out, m[k])
	}
	return append(out, '}')
}

// appendJSONString appends s as json.Marshal encodes a string.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
