package wire

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

// sample is a concrete body type decoded by reflection.
type sample struct {
	Name string    `msgpack:"name"`
	X    []float64 `msgpack:"x"`
	IDs  []int32   `msgpack:"ids"`
	Sub  *sample   `msgpack:"sub,omitempty"`
}

// pair has a hand-written codec: [a, b, ...more fields skipped].
type pair struct{ A, B int64 }

func (p *pair) EncodeMsgpack(e *msgpack.Encoder) error {
	return errors.Join(e.EncodeArrayLen(2), e.EncodeInt(p.A), e.EncodeInt(p.B))
}

func (p *pair) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := ArrayLen(d, 2, 16, "pair")
	if err != nil {
		return err
	}
	if p.A, err = d.DecodeInt64(); err != nil {
		return err
	}
	if p.B, err = d.DecodeInt64(); err != nil {
		return err
	}
	return Skip(d, n-2)
}

func frame(t byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)+1))
	b = append(b, t)
	return append(b, body...)
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf, 0)
	s := &sample{Name: "a", X: []float64{1, math.Inf(1), -0.5}, IDs: []int32{7}, Sub: &sample{Name: "b"}}
	if err := e.Encode(9, s); err != nil {
		t.Fatal(err)
	}
	p := &pair{A: -3, B: 1 << 40}
	if err := e.Encode(10, p); err != nil {
		t.Fatal(err)
	}
	r := NewReader(bytes.NewReader(buf.Bytes()), 0)
	var d Decoder
	typ, body, err := r.Next()
	if err != nil || typ != 9 {
		t.Fatalf("first frame: type %d, err %v", typ, err)
	}
	var gotS sample
	if err := d.Decode("sample", body, &gotS); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&gotS, s) {
		t.Errorf("sample: got %+v, want %+v", gotS, *s)
	}
	typ, body, err = r.Next()
	if err != nil || typ != 10 {
		t.Fatalf("second frame: type %d, err %v", typ, err)
	}
	var gotP pair
	if err := d.Decode("pair", body, &gotP); err != nil || gotP != *p {
		t.Errorf("pair: got %+v, %v", gotP, err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	if r.BytesRead() != int64(buf.Len()) {
		t.Errorf("BytesRead %d, want %d", r.BytesRead(), buf.Len())
	}
	// Split agrees with the reader.
	typ, body, n, err := Split(buf.Bytes(), 0)
	if err != nil || typ != 9 || n+len(frameOf(t, 10, p)) != buf.Len() || len(body) != n-HeaderLen {
		t.Errorf("Split: type %d, body %d, n %d, err %v", typ, len(body), n, err)
	}
}

func frameOf(t *testing.T, typ byte, v any) []byte {
	t.Helper()
	b, err := AppendFrame(nil, typ, v, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPairSkipsAppendedFields(t *testing.T) {
	body := []byte{0x94, 0x01, 0x02, 0xa1, 'z', 0x90} // [1, 2, "z", []]
	var p pair
	var d Decoder
	if err := d.Decode("pair", body, &p); err != nil || p != (pair{1, 2}) {
		t.Errorf("got %+v, %v", p, err)
	}
}

func TestEncodeLeavesBufferOnError(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf, 64)
	if err := e.Encode(1, &pair{1, 2}); err != nil {
		t.Fatal(err)
	}
	before := buf.Len()
	err := e.Encode(1, &sample{X: make([]float64, 100)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized: %v, want ErrFrameTooLarge", err)
	}
	if err := e.Encode(1, func() {}); err == nil {
		t.Error("encoding a func succeeded")
	}
	if buf.Len() != before {
		t.Errorf("buffer grew from %d to %d on failed encodes", before, buf.Len())
	}
	if err := e.End(nil); err == nil {
		t.Error("End without Begin succeeded")
	}
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

// Hostile headers that msgpack v5.4.x would turn into gigabyte
// allocations (its decoder trusts a header's length before reading the
// bytes) are refused by Validate
// before msgpack sees them, for reflection and hand-written decoders alike.
func TestHostileBodiesAllocateLittle(t *testing.T) {
	const limit = 4 << 20
	arr32 := func(n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{0xdd}, n) }
	cases := []struct {
		name string
		body []byte
		into func() any
	}{
		{"array32 64Mi into struct", []byte{0xdd, 0x04, 0x00, 0x00, 0x00}, func() any { return new(sample) }},
		{"array32 4Gi into struct", arr32(math.MaxUint32), func() any { return new(sample) }},
		{"x array32 4Gi", append([]byte{0x81, 0xa1, 'x'}, arr32(math.MaxUint32)...), func() any { return new(sample) }},
		{"ids array32 64Mi", append([]byte{0x81, 0xa3, 'i', 'd', 's'}, arr32(1<<26)...), func() any { return new(sample) }},
		{"name str32 4Gi", []byte{0x81, 0xa4, 'n', 'a', 'm', 'e', 0xdb, 0xff, 0xff, 0xff, 0xff}, func() any { return new(sample) }},
		{"map32 4Gi", []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, func() any { return new(sample) }},
		{"bin32 4Gi", []byte{0xc6, 0xff, 0xff, 0xff, 0xff}, func() any { return new(sample) }},
		{"ext32", []byte{0xc9, 0xff, 0xff, 0xff, 0xff, 0x01}, func() any { return new(sample) }},
		{"nested 1M deep", bytes.Repeat([]byte{0x91}, 1<<20), func() any { return new(sample) }},
		{"pair array32 4Gi", arr32(math.MaxUint32), func() any { return new(pair) }},
		{"pair extra fields 4Gi", append([]byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02}, 0x03), func() any { return new(pair) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := frame(1, c.body)
			var err error
			var d Decoder
			n := allocated(func() {
				_, body, _, serr := Split(b, 0)
				if serr != nil {
					err = serr
					return
				}
				err = d.Decode(c.name, body, c.into())
			})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v, want ErrMalformed", err)
			}
			if n > limit {
				t.Errorf("decoding allocated %d bytes, want < %d", n, limit)
			}
			n = allocated(func() {
				_, body, rerr := NewReader(bytes.NewReader(b), 0).Next()
				if rerr == nil {
					rerr = d.Decode(c.name, body, c.into())
				}
				err = rerr
			})
			if err == nil || n > limit+3*uint64(len(b)) {
				t.Errorf("stream: err %v, allocated %d", err, n)
			}
		})
	}
}

func TestLengthOverCapRejectedWithoutAllocation(t *testing.T) {
	for _, length := range []uint32{DefaultMaxFrame + 1, math.MaxUint32} {
		hdr := binary.BigEndian.AppendUint32(nil, length)
		r := bufio.NewReader(io.MultiReader(bytes.NewReader(hdr), strings.NewReader("\x05 endless")))
		fr := NewReader(r, 0)
		var err error
		n := allocated(func() { _, _, err = fr.Next() })
		if !errors.Is(err, ErrFrameTooLarge) || !errors.Is(err, ErrMalformed) {
			t.Errorf("length %d: error %v, want ErrFrameTooLarge", length, err)
		}
		if n > 64<<10 {
			t.Errorf("length %d: allocated %d bytes before rejecting", length, n)
		}
		if _, _, _, err := Split(append(hdr, 5), 0); !errors.Is(err, ErrFrameTooLarge) {
			t.Errorf("Split length %d: error %v", length, err)
		}
	}
	if _, _, _, err := Split([]byte{0, 0, 0, 0}, 0); !errors.Is(err, ErrMalformed) {
		t.Errorf("empty frame: %v", err)
	}
	if _, _, _, err := Split([]byte{0, 0, 0}, 0); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short prefix: %v", err)
	}
}

