package main

import (
	"errors"
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
	o, err := parseOptions([]string{"-max-gens", "6", "-duration", "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.replay(42), "essoak -seed 42 -runs 1 -max-gens 6"; got != want {
		t.Errorf("replay %q, want %q", got, want)
	}
}
