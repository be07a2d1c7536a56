package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/esgrid/esgrid/problems"
)

// MaxPlugins bounds the plugins one process lists: their names travel in
// gossip metadata, which is capped at 512 bytes.
const MaxPlugins = 16

// Entry is one plugin that a machine's owner allows: the problem name a
// master may ask for, and the executable that evaluates it. A master names
// a problem, never a command: the path comes only from the owner's own
// command line or configuration file.
type Entry struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// String is NAME=PATH.
func (e Entry) String() string { return e.Name + "=" + e.Path }

// ParseEntry parses NAME=PATH.
func ParseEntry(s string) (Entry, error) {
	name, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return Entry{}, fmt.Errorf("plugin %q: want NAME=PATH", s)
	}
	if err := CheckName(name); err != nil {
		return Entry{}, err
	}
	return Entry{Name: name, Path: path}, nil
}

// CheckName checks a plugin's problem name: 1 to 40 letters, digits, '.',
// '_' or '-', starting with a letter or digit. Names are short so that a
// worker's list fits in its gossip metadata, and plain so that they are
// never mistaken for paths or options.
func CheckName(name string) error {
	if name == "" || len(name) > 40 {
		return fmt.Errorf("plugin name %q: 1 to 40 characters", name)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("plugin name %q: letters, digits, '.', '_' and '-' only, starting with a letter or digit", name)
		}
	}
	return nil
}

// Entries is a repeatable NAME=PATH command-line flag (flag.Value).
type Entries []Entry

// String implements flag.Value.
func (es *Entries) String() string {
	if es == nil {
		return ""
	}
	s := make([]string, len(*es))
	for i, e := range *es {
		s[i] = e.String()
	}
	return strings.Join(s, ",")
}

// Set implements flag.Value: it adds one NAME=PATH.
func (es *Entries) Set(s string) error {
	e, err := ParseEntry(s)
	if err != nil {
		return err
	}
	*es = append(*es, e)
	return nil
}

// Catalog is the plugins one process may run, by problem name. It is the
// only way from a name to a program: a name it does not list is never
// executed.
type Catalog struct {
	entries  []Entry              // sorted by name
	counters map[string]*Counters // by name: its processes' events, for metrics
}

// NewCatalog checks entries and returns their catalog. Each name must be
// valid, unique and not a built-in problem's (built-ins come first, and
// a plugin must not silently stand in for one); each path must name an
// executable regular file, and is made absolute (a bare name is looked up
// in PATH), so that what runs later does not depend on the working
// directory; no one but root and this program's user may be able to
// change it (its mode, its owner, its directory's and those above).
func NewCatalog(entries ...Entry) (*Catalog, error) {
	if len(entries) > MaxPlugins {
		return nil, fmt.Errorf("%d plugins, at most %d", len(entries), MaxPlugins)
	}
	c := &Catalog{counters: make(map[string]*Counters)}
	builtin := problems.Names()
	for _, e := range entries {
		if err := CheckName(e.Name); err != nil {
			return nil, err
		}
		if slices.Contains(builtin, e.Name) {
			return nil, fmt.Errorf("plugin %s: %q is a built-in problem; give the plugin another name", e, e.Name)
		}
		if _, dup := c.Lookup(e.Name); dup {
			return nil, fmt.Errorf("plugin %q listed twice", e.Name)
		}
		path, err := resolve(e.Path)
		if err != nil {
			return nil, fmt.Errorf("plugin %s: %w", e, err)
		}
		c.entries = append(c.entries, Entry{Name: e.Name, Path: path})
		c.counters[e.Name] = new(Counters)
	}
	slices.SortFunc(c.entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return c, nil
}

// resolve makes path absolute and checks that it is an executable file
// that only root and this program's user can change.
func resolve(path string) (string, error) {
	if !strings.ContainsRune(path, filepath.Separator) {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", err
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", err
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file", abs)
	case fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable (chmod +x)", abs)
	}
	if err := CheckWriters(abs, "the plugin"); err != nil { // secure_unix.go
		return "", err
	}
	return abs, nil
}

// Lookup returns the entry listed under name.
func (c *Catalog) Lookup(name string) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	i := slices.IndexFunc(c.entries, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, false
	}
	return c.entries[i], true
}

// Names returns the listed problem names, sorted.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	names := make([]string, len(c.entries))
	for i, e := range c.entries {
		names[i] = e.Name
	}
	return names
}

// Entries returns the listed plugins, sorted by name.
func (c *Catalog) Entries() []Entry {
	if c == nil {
		return nil
	}
	return slices.Clone(c.entries)
}

// Len is the number of listed plugins.
func (c *Catalog) Len() int {
	if c == nil {
		return 0
	}
	return len(c.entries)
}

// Counters returns the listed plugin name's process counters, which
// every Problem started from this catalog counts in (Start, and a
// worker's PluginBuild): what this process's metrics export. Nil for a
// name not listed.
func (c *Catalog) Counters(name string) *Counters {
	if c == nil {
		return nil
	}
	return c.counters[name]
}

// ErrNotListed is returned for a problem name that is neither built in
// nor listed.
var ErrNotListed = errors.New("neither a built-in problem nor a listed plugin")

// Start starts the listed plugin name (Open) for dimension dim (0: any
// its hello accepts) with up to procs processes. Its error names the
// entry, NAME=PATH.
func (c *Catalog) Start(ctx context.Context, name string, dim, procs int) (*Problem, error) {
	e, ok := c.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("plugin %q is not listed", name)
	}
	p, err := Open(ctx, Config{Name: e.Name, Path: e.Path, Dim: dim, Procs: procs, Counters: c.Counters(e.Name)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	return p, nil
}

// DeclaresNonFinite says p is a plugin problem (or wraps one, with its
// Hello) whose hello declares NaN and ±Inf its answers (NonFinite), so
// that the master takes them (grid.ProblemSpec.NonFinite).
func DeclaresNonFinite(p problems.Problem) bool {
	h, ok := p.(interface{ Hello() Hello })
	return ok && h.Hello().NonFinite
}