func TestStalledFrameAllocatesOnlyWhatArrived(t *testing.T) {
	b := append(binary.BigEndian.AppendUint32(nil, DefaultMaxFrame), 1, 0x92)
	var err error
	n := allocated(func() { _, _, err = NewReader(bytes.NewReader(b), 0).Next() })
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %v, want unexpected EOF", err)
	}
	if n > 256<<10 {
		t.Errorf("allocated %d bytes for a frame that never came", n)
	}
}

func TestHelpersCheckBounds(t *testing.T) {
	dec := func(b []byte) *msgpack.Decoder { return msgpack.NewDecoder(bytes.NewReader(b)) }
	if _, err := ArrayLen(dec([]byte{0x93}), 0, 2, "a"); err == nil {
		t.Error("ArrayLen accepted 3 > 2")
	}
	if n, err := ArrayLen(dec([]byte{0xc0}), 0, 2, "a"); err != nil || n != 0 {
		t.Errorf("ArrayLen(nil) = %d, %v", n, err)
	}
	if _, err := MapLen(dec([]byte{0x80}), 1, 2, "m"); err == nil {
		t.Error("MapLen accepted 0 < 1")
	}
	if _, err := ArrayLen(dec([]byte{0x80}), 0, 2, "a"); err == nil {
		t.Error("ArrayLen accepted a map")
	}
	if s, err := String(dec([]byte{0xa3, 'a', 'b', 'c'}), 3, "s"); err != nil || s != "abc" {
		t.Errorf("String = %q, %v", s, err)
	}
	if _, err := String(dec([]byte{0xa3, 'a', 'b', 'c'}), 2, "s"); err == nil {
		t.Error("String accepted 3 bytes > 2")
	}
	if s, err := String(dec([]byte{0xc0}), 2, "s"); err != nil || s != "" {
		t.Errorf("String(nil) = %q, %v", s, err)
	}
}

