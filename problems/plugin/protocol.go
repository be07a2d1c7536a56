package plugin

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/esgrid/esgrid/internal/logx"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// ProtocolVersion is the plugin protocol this package speaks; a plugin
// says which one it speaks in its hello.
const ProtocolVersion = 1

// MsgType is a frame's type byte in the plugin protocol.
type MsgType byte

// The plugin protocol's messages. Every body is a msgpack map with string
// keys; unknown keys are ignored, so a later version may add some.
const (
	MsgHello  MsgType = 1 // plugin → host, the first frame: what the plugin is
	MsgEval   MsgType = 2 // host → plugin: {id, x}
	MsgResult MsgType = 3 // plugin → host: {id, f} or {id, error}
	MsgCancel MsgType = 4 // host → plugin: {id}, only to a plugin whose hello says cancel
)

// String names the message type for errors.
func (t MsgType) String() string {
	switch t {
	case MsgHello:
		return "hello"
	case MsgEval:
		return "eval"
	case MsgResult:
		return "result"
	case MsgCancel:
		return "cancel"
	}
	return fmt.Sprintf("type(%d)", byte(t))
}

// Limits on what a plugin may say, on top of the frame cap.
const (
	// MaxDim bounds a vector's length, and the dimensions a hello may
	// name.
	MaxDim = 1 << 20
	// maxName bounds a problem name in a hello.
	maxName = 64
	// maxKey bounds a map key; the protocol's keys are short.
	maxKey = 64
	// maxFields bounds the keys of one message map.
	maxFields = 64
	// maxErrorText bounds the error text of a result (longer is refused:
	// a plugin's reason must stay a reason).
	maxErrorText = 64 << 10
)

// Hello is the plugin's first frame: what it evaluates, in which
// dimensions and box, and whether it honours cancels.
type Hello struct {
	// Version is the protocol version the plugin speaks ("v").
	Version int
	// Name is the problem's name ("name"); it must equal the name the
	// plugin is listed under.
	Name string
	// MinDim and MaxDim bound the dimensions the plugin accepts
	// ("min_dim", default 1; "max_dim", default 0: no upper bound).
	MinDim, MaxDim int
	// Lower and Upper bound every coordinate ("lower", "upper").
	Lower, Upper float64
	// Cancel says the plugin honours cancel messages ("cancel", default
	// false).
	Cancel bool
	// NonFinite says the problem's values may be NaN or ±Inf and are
	// then its answers, which the ES ranks ("nonfinite", default false:
	// a non-finite value is an evaluation error, retried on another
	// worker, as without esrun -nonfinite).
	NonFinite bool
}

// Accepts reports whether the plugin accepts dimension dim.
func (h *Hello) Accepts(dim int) bool {
	return dim >= h.MinDim && (h.MaxDim == 0 || dim <= h.MaxDim)
}

// Dims describes the accepted dimensions for messages: "30", "≥ 2",
// "2..10".
func (h *Hello) Dims() string {
	switch {
	case h.MaxDim == 0:
		return fmt.Sprintf("≥ %d", h.MinDim)
	case h.MinDim == h.MaxDim:
		return fmt.Sprint(h.MinDim)
	}
	return fmt.Sprintf("%d..%d", h.MinDim, h.MaxDim)
}

// check says what is wrong with a decoded hello.
func (h *Hello) check() error {
	switch {
	case h.Version != ProtocolVersion:
		return fmt.Errorf("protocol version %d, this esgrid speaks %d", h.Version, ProtocolVersion)
	case CheckName(h.Name) != nil:
		return fmt.Errorf("hello: %w", CheckName(h.Name))
	case h.MinDim < 1 || h.MinDim > MaxDim:
		return fmt.Errorf("hello: min_dim %d outside [1, %d]", h.MinDim, MaxDim)
	case h.MaxDim != 0 && (h.MaxDim < h.MinDim || h.MaxDim > MaxDim):
		return fmt.Errorf("hello: max_dim %d outside [min_dim %d, %d] (0: no limit)", h.MaxDim, h.MinDim, MaxDim)
	case math.IsNaN(h.Lower) || math.IsInf(h.Lower, 0) || math.IsNaN(h.Upper) || math.IsInf(h.Upper, 0):
		return fmt.Errorf("hello: bounds [%v, %v] not finite", h.Lower, h.Upper)
	case !(h.Lower < h.Upper):
		return fmt.Errorf("hello: lower %v not below upper %v", h.Lower, h.Upper)
	case math.IsInf(h.Upper-h.Lower, 0):
		// The ES's step sizes are a share of the width: the run
		// would fail on it, blaming its own configuration.
		return fmt.Errorf("hello: the box [%v, %v] is wider than a float64 holds (upper − lower overflows)", h.Lower, h.Upper)
	}
	return nil
}

