package pipeline

// outcome is what a handler did.
type outcome struct {
	skipped string // non-empty: nothing applied, SKIPPED with this reason
	note    string // reason recorded with a successful state
	// pending: earlier transactions of this message (a snapshot's batches)
	// left projections that are still pending, so it is APPLIED even if
	// this transaction wrote none.
	pending bool
}
