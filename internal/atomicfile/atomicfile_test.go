package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A write that fails (a full disk, a kill before the rename) leaves the
// old file as it was and no temporary file; one that succeeds replaces it
// whole, with the mode asked for.
func TestWriteWholeOrNotAtAll(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	err := Write(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return full
	})
	if !errors.Is(err, full) {
		t.Errorf("err %v, want %v", err, full)
	}
	if got := read(t, path); got != "old" {
		t.Errorf("after a failed write: %q, want the old file", got)
	}
	if err := WriteBytes(path, 0o644, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, path); got != "new" {
		t.Errorf("after a write: %q", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left: %v", entries)
	}
}

// A symbolic link is written through, the link kept; a dangling one
// creates the file it names; a loop, a directory and a named pipe are
// refused and left as they are.
func TestWriteLinksAndOtherFiles(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "sub", "real")
	os.Mkdir(filepath.Dir(real), 0o755)
	os.WriteFile(real, []byte("old"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink("sub/real", link)
	chain := filepath.Join(dir, "chain")
	os.Symlink(link, chain)
	if err := WriteBytes(chain, 0o644, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, real); got != "new" {
		t.Errorf("through two links: %q", got)
	}
	for _, l := range []string{link, chain} {
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v", l, err)
		}
	}

	dangling := filepath.Join(dir, "dangling")
	os.Symlink("created", dangling)
	if err := WriteBytes(dangling, 0o644, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "created")); got != "x" {
		t.Errorf("through a dangling link: %q", got)
	}

	loop := filepath.Join(dir, "loop")
	os.Symlink("loop2", loop)
	os.Symlink("loop", filepath.Join(dir, "loop2"))
	if err := WriteBytes(loop, 0o644, nil); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a loop of links: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		fifo:                         fifo + " is a named pipe, not a regular file",
		filepath.Join(dir, "sub"):    filepath.Join(dir, "sub") + " is a directory",
		filepath.Join(dir, "tofifo"): filepath.Join(dir, "tofifo") + " is a named pipe, not a regular file",
	} {
		if path == filepath.Join(dir, "tofifo") {
			os.Symlink("fifo", path)
		}
		err := WriteBytes(path, 0o644, nil)
		var nr *NotRegularError
		if !errors.As(err, &nr) || err.Error() != want {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe was replaced: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 9 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files: %s", strings.Join(names, " "))
	}
}
