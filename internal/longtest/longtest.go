// Package longtest tells tests whether the long build tag is set.
//
// A test that is long only because it runs many trials (seeds, policies,
// machine sets) runs a short version by default that still asserts its
// property, and the full version under the tag:
//
//	go test -tags long -timeout 60m ./...
//
// .ci/run runs both.
package longtest

// Pick returns short by default and long under the long build tag.
func Pick[T any](short, long T) T {
	if Long {
		return long
	}
	return short
}
