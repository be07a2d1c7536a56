package flagx

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// PrintGroups prints each group's title and its flags in the groups'
// order, as flag.PrintDefaults formats them, quoting the defaults of the
// arguments it is told to.
func TestPrintGroups(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("policy", "wq", "the `POLICY`")
	fs.Int("n", 3, "how many")
	fs.Bool("v", false, "verbose")
	var b bytes.Buffer
	PrintGroups(&b, fs, []Group{{Title: "Run", Names: []string{"v", "policy"}}, {Title: "Size", Names: []string{"n"}}}, "POLICY")
	want := "\nRun flags:\n  -v\tverbose\n  -policy POLICY\n    \tthe POLICY (default \"wq\")\n\nSize flags:\n  -n int\n    \thow many (default 3)\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	b.Reset()
	PrintGroups(&b, fs, []Group{{Title: "Run", Names: []string{"policy"}}})
	if !strings.Contains(b.String(), "(default wq)") {
		t.Errorf("a default quoted unasked: %q", b.String())
	}
}
