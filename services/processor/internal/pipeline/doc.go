// Package pipeline implements the processor's three loops (inbox
// registration, FIFO execution, projection acks) and the transactions they
// run. See the processor package for the design.
package pipeline
