package grid

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

// A frame on the wire is
//
//	length uint32, big-endian: the number of bytes that follow (type + body)
//	type   MsgType, one byte
//	body   msgpack of the concrete message for that type
//
// Nothing in a frame is trusted: the length is checked against a cap before
// any buffer is sized for it, and the body is walked by validateBody (every
// length and count it claims must fit in the bytes actually present, nesting
// is bounded) before msgpack decodes it into the concrete type.

// DefaultMaxFrame is the default cap on a frame's length (type byte plus
// body). Ten thousand 30-dimensional tasks fit in about 3 MiB.
const DefaultMaxFrame = 4 << 20

// frameHeader is the length prefix plus the type byte.
const frameHeader = 5

// Limits on counts inside a message, on top of the frame cap, so that a
// frame of tiny elements cannot make the decoder allocate many times its
// own size.
const (
	maxItemsPerFrame = 1 << 16 // tasks, results or ids in one frame
	maxDim           = 1 << 20 // coordinates of one task
	maxNesting       = 8       // containers inside containers in one body
)

// Wire errors. Every error from decoding a frame wraps ErrMalformed, and
// oversized frames also wrap ErrFrameTooLarge, so a caller can tell a broken
// peer from a broken network.
var (
	ErrMalformed     = errors.New("grid: malformed frame")
	ErrFrameTooLarge = errors.New("grid: frame too large")
	ErrUnknownType   = errors.New("grid: unknown message type")
)

// Message is one of the protocol's messages (the types in msg.go). Send
// accepts a value or a pointer; decoding always yields a pointer
// (*Tasks, *Results, ...).
type Message interface {
	// Type is the frame type byte for the message.
	Type() MsgType
}

// Type implements Message.
func (Challenge) Type() MsgType { return MsgChallenge }

// Type implements Message.
func (Hello) Type() MsgType { return MsgHello }

// Type implements Message.
func (Welcome) Type() MsgType { return MsgWelcome }

// Type implements Message.
func (Reject) Type() MsgType { return MsgReject }

// Type implements Message.
func (Tasks) Type() MsgType { return MsgTasks }

// Type implements Message.
func (Cancel) Type() MsgType { return MsgCancel }

// Type implements Message.
func (Results) Type() MsgType { return MsgResults }

// Type implements Message.
func (Heartbeat) Type() MsgType { return MsgHeartbeat }

// Type implements Message.
func (Drain) Type() MsgType { return MsgDrain }

// Type implements Message.
func (Shutdown) Type() MsgType { return MsgShutdown }

