// Package docstest reads the repository's documentation for tests that
// check it against the code: the README and the pages of docs/. Tests run
// in their package's directory, so a page is found from the repository's
// root (the directory of go.mod), whatever the package.
package docstest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// Root returns the repository's root: the nearest directory, from the
// working directory up, that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("docstest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Read returns the file at rel, a slash-separated path from the
// repository's root such as "docs/logs.md", or fails the test.
func Read(tb testing.TB, rel string) []byte {
	tb.Helper()
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Section returns the section of the Markdown file rel under the heading
// line heading (such as "## Vocabulary"): the lines after it up to the
// next heading of the same level or above. It fails the test when the
// file has no such heading.
func Section(tb testing.TB, rel, heading string) string {
	tb.Helper()
	text := string(Read(tb, rel))
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	_, after, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok || level < 1 {
		tb.Fatalf("%s has no section %q", rel, heading)
	}
	lines := strings.Split(after, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && headingLevel(line) > 0 && headingLevel(line) <= level {
			return strings.Join(lines[:i], "\n")
		}
	}
	return after
}

// headingLevel is the level of an ATX heading line ("## x" is 2), or 0.
func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(line) || line[n] != ' ' {
		return 0
	}
	return n
}

// Headings returns the anchors of a Markdown text's headings, as GitHub
// makes them (see Anchor), with a -1, -2 … suffix on repeats. Lines in
// fenced code blocks are not headings.
func Headings(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || headingLevel(line) == 0 {
			continue
		}
		a := Anchor(strings.TrimLeft(line, "#"))
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

var linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// Anchor is the fragment GitHub gives a heading: its text (a link's
// label, not its target) in lower case, with every character that is
// not a letter, a digit, a space, '-' or '_' removed, and each space
// made '-'.
func Anchor(heading string) string {
	heading = linkText.ReplaceAllString(strings.TrimSpace(heading), "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
