//go:build !race

package rrl

const raceEnabled = false
