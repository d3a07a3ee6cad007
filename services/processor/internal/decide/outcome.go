package decide

// Outcome is what a handler decided besides its writes.
type Outcome struct {
	// Note is the reason recorded with the successful state.
	Note string
	// Pending: earlier transactions of this message (a snapshot's batches)
	// left projections that are still pending, so it is APPLIED even if
	// this decision wrote none.
	Pending bool
	// Continue, when set, ends one batch of a larger package (a daily
	// snapshot, R-C6): the pipeline commits what was written and leaves
	// the message open with this progress as its reason.
	Continue string
}
