package flagx

import (
	"os"
	"path/filepath"
	"strings"
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
