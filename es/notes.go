package es

import (
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// Note is a fact about a run that is not the ES's state but that the
// program driving the run keeps in its checkpoints, to have it back when
// the run is resumed: esrun keeps there each host that -verify excluded
// (Kind "excluded", Key the host, Value why). The engine stores notes
// and gives them back; it never reads them, so they cannot change the
// run's trajectory.
type Note struct {
	Kind  string `msgpack:"kind"`
	Key   string `msgpack:"key"`
	Value string `msgpack:"value"`
}

// Bounds on a run's notes, checked when they are set and when a
// checkpoint is read, so that a damaged or hostile checkpoint costs
// little: at most MaxNotes notes, each field at most MaxNoteLen bytes.
const (
	MaxNotes   = 4096
	MaxNoteLen = 1024
)

// TooManyNotesError is the error of SetNotes (and of Run, wrapped) given
// more than MaxNotes notes: the program that made them knows what they
// are, and can say what to do.
type TooManyNotesError struct {
	N int // the notes given
}

// Error says how many notes there were, and the bound.
func (e *TooManyNotesError) Error() string {
	return fmt.Sprintf("%d run notes, at most %d", e.N, MaxNotes)
}

// Notes returns the run's notes: those of the checkpoint the engine was
// restored from, or those last set (SetNotes, RunOptions.Notes). A new
// engine has none.
func (e *Engine) Notes() []Note { return slices.Clone(e.notes) }

// SetNotes replaces the notes that the engine's checkpoints carry from
// now on. It refuses more than MaxNotes notes (a *TooManyNotesError), a
// field longer than MaxNoteLen bytes and a note without a Kind.
func (e *Engine) SetNotes(notes []Note) error {
	if err := checkNotes(notes); err != nil {
		return fmt.Errorf("es: %w", err)
	}
	e.notes = slices.Clone(notes)
	return nil
}

// checkNotes checks notes against MaxNotes and MaxNoteLen.
func checkNotes(notes []Note) error {
	if len(notes) > MaxNotes {
		return &TooManyNotesError{N: len(notes)}
	}
	for i, n := range notes {
		if n.Kind == "" {
			return fmt.Errorf("run note %d has no kind", i)
		}
		if l := max(len(n.Kind), len(n.Key), len(n.Value)); l > MaxNoteLen {
			return fmt.Errorf("run note %d (%.40q) has a field of %d bytes, at most %d", i, n.Kind, l, MaxNoteLen)
		}
	}
	return nil
}

// noteList is a checkpoint's notes. It decodes itself so that their
// number is checked before anything is allocated for them; a string
// cannot be longer than the body it is read from, already bounded by
// MaxCheckpointSize, and checkpoint.check checks the lengths.
type noteList []Note

// DecodeMsgpack implements msgpack.CustomDecoder.
func (l *noteList) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n > MaxNotes {
		return checkpointErrorf("%d run notes, at most %d: damaged", n, MaxNotes)
	}
	if n <= 0 {
		*l = nil // -1 is nil
		return nil
	}
	notes := make([]Note, n)
	for i := range notes {
		if err := d.Decode(&notes[i]); err != nil {
			return err
		}
	}
	*l = notes
	return nil
}
