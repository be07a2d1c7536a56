package es

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/vmihailenco/msgpack/v5"
)

// checkpointVersion is bumped whenever the checkpoint layout changes.
const checkpointVersion = 1

// checkpoint is the file format: everything a resumed run needs. No RNG
// state is stored because generation g's offspring come from (Seed, g).
type checkpoint struct {
	Version int          `msgpack:"version"`
	Config  Config       `msgpack:"config"`
	Gen     int          `msgpack:"gen"` // the next generation to run
	Evals   int          `msgpack:"evals"`
	NaNs    int          `msgpack:"nans"`
	Parents []Individual `msgpack:"parents"`
	Best    Individual   `msgpack:"best"`
}

// MarshalBinary encodes the engine's state at the last completed generation
// as msgpack. A batch that was asked but not told is not part of the state:
// it is regenerated, identically, by the next Ask.
func (e *Engine) MarshalBinary() ([]byte, error) {
	if e.parents == nil {
		return nil, errors.New("es: no state to save before generation 0 is told")
	}
	b, err := msgpack.Marshal(checkpoint{
		Version: checkpointVersion,
		Config:  e.cfg,
		Gen:     e.gen,
		Evals:   e.evals,
		NaNs:    e.nans,
		Parents: e.parents,
		Best:    e.best,
	})
	if err != nil {
		return nil, fmt.Errorf("es: encode state: %w", err)
	}
	return b, nil
}

// UnmarshalBinary replaces the engine's state with one encoded by
// MarshalBinary, after checking that it is consistent.
func (e *Engine) UnmarshalBinary(data []byte) error {
	var c checkpoint
	if err := msgpack.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("es: decode state: %w", err)
	}
	if err := c.check(); err != nil {
		return fmt.Errorf("es: decode state: %w", err)
	}
	fresh, err := New(c.Config)
	if err != nil {
		return err
	}
	fresh.gen, fresh.evals, fresh.nans = c.Gen, c.Evals, c.NaNs
	fresh.parents, fresh.best = c.Parents, c.Best
	fresh.last = fresh.stats(c.Gen - 1)
	*e = *fresh
	return nil
}

// check rejects a state that New and Tell could not have produced, so a
// damaged file fails here rather than deep inside a run.
func (c *checkpoint) check() error {
	cfg := c.Config
	if c.Version != checkpointVersion {
		return fmt.Errorf("version %d, want %d", c.Version, checkpointVersion)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if c.Gen < 1 {
		return fmt.Errorf("generation %d, want ≥ 1", c.Gen)
	}
	if want := cfg.Mu + (c.Gen-1)*cfg.Lambda; c.Evals != want {
		return fmt.Errorf("%d evaluations after generation %d, want %d", c.Evals, c.Gen-1, want)
	}
	if c.NaNs < 0 || c.NaNs > c.Evals {
		return fmt.Errorf("%d NaN values out of %d evaluations", c.NaNs, c.Evals)
	}
	if len(c.Parents) != cfg.Mu {
		return fmt.Errorf("%d parents, want %d", len(c.Parents), cfg.Mu)
	}
	for i, p := range append([]Individual{c.Best}, c.Parents...) {
		if len(p.X) != cfg.Dim || len(p.Sigma) != cfg.Dim {
			return fmt.Errorf("individual %d: vector lengths %d and %d, want %d", i, len(p.X), len(p.Sigma), cfg.Dim)
		}
		for j := range p.X {
			if !(p.X[j] >= cfg.Lower && p.X[j] <= cfg.Upper) || !(p.Sigma[j] >= 0 && !math.IsInf(p.Sigma[j], 0)) {
				return fmt.Errorf("individual %d: coordinate %d out of range", i, j)
			}
		}
	}
	return nil
}

// SaveCheckpoint writes e's state to path atomically: to a temporary file in
// the same directory, synced, then renamed over path. A crash leaves either
// the old checkpoint or the new one, never a torn file.
func SaveCheckpoint(path string, e *Engine) (err error) {
	data, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("es: checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("es: checkpoint %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	// Sync the directory so the rename itself survives a crash; not every
	// platform can, so a failure here is not an error.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// LoadCheckpoint returns an engine restored from a file written by
// SaveCheckpoint. Run on it continues exactly as the original run would
// have.
func LoadCheckpoint(path string) (*Engine, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("es: resume: %w", err)
	}
	var e Engine
	if err := e.UnmarshalBinary(data); err != nil {
		return nil, fmt.Errorf("es: resume from %s: %w", path, err)
	}
	return &e, nil
}
