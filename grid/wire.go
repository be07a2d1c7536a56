package grid

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// A frame on the wire is grid/wire's frame:
//
//	length uint32, big-endian: the number of bytes that follow (type + body)
//	type   MsgType, one byte
//	body   msgpack of the concrete message for that type
//
// Nothing in a frame is trusted: package wire checks the length against a
// cap before any buffer is sized for it, and validates the body (every
// length and count it claims must fit in the bytes actually present,
// nesting is bounded) before msgpack decodes it into the concrete type.
// This file maps the grid's message types onto that framing and holds
// their hand-written codecs.

// DefaultMaxFrame is the default cap on a frame's length (type byte plus
// body). Ten thousand 30-dimensional tasks fit in about 3 MiB.
const DefaultMaxFrame = wire.DefaultMaxFrame

// Limits on counts inside a message, on top of the frame cap, so that a
// frame of tiny elements cannot make the decoder allocate many times its
// own size.
const (
	maxItemsPerFrame = 1 << 16 // tasks, results or ids in one frame
	maxDim           = 1 << 20 // coordinates of one task
)

// MaxItemsPerFrame is the most tasks, results or cancelled ids one frame
// may hold: a peer's decoder refuses a frame with more, and the connection
// with it. A sender cuts what it has into frames of at most this many.
const MaxItemsPerFrame = maxItemsPerFrame

// Wire errors: package wire's. Every error from decoding a frame wraps
// ErrMalformed, and oversized frames also wrap ErrFrameTooLarge, so a
// caller can tell a broken peer from a broken network.
var (
	ErrMalformed     = wire.ErrMalformed
	ErrFrameTooLarge = wire.ErrFrameTooLarge
	ErrUnknownType   = wire.ErrUnknownType
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
	if s := extName(t); s != "" { // splitmsg.go
		return s
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
	if m := newExtMessage(t); m != nil { // splitmsg.go
		return m, nil
	}
	return nil, fmt.Errorf("%w: %w %d", ErrMalformed, ErrUnknownType, uint8(t))
}

// frameEncoder encodes frames into a growing buffer, reusing one msgpack
// encoder. It is not safe for concurrent use.
type frameEncoder struct {
	buf bytes.Buffer
	enc *wire.Encoder
}

func newFrameEncoder(maxFrame int) *frameEncoder {
	fe := &frameEncoder{}
	fe.enc = wire.NewEncoder(&fe.buf, maxFrame)
	return fe
}

// encode appends m's frame to fe.buf. On error fe.buf is left as it was.
func (fe *frameEncoder) encode(m Message) error {
	err := fe.enc.End(encodeBody(fe.enc.Begin(byte(m.Type())), m))
	if err != nil && !errors.Is(err, ErrFrameTooLarge) {
		return fmt.Errorf("grid: encode %v: %w", m.Type(), err)
	}
	if err != nil {
		return fmt.Errorf("%w (%v)", err, m.Type())
	}
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
	t, body, n, err := wire.Split(b, maxFrame)
	if err != nil {
		return nil, 0, err
	}
	m, err := DecodeBody(MsgType(t), body)
	if err != nil {
		return nil, 0, err
	}
	return m, n, nil
}

// FrameReader reads frames from a stream, reusing its buffers. It is not
// safe for concurrent use.
type FrameReader struct {
	fr  *wire.Reader
	dec bodyDecoder
}

// NewFrameReader reads frames of at most maxFrame bytes (DefaultMaxFrame
// when maxFrame <= 0) from r. If r is a *bufio.Reader it is used as is.
func NewFrameReader(r io.Reader, maxFrame int) *FrameReader {
	return &FrameReader{fr: wire.NewReader(r, maxFrame)}
}

// BytesRead is how many bytes the frames read so far took on the wire,
// length prefixes included.
func (fr *FrameReader) BytesRead() int64 { return fr.fr.BytesRead() }

// Next reads and decodes the next frame. io.EOF means the stream ended
// cleanly between frames; a stream cut inside a frame is
// io.ErrUnexpectedEOF; a broken frame wraps ErrMalformed.
func (fr *FrameReader) Next() (Message, error) {
	t, body, err := fr.fr.Next()
	if err != nil {
		return nil, err
	}
	return fr.dec.decode(MsgType(t), body)
}

// bodyDecoder is a wire.Decoder for the grid's message types.
type bodyDecoder struct {
	d wire.Decoder
}

func (d *bodyDecoder) decode(t MsgType, body []byte) (Message, error) {
	m, err := newMessage(t)
	if err != nil {
		return nil, err
	}
	if err := d.d.Decode(t.String(), body, m); err != nil {
		return nil, err
	}
	return m, nil
}

// validateBody is wire.Validate, the check every body passes before
// msgpack decodes it.
func validateBody(b []byte) error { return wire.Validate(b) }

// The hot messages (Tasks, Results, Cancel) have hand-written codecs: they
// are encoded as positional arrays (no field names on the wire) without
// reflection. Decoders accept extra trailing fields, so a later version may
// append some.

// decodeLen reads an array header and checks it against lo and hi; nil
// counts as an empty array.
func decodeLen(d *msgpack.Decoder, lo, hi int, what string) (int, error) {
	return wire.ArrayLen(d, lo, hi, what)
}

// skipRest skips the fields a newer peer may have appended.
func skipRest(d *msgpack.Decoder, n int) error { return wire.Skip(d, n) }

// EncodeMsgpack writes t as [id, [x...], token].
func (t Task) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := e.EncodeInt(int64(t.ID)); err != nil {
		return err
	}
	if err := e.EncodeArrayLen(len(t.X)); err != nil {
		return err
	}
	if err := encodeFloats(e, t.X); err != nil {
		return err
	}
	return e.EncodeUint(t.Token)
}

