// Package atomicfile writes the files the commands leave behind
// (checkpoints, reports, pictures, tables, plans) whole or not at all, and
// only over regular files.
//
// A file is written to a temporary file beside it, synced, then renamed
// over it, and the directory synced: a crash, a full disk or a kill
// leaves the old file or the new one, never a part of one. A rename does
// not follow a symbolic link, it replaces it, and it replaces whatever the
// name held: so the path is resolved first, through its links, and a name
// that holds something other than a regular file is refused. Without
// that, `-report /dev/null` replaced the device by a regular file (as
// root, for every later user of /dev/null), and a checkpoint given as a
// link to the real file replaced the link and left the real file behind.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxLinks bounds the symbolic links followed to the file, as the kernel
// bounds them (40 on Linux).
const maxLinks = 40

// NotRegularError says that a path names something a writer must not
// replace: a directory, a device, a named pipe or a socket.
type NotRegularError struct {
	Path string
	Kind string // "a directory", "a character device", ...
}

// Error says what the path is.
func (e *NotRegularError) Error() string {
	return e.Path + e.Phrase()
}

// Phrase is what the error says of the path, after its name: " is a
// directory", " is a named pipe, not a regular file".
func (e *NotRegularError) Phrase() string {
	if e.Kind == "a directory" {
		return " is a directory"
	}
	return " is " + e.Kind + ", not a regular file"
}

// Target is the file Write replaces for path: path itself, or where its
// symbolic links lead (a link that leads to no file yet: the file it
// would create). It refuses, with a *NotRegularError, a path that leads to
// anything but a regular file, and a loop of links.
func Target(path string) (string, error) {
	target := path
	for range maxLinks {
		fi, err := os.Lstat(target)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			return target, nil // to be created (or not: no directory, which creating says)
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			if !fi.Mode().IsRegular() {
				return "", &NotRegularError{Path: path, Kind: kind(fi.Mode())}
			}
			return target, nil
		}
		link, err := os.Readlink(target)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = link
	}
	return "", &fs.PathError{Op: "write", Path: path, Err: syscall.ELOOP}
}

// kind names a file mode that is not a regular file's.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// Write writes what write writes to path, whole or not at all, with mode
// perm: into a temporary file in the directory of Target(path), synced,
// renamed over the target, the directory synced. On any error the
// temporary file is removed and the target is as it was.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) (err error) {
	target, err := Target(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	f, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), target); err != nil {
		return err
	}
	// Sync the directory so that the rename itself survives a crash; not
	// every platform can, so a failure here is not an error.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteBytes is Write of data.
func WriteBytes(path string, perm fs.FileMode, data []byte) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