// String names the message type for logs and errors.
func (t MsgType) String() string {
	switch t {
	case MsgChallenge:
		return "challenge"
	case MsgHello:
		return "hello"
	case MsgWelcome:
		return "welcome"
	case MsgReject:
		return "reject"
	case MsgTasks:
		return "tasks"
	case MsgCancel:
		return "cancel"
	case MsgResults:
		return "results"
	case MsgHeartbeat:
		return "heartbeat"
	case MsgDrain:
		return "drain"
	case MsgShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// newMessage returns a fresh pointer to the concrete type for t.
func newMessage(t MsgType) (Message, error) {
	switch t {
	case MsgChallenge:
		return new(Challenge), nil
	case MsgHello:
		return new(Hello), nil
	case MsgWelcome:
		return new(Welcome), nil
	case MsgReject:
		return new(Reject), nil
	case MsgTasks:
		return new(Tasks), nil
	case MsgCancel:
		return new(Cancel), nil
	case MsgResults:
		return new(Results), nil
	case MsgHeartbeat:
		return new(Heartbeat), nil
	case MsgDrain:
		return new(Drain), nil
	case MsgShutdown:
		return new(Shutdown), nil
	}
	return nil, fmt.Errorf("%w: %w %d", ErrMalformed, ErrUnknownType, uint8(t))
}

// frameEncoder encodes frames into a growing buffer, reusing one msgpack
// encoder. It is not safe for concurrent use.
type frameEncoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
	max int
}

func newFrameEncoder(maxFrame int) *frameEncoder {
	fe := &frameEncoder{max: maxFrame}
	fe.enc = msgpack.NewEncoder(&fe.buf)
	return fe
}

// encode appends m's frame to fe.buf. On error fe.buf is left as it was.
func (fe *frameEncoder) encode(m Message) error {
	start := fe.buf.Len()
	var hdr [frameHeader]byte
	hdr[4] = byte(m.Type())
	fe.buf.Write(hdr[:])
	if err := encodeBody(fe.enc, m); err != nil {
		fe.buf.Truncate(start)
		return fmt.Errorf("grid: encode %v: %w", m.Type(), err)
	}
	n := fe.buf.Len() - start - 4
	if n > fe.max {
		fe.buf.Truncate(start)
		return fmt.Errorf("%w: %v of %d bytes, cap %d", ErrFrameTooLarge, m.Type(), n, fe.max)
	}
	binary.BigEndian.PutUint32(fe.buf.Bytes()[start:], uint32(n))
	return nil
}

// encodeBody writes m's msgpack body. The hot messages call their codecs
// directly to skip reflection.
func encodeBody(enc *msgpack.Encoder, m Message) error {
	switch v := m.(type) {
	case *Tasks:
		return v.EncodeMsgpack(enc)
	case Tasks:
		return v.EncodeMsgpack(enc)
	case *Results:
		return v.EncodeMsgpack(enc)
	case Results:
		return v.EncodeMsgpack(enc)
	case *Cancel:
		return v.EncodeMsgpack(enc)
	case Cancel:
		return v.EncodeMsgpack(enc)
	}
	return enc.Encode(m)
}

// AppendFrame appends the frame for m to dst and returns the extended
// slice. It fails with ErrFrameTooLarge when the frame would exceed
// maxFrame (DefaultMaxFrame when maxFrame <= 0).
func AppendFrame(dst []byte, m Message, maxFrame int) ([]byte, error) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	fe := newFrameEncoder(maxFrame)
	if err := fe.encode(m); err != nil {
		return dst, err
	}
	return append(dst, fe.buf.Bytes()...), nil
}

// DecodeBody decodes the body of a frame of type t into a new message of
// that concrete type. The body is validated first; msgpack never sees a
// length or count that the bytes cannot back. The result does not alias
// body.
func DecodeBody(t MsgType, body []byte) (Message, error) {
	var d bodyDecoder
	return d.decode(t, body)
}

// DecodeFrame decodes the first frame in b. It returns the message and the
// number of bytes the frame took. A length prefix over maxFrame
// (DefaultMaxFrame when maxFrame <= 0) is rejected before anything is
// allocated; a b shorter than the frame is io.ErrUnexpectedEOF.
func DecodeFrame(b []byte, maxFrame int) (Message, int, error) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if len(b) < 4 {
		return nil, 0, io.ErrUnexpectedEOF
	}
	n, err := checkLength(binary.BigEndian.Uint32(b), maxFrame)
	if err != nil {
		return nil, 0, err
	}
	if len(b)-4 < n {
		return nil, 0, io.ErrUnexpectedEOF
	}
	m, err := DecodeBody(MsgType(b[4]), b[5:4+n])
	if err != nil {
		return nil, 0, err
	}
	return m, 4 + n, nil
}

func checkLength(n uint32, maxFrame int) (int, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	if uint64(n) > uint64(maxFrame) {
		return 0, fmt.Errorf("%w: %w: length %d, cap %d", ErrMalformed, ErrFrameTooLarge, n, maxFrame)
	}
	return int(n), nil
}

// FrameReader reads frames from a stream, reusing its buffers. It is not
// safe for concurrent use.
type FrameReader struct {
	r    *bufio.Reader
	max  int
	body []byte
	hdr  [4]byte // here, not on Next's stack: io.ReadFull would move it to the heap every frame
	dec  bodyDecoder
	read int64 // bytes of whole frames read, length prefixes included
}

// NewFrameReader reads frames of at most maxFrame bytes (DefaultMaxFrame
// when maxFrame <= 0) from r. If r is a *bufio.Reader it is used as is.
func NewFrameReader(r io.Reader, maxFrame int) *FrameReader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &FrameReader{r: br, max: maxFrame}
}

