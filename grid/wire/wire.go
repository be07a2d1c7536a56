// Package wire is esgrid's one framing: length-prefixed, capped msgpack
// frames, and the rules for decoding them safely. The grid's protocol
// (package grid) and the problem-plugin protocol (package problems/plugin)
// both speak it; each defines its own message types on top.
//
// A frame is
//
//	length uint32, big-endian: the number of bytes that follow (type + body)
//	type   one byte, which says what the body is
//	body   one msgpack value
//
// Nothing in a frame is trusted. The length is checked against a cap before
// any buffer is sized for it; a stream reader grows its buffer only as bytes
// actually arrive. Before msgpack sees a body, Validate walks it and checks
// that every length and count it claims fits in the bytes present (each
// element takes at least one byte), that containers nest at most MaxNesting
// deep, that no extension type appears and that the body is exactly one
// value. After that, decoding into a concrete type cannot be made to
// allocate much more than the frame's own size, nor to recurse deeply.
// Bodies are always decoded into concrete types, never into interface{}.
//
// The package imports only msgpack and the standard library.
package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// DefaultMaxFrame is the default cap on a frame's length (type byte plus
// body): 4 MiB.
const DefaultMaxFrame = 4 << 20

// HeaderLen is the length prefix plus the type byte.
const HeaderLen = 5

// MaxNesting bounds how deep containers nest inside one body.
const MaxNesting = 8

// Framing errors. Every error from reading or decoding a frame wraps
// ErrMalformed, except a stream that ends (io.EOF between frames,
// io.ErrUnexpectedEOF inside one) or fails; an oversized frame also wraps
// ErrFrameTooLarge. So a caller can tell a broken peer from a broken
// stream.
var (
	ErrMalformed     = errors.New("wire: malformed frame")
	ErrFrameTooLarge = errors.New("wire: frame too large")
	ErrUnknownType   = errors.New("wire: unknown message type")
)

// Encoder appends frames to a bytes.Buffer, reusing one msgpack encoder.
// It is not safe for concurrent use.
type Encoder struct {
	buf   *bytes.Buffer
	enc   *msgpack.Encoder
	max   int
	start int // offset of the open frame, -1 when none
	typ   byte
	seal  *Sealer // seals every frame when set (seal.go)
}

// NewEncoder returns an encoder that appends frames of at most maxFrame
// bytes (DefaultMaxFrame when maxFrame <= 0) to buf.
func NewEncoder(buf *bytes.Buffer, maxFrame int) *Encoder {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	// msgpack writes straight into a *bytes.Buffer (no buffering of its
	// own), so buf.Len() is exact after every call.
	return &Encoder{buf: buf, enc: msgpack.NewEncoder(buf), max: maxFrame, start: -1}
}

// MaxFrame is the encoder's cap on a frame's length.
func (e *Encoder) MaxFrame() int { return e.max }

// Seal makes End seal every frame from now on with s (see seal.go). The
// cap applies to the frame on the wire, tag included: a plain frame may
// take the cap less SealOverhead.
func (e *Encoder) Seal(s *Sealer) { e.seal = s }

// Begin opens a frame of type t and returns the msgpack encoder to write
// its body with; End closes it. Begin and End are the allocation-free
// path for hand-written codecs; Encode is the convenient one.
func (e *Encoder) Begin(t byte) *msgpack.Encoder {
	e.start = e.buf.Len()
	e.typ = t
	var hdr [HeaderLen]byte
	hdr[4] = t
	e.buf.Write(hdr[:])
	return e.enc
}

// End closes the frame opened by Begin. bodyErr is the error (if any) of
// writing the body. On any error the buffer is left as it was before
// Begin; a frame over the cap fails with ErrFrameTooLarge.
func (e *Encoder) End(bodyErr error) error {
	start := e.start
	if start < 0 {
		return errors.New("wire: End without Begin")
	}
	e.start = -1
	if bodyErr != nil {
		e.buf.Truncate(start)
		return fmt.Errorf("wire: encode type %d: %w", e.typ, bodyErr)
	}
	n := e.buf.Len() - start - 4
	limit := e.max
	if e.seal != nil {
		limit -= SealOverhead
	}
	if n > limit {
		e.buf.Truncate(start)
		return fmt.Errorf("%w: type %d of %d bytes, cap %d", ErrFrameTooLarge, e.typ, n, limit)
	}
	if e.seal != nil {
		var tag [SealOverhead]byte
		e.buf.Write(tag[:])
		if err := e.seal.sealFrame(e.buf.Bytes()[start:], n); err != nil {
			e.buf.Truncate(start)
			return err
		}
		return nil
	}
	binary.BigEndian.PutUint32(e.buf.Bytes()[start:], uint32(n))
	return nil
}

// Encode appends one frame of type t whose body is v: v's own
// EncodeMsgpack when it has one (msgpack.CustomEncoder), msgpack's
// reflection otherwise. Pass pointers to avoid an allocation.
func (e *Encoder) Encode(t byte, v any) error {
	enc := e.Begin(t)
	var err error
	if ce, ok := v.(msgpack.CustomEncoder); ok {
		err = ce.EncodeMsgpack(enc)
	} else {
		err = enc.Encode(v)
	}
	return e.End(err)
}

