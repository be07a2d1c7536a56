//go:build unix

package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plugin that anyone but root and the worker's user could change — the
// file, its directory, a directory above, or where a link leads — is
// refused, with the path and the cure; a sticky directory above the
// plugin's own (as /tmp) is no such way in.
func TestCatalogRefusesWhatOthersCanChange(t *testing.T) {
	root := t.TempDir()
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
	exe := func(dir string, mode os.FileMode) string {
		t.Helper()
		path := filepath.Join(dir, "sim")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := exe(mkdir(filepath.Join(root, "good"), 0o755), 0o755)
	groupFile := exe(mkdir(filepath.Join(root, "gfile"), 0o755), 0o775)
	openDir := exe(mkdir(filepath.Join(root, "open"), 0o777), 0o755)
	groupDir := exe(mkdir(filepath.Join(root, "group"), 0o775), 0o755)
	stickyOwn := exe(mkdir(filepath.Join(root, "sticky"), 0o777|os.ModeSticky), 0o755)
	mkdir(filepath.Join(root, "above"), 0o777)
	openAbove := exe(mkdir(filepath.Join(root, "above", "plugins"), 0o755), 0o755)
	mkdir(filepath.Join(root, "stickyabove"), 0o777|os.ModeSticky)
	stickyAbove := exe(mkdir(filepath.Join(root, "stickyabove", "plugins"), 0o755), 0o755)
	link := filepath.Join(mkdir(filepath.Join(root, "links"), 0o755), "sim")
	if err := os.Symlink(openDir, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, want string // want "": accepted
	}{
		{good, ""},
		{stickyAbove, ""},
		{groupFile, "the plugin " + groupFile + " is writable by its group (mode -rwxrwxr-x; chmod g-w " + groupFile + ")"},
		{openDir, "its directory " + filepath.Dir(openDir) + " is writable by its group and every user (mode -rwxrwxrwx; chmod go-w " + filepath.Dir(openDir) + ")"},
		{groupDir, "its directory " + filepath.Dir(groupDir) + " is writable by its group (mode -rwxrwxr-x; chmod g-w"},
		{stickyOwn, "its directory " + filepath.Dir(stickyOwn) + " is writable by its group and every user"},
		{openAbove, "its directory " + filepath.Join(root, "above") + " is writable by its group and every user"},
		{link, "its directory " + filepath.Dir(openDir) + " is writable by its group and every user (mode -rwxrwxrwx; chmod go-w " + filepath.Dir(openDir) + ")"},
	} {
		_, err := NewCatalog(Entry{Name: "sim", Path: c.path})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s refused: %v", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.path, err, c.want)
		}
	}

	// Another user's plugin (only root can make one).
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a file to another user")
	}
	theirs := exe(mkdir(filepath.Join(root, "theirs"), 0o755), 0o755)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := NewCatalog(Entry{Name: "sim", Path: theirs}); err == nil || !strings.Contains(err.Error(), "the plugin "+theirs+" belongs to user 65534, neither root nor this worker's user (0), who could make this worker run any program (chown 0 "+theirs) {
		t.Errorf("another user's plugin: %v, want refused", err)
	}
}
