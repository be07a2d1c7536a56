package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
)

// Sealed frames. Once two peers share a secret (the grid's handshake
// derives one pair of keys per connection), every frame is sealed with
// AES-256-GCM:
//
//	length  uint32, big-endian: the bytes that follow (sealed payload)
//	payload AES-GCM(key, nonce, type ‖ body, additional data = length)
//
// The nonce is never sent: it is the frame's sequence number in its
// direction (0, 1, 2, …, as 8 big-endian bytes after 4 zero bytes), which
// sender and receiver count independently. A frame altered in any bit, a
// frame replayed, a frame dropped (the next one is opened with the wrong
// number) and frames reordered all fail to open, and the reader returns
// an error wrapping ErrAuth and ErrMalformed. The type byte is sealed
// too, so that an observer learns only the frames' sizes and timing.
//
// AES-GCM rather than ChaCha20-Poly1305: it is in the standard library
// (no new dependency), it is what memberlist already uses for gossip,
// and on the grid's machines (x86-64 and arm64, with AES and carry-less
// multiply instructions) it is the faster of the two and constant-time.

// SealOverhead is the bytes sealing adds to a frame: the GCM tag.
const SealOverhead = 16

// SealKeyLen is the length of a sealing key (AES-256).
const SealKeyLen = 32

// ErrAuth means a sealed frame failed to open: altered, replayed,
// reordered, a frame missing before it, or sealed with another key.
var ErrAuth = errors.New("wire: frame failed authentication (altered, replayed, reordered or dropped on the way)")

// sealState is one direction's AEAD and its frame counter.
type sealState struct {
	aead  cipher.AEAD
	seq   uint64
	nonce [12]byte
}

func newSealState(key []byte) (sealState, error) {
	if len(key) != SealKeyLen {
		return sealState{}, fmt.Errorf("wire: sealing key of %d bytes, want %d", len(key), SealKeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealState{}, fmt.Errorf("wire: sealing key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealState{}, fmt.Errorf("wire: sealing key: %w", err)
	}
	return sealState{aead: aead}, nil
}

// next sets the nonce to the current sequence number and advances it.
func (s *sealState) next() ([]byte, error) {
	if s.seq == ^uint64(0) {
		return nil, errors.New("wire: sequence numbers exhausted")
	}
	binary.BigEndian.PutUint64(s.nonce[4:], s.seq)
	s.seq++
	return s.nonce[:], nil
}

// Sealer seals the frames of one direction of a connection. It is not
// safe for concurrent use: frames must be sealed in the order they are
// sent.
type Sealer struct{ s sealState }

// NewSealer returns a sealer for key (SealKeyLen bytes), its counter at 0.
func NewSealer(key []byte) (*Sealer, error) {
	s, err := newSealState(key)
	if err != nil {
		return nil, err
	}
	return &Sealer{s: s}, nil
}

// Frames reports how many frames the sealer has sealed.
func (s *Sealer) Frames() uint64 { return s.s.seq }

// sealFrame seals the frame in b, whose length prefix says n (type and
// body, b[4:4+n]) and after which b has SealOverhead spare bytes. It
// rewrites the prefix to the sealed length.
func (s *Sealer) sealFrame(b []byte, n int) error {
	nonce, err := s.s.next()
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(b, uint32(n+SealOverhead))
	s.s.aead.Seal(b[4:4], nonce, b[4:4+n], b[:4])
	return nil
}

// Opener opens the frames of one direction of a connection, in order. It
// is not safe for concurrent use.
type Opener struct{ s sealState }

// NewOpener returns an opener for key (SealKeyLen bytes), expecting frame
// number 0 first.
func NewOpener(key []byte) (*Opener, error) {
	s, err := newSealState(key)
	if err != nil {
		return nil, err
	}
	return &Opener{s: s}, nil
}

// Frames reports how many frames the opener has opened.
func (o *Opener) Frames() uint64 { return o.s.seq }

// open opens payload in place; hdr is the frame's length prefix as
// received. It returns type and body.
func (o *Opener) open(hdr, payload []byte) ([]byte, error) {
	if len(payload) < SealOverhead+1 {
		return nil, fmt.Errorf("%w: %w: sealed frame %d of %d bytes", ErrMalformed, ErrAuth, o.s.seq, len(payload))
	}
	binary.BigEndian.PutUint64(o.s.nonce[4:], o.s.seq)
	pt, err := o.s.aead.Open(payload[:0], o.s.nonce[:], payload, hdr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: frame %d", ErrMalformed, ErrAuth, o.s.seq)
	}
	o.s.seq++
	return pt, nil
}

// SealFrame seals in place the one plain frame that dst[start:] holds
// and returns dst with room for the tag appended. It is for callers that
// build frames without an Encoder; an Encoder with Seal set does it
// itself.
func (s *Sealer) SealFrame(dst []byte, start int) ([]byte, error) {
	if len(dst)-start < HeaderLen {
		return dst, fmt.Errorf("%w: no frame to seal", ErrMalformed)
	}
	n := int(binary.BigEndian.Uint32(dst[start:]))
	if n != len(dst)-start-4 {
		return dst, fmt.Errorf("%w: seal: length prefix %d, frame of %d bytes", ErrMalformed, n, len(dst)-start-4)
	}
	var tag [SealOverhead]byte
	dst = append(dst, tag[:]...)
	return dst, s.sealFrame(dst[start:], n)
}

// OpenFrame opens the one sealed frame b (length prefix included) in
// place and returns its type and body, which alias b.
func (o *Opener) OpenFrame(b []byte) (t byte, body []byte, err error) {
	if len(b) < 4 || int(binary.BigEndian.Uint32(b)) != len(b)-4 {
		return 0, nil, fmt.Errorf("%w: not one whole frame", ErrMalformed)
	}
	pt, err := o.open(b[:4], b[4:])
	if err != nil {
		return 0, nil, err
	}
	return pt[0], pt[1:], nil
}
