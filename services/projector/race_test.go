//go:build race

package projector_test

// raceEnabled reports a build with the race detector, under which memory
// figures are not the projector's.
const raceEnabled = true
