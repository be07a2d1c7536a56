package flagx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/esgrid/esgrid/internal/atomicfile"
)

// File is a path a command writes or reads, as a check of the command
// line sees it.
type File struct {
	// What names it in the error: "-checkpoint R.partial", "the partial
	// report R.partial of -report R".
	What string
	Path string
	// Write: the command writes it (else it reads it and needs it).
	Write bool
}

// CheckFiles refuses a command line on which a written file cannot be
// written (CheckWritable), or two written files, or a written file and a
// read one, are the same file: the same path once made absolute and
// cleaned, through symbolic links to directories too, or two names of one
// existing file (a symbolic or hard link). Files with an empty Path are
// skipped; "-" (standard output) is no file.
func CheckFiles(files ...File) error {
	for _, f := range files {
		if f.Write && f.Path != "" && f.Path != "-" {
			if p := unwritable(f.Path); p != "" {
				return errors.New(f.What + p)
			}
		}
	}
	for i, a := range files {
		for _, b := range files[i+1:] {
			if !a.Write && !b.Write {
				continue
			}
			if SameFile(a.Path, b.Path) {
				return fmt.Errorf("%s and %s are the same file: name another, so that neither overwrites the other", a.What, b.What)
			}
		}
	}
	return nil
}

// SameFile says whether paths a and b name one file, existing or not.
func SameFile(a, b string) bool {
	if a == "" || b == "" || a == "-" || b == "-" {
		return false
	}
	if canonical(a) == canonical(b) {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// canonical is path absolute and clean, with the symbolic links in it
// resolved as far as they lead to something that exists.
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	// A dangling symbolic link: where it points, which a writer that
	// follows it would create.
	for range 8 {
		target, err := os.Readlink(abs)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		abs = filepath.Clean(target)
	}
	// The file itself may not exist yet: resolve its directory.
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// CheckWritable refuses, before any work, a file a command is to write
// that it cannot: there is no directory to write it in, or it is not a
// regular file (a directory, a device such as /dev/null, a named pipe),
// or its symbolic links loop; atomicfile.Write, which writes it, would
// refuse it too, but only once the work is done. What names it ("-report").
func CheckWritable(what, path string) error {
	if p := unwritable(path); p != "" {
		return errors.New(what + " " + path + p)
	}
	return nil
}

// unwritable says what is wrong with path as a file to write, as the end
// of a sentence that names it, or "".
func unwritable(path string) string {
	target, err := atomicfile.Target(path)
	var nr *atomicfile.NotRegularError
	switch {
	case errors.As(err, &nr):
		return nr.Phrase()
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return ": " + err.Error()
	}
	dir := filepath.Dir(target)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ": there is no directory " + dir + " to write it in"
	}
	return ""
}

// Exists says whether path names anything at all (a dangling symbolic
// link included: writing through it would create a file elsewhere). Its
// error does not repeat the path.
func Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is in the message already
	}
	return false, err
}

// FirstRegular is the first of paths that is a regular file now, or ""
// (empty paths skipped).
func FirstRegular(paths ...string) string {
	for _, path := range paths {
		if path == "" {
			continue
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			return path
		}
	}
	return ""
}
