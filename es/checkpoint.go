package es

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/esgrid/esgrid/internal/atomicfile"
)

// The checkpoint file format: a 52-byte header, then the state in msgpack.
//
//	offset  size  content
//	0       8     magic "esgrid\x00C"
//	8       4     format version, big-endian (checkpointVersion)
//	12      8     length of the body in bytes, big-endian
//	20      32    SHA-256 of bytes 0..19 followed by the body
//	52      …     the body: msgpack of checkpoint (config, generation, state, notes)
//
// The checksum covers the header fields and the whole body, the Config the
// state belongs to included, so any changed byte is an error rather than a
// silently different run. Version 4 added the run's notes; a version 3
// checkpoint is read as one without notes. Version 1 checkpoints (bare
// msgpack, no header) and version 2 (CMA-ES before its bound penalty and
// restarts) are not read. An older program refuses version 4 rather than
// resume the run without its notes (the hosts -verify excluded).
const (
	checkpointMagic   = "esgrid\x00C"
	checkpointVersion = 4
	oldestVersion     = 3 // the oldest version read
	headerSize        = 8 + 4 + 8 + sha256.Size
)

// MaxCheckpointSize bounds the body of a checkpoint that LoadCheckpoint and
// UnmarshalBinary accept: 1 GiB, far above any state that fits in memory
// with room to run (a CMA-ES state of MaxCMADim coordinates is 64 MB).
const MaxCheckpointSize = 1 << 30

// checkpoint is the body: everything a resumed run needs. No RNG state is
// stored because generation g's batch comes from (Seed, g).
type checkpoint struct {
	Config  Config         `msgpack:"config"`
	Gen     int            `msgpack:"gen"` // the next generation to run
	Evals   int            `msgpack:"evals"`
	NaNs    int            `msgpack:"nans"`
	Parents []Individual   `msgpack:"parents"`
	Best    Individual     `msgpack:"best"`
	CMA     *cmaCheckpoint `msgpack:"cma"`             // CMA-ES only
	Notes   noteList       `msgpack:"notes,omitempty"` // version 4; none in version 3
}

// CheckpointError says why a checkpoint cannot be read: damaged, of
// another format, or not a checkpoint at all.
type CheckpointError struct{ Msg string }

// Error returns the reason.
func (e *CheckpointError) Error() string { return e.Msg }

func checkpointErrorf(format string, args ...any) error {
	return &CheckpointError{Msg: fmt.Sprintf(format, args...)}
}

// MarshalBinary encodes the engine's state at the last completed generation
// in the checkpoint format: header, checksum, msgpack body. A batch that was
// asked but not told is not part of the state: it is regenerated,
// identically, by the next Ask.
func (e *Engine) MarshalBinary() ([]byte, error) {
	if e.parents == nil {
		return nil, errors.New("es: no state to save before generation 0 is told")
	}
	c := checkpoint{
		Config:  e.cfg,
		Gen:     e.gen,
		Evals:   e.evals,
		NaNs:    e.nans,
		Parents: e.parents,
		Best:    e.best,
		Notes:   e.notes,
	}
	if e.cma != nil {
		c.CMA = e.cma.checkpoint()
	}
	body, err := msgpack.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("es: encode state: %w", err)
	}
	out := make([]byte, headerSize, headerSize+len(body))
	copy(out, checkpointMagic)
	binary.BigEndian.PutUint32(out[8:], checkpointVersion)
	binary.BigEndian.PutUint64(out[12:], uint64(len(body)))
	out = append(out, body...)
	sum := checksum(out[:20], body)
	copy(out[20:headerSize], sum[:])
	return out, nil
}

