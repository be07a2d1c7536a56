//go:build race

package simgrid

const raceEnabled = true