// BytesRead is how many bytes the frames read so far took on the wire,
// length prefixes included.
func (fr *FrameReader) BytesRead() int64 { return fr.read }

// Next reads and decodes the next frame. io.EOF means the stream ended
// cleanly between frames; a stream cut inside a frame is
// io.ErrUnexpectedEOF; a broken frame wraps ErrMalformed.
func (fr *FrameReader) Next() (Message, error) {
	hdr := fr.hdr[:]
	if _, err := io.ReadFull(fr.r, hdr); err != nil {
		return nil, err
	}
	n, err := checkLength(binary.BigEndian.Uint32(hdr), fr.max)
	if err != nil {
		return nil, err
	}
	// Grow the buffer only as bytes actually arrive, so a header that
	// claims the cap and then stalls costs at most one chunk.
	const chunk = 64 << 10
	b := fr.body[:0]
	for len(b) < n {
		k := min(n-len(b), chunk)
		b = slices.Grow(b, k)
		got, err := io.ReadFull(fr.r, b[len(b):len(b)+k])
		b = b[:len(b)+got]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	if cap(b) <= 1<<20 {
		fr.body = b // keep ordinary buffers, let rare huge ones go
	}
	fr.read += int64(len(hdr) + n)
	return fr.dec.decode(MsgType(b[0]), b[1:])
}

// bodyDecoder reuses one msgpack decoder and one bytes.Reader.
type bodyDecoder struct {
	br  bytes.Reader
	dec *msgpack.Decoder
}

func (d *bodyDecoder) decode(t MsgType, body []byte) (Message, error) {
	m, err := newMessage(t)
	if err != nil {
		return nil, err
	}
	if err := validateBody(body); err != nil {
		return nil, fmt.Errorf("%w: %v: %w", ErrMalformed, t, err)
	}
	d.br.Reset(body)
	if d.dec == nil {
		d.dec = msgpack.NewDecoder(&d.br)
	} else {
		d.dec.Reset(&d.br)
	}
	switch v := m.(type) {
	case *Tasks:
		err = v.DecodeMsgpack(d.dec)
	case *Results:
		err = v.DecodeMsgpack(d.dec)
	case *Cancel:
		err = v.DecodeMsgpack(d.dec)
	default:
		err = d.dec.Decode(m)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v: %w", ErrMalformed, t, err)
	}
	if d.br.Len() != 0 {
		return nil, fmt.Errorf("%w: %v: %d trailing bytes", ErrMalformed, t, d.br.Len())
	}
	return m, nil
}

// validateBody walks one msgpack value without recursion and checks that it
// is exactly body: every string, binary and container length fits in the
// bytes left (each element takes at least one byte), containers nest at
// most maxNesting deep, and extension types (which the protocol never uses)
// are absent. After it, msgpack cannot be asked to allocate more than the
// frame can back, nor to recurse deeper than maxNesting.
func validateBody(b []byte) error {
	// pending[i] is the number of values still expected at depth i.
	var pending [maxNesting + 1]uint64
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
			if depth == maxNesting {
				return fmt.Errorf("nesting deeper than %d", maxNesting)
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

// The hot messages (Tasks, Results, Cancel) have hand-written codecs: they
// are encoded as positional arrays (no field names on the wire) without
// reflection. Decoders accept extra trailing fields, so a later version may
// append some.

// decodeLen reads an array header and checks it against lo and hi; nil
// counts as an empty array.
func decodeLen(d *msgpack.Decoder, lo, hi int, what string) (int, error) {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if n < 0 {
		n = 0
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s: %d elements, want %d..%d", what, n, lo, hi)
	}
	return n, nil
}

// skipRest skips the fields a newer peer may have appended.
func skipRest(d *msgpack.Decoder, n int) error {
	for ; n > 0; n-- {
		if err := d.Skip(); err != nil {
			return err
		}
	}
	return nil
}

// EncodeMsgpack writes t as [id, [x...]].
func (t Task) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(t.ID)); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(t.X)); err != nil {
		return err
	}
	for _, x := range t.X {
		if err := e.EncodeFloat64(x); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (t *Task) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeLen(d, 2, 16, "task")
	if err != nil {
		return err
	}
	if t.ID, err = d.DecodeInt32(); err != nil {
		return err
	}
	k, err := decodeLen(d, 0, maxDim, "task.x")
	if err != nil {
		return err
	}
	t.X = make([]float64, k)
	for i := range t.X {
		if t.X[i], err = d.DecodeFloat64(); err != nil {
			return err
		}
	}
	return skipRest(d, n-2)
}

// EncodeMsgpack writes ts as [gen, [task...]].
func (ts Tasks) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(ts.Gen)); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(ts.Items)); err != nil {
		return err
	}
	for i := range ts.Items {
		if err := ts.Items[i].EncodeMsgpack(e); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (ts *Tasks) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeLen(d, 2, 16, "tasks")
	if err != nil {
		return err
	}
	if ts.Gen, err = d.DecodeInt32(); err != nil {
		return err
	}
	k, err := decodeLen(d, 0, maxItemsPerFrame, "tasks.items")
	if err != nil {
		return err
	}
	ts.Items = make([]Task, k)
	for i := range ts.Items {
		if err := ts.Items[i].DecodeMsgpack(d); err != nil {
			return err
		}
	}
	return skipRest(d, n-2)
}

