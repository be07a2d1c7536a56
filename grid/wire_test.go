package grid

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// allMessages has one filled-in value of every message type.
func allMessages() []Message {
	return []Message{
		&Challenge{Version: ProtocolVersion, Nonce: bytes.Repeat([]byte{7}, 32)},
		&Hello{Version: ProtocolVersion, Name: "lab-3", Slots: 8, Problems: []string{"ridge", "sphere"}, Nonce: []byte{1, 2, 3}, MAC: []byte{4, 5}},
		&Welcome{Version: ProtocolVersion, Worker: 12, Problem: ProblemSpec{Name: "ridge", Dim: 30, LoadN: 200}, MAC: []byte{9}},
		&Reject{Reason: "wrong key"},
		&Tasks{Gen: 41, Items: []Task{
			{ID: 0, X: []float64{1.5, -2, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(-1)}},
			{ID: 69, X: []float64{}},
		}},
		&Tasks{Gen: 0, Items: []Task{}},
		&Cancel{Gen: 3, IDs: []int32{1, -1, math.MaxInt32, math.MinInt32}},
		&Results{Items: []Result{
			{Gen: 7, ID: 3, F: 1e-300, Exec: 1234567890123},
			{Gen: 7, ID: 4, Err: "boom", Cancelled: true, Exec: -1},
		}, Queued: 5, Running: 2},
		&Results{Items: []Result{}, Queued: 0, Running: 0},
		&Heartbeat{},
		&Heartbeat{Echo: true},
		&Heartbeat{Starting: 61e9},
		&Drain{Gen: 9, Returned: []int32{4, 5}},
		&Shutdown{Reason: "run over"},
		&Shutdown{Reason: "run over", Within: 14e9},
		&Shutdown{Reason: "awaiting a lost child's workers", Hold: 30e9},
	}
}

