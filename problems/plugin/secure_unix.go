//go:build unix

package plugin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// checkWriters refuses a plugin that someone other than this program's
// user or root could change: whoever can write the executable, its
// directory or a directory above (rename the one below, put another in
// its place) can run any program as this worker. So the file and every
// directory on its path, as given and with its links resolved, must be
// owned by root or this program's user and writable by no group or other
// user; a directory above the plugin's own may be if it is sticky (as
// /tmp), which lets no one replace what others own in it. The plugin's
// own directory may not be, sticky or not: an interpreted plugin loads
// its neighbours (Python imports from the script's directory).
func checkWriters(abs string) error {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if err := checkOwner(real, false); err != nil {
		return err
	}
	own := map[string]bool{filepath.Dir(abs): true, filepath.Dir(real): true}
	seen := map[string]bool{}
	for _, p := range []string{abs, real} {
		for dir := filepath.Dir(p); !seen[dir]; dir = filepath.Dir(dir) {
			seen[dir] = true
			if err := checkOwner(dir, !own[dir]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOwner checks one file or directory; a sticky directory may be
// writable by others when stickyOK.
func checkOwner(path string, stickyOK bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	what := "the plugin"
	if fi.IsDir() {
		what = "its directory"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s %s belongs to user %d, neither root nor this worker's user (%d), who could make it run any program", what, path, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 && !(stickyOK && fi.Mode()&fs.ModeSticky != 0) {
		return fmt.Errorf("%s %s is writable by other users (mode %v; chmod go-w), who could make it run any program", what, path, fi.Mode().Perm())
	}
	return nil
}
