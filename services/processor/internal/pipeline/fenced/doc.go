// Package fenced is the processor's only handle on PostgreSQL. A DB offers
// reads on the pool and writes only inside transactions that end with the
// lease fence (R-B8, CLM-6); the pool itself stays unexported here, so code
// of the pipeline cannot open an unfenced transaction or run a statement
// on the pool: the compiler refuses it.
//
// A refused fence ends the lease term at once (R-H6): the term's context is
// cancelled with the refusal as its cause, so every loop of the term stops,
// and no later transaction of that term reaches PostgreSQL — the term's
// token is never tried again.
package fenced
