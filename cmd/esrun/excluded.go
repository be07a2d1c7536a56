package main

import (
	"errors"
	"fmt"

	"github.com/esgrid/esgrid/es"
	"github.com/esgrid/esgrid/grid"
)

// A host -verify excluded stays excluded when the run is resumed: the
// checkpoint keeps it as a note (es.Note, opaque to the engine), and
// the resumed run's master starts with it (grid.MasterConfig.Excluded).

// noteExcluded is the kind of the notes that keep excluded hosts: Key
// the host, Value why.
const noteExcluded = "excluded"

// exclusionsOf returns the hosts a checkpoint's notes keep excluded,
// checked: a note of another kind, or a malformed host or reason, is an
// error.
func exclusionsOf(notes []es.Note) ([]grid.Exclusion, error) {
	var xs []grid.Exclusion
	for _, n := range notes {
		if n.Kind != noteExcluded {
			return nil, fmt.Errorf("a run note of kind %.40q, which this esrun does not know", n.Kind)
		}
		x := grid.Exclusion{Host: n.Key, Why: n.Value}
		if err := x.Validate(); err != nil {
			return nil, err
		}
		xs = append(xs, x)
	}
	return xs, nil
}

// notesOf returns the notes that keep xs in a checkpoint.
func notesOf(xs []grid.Exclusion) []es.Note {
	var notes []es.Note
	for _, x := range xs {
		notes = append(notes, es.Note{Kind: noteExcluded, Key: x.Host, Value: x.Why})
	}
	return notes
}

// tooManyExcluded says what err means when it is the engine's refusal
// of more notes than a checkpoint keeps (es.MaxNotes): esrun's notes are
// the hosts -verify excluded, and so many of them that disagree with the
// others is rarely a few bad machines. It returns any other err as it is.
func tooManyExcluded(err error) error {
	var tm *es.TooManyNotesError
	if !errors.As(err, &tm) {
		return err
	}
	return fmt.Errorf("%w: -verify has excluded %d hosts from the run, more than a checkpoint keeps for -resume (%d), so the run stops. "+
		"So many hosts whose values differ from the others' mostly means that the problem does not give the same bits on every machine "+
		"(see \"Writing a plugin\" in docs/plugins.md), or that a key holder answers from many addresses; fix that, "+
		"or start the run again without -checkpoint, which keeps no exclusions", err, tm.N, es.MaxNotes)
}
