package main

import (
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