func TestRoundTripEveryType(t *testing.T) {
	seen := map[MsgType]bool{}
	var stream []byte
	for _, m := range allMessages() {
		seen[m.Type()] = true
		b, err := AppendFrame(nil, m, 0)
		if err != nil {
			t.Fatalf("%v: encode: %v", m.Type(), err)
		}
		got, n, err := DecodeFrame(b, 0)
		if err != nil {
			t.Fatalf("%v: decode: %v", m.Type(), err)
		}
		if n != len(b) {
			t.Errorf("%v: consumed %d of %d bytes", m.Type(), n, len(b))
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: round trip\n got %#v\nwant %#v", m.Type(), got, m)
		}
		stream = append(stream, b...)
	}
	for ty := MsgChallenge; ty <= MsgShutdown; ty++ {
		if !seen[ty] {
			t.Errorf("no round-trip case for %v", ty)
		}
	}

	// The same frames back to back through one FrameReader, whose buffers
	// are reused: earlier messages must not change under later reads.
	fr := NewFrameReader(bytes.NewReader(stream), 0)
	var got []Message
	for {
		m, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	if !reflect.DeepEqual(got, allMessages()) {
		t.Errorf("stream round trip differs")
	}
}

// TestHeartbeatEchoIsOptional: a plain Heartbeat is the empty map it
// always was, and an Echo one decodes into the field-less Heartbeat of a
// peer that predates it (which then does not answer).
func TestHeartbeatEchoIsOptional(t *testing.T) {
	b, err := AppendFrame(nil, Heartbeat{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 2, byte(MsgHeartbeat), 0x80}; !bytes.Equal(b, want) {
		t.Errorf("a plain heartbeat's frame is % x, want % x", b, want)
	}
	body, err := msgpack.Marshal(Heartbeat{Echo: true})
	if err != nil {
		t.Fatal(err)
	}
	var old struct{}
	if err := msgpack.Unmarshal(body, &old); err != nil {
		t.Errorf("a peer without Echo cannot decode an echo request: %v", err)
	}
}

// TestHeartbeatStartingIsOptional: a worker's word that it starts is a
// Heartbeat's field, which decodes into the field-less Heartbeat of a
// master that predates it: that master's Conn absorbs it as any
// heartbeat, and its loop never sees a word from the worker before the
// worker serves (a Results, which such a master takes for a word that the
// worker can evaluate, refusals.go).
func TestHeartbeatStartingIsOptional(t *testing.T) {
	body, err := msgpack.Marshal(Heartbeat{Starting: 61e9})
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Echo bool `msgpack:"e,omitempty"`
	}
	if err := msgpack.Unmarshal(body, &old); err != nil || old.Echo {
		t.Errorf("a peer without Starting decodes a word that the worker starts as %+v, %v; want a plain heartbeat", old, err)
	}
}

func TestValueAndPointerEncodeAlike(t *testing.T) {
	ts := Tasks{Gen: 2, Items: []Task{{ID: 1, X: []float64{3}}}}
	a, err := AppendFrame(nil, ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := AppendFrame(nil, &ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("value %x and pointer %x encode differently", a, b)
	}
}

// frame builds a raw frame around a body.
func frame(t MsgType, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
	b = append(b, byte(t))
	return append(b, body...)
}

// allocated runs f and returns the bytes the heap allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHostileFramesAllocateLittle(t *testing.T) {
	const limit = 4 << 20
	arr32 := func(n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{0xdd}, n) }
	cases := []struct {
		name string
		ty   MsgType
		body []byte
	}{
		{"tasks body array32 64Mi", MsgTasks, []byte{0xdd, 0x04, 0x00, 0x00, 0x00}},
		{"tasks body array32 4Gi", MsgTasks, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"tasks items array32 4Gi", MsgTasks, append([]byte{0x92, 0x01}, arr32(math.MaxUint32)...)},
		{"task x array32 4Gi", MsgTasks, append([]byte{0x92, 0x01, 0x91, 0x92, 0x05}, arr32(math.MaxUint32)...)},
		{"task x array32 at maxDim", MsgTasks, append([]byte{0x92, 0x01, 0x91, 0x92, 0x05}, arr32(maxDim)...)},
		{"task x array32 64Mi", MsgTasks, append([]byte{0x92, 0x01, 0x91, 0x92, 0x05}, arr32(0x04000000)...)},
		{"results items array32 4Gi", MsgResults, append([]byte{0x93}, arr32(math.MaxUint32)...)},
		{"cancel ids array32 4Gi", MsgCancel, append([]byte{0x92, 0x01}, arr32(math.MaxUint32)...)},
		{"drain ids array32 4Gi", MsgDrain, append([]byte{0x82, 0xa1, 'g', 0x01, 0xa3, 'i', 'd', 's'}, arr32(math.MaxUint32)...)},
		{"hello problems array32 4Gi", MsgHello, append([]byte{0x81, 0xa8, 'p', 'r', 'o', 'b', 'l', 'e', 'm', 's'}, arr32(math.MaxUint32)...)},
		{"hello name str32 4Gi", MsgHello, []byte{0x81, 0xa4, 'n', 'a', 'm', 'e', 0xdb, 0xff, 0xff, 0xff, 0xff}},
		{"challenge nonce bin32 4Gi", MsgChallenge, []byte{0x81, 0xa1, 'n', 0xc6, 0xff, 0xff, 0xff, 0xff}},
		{"welcome map32 4Gi", MsgWelcome, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}},
		{"shutdown unknown field array32", MsgShutdown, append([]byte{0x81, 0xa1, 'z'}, arr32(math.MaxUint32)...)},
		{"heartbeat nested 1M deep", MsgHeartbeat, bytes.Repeat([]byte{0x91}, 1<<20)},
		{"reject ext32", MsgReject, []byte{0x81, 0xa1, 'r', 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := frame(c.ty, c.body)
			var err error
			n := allocated(func() { _, _, err = DecodeFrame(b, 0) })
			if err == nil {
				t.Fatal("hostile frame decoded without error")
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if n > limit {
				t.Errorf("decoding allocated %d bytes, want < %d", n, limit)
			}
			// The same through the stream reader, which also buffers the
			// bytes that actually arrived.
			n = allocated(func() { _, err = NewFrameReader(bytes.NewReader(b), 0).Next() })
			if err == nil || n > limit+3*uint64(len(b)) {
				t.Errorf("stream: err %v, allocated %d", err, n)
			}
		})
	}
}

