//go:build !linux

package plugin

import "os"

// protectStdout returns os.Stdout: only Linux moves it out of reach.
func protectStdout() *os.File { return os.Stdout }

// pollableStdin returns os.Stdin.
func pollableStdin() *os.File { return os.Stdin }
