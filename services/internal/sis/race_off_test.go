//go:build !race

package sis

// raceDetector reports whether the tests run under the race detector, which
// makes the decoder's byte loops about ten times slower.
const raceDetector = false