func TestLengthPrefixOverCapRejectedWithoutAllocation(t *testing.T) {
	for _, length := range []uint32{DefaultMaxFrame + 1, math.MaxUint32} {
		hdr := binary.BigEndian.AppendUint32(nil, length)
		r := bufio.NewReader(io.MultiReader(bytes.NewReader(hdr), strings.NewReader("\x05 endless")))
		fr := NewFrameReader(r, 0)
		var err error
		n := allocated(func() { _, err = fr.Next() })
		if !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrMalformed) {
			t.Errorf("length %d: error %v, want ErrFrameTooLarge", length, err)
		}
		if n > 64<<10 {
			t.Errorf("length %d: allocated %d bytes before rejecting", length, n)
		}
		if _, _, err := DecodeFrame(append(hdr, 5), 0); !errors.Is(err, ErrFrameTooLarge) {
			t.Errorf("DecodeFrame length %d: error %v", length, err)
		}
	}
}

func TestStalledFrameAllocatesOnlyWhatArrived(t *testing.T) {
	// A header claiming the whole cap, followed by a few bytes and EOF.
	b := append(binary.BigEndian.AppendUint32(nil, DefaultMaxFrame), byte(MsgTasks), 0x92)
	var err error
	n := allocated(func() { _, err = NewFrameReader(bytes.NewReader(b), 0).Next() })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v, want unexpected EOF", err)
	}
	if n > 256<<10 {
		t.Errorf("allocated %d bytes for a frame that never came", n)
	}
}

func TestMalformedFrames(t *testing.T) {
	good, _ := AppendFrame(nil, &Reject{Reason: "x"}, 0)
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"unknown type", frame(200, []byte{0x80}), ErrUnknownType},
		{"type zero", frame(0, []byte{0x80}), ErrUnknownType},
		{"empty frame", []byte{0, 0, 0, 0}, ErrMalformed},
		{"trailing bytes", frame(MsgReject, []byte{0x80, 0x00}), ErrMalformed},
		{"empty body", frame(MsgReject, nil), ErrMalformed},
		{"wrong field type", frame(MsgReject, []byte{0x81, 0xa1, 'r', 0x05}), ErrMalformed},
		{"tasks as map", frame(MsgTasks, []byte{0x80}), ErrMalformed},
		{"result too short", frame(MsgResults, []byte{0x93, 0x91, 0x92, 0x01, 0x02, 0x00, 0x00}), ErrMalformed},
		{"reserved code c1", frame(MsgReject, []byte{0xc1}), ErrMalformed},
		{"truncated", good[:len(good)-1], io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeFrame(c.b, 0)
			if !errors.Is(err, c.want) {
				t.Errorf("error %v, want %v", err, c.want)
			}
		})
	}
}

func TestEncodeRefusesOversizedFrame(t *testing.T) {
	big := &Tasks{Items: []Task{{X: make([]float64, 1000)}}}
	if _, err := AppendFrame(nil, big, 1000); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("error %v, want ErrFrameTooLarge", err)
	}
	if _, err := AppendFrame(nil, big, 0); err != nil {
		t.Errorf("default cap: %v", err)
	}
}

