package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// checkOutputFiles refuses, before any work, a run that would replace a
// file it did not write: an existing -checkpoint (unless it is the one
// -resume continues) or -report, without -force.
func checkOutputFiles(o *options) error {
	for _, f := range []struct{ flag, path string }{{"-checkpoint", o.checkpoint}, {"-report", o.report}} {
		if f.path == "" {
			continue
		}
		// A file that cannot be written at all fails now, not after
		// the first generation's work.
		dir := filepath.Dir(f.path)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return usagef("%s %s: there is no directory %s to write it in", f.flag, f.path, dir)
		}
		if fi, err := os.Stat(f.path); err == nil && fi.IsDir() {
			return usagef("%s %s is a directory", f.flag, f.path)
		}
	}
	if o.force {
		return nil
	}
	if o.checkpoint != "" && !(o.resume != "" && sameFile(o.checkpoint, o.resume)) {
		switch exists, err := fileExists(o.checkpoint); {
		case err != nil:
			return usagef("-checkpoint %s: %v", o.checkpoint, err)
		case exists:
			return usagef("-checkpoint %s: the file exists, and this run would replace it; continue that run with -resume %s, or give -force to start afresh over it", o.checkpoint, o.checkpoint)
		}
	}
	if o.report != "" {
		switch exists, err := fileExists(o.report); {
		case err != nil:
			return usagef("-report %s: %v", o.report, err)
		case exists:
			return usagef("-report %s: the file exists, and this run would replace it; name another file, or give -force to replace it", o.report)
		}
	}
	return nil
}

// fileExists says whether path names anything at all (a dangling symbolic
// link included: writing through it would create a file elsewhere).
func fileExists(path string) (bool, error) {
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

// sameFile says whether a and b name the same file: the same path, or two
// paths to one file.
func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// resumableCheckpoint is the checkpoint a failed run can be continued
// from, or "" when there is none: the -checkpoint file if this run wrote
// it (wrote: a generation completed, and the engine writes the checkpoint
// before it reports one), else the -resume file the run started from;
// either only if it is there now.
func resumableCheckpoint(o *options, wrote bool) string {
	var candidates []string
	if wrote {
		candidates = append(candidates, o.checkpoint)
	}
	for _, path := range append(candidates, o.resume) {
		if path == "" {
			continue
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			return path
		}
	}
	return ""
}
