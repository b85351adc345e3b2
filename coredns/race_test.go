//go:build race

package rrl

// raceEnabled: the race detector allocates, and drops pooled items at
// random, so allocation counts mean nothing under it.
const raceEnabled = true
