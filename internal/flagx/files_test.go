package flagx

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// CheckWritable refuses a file in no directory and a directory; Exists
// counts a dangling link; FirstRegular skips what is not a regular file.
func TestWritableExistsRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := CheckWritable("-report", filepath.Join(dir, "new")); err != nil {
		t.Error(err)
	}
	if err := CheckWritable("-report", filepath.Join(dir, "no", "r")); err == nil || !strings.Contains(err.Error(), "there is no directory") {
		t.Errorf("%v, want no directory", err)
	}
	if err := CheckWritable("-report", dir); err == nil || err.Error() != "-report "+dir+" is a directory" {
		t.Errorf("%v, want a directory", err)
	}
	for path, want := range map[string]bool{file: true, dangling: true, filepath.Join(dir, "none"): false} {
		if got, err := Exists(path); got != want || err != nil {
			t.Errorf("Exists(%s) = %v, %v", path, got, err)
		}
	}
	if got := FirstRegular("", dir, dangling, file); got != file {
		t.Errorf("FirstRegular: %q", got)
	}
	if got := FirstRegular("", dir); got != "" {
		t.Errorf("FirstRegular of no file: %q", got)
	}
}

// CheckFiles refuses, before any work, a written file that is not a
// regular file or cannot be resolved, in one line that names the flag: the
// old code let every command but esrun go on, and its writer then renamed
// a regular file over the named pipe (or over /dev/null).
func TestCheckFilesRefusesWhatCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(dir, "loop")
	os.Symlink("loop", loop)
	for _, tt := range []struct {
		f    File
		want string
	}{
		{File{What: "-csv " + fifo, Path: fifo, Write: true}, "-csv " + fifo + " is a named pipe, not a regular file"},
		{File{What: "-png " + loop, Path: loop, Write: true}, "-png " + loop + ": too many levels of symbolic links"},
		{File{What: "-o x", Path: filepath.Join(dir, "no", "x"), Write: true}, "-o x: there is no directory " + filepath.Join(dir, "no") + " to write it in"},
	} {
		if err := CheckFiles(tt.f); err == nil || err.Error() != tt.want {
			t.Errorf("%v, want %q", err, tt.want)
		}
	}
	// Read files and standard output are not checked.
	if err := CheckFiles(File{What: "-cal", Path: fifo}, File{What: "-o -", Path: "-", Write: true}); err != nil {
		t.Error(err)
	}
}
