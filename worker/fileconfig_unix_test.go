//go:build unix

package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Another local user may not choose the plugins esworker runs, by any way
// into its configuration file: owning it (mode 0644 or not, the owner may
// write it), or a directory on its path that they may write, where they
// could rename another file over it — its own directory, one above, or
// one a link leads into. A sticky directory above its own (as /tmp) is no
// such way in. Each refusal names the path, who may change it, and the
// cure.
func TestLoadFileConfigRefusesWhatOthersCanChange(t *testing.T) {
	root := t.TempDir() // itself in a sticky /tmp, or wherever TMPDIR says
	mkdir := func(path string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	config := func(dir string) string {
		t.Helper()
		path := filepath.Join(dir, "esworker.json")
		if err := os.WriteFile(path, []byte(`{"join": "m"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := config(mkdir(filepath.Join(root, "good"), 0o755))
	openDir := mkdir(filepath.Join(root, "open"), 0o777)
	inOpen := config(openDir)
	groupDir := mkdir(filepath.Join(root, "group"), 0o775)
	inGroup := config(groupDir)
	stickyDir := mkdir(filepath.Join(root, "sticky"), 0o777|os.ModeSticky)
	inSticky := config(stickyDir)
	above := mkdir(filepath.Join(root, "above"), 0o777)
	belowOpen := config(mkdir(filepath.Join(above, "etc"), 0o755))
	mkdir(filepath.Join(root, "stickyabove"), 0o777|os.ModeSticky)
	belowSticky := config(mkdir(filepath.Join(root, "stickyabove", "etc"), 0o755))
	link := filepath.Join(mkdir(filepath.Join(root, "links"), 0o755), "esworker.json")
	if err := os.Symlink(inOpen, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string // want "": read
	}{
		{good, ""},
		{belowSticky, ""},
		{inOpen, "its directory " + openDir + " is writable by its group and every user (mode -rwxrwxrwx; chmod go-w " + openDir + "), who could make this worker run any program"},
		{inGroup, "its directory " + groupDir + " is writable by its group (mode -rwxrwxr-x; chmod g-w " + groupDir + ")"},
		{inSticky, "its directory " + stickyDir + " is writable by its group and every user"},
		{belowOpen, "its directory " + above + " is writable by its group and every user"},
		{link, "its directory " + openDir + " is writable by its group and every user"},
	} {
		_, err := LoadFileConfig(c.path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s refused: %v", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.path, err, c.want)
		}
	}

	// Another user's file (only root can make one).
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a file to another user")
	}
	theirs := config(mkdir(filepath.Join(root, "theirs"), 0o755))
	if err := os.Chown(theirs, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	want := "the configuration file " + theirs + " belongs to user 12345, neither root nor this worker's user (0), who could make this worker run any program (chown 0 " + theirs
	if _, err := LoadFileConfig(theirs); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("another user's configuration file, mode 0644: %v, want an error with %q", err, want)
	}
}
