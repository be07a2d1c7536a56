package flagx

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Group is a titled group of a command's flags in its help.
type Group struct {
	Title string
	Names []string
}

// PrintGroups writes fs's flags group by group, in the groups' order, as
// "TITLE flags:" and each flag formatted as flag.PrintDefaults does; a
// default is quoted for an argument named string or quoted.
func PrintGroups(w io.Writer, fs *flag.FlagSet, groups []Group, quoted ...string) {
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s flags:\n", g.Title)
		for _, name := range g.Names {
			printFlag(w, fs.Lookup(name), quoted)
		}
	}
}

// printFlag writes one flag's help.
func printFlag(w io.Writer, f *flag.Flag, quoted []string) {
	arg, usage := flag.UnquoteUsage(f)
	line := "  -" + f.Name
	if arg != "" {
		line += " " + arg
	}
	if len(line) <= 4 {
		line += "\t"
	} else {
		line += "\n    \t"
	}
	line += strings.ReplaceAll(usage, "\n", "\n    \t")
	switch d := f.DefValue; {
	case d == "" || d == "0" || d == "false":
	case arg == "string" || slices.Contains(quoted, arg):
		line += fmt.Sprintf(" (default %q)", d)
	default:
		line += fmt.Sprintf(" (default %s)", d)
	}
	fmt.Fprintln(w, line)
}
