//go:build unix

package plugin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// CheckWriters refuses a file that someone other than this program's
// user or root could change; what names it in the error ("the plugin",
// "the configuration file"). It is the one rule for a plugin and for
// esworker's configuration file, which names the plugins: whoever can
// write the file, its directory or a directory above (rename the one
// below, put another in its place) can run any program as this worker.
// So the file and every directory on its path, as given and with its
// links resolved, must be owned by root or this program's user and
// writable by no group or other user, as ssh's StrictModes asks of its
// files; a directory above the file's own may be if it is sticky (as
// /tmp), which lets no one replace what others own in it. The file's own
// directory may not be, sticky or not: an interpreted plugin loads its
// neighbours (Python imports from the script's directory), and a
// configuration file's relative paths (a key file) start there, where
// another user could create what is not there yet.
func CheckWriters(path, what string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if err := checkOwner(real, what, false); err != nil {
		return err
	}
	own := map[string]bool{filepath.Dir(abs): true, filepath.Dir(real): true}
	seen := map[string]bool{}
	for _, p := range []string{abs, real} {
		for dir := filepath.Dir(p); !seen[dir]; dir = filepath.Dir(dir) {
			seen[dir] = true
			if err := checkOwner(dir, "its directory", !own[dir]); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkOwner checks one file or directory; a sticky directory may be
// writable by others when stickyOK. The error names the path, who may
// change it, and the cure.
func checkOwner(path, what string, stickyOK bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s %s belongs to user %d, neither root nor this worker's user (%d), who could make this worker run any program (chown %d %s, or move it somewhere user %d cannot write)",
			what, path, st.Uid, os.Geteuid(), os.Geteuid(), path, st.Uid)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 || stickyOK && fi.Mode()&fs.ModeSticky != 0 {
		return nil
	}
	who, fix := "its group and every user", "go-w"
	switch perm & 0o022 {
	case 0o020:
		who, fix = "its group", "g-w"
	case 0o002:
		who, fix = "every user", "o-w"
	}
	return fmt.Errorf("%s %s is writable by %s (mode %v; chmod %s %s), who could make this worker run any program", what, path, who, perm, fix, path)
}
