package es_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/esgrid/esgrid/es"
)

// A checkpoint given as a symbolic link is written where the link leads,
// the link kept: the old code renamed the new checkpoint over the link,
// so the file it named kept the old state ("the file the link names held
// what it held before"). And a path that holds no regular file (here a
// named pipe, as /dev/null is a device) is refused and left as it is: the
// old code replaced it by a regular file.
func TestSaveCheckpointThroughLinkNeverOverOtherFiles(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.ckpt")
	link := filepath.Join(dir, "link.ckpt")
	if err := os.Symlink("real.ckpt", link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("an older run"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, sphereConfig(3))
	record(t, e, sphere, es.RunOptions{Checkpoint: link})
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer a link: %v, %v", fi.Mode(), err)
	}
	if got, err := es.LoadCheckpoint(real); err != nil {
		t.Errorf("the file the link names: %v", err)
	} else if got.Gen() != e.Gen() {
		t.Errorf("the file the link names holds generation %d, want %d", got.Gen(), e.Gen())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("files left: %v", entries)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	err := es.SaveCheckpoint(fifo, e)
	if err == nil || !strings.Contains(err.Error(), fifo+" is a named pipe, not a regular file") {
		t.Errorf("checkpoint over a named pipe: %v", err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the named pipe was replaced: %v, %v", fi.Mode(), err)
	}
}

// Two runs that write the same checkpoint do not replace each other's
// generation after generation: the one that finds the other's file at its
// next checkpoint stops, and the file stays the other's. The old code ran
// on ("run ended normally: generations") and wrote over the other run's
// checkpoint, so a resume continued whichever wrote last.
func TestCheckpointWrittenByAnotherRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	other := newEngine(t, sphereConfig(2))
	record(t, other, sphere, es.RunOptions{})
	e := newEngine(t, sphereConfig(6))
	_, err := e.Run(context.Background(), sphere, es.RunOptions{Checkpoint: path, OnGeneration: func(s es.Stats) error {
		if s.Gen == 2 {
			// Another run, given the same file, writes it.
			return es.SaveCheckpoint(path, other)
		}
		return nil
	}})
	want := "es: checkpoint " + path + ": replaced by another process since this run wrote it after generation 2: two runs write this file"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, es.ErrCheckpointReplaced) {
		t.Errorf("run ended with %v, want %q", err, want)
	}
	got, lerr := es.LoadCheckpoint(path)
	if lerr != nil {
		t.Fatal(lerr)
	}
	if got.Gen() != other.Gen() {
		t.Errorf("the checkpoint holds generation %d, want the other run's %d", got.Gen(), other.Gen())
	}
}
