//go:build !race

package simgrid

const raceEnabled = false
