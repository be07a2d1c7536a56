//go:build !linux

package plugin

import "errors"

// startDescendants is for the Linux test of Subreap only.
func startDescendants(string, int) error {
	return errors.New("descendants are started on Linux only")
}
