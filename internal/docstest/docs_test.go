package docstest

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines is the README's budget: the quick start, the user's
// paths and the flag table; everything else is a page of docs/.
const maxReadmeLines = 400

func root(t *testing.T) string {
	t.Helper()
	r, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReadmeIsShort(t *testing.T) {
	readme := string(Read(t, "README.md"))
	if n := strings.Count(readme, "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move a topic to a page of docs/", n, maxReadmeLines)
	}
}

// TestReadmeContents checks the README's table of contents: every entry
// links to a heading of the README, and every section (## heading) has an
// entry.
func TestReadmeContents(t *testing.T) {
	readme := string(Read(t, "README.md"))
	toc := Section(t, "README.md", "## Contents")
	anchors := Headings(readme)
	listed := map[string]bool{}
	for _, l := range links(toc) {
		a, ok := strings.CutPrefix(l.target, "#")
		if !ok {
			t.Errorf("contents: %q is not a link to a heading of the README", l.target)
			continue
		}
		if !anchors[a] {
			t.Errorf("contents: %q links to no heading of the README", l.target)
		}
		listed[a] = true
	}
	if len(listed) == 0 {
		t.Fatal("the README's contents list nothing")
	}
	fenced := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if title, ok := strings.CutPrefix(line, "## "); ok && !fenced && title != "Contents" && !listed[Anchor(title)] {
			t.Errorf("the README's contents lack the section %q", title)
		}
	}
}

// TestLinksResolve checks every relative link of the README and of every
// Markdown page under docs/: its file exists, and so does its heading
// when it names one.
func TestLinksResolve(t *testing.T) {
	r := root(t)
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(r, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(r, p)
			pages = append(pages, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("only %d pages: %v", len(pages), pages)
	}
	checked := 0
	for _, page := range pages {
		text := string(Read(t, page))
		for _, l := range links(text) {
			if isExternal(l.target) {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(l.target, "#")
			target := page
			if file != "" {
				target = path.Join(path.Dir(page), file)
			}
			if strings.HasPrefix(target, "../") || path.IsAbs(file) {
				t.Errorf("%s:%d: %q leaves the repository", page, l.line, l.target)
				continue
			}
			fi, err := os.Stat(filepath.Join(r, filepath.FromSlash(target)))
			if err != nil {
				t.Errorf("%s:%d: %q: no file %s", page, l.line, l.target, target)
				continue
			}
			if frag == "" {
				continue
			}
			if fi.IsDir() || !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: %q: a heading of a file that is not Markdown", page, l.line, l.target)
				continue
			}
			if !Headings(string(Read(t, target)))[frag] {
				t.Errorf("%s:%d: %q: %s has no heading #%s", page, l.line, l.target, target, frag)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked", checked)
	}
}

// The documents outside the repository that texts used to cite (the
// project's private notes), and the bibliography's sections. The names
// are built so that this file does not cite them itself.
var (
	docRef     = regexp.MustCompile(`[\w./-]*\b(?:papers|DESIGN|DEPENDENCIES)` + `\.md((?:[ ,;]*(?:and )?§\d+)*)`)
	sharedRef  = regexp.MustCompile(`[\w./-]*\.\./shared\b|/work/` + `shared\b`)
	sectionRef = regexp.MustCompile(`§(\d+)`)
)

// TestReferencesResolve checks that no source, page or -h text cites a
// document that is not in the repository: every mention of the
// bibliography or of a design note is a path, from its file's directory
// or from the root, to a file of the repository, and every "§N" after a
// mention of the bibliography is one of its sections.
func TestReferencesResolve(t *testing.T) {
	r := root(t)
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## §(\d+) `).FindAllStringSubmatch(string(Read(t, "docs/papers.md")), -1) {
		sections[m[1]] = true
	}
	for n := 1; n <= 5; n++ {
		if !sections[string(rune('0'+n))] {
			t.Errorf("docs/papers.md has no section §%d", n)
		}
	}
	files := 0
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !textFile(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(r, p)
		rel = filepath.ToSlash(rel)
		text := string(b)
		for _, m := range sharedRef.FindAllStringIndex(text, -1) {
			t.Errorf("%s:%d: %q is outside the repository", rel, lineOf(text, m[0]), text[m[0]:m[1]])
		}
		for _, m := range docRef.FindAllStringSubmatchIndex(text, -1) {
			ref := text[m[0]:m[1]]
			name := ref
			if m[2] >= 0 {
				name = text[m[0]:m[2]]
			}
			line := lineOf(text, m[0])
			if !inRepo(r, path.Dir(rel), name) {
				t.Errorf("%s:%d: %q names no file of the repository (from its directory or the root)", rel, line, name)
				continue
			}
			if m[2] >= 0 && strings.HasSuffix(name, "papers"+".md") {
				for _, s := range sectionRef.FindAllStringSubmatch(text[m[2]:m[3]], -1) {
					if !sections[s[1]] {
						t.Errorf("%s:%d: %q: docs/papers.md has no section §%s", rel, line, ref, s[1])
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Errorf("only %d files searched", files)
	}
}

// inRepo says whether name, a slash-separated relative path, is a file of
// the repository from dir or from the root.
func inRepo(root, dir, name string) bool {
	if path.IsAbs(name) {
		return false
	}
	for _, base := range []string{dir, "."} {
		p := path.Join(base, name)
		if p == ".." || strings.HasPrefix(p, "../") {
			continue
		}
		if fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}

// textFile says whether a file is one whose text may cite a document: Go
// sources, Markdown, and the configuration and scripts shipped beside
// them.
func textFile(name string) bool {
	switch filepath.Ext(name) {
	case ".go", ".md", ".json", ".yml", ".yaml", ".txt", ".py", ".sh", ".service", ".toml":
		return true
	}
	return name == "run" || name == "Makefile" || name == "Dockerfile"
}

func lineOf(text string, i int) int { return strings.Count(text[:i], "\n") + 1 }

type link struct {
	target string
	line   int
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
)

// links returns the targets of a Markdown text's inline links and images,
// outside fenced code blocks and code spans.
func links(text string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{target: strings.Trim(m[1], "<>"), line: i + 1})
		}
	}
	return out
}

func isExternal(target string) bool {
	for _, p := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// TestAnchor pins the anchors GitHub gives the headings the pages link to.
func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start": "quick-start",
		"What `-verify` promises, and what it cannot":              "what--verify-promises-and-what-it-cannot",
		"§1 R3Q: scheduling an evolutionary computation on a grid": "1-r3q-scheduling-an-evolutionary-computation-on-a-grid",
		"Relays: workers the master cannot reach":                  "relays-workers-the-master-cannot-reach",
		"[Security](security.md) for you":                          "security-for-you",
		"Dynamic load balancing in the PC-cluster system Clop":     "dynamic-load-balancing-in-the-pc-cluster-system-clop",
		"CMA-ES with λ = 70":                                       "cma-es-with-λ--70",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