// AppendFrame appends the frame of type t with body v to dst and returns
// the extended slice; see Encoder.Encode.
func AppendFrame(dst []byte, t byte, v any, maxFrame int) ([]byte, error) {
	var buf bytes.Buffer
	if err := NewEncoder(&buf, maxFrame).Encode(t, v); err != nil {
		return dst, err
	}
	return append(dst, buf.Bytes()...), nil
}

// CheckLength checks a length prefix against maxFrame and returns it as
// an int: a frame is never empty (it has its type byte) and never longer
// than the cap.
func CheckLength(n uint32, maxFrame int) (int, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	if uint64(n) > uint64(maxFrame) {
		return 0, fmt.Errorf("%w: %w: length %d, cap %d", ErrMalformed, ErrFrameTooLarge, n, maxFrame)
	}
	return int(n), nil
}

// Split cuts the first frame out of b: its type, its body (aliasing b,
// not yet validated) and the number of bytes the frame took. A length
// over maxFrame (DefaultMaxFrame when maxFrame <= 0) is rejected before
// anything else; a b shorter than the frame is io.ErrUnexpectedEOF.
func Split(b []byte, maxFrame int) (t byte, body []byte, n int, err error) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if len(b) < 4 {
		return 0, nil, 0, io.ErrUnexpectedEOF
	}
	k, err := CheckLength(binary.BigEndian.Uint32(b), maxFrame)
	if err != nil {
		return 0, nil, 0, err
	}
	if len(b)-4 < k {
		return 0, nil, 0, io.ErrUnexpectedEOF
	}
	return b[4], b[5 : 4+k], 4 + k, nil
}

// Reader reads frames from a stream, reusing its buffer. It is not safe
// for concurrent use.
type Reader struct {
	r    *bufio.Reader
	max  int
	body []byte
	hdr  [4]byte // here, not on Next's stack: io.ReadFull would move it to the heap every frame
	read int64   // bytes of whole frames read, length prefixes included
	open *Opener // opens every frame when set (seal.go)
}

// readChunk is how much a Reader's buffer grows at a time while a frame
// arrives: a header that claims the cap and then stalls costs one chunk.
const readChunk = 64 << 10

// keepBuffer is the largest buffer a Reader keeps between frames; rare
// larger ones are let go.
const keepBuffer = 1 << 20

// NewReader reads frames of at most maxFrame bytes (DefaultMaxFrame when
// maxFrame <= 0) from r. If r is a *bufio.Reader it is used as is.
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &Reader{r: br, max: maxFrame}
}

// BytesRead is how many bytes the frames read so far took on the stream,
// length prefixes included.
func (fr *Reader) BytesRead() int64 { return fr.read }

// Open makes Next open every frame from now on with o (see seal.go): a
// frame that fails to open is an error wrapping ErrAuth and ErrMalformed.
// The cap applies to the frame on the wire, tag included.
func (fr *Reader) Open(o *Opener) { fr.open = o }

// Header is the last length prefix Next read, as it came: when Next
// refuses a length, it shows what the peer wrote instead of a frame.
func (fr *Reader) Header() [4]byte { return fr.hdr }

// Next reads the next frame and returns its type and body. The body is
// not validated, and is valid only until the next call. io.EOF means the
// stream ended cleanly between frames; a stream cut inside a frame is
// io.ErrUnexpectedEOF; a bad length prefix wraps ErrMalformed.
func (fr *Reader) Next() (t byte, body []byte, err error) {
	hdr := fr.hdr[:]
	if _, err := io.ReadFull(fr.r, hdr); err != nil {
		return 0, nil, err
	}
	n, err := CheckLength(binary.BigEndian.Uint32(hdr), fr.max)
	if err != nil {
		return 0, nil, err
	}
	b := fr.body[:0]
	for len(b) < n {
		k := min(n-len(b), readChunk)
		b = slices.Grow(b, k)
		got, err := io.ReadFull(fr.r, b[len(b):len(b)+k])
		b = b[:len(b)+got]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, err
		}
	}
	if cap(b) <= keepBuffer {
		fr.body = b
	} else {
		fr.body = nil
	}
	fr.read += int64(len(hdr) + n)
	if fr.open != nil {
		pt, err := fr.open.open(hdr, b)
		if err != nil {
			return 0, nil, err
		}
		b = pt
	}
	return b[0], b[1:], nil
}

// Decoder decodes frame bodies into concrete values, reusing one msgpack
// decoder. It is not safe for concurrent use; the zero value is ready.
type Decoder struct {
	br  bytes.Reader
	dec *msgpack.Decoder
}

