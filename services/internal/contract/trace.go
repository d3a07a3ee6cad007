package contract

// Trace is the W3C trace context (https://www.w3.org/TR/trace-context/) of
// a change. A record carries it as the traceparent and tracestate headers,
// so a consumer's tracing joins the trace that produced the change.
type Trace struct {
	// Parent is the traceparent value, e.g.
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.
	Parent string
	// State is the tracestate value; carried only with a valid Parent.
	State string
}

// Valid reports whether Parent is a traceparent a consumer can use:
// version-format 00 (or a later version, read as 00 as the specification
// asks), lower-case hex, neither ID all zeros, version not ff.
func (t Trace) Valid() bool {
	p := t.Parent
	if len(p) < 55 || (len(p) > 55 && p[55] != '-') {
		return false
	}
	if p[2] != '-' || p[35] != '-' || p[52] != '-' {
		return false
	}
	version, traceID, parentID, flags := p[0:2], p[3:35], p[36:52], p[53:55]
	if !lowerHex(version) || version == "ff" || !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(flags) {
		return false
	}
	if version == "00" && len(p) != 55 {
		return false
	}
	return !allZero(traceID) && !allZero(parentID)
}

// SetHeaders sets the trace headers in h when the context is valid, for
// records outside the consumer contract that join the same trace (the
// internal msgx.flight-state records).
func (t Trace) SetHeaders(h map[string]string) { t.addTo(h) }

// addTo sets the trace headers in h when the context is valid. An invalid
// traceparent is left out rather than passed on: consumers would drop it
// anyway, and a tracestate without its traceparent means nothing.
func (t Trace) addTo(h map[string]string) {
	if !t.Valid() {
		return
	}
	h[HeaderTraceparent] = t.Parent
	if t.State != "" && len(t.State) <= 512 && printableASCII(t.State) {
		h[HeaderTracestate] = t.State
	}
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
