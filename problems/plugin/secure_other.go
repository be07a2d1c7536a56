//go:build !unix

package plugin

// checkWriters checks nothing where file modes do not say who may write.
func checkWriters(string) error { return nil }
