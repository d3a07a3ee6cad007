package faultproxy

import (
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// strandType is the toxic of StrandFault, registered with toxiproxy.
const strandType = "msgx_strand"

func init() { toxics.Register(strandType, new(strandToxic)) }

// strandToxic drops every chunk of a connection that carries data while
// the fault is in force, and every later chunk of that connection too,
// even after the fault healed; connections that carry data only after it
// healed pass. Unlike toxiproxy's timeout toxic it never closes a
// connection: removing a timeout toxic closes every connection it held
// (its Cleanup), which frees a client that has no deadline as surely as
// one that has.
type strandToxic struct {
	healed atomic.Bool
}

// strandState is one connection's (one direction's) state: stranded once
// it carried data during the fault.
type strandState struct{ stranded bool }

// NewState makes the toxic stateful: toxiproxy keeps a stub's state when
// it pipes the stub again after another toxic was added or removed.
func (t *strandToxic) NewState() any { return new(strandState) }

// Pipe passes or drops the stub's chunks (see strandToxic).
func (t *strandToxic) Pipe(stub *toxics.ToxicStub) {
	state := stub.State.(*strandState)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if !t.healed.Load() {
				state.stranded = true
			}
			if state.stranded {
				continue // on the floor, for good
			}
			stub.Output <- c
		}
	}
}