// Decode validates body (see Validate) and decodes it into v, which must
// be a pointer to a concrete type: v's DecodeMsgpack when it has one
// (msgpack.CustomDecoder), msgpack's reflection otherwise. name says what
// is decoded, for the error. Every error wraps ErrMalformed. The result
// does not alias body.
func (d *Decoder) Decode(name string, body []byte, v any) error {
	if err := Validate(body); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
	}
	d.br.Reset(body)
	if d.dec == nil {
		d.dec = msgpack.NewDecoder(&d.br)
	} else {
		d.dec.Reset(&d.br)
	}
	var err error
	if cd, ok := v.(msgpack.CustomDecoder); ok {
		err = cd.DecodeMsgpack(d.dec)
	} else {
		err = d.dec.Decode(v)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
	}
	if d.br.Len() != 0 {
		return fmt.Errorf("%w: %s: %d trailing bytes", ErrMalformed, name, d.br.Len())
	}
	return nil
}

// Validate walks one msgpack value without recursion and checks that it
// is exactly b: every string, binary and container length fits in the
// bytes left (each element takes at least one byte), containers nest at
// most MaxNesting deep, and extension types (which esgrid's protocols
// never use) and the reserved code 0xc1 are absent. After it, msgpack
// cannot be asked to allocate more than the bytes can back, nor to recurse
// deeper than MaxNesting.
func Validate(b []byte) error {
	// pending[i] is the number of values still expected at depth i.
	var pending [MaxNesting + 1]uint64
	depth := 0
	pending[0] = 1
	p := 0
	need := func(k int) error {
		if len(b)-p < k {
			return io.ErrUnexpectedEOF
		}
		return nil
	}
	for {
		for depth > 0 && pending[depth] == 0 {
			depth--
		}
		if pending[depth] == 0 { // depth 0 done: the one top-level value
			break
		}
		pending[depth]--
		if err := need(1); err != nil {
			return err
		}
		c := b[p]
		p++
		var size, items uint64 // payload bytes to skip, values to expect
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
			// fixints, nil, booleans: the code is the value
		case c >= 0x80 && c <= 0x8f:
			items = 2 * uint64(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			items = uint64(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			size = uint64(c & 0x1f)
		default:
			var width int
			switch c {
			case 0xcc, 0xd0:
				size = 1
			case 0xcd, 0xd1:
				size = 2
			case 0xca, 0xce, 0xd2:
				size = 4
			case 0xcb, 0xcf, 0xd3:
				size = 8
			case 0xc4, 0xd9:
				width = 1
			case 0xc5, 0xda, 0xdc, 0xde:
				width = 2
			case 0xc6, 0xdb, 0xdd, 0xdf:
				width = 4
			default:
				return fmt.Errorf("unsupported msgpack code 0x%02x at %d", c, p-1)
			}
			if width > 0 {
				if err := need(width); err != nil {
					return err
				}
				var n uint64
				for _, x := range b[p : p+width] {
					n = n<<8 | uint64(x)
				}
				p += width
				switch c {
				case 0xdc, 0xdd:
					items = n
				case 0xde, 0xdf:
					items = 2 * n
				default:
					size = n
				}
			}
		}
		if size > uint64(len(b)-p) {
			return fmt.Errorf("length %d at %d exceeds the %d bytes left", size, p, len(b)-p)
		}
		p += int(size)
		if items > 0 {
			if items > uint64(len(b)-p) {
				return fmt.Errorf("count %d at %d exceeds the %d bytes left", items, p, len(b)-p)
			}
			if depth == MaxNesting {
				return fmt.Errorf("nesting deeper than %d", MaxNesting)
			}
			depth++
			pending[depth] = items
		}
	}
	if p != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-p)
	}
	return nil
}

// The helpers below are for hand-written decoders of validated bodies.
// Messages encoded as positional arrays or as maps accept fields they do
// not know (skipped), so that a later version may add some.

// ArrayLen reads an array header and checks lo ≤ n ≤ hi; nil counts as
// an empty array. what names the array, for the error.
func ArrayLen(d *msgpack.Decoder, lo, hi int, what string) (int, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return checkCount(n, lo, hi, what)
}

// MapLen reads a map header and checks lo ≤ n ≤ hi (n counts pairs); nil
// counts as an empty map.
func MapLen(d *msgpack.Decoder, lo, hi int, what string) (int, error) {
	n, err := d.DecodeMapLen()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return checkCount(n, lo, hi, what)
}

func checkCount(n, lo, hi int, what string) (int, error) {
	if n < 0 {
		n = 0
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s: %d elements, want %d..%d", what, n, lo, hi)
	}
	return n, nil
}

// Skip skips n values (fields a newer peer may have appended).
func Skip(d *msgpack.Decoder, n int) error {
	for ; n > 0; n-- {
		if err := d.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// String reads a string of at most max bytes (nil reads as ""). In a
// validated body the length cannot exceed the frame; max bounds it
// further, so that a name or a message stays a name or a message.
func String(d *msgpack.Decoder, max int, what string) (string, error) {
	n, err := d.DecodeBytesLen()
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if n > max {
		return "", fmt.Errorf("%s: string of %d bytes, at most %d", what, n, max)
	}
	if n <= 0 {
		return "", nil
	}
	buf := make([]byte, n)
	if err := d.ReadFull(buf); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return string(buf), nil
}