// checksum is the SHA-256 of the header's first 20 bytes and the body.
func checksum(head, body []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(head)
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// parseHeader checks a checkpoint header and returns the body's length.
func parseHeader(h []byte) (int, error) {
	if len(h) < headerSize {
		return 0, checkpointErrorf("not a checkpoint: %d bytes, shorter than the %d-byte header", len(h), headerSize)
	}
	if string(h[:8]) != checkpointMagic {
		return 0, checkpointErrorf("not an esgrid checkpoint (no checkpoint header; checkpoints of format 1 are no longer read)")
	}
	if v := binary.BigEndian.Uint32(h[8:]); v < oldestVersion || v > checkpointVersion {
		return 0, checkpointErrorf("checkpoint format version %d, this program reads versions %d to %d", v, oldestVersion, checkpointVersion)
	}
	n := binary.BigEndian.Uint64(h[12:])
	if n > MaxCheckpointSize {
		return 0, checkpointErrorf("the header announces a body of %d bytes, more than the limit of %d: damaged", n, MaxCheckpointSize)
	}
	return int(n), nil
}

// UnmarshalBinary replaces the engine's state with one encoded by
// MarshalBinary, after checking the header, the checksum and that the
// state is consistent. A *CheckpointError says why data is refused.
func (e *Engine) UnmarshalBinary(data []byte) error {
	n, err := parseHeader(data)
	if err != nil {
		return fmt.Errorf("es: decode state: %w", err)
	}
	if len(data)-headerSize != n {
		return fmt.Errorf("es: decode state: %w", checkpointErrorf("%d bytes after the header, the header announces %d: damaged or truncated", len(data)-headerSize, n))
	}
	if err := e.decodeBody(data[:headerSize], data[headerSize:]); err != nil {
		return fmt.Errorf("es: decode state: %w", err)
	}
	return nil
}

// decodeBody verifies the checksum of a body whose header has been
// checked, decodes it and replaces e's state with it.
func (e *Engine) decodeBody(header, body []byte) error {
	if sum := checksum(header[:20], body); !bytes.Equal(sum[:], header[20:headerSize]) {
		return checkpointErrorf("checksum mismatch: the checkpoint is damaged")
	}
	var c checkpoint
	if err := msgpack.Unmarshal(body, &c); err != nil {
		// A good checksum over a body that does not decode: not written
		// by SaveCheckpoint (the checksum is not a seal).
		return checkpointErrorf("damaged: the state does not decode: %v", err)
	}
	if err := c.check(); err != nil {
		return err
	}
	fresh, err := New(c.Config)
	if err != nil {
		return err
	}
	if fresh.cfg != c.Config {
		// A stored config always has its defaults filled in.
		return checkpointErrorf("config without its defaults")
	}
	if fresh.cma != nil {
		if c.CMA == nil {
			return checkpointErrorf("CMA-ES checkpoint without its state")
		}
		if err := fresh.cma.restore(c.CMA, c.Gen, c.Evals); err != nil {
			return err
		}
	} else if c.CMA != nil {
		return checkpointErrorf("ES checkpoint with a CMA-ES state")
	}
	fresh.gen, fresh.evals, fresh.nans = c.Gen, c.Evals, c.NaNs
	fresh.parents, fresh.best = c.Parents, c.Best
	fresh.notes = c.Notes
	fresh.last = fresh.stats(c.Gen - 1)
	*e = *fresh
	return nil
}

// check rejects a state that New and Tell could not have produced, so a
// damaged file fails here rather than deep inside a run.
func (c *checkpoint) check() error {
	cfg := c.Config
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	if c.Gen < 1 {
		return fmt.Errorf("generation %d, want ≥ 1", c.Gen)
	}
	// CMA-ES's evaluations follow its runs (cmaState.restore), and its
	// parents are the μ best of the last generation, whose run may have
	// ended with it.
	if cfg.Strategy == StrategyCMA {
		if c.CMA == nil {
			return checkpointErrorf("CMA-ES checkpoint without its state")
		}
		if len(c.Parents) < 1 || len(c.Parents) > cfg.Lambda<<maxDoublings {
			return fmt.Errorf("%d parents", len(c.Parents))
		}
	} else if want := cfg.firstBatch() + (c.Gen-1)*cfg.Lambda; c.Evals != want {
		return fmt.Errorf("%d evaluations after generation %d, want %d", c.Evals, c.Gen-1, want)
	} else if len(c.Parents) != cfg.Mu {
		return fmt.Errorf("%d parents, want %d", len(c.Parents), cfg.Mu)
	}
	if err := checkNotes(c.Notes); err != nil {
		return checkpointErrorf("%v: damaged", err)
	}
	if c.NaNs < 0 || c.NaNs > c.Evals {
		return fmt.Errorf("%d NaN values out of %d evaluations", c.NaNs, c.Evals)
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

// SaveCheckpoint writes e's state to path atomically (atomicfile.Write):
// to a temporary file in the same directory, synced, then renamed over
// path, mode 0600. A crash leaves either the old checkpoint or the new
// one, never a torn file. A path that is a symbolic link is written
// through; one that is not a regular file (a device, a directory) is
// refused.
func SaveCheckpoint(path string, e *Engine) error {
	data, err := e.MarshalBinary()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(path, 0o600, data); err != nil {
		return fmt.Errorf("es: checkpoint %s: %w", path, err)
	}
	return nil
}

// LoadCheckpoint returns an engine restored from a file written by
// SaveCheckpoint. Run on it continues exactly as the original run would
// have. It reads the header first and refuses, before reading further,
// anything that is not a checkpoint of this format or announces a body
// larger than MaxCheckpointSize or than the file; so a wrong file (even
// /dev/zero) fails at once with a *CheckpointError in the chain.
func LoadCheckpoint(path string) (*Engine, error) {
	fail := func(err error) (*Engine, error) {
		return nil, fmt.Errorf("es: resume from %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("es: resume: %w", err)
	}
	defer f.Close()
	header := make([]byte, headerSize)
	if k, err := io.ReadFull(f, header); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(checkpointErrorf("not a checkpoint: %d bytes, shorter than the %d-byte header", k, headerSize))
		}
		return fail(err)
	}
	n, err := parseHeader(header)
	if err != nil {
		return fail(err)
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size()-headerSize != int64(n) {
		return fail(checkpointErrorf("%d bytes after the header, the header announces %d: damaged or truncated", st.Size()-headerSize, n))
	}
	// Read at most one byte more than announced, growing the buffer as the
	// bytes arrive, so a pipe that lies about its length costs little.
	body, err := io.ReadAll(io.LimitReader(f, int64(n)+1))
	if err != nil {
		return fail(err)
	}
	if len(body) != n {
		return fail(checkpointErrorf("%d bytes after the header, the header announces %d: damaged or truncated", len(body), n))
	}
	var e Engine
	if err := e.decodeBody(header, body); err != nil {
		return fail(err)
	}
	return &e, nil
}
