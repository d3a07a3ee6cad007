// Package runtest holds the test of `make run` (R-G1), which runs the
// README's command in a copy of the tree: make run-test.
package runtest
