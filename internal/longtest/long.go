//go:build long

package longtest

// Long is true when the tests were built with -tags long: the full
// versions run.
const Long = true