// EncodeMsgpack writes c as [gen, [id...]].
func (c Cancel) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(c.Gen)); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(c.IDs)); err != nil {
		return err
	}
	for _, id := range c.IDs {
		if err := e.EncodeInt(int64(id)); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (c *Cancel) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeLen(d, 2, 16, "cancel")
	if err != nil {
		return err
	}
	if c.Gen, err = d.DecodeInt32(); err != nil {
		return err
	}
	k, err := decodeLen(d, 0, maxItemsPerFrame, "cancel.ids")
	if err != nil {
		return err
	}
	c.IDs = make([]int32, k)
	for i := range c.IDs {
		if c.IDs[i], err = d.DecodeInt32(); err != nil {
			return err
		}
	}
	return skipRest(d, n-2)
}

// EncodeMsgpack writes r as [gen, id, f, exec, err, cancelled].
func (r Result) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(6); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(r.Gen)); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(r.ID)); err != nil {
		return err
	}
	if err := e.EncodeFloat64(r.F); err != nil {
		return err
	}
	if err := e.EncodeInt(r.Exec); err != nil {
		return err
	}
	if err := e.EncodeString(r.Err); err != nil {
		return err
	}
	return e.EncodeBool(r.Cancelled)
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (r *Result) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeLen(d, 6, 16, "result")
	if err != nil {
		return err
	}
	if r.Gen, err = d.DecodeInt32(); err != nil {
		return err
	}
	if r.ID, err = d.DecodeInt32(); err != nil {
		return err
	}
	if r.F, err = d.DecodeFloat64(); err != nil {
		return err
	}
	if r.Exec, err = d.DecodeInt64(); err != nil {
		return err
	}
	if r.Err, err = d.DecodeString(); err != nil {
		return err
	}
	if r.Cancelled, err = d.DecodeBool(); err != nil {
		return err
	}
	return skipRest(d, n-6)
}

// EncodeMsgpack writes rs as [[result...], queued, running].
func (rs Results) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(rs.Items)); err != nil {
		return err
	}
	for i := range rs.Items {
		if err := rs.Items[i].EncodeMsgpack(e); err != nil {
			return err
		}
	}
	if err := e.EncodeInt(int64(rs.Queued)); err != nil {
		return err
	}
	return e.EncodeInt(int64(rs.Running))
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (rs *Results) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := decodeLen(d, 3, 16, "results")
	if err != nil {
		return err
	}
	k, err := decodeLen(d, 0, maxItemsPerFrame, "results.items")
	if err != nil {
		return err
	}
	rs.Items = make([]Result, k)
	for i := range rs.Items {
		if err := rs.Items[i].DecodeMsgpack(d); err != nil {
			return err
		}
	}
	if rs.Queued, err = d.DecodeInt32(); err != nil {
		return err
	}
	if rs.Running, err = d.DecodeInt32(); err != nil {
		return err
	}
	return skipRest(d, n-3)
}