// EncodeMsgpack writes the hello map.
func (h *Hello) EncodeMsgpack(e *msgpack.Encoder) error {
	return errors.Join(
		e.EncodeMapLen(8),
		e.EncodeString("v"), e.EncodeInt(int64(h.Version)),
		e.EncodeString("name"), e.EncodeString(h.Name),
		e.EncodeString("min_dim"), e.EncodeInt(int64(h.MinDim)),
		e.EncodeString("max_dim"), e.EncodeInt(int64(h.MaxDim)),
		e.EncodeString("lower"), e.EncodeFloat64(h.Lower),
		e.EncodeString("upper"), e.EncodeFloat64(h.Upper),
		e.EncodeString("cancel"), e.EncodeBool(h.Cancel),
		e.EncodeString("nonfinite"), e.EncodeBool(h.NonFinite),
	)
}

// DecodeMsgpack reads a hello map; absent keys take their defaults.
func (h *Hello) DecodeMsgpack(d *msgpack.Decoder) error {
	*h = Hello{MinDim: 1}
	var seen [4]bool // v, name, lower, upper
	err := decodeMap(d, "hello", func(key string) (err error) {
		switch key {
		case "v":
			seen[0] = true
			h.Version, err = decodeInt(d, 0, math.MaxInt32, key)
		case "name":
			seen[1] = true
			h.Name, err = wire.String(d, maxName, key)
		case "min_dim":
			h.MinDim, err = decodeInt(d, 0, MaxDim, key)
		case "max_dim":
			h.MaxDim, err = decodeInt(d, 0, MaxDim, key)
		case "lower":
			seen[2] = true
			h.Lower, err = decodeFloat(d, key)
		case "upper":
			seen[3] = true
			h.Upper, err = decodeFloat(d, key)
		case "cancel":
			h.Cancel, err = decodeBool(d, key)
		case "nonfinite":
			h.NonFinite, err = decodeBool(d, key)
		default:
			err = d.Skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	for i, k := range []string{"v", "name", "lower", "upper"} {
		if !seen[i] {
			return fmt.Errorf("no %q", k)
		}
	}
	return nil
}

// Eval asks for f(X); ID is the host's, echoed in the result.
type Eval struct {
	ID uint64
	X  []float64
}

// EncodeMsgpack writes {"id": id, "x": [x...]}.
func (m *Eval) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := errors.Join(e.EncodeMapLen(2), e.EncodeString("id"), e.EncodeUint(m.ID),
		e.EncodeString("x"), e.EncodeArrayLen(len(m.X))); err != nil {
		return err
	}
	for _, x := range m.X {
		if err := e.EncodeFloat64(x); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack reads an eval map; both keys are required.
func (m *Eval) DecodeMsgpack(d *msgpack.Decoder) error {
	*m = Eval{}
	var haveID, haveX bool
	err := decodeMap(d, "eval", func(key string) (err error) {
		switch key {
		case "id":
			haveID = true
			m.ID, err = decodeID(d)
		case "x":
			haveX = true
			var n int
			if n, err = wire.ArrayLen(d, 0, MaxDim, "x"); err != nil {
				return err
			}
			m.X = make([]float64, n)
			for i := range m.X {
				if m.X[i], err = decodeFloat(d, "x"); err != nil {
					return err
				}
			}
		default:
			err = d.Skip()
		}
		return err
	})
	if err == nil && (!haveID || !haveX) {
		err = errors.New("needs id and x")
	}
	return err
}

// Result answers an Eval: F, or the reason in Err when Err is not empty.
type Result struct {
	ID  uint64
	F   float64
	Err string
}

// EncodeMsgpack writes {"id": id, "f": f} or {"id": id, "error": err}.
func (m *Result) EncodeMsgpack(e *msgpack.Encoder) error {
	if m.Err != "" {
		return errors.Join(e.EncodeMapLen(2), e.EncodeString("id"), e.EncodeUint(m.ID),
			e.EncodeString("error"), e.EncodeString(m.Err))
	}
	return errors.Join(e.EncodeMapLen(2), e.EncodeString("id"), e.EncodeUint(m.ID),
		e.EncodeString("f"), e.EncodeFloat64(m.F))
}

// DecodeMsgpack reads a result map: id, and f or a non-empty error (the
// error wins when both are present).
func (m *Result) DecodeMsgpack(d *msgpack.Decoder) error {
	*m = Result{}
	var haveID, haveF bool
	var keys []string // for the error of a result without f nor error
	err := decodeMap(d, "result", func(key string) (err error) {
		keys = append(keys, key)
		switch key {
		case "id":
			haveID = true
			m.ID, err = decodeID(d)
		case "f":
			haveF = true
			m.F, err = decodeFloat(d, key)
		case "error":
			m.Err, err = wire.String(d, maxErrorText, key)
		default:
			err = d.Skip()
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case !haveID:
		return errors.New("no id")
	case !haveF && m.Err == "":
		return fmt.Errorf("neither f nor error (its keys: %s)", logx.Printable(clip(strings.Join(keys, ", "), 200)))
	}
	return nil
}

// Cancel asks the plugin to stop evaluation ID.
type Cancel struct {
	ID uint64
}

// EncodeMsgpack writes {"id": id}.
func (m *Cancel) EncodeMsgpack(e *msgpack.Encoder) error {
	return errors.Join(e.EncodeMapLen(1), e.EncodeString("id"), e.EncodeUint(m.ID))
}

// DecodeMsgpack reads a cancel map.
func (m *Cancel) DecodeMsgpack(d *msgpack.Decoder) error {
	*m = Cancel{}
	var haveID bool
	err := decodeMap(d, "cancel", func(key string) (err error) {
		if key != "id" {
			return d.Skip()
		}
		haveID = true
		m.ID, err = decodeID(d)
		return err
	})
	if err == nil && !haveID {
		err = errors.New("no id")
	}
	return err
}

// decodeMap reads a map of string keys, calling field for each key with
// the decoder positioned at its value. A key may appear once.
func decodeMap(d *msgpack.Decoder, what string, field func(key string) error) error {
	c, err := d.PeekCode()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !msgpcode.IsFixedMap(c) && c != msgpcode.Map16 && c != msgpcode.Map32 {
		return fmt.Errorf("%s: not a map (code 0x%02x)", what, c)
	}
	n, err := wire.MapLen(d, 0, maxFields, what)
	if err != nil {
		return err
	}
	var buf [8]string
	seen := buf[:0]
	for range n {
		key, err := wire.String(d, maxKey, "key")
		if err != nil {
			return err
		}
		if slices.Contains(seen, key) {
			return fmt.Errorf("%s: key %q twice", what, key)
		}
		seen = append(seen, key)
		if err := field(key); err != nil {
			// wire.Decoder names the message already.
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// isInt says c starts a msgpack integer.
func isInt(c byte) bool {
	return msgpcode.IsFixedNum(c) || (c >= msgpcode.Uint8 && c <= msgpcode.Uint64) || (c >= msgpcode.Int8 && c <= msgpcode.Int64)
}

// decodeID reads a non-negative integer (nil and floats are refused).
func decodeID(d *msgpack.Decoder) (uint64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	if !isInt(c) {
		return 0, fmt.Errorf("not an integer: %s (send it as a msgpack integer, as the eval's id)", found(d, c))
	}
	n, err := d.DecodeInt64()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("negative id %d", n)
	}
	return uint64(n), nil
}

// decodeInt reads an integer in [lo, hi].
func decodeInt(d *msgpack.Decoder, lo, hi int64, what string) (int, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	if !isInt(c) {
		return 0, fmt.Errorf("not an integer: %s (send it as a msgpack integer)", found(d, c))
	}
	n, err := d.DecodeInt64()
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s %d outside [%d, %d]", what, n, lo, hi)
	}
	return int(n), nil
}

// decodeFloat reads a float64, float32 or integer (nil is refused: a
// missing fitness is not 0).
func decodeFloat(d *msgpack.Decoder, what string) (float64, error) {
	c, err := d.PeekCode()
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Double && c != msgpcode.Float && !isInt(c) {
		return 0, fmt.Errorf("not a number: %s (send %s as a msgpack float64, never as text; NaN and ±Inf are float64 values too)", found(d, c), what)
	}
	return d.DecodeFloat64()
}

// decodeBool reads a bool; nil is false.
func decodeBool(d *msgpack.Decoder, what string) (bool, error) {
	c, err := d.PeekCode()
	if err != nil {
		return false, err
	}
	if c != msgpcode.True && c != msgpcode.False && c != msgpcode.Nil {
		return false, fmt.Errorf("not a boolean: %s (send %s as msgpack true or false)", found(d, c), what)
	}
	return d.DecodeBool()
}

// found says what a plugin sent where another type belongs, for its
// author: the value, as far as it can be shown, and its msgpack code. It
// consumes the value, which the caller does not read again.
func found(d *msgpack.Decoder, c byte) string {
	switch {
	case msgpcode.IsString(c):
		if s, err := d.DecodeString(); err == nil {
			return fmt.Sprintf("a string, %q (code 0x%02x)", logx.Printable(clip(s, 40)), c)
		}
	case c == msgpcode.Double || c == msgpcode.Float:
		if f, err := d.DecodeFloat64(); err == nil {
			return fmt.Sprintf("a float, %v (code 0x%02x)", f, c)
		}
	case c == msgpcode.Nil:
		return "nil (code 0xc0)"
	case c == msgpcode.True || c == msgpcode.False:
		return fmt.Sprintf("a boolean (code 0x%02x)", c)
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		return fmt.Sprintf("an array (code 0x%02x)", c)
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		return fmt.Sprintf("a map (code 0x%02x)", c)
	case c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32:
		return fmt.Sprintf("binary data (code 0x%02x)", c)
	}
	return fmt.Sprintf("code 0x%02x", c)
}
