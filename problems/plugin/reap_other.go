//go:build !linux

package plugin

import "context"

// Subreap does nothing here: only Linux lets a program adopt its
// children's orphans (see the Linux version). A kill reaches a plugin's
// process group only, as it always has.
func Subreap(context.Context) error { return nil }

// reapOrphans has nothing to reap without Subreap.
func reapOrphans() {}
