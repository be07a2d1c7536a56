package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "0"}, {"-runs", "-1"}, {"-slack", "0.5"}, {"-max-gens", "3"}, {"-max-workers", "0"},
		{"-bogus"}, {"extra"}, {"-keep", ""},
	} {
		_, err := parseOptions(args)
		var ue *usageError
		if !errors.As(err, &ue) || strings.Contains(ue.msg, "\n") {
			t.Errorf("%v: %v, want a one-line usage error", args, err)
		}
	}
	// Files that cannot be what the flags name: the old essoak went on,
	// and a -keep that is a file lost the logs of the first defect, hours
	// in ("(not kept: mkdir …: not a directory)").
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[[2]string]string{
		{"-keep", file}:                         "-keep " + file + " is not a directory",
		{"-keep", filepath.Join(file, "x")}:     "-keep " + filepath.Join(file, "x") + ": ",
		{"-keep", filepath.Join(dir, "a", "b")}: "there is no directory " + filepath.Join(dir, "a") + " to make it in",
		{"-bin", file}:                          "-bin " + file + " is not a directory",
	} {
		_, err := parseOptions(args[:])
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, want) {
			t.Errorf("%v: %v, want a usage error with %q", args, err, want)
		}
	}
	if _, err := parseOptions([]string{"-keep", filepath.Join(dir, "new"), "-bin", dir}); err != nil {
		t.Errorf("a -keep to make and a -bin that is a directory: %v", err)
	}
	o, err := parseOptions([]string{"-max-gens", "6", "-duration", "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.replay(42), "essoak -seed 42 -runs 1 -max-gens 6"; got != want {
		t.Errorf("replay %q, want %q", got, want)
	}
}