func TestValidateBodyAcceptsEveryMsgpackKind(t *testing.T) {
	// One body with every kind of value the validator knows, in a map.
	body := []byte{0x8c,
		0x00, 0x7f, // positive fixint
		0x01, 0xe0, // negative fixint
		0x02, 0xc0, // nil
		0x03, 0xc3, // true
		0x04, 0xcc, 0xff, // uint8
		0x05, 0xd1, 0xff, 0xfe, // int16
		0x06, 0xca, 0, 0, 0, 0, // float32
		0x07, 0xcf, 1, 2, 3, 4, 5, 6, 7, 8, // uint64
		0x08, 0xd9, 0x02, 'h', 'i', // str8
		0x09, 0xc5, 0x00, 0x01, 0xaa, // bin16
		0x0a, 0xdc, 0x00, 0x02, 0x90, 0x80, // array16 of empty array, empty map
		0x0b, 0xde, 0x00, 0x01, 0xa0, 0xc2, // map16
	}
	if err := validateBody(body); err != nil {
		t.Errorf("valid body rejected: %v", err)
	}
	for i := 1; i < len(body); i++ {
		if err := validateBody(body[:i]); err == nil {
			t.Errorf("body cut at %d accepted", i)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	for _, m := range allMessages() {
		b, err := AppendFrame(nil, m, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// A child master's counts (splitmsg.go).
	if b, err := AppendFrame(nil, &ChildResults{Gen: 2, IDs: []int32{1}, F: []float64{3}, C: &ChildCounts{First: []int32{1, 4}, Replicas: 2, Wasted: 5}}, 0); err == nil {
		f.Add(b)
	}
	f.Add(frame(MsgTasks, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x05})
	f.Add(frame(MsgHeartbeat, bytes.Repeat([]byte{0x91}, 64)))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := DecodeFrame(b, 1<<16)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		// Whatever decodes must encode again and decode to the same.
		again, err := AppendFrame(nil, m, 0)
		if err != nil {
			t.Fatalf("re-encode %v: %v", m.Type(), err)
		}
		m2, _, err := DecodeFrame(again, 0)
		if err != nil {
			t.Fatalf("decode re-encoded %v: %v", m.Type(), err)
		}
		if !reflect.DeepEqual(m, m2) && !hasNaN(m) {
			t.Fatalf("%v changed on re-encoding:\n%#v\n%#v", m.Type(), m, m2)
		}
		// And the stream reader agrees with the slice decoder.
		if _, err := NewFrameReader(bytes.NewReader(b), 1<<16).Next(); err != nil {
			t.Fatalf("stream reader failed where DecodeFrame succeeded: %v", err)
		}
	})
}

func hasNaN(m Message) bool {
	switch v := m.(type) {
	case *Tasks:
		for _, t := range v.Items {
			for _, x := range t.X {
				if x != x {
					return true
				}
			}
		}
	case *Results:
		for _, r := range v.Items {
			if r.F != r.F {
				return true
			}
		}
	}
	return false
}

func BenchmarkEncodeTask30(b *testing.B) {
	fe := newFrameEncoder(DefaultMaxFrame)
	m := &Tasks{Gen: 5, Items: []Task{{ID: 17, X: make([]float64, 30)}}}
	b.ReportAllocs()
	for b.Loop() {
		fe.buf.Reset()
		if err := fe.encode(m); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(fe.buf.Len()))
}

func BenchmarkDecodeResult(b *testing.B) {
	frameBytes, _ := AppendFrame(nil, &Results{Items: []Result{{Gen: 5, ID: 17, F: 3.25, Exec: 100e6}}, Queued: 3, Running: 2}, 0)
	var d bodyDecoder
	b.ReportAllocs()
	b.SetBytes(int64(len(frameBytes)))
	for b.Loop() {
		if _, err := d.decode(MsgResults, frameBytes[5:]); err != nil {
			b.Fatal(err)
		}
	}
}

// encodeFloats writes the bytes EncodeFloat64 writes, float by float,
// for any length (across its chunks) and any value.
func TestEncodeFloatsAsMsgpack(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 33, 65, 1000} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = math.Float64frombits(uint64(i)*0x9e3779b97f4a7c15 + 12345)
		}
		if n > 3 {
			xs[0], xs[1], xs[2], xs[3] = math.NaN(), math.Inf(1), 0, 3 // a whole number too: no compact form
		}
		var want, got, other bytes.Buffer
		we := msgpack.NewEncoder(&want)
		want.WriteString("head")
		got.WriteString("head")
		for _, x := range xs {
			if err := we.EncodeFloat64(x); err != nil {
				t.Fatal(err)
			}
		}
		// Into a bytes.Buffer (a frame's), and through another writer.
		if err := encodeFloats(msgpack.NewEncoder(&got), xs); err != nil {
			t.Fatal(err)
		}
		other.WriteString("head")
		if err := encodeFloats(msgpack.NewEncoder(struct{ io.Writer }{&other}), xs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) || !bytes.Equal(other.Bytes(), want.Bytes()) {
			t.Errorf("%d floats: encodeFloats wrote %x and %x, EncodeFloat64 %x", n, got.Bytes(), other.Bytes(), want.Bytes())
		}
	}
}
