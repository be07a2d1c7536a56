package main

import (
	"context"
	"regexp"
	"testing"

	"github.com/esgrid/esgrid/internal/docstest"
)

// TestReadmeFlagTable: the README's flag table names every flag that
// esrun -h prints, so that a user finds each one without running -h.
func TestReadmeFlagTable(t *testing.T) {
	code, stdout, _ := esrun(context.Background(), "-h")
	if code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	table := docstest.Section(t, "README.md", "## esrun flags")
	flags := regexp.MustCompile(`(?m)^  (-[a-z][a-z-]*)`).FindAllStringSubmatch(stdout, -1)
	if len(flags) < 40 {
		t.Fatalf("-h prints %d flags", len(flags))
	}
	for _, f := range flags {
		if !regexp.MustCompile("(?m)^\\| `" + f[1] + "[ `]|, `" + f[1] + "[ `]").MatchString(table) {
			t.Errorf("the README's esrun flags table lacks %s", f[1])
		}
	}
}