func TestValidateAcceptsEveryMsgpackKind(t *testing.T) {
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
	if err := Validate(body); err != nil {
		t.Errorf("valid body rejected: %v", err)
	}
	for i := 0; i < len(body); i++ {
		if err := Validate(body[:i]); err == nil {
			t.Errorf("body cut at %d accepted", i)
		}
	}
	if err := Validate(append(body, 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	deep := append(bytes.Repeat([]byte{0x91}, MaxNesting), 0x00)
	if err := Validate(deep); err != nil {
		t.Errorf("nesting %d rejected: %v", MaxNesting, err)
	}
	if err := Validate(append([]byte{0x91}, deep...)); err == nil {
		t.Errorf("nesting %d accepted", MaxNesting+1)
	}
}

// FuzzFrame feeds arbitrary bytes to the reader, the splitter and the
// decoder: none may panic, and they must agree.
func FuzzFrame(f *testing.F) {
	f.Add(frameOf(&testing.T{}, 1, &sample{Name: "n", X: []float64{1}, IDs: []int32{2}}))
	f.Add(frameOf(&testing.T{}, 2, &pair{3, 4}))
	f.Add(frame(1, []byte{0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x05})
	f.Add(frame(1, bytes.Repeat([]byte{0x91}, 64)))
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, body, n, err := Split(b, 1<<16)
		_, rbody, rerr := NewReader(bytes.NewReader(b), 1<<16).Next()
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Split err %v, Reader err %v", err, rerr)
		}
		if err != nil {
			return
		}
		if n > len(b) || !bytes.Equal(body, rbody) {
			t.Fatalf("Split and Reader disagree")
		}
		var d Decoder
		var s sample
		var p pair
		serr := d.Decode("sample", body, &s)
		perr := d.Decode("pair", body, &p)
		if Validate(body) != nil && (serr == nil || perr == nil) {
			t.Fatalf("an invalid body decoded")
		}
		if serr == nil {
			again := frameOf(t, typ, &s)
			_, b2, _, err := Split(again, 0)
			var s2 sample
			if err != nil || d.Decode("sample", b2, &s2) != nil {
				t.Fatalf("re-encoded sample does not decode: %v", err)
			}
		}
	})
}

func BenchmarkEncodePair(b *testing.B) {
	var buf bytes.Buffer
	e := NewEncoder(&buf, 0)
	p := &pair{1, 2}
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := e.Encode(1, p); err != nil {
			b.Fatal(err)
		}
	}
}