// encodeFloats writes xs as EncodeFloat64 does each (a msgpack float 64:
// its code and 8 bytes, big-endian), all at once into the frame's buffer
// when the encoder writes to one: a write per float was a tenth of a
// busy master's own work per task.
func encodeFloats(e *msgpack.Encoder, xs []float64) error {
	buf, ok := e.Writer().(*bytes.Buffer)
	if !ok {
		for _, x := range xs {
			if err := e.EncodeFloat64(x); err != nil {
				return err
			}
		}
		return nil
	}
	buf.Grow(9 * len(xs))
	b := buf.AvailableBuffer()
	for _, x := range xs {
		b = binary.BigEndian.AppendUint64(append(b, msgpcode.Double), math.Float64bits(x))
	}
	_, err := buf.Write(b)
	return err
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
	t.Token = 0
	if n == 2 {
		return nil
	}
	if t.Token, err = d.DecodeUint64(); err != nil {
		return err
	}
	return skipRest(d, n-3)
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

// EncodeMsgpack writes r as [gen, id, f, exec, err, cancelled], then
// ack for an acknowledgement of a cancel, then the token when there is
// one: [gen, id, f, exec, err, cancelled, ack, token] (ack 0 when the
// result acknowledges no cancel). A decoder that predates a trailing
// field skips it.
func (r Result) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 6
	switch {
	case r.Token != 0:
		n = 8
	case r.Ack != 0:
		n = 7
	}
	if err := e.EncodeArrayLen(n); err != nil {
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
	if err := e.EncodeBool(r.Cancelled); err != nil || n == 6 {
		return err
	}
	if err := e.EncodeUint(uint64(r.Ack)); err != nil || n == 7 {
		return err
	}
	return e.EncodeUint(r.Token)
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
	r.Ack, r.Token = 0, 0
	if n == 6 {
		return nil
	}
	if r.Ack, err = decodeAck(d); err != nil {
		return err
	}
	if n == 7 {
		return nil
	}
	if r.Token, err = d.DecodeUint64(); err != nil {
		return err
	}
	return skipRest(d, n-8)
}

// decodeAck reads a cancel's outcome; an outcome this version does not
// know reads as none.
func decodeAck(d *msgpack.Decoder) (CancelAck, error) {
	v, err := d.DecodeUint64()
	if err != nil || v > uint64(AckLate) {
		return 0, err
	}
	return CancelAck(v), nil
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
