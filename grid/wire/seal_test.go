package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
)

type sealMsg struct {
	N int    `msgpack:"n"`
	S string `msgpack:"s"`
}

func sealKey(b byte) []byte { return bytes.Repeat([]byte{b}, SealKeyLen) }

// sealedFrames encodes msgs as sealed frames and returns each frame's
// bytes.
func sealedFrames(t *testing.T, key []byte, msgs ...sealMsg) [][]byte {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := NewEncoder(&buf, 1024)
	enc.Seal(s)
	var out [][]byte
	for i := range msgs {
		before := buf.Len()
		if err := enc.Encode(7, &msgs[i]); err != nil {
			t.Fatal(err)
		}
		out = append(out, bytes.Clone(buf.Bytes()[before:]))
	}
	if s.Frames() != uint64(len(msgs)) {
		t.Errorf("sealer counted %d frames, want %d", s.Frames(), len(msgs))
	}
	return out
}

// readAll opens every frame of stream and returns the messages, and the
// error that stopped it (nil at a clean end).
func readAll(t *testing.T, key []byte, stream []byte) ([]sealMsg, error) {
	t.Helper()
	o, err := NewOpener(key)
	if err != nil {
		t.Fatal(err)
	}
	fr := NewReader(bytes.NewReader(stream), 1024)
	fr.Open(o)
	var dec Decoder
	var got []sealMsg
	for {
		typ, body, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if typ != 7 {
			t.Fatalf("type %d, want 7", typ)
		}
		var m sealMsg
		if err := dec.Decode("msg", body, &m); err != nil {
			return got, err
		}
		got = append(got, m)
	}
}

func TestSealRoundTrip(t *testing.T) {
	msgs := []sealMsg{{1, "one"}, {2, "two"}, {3, "three"}}
	frames := sealedFrames(t, sealKey(1), msgs...)
	for i, f := range frames {
		if bytes.Contains(f, []byte(msgs[i].S)) {
			t.Errorf("frame %d shows its body in clear", i)
		}
	}
	got, err := readAll(t, sealKey(1), bytes.Join(frames, nil))
	if err != nil || len(got) != len(msgs) {
		t.Fatalf("got %v, %v", got, err)
	}
	for i := range msgs {
		if got[i] != msgs[i] {
			t.Errorf("frame %d: %v, want %v", i, got[i], msgs[i])
		}
	}
}

// Every way to tamper with a sealed stream fails the frame where it
// happens, with ErrAuth (and ErrMalformed): the frames before it are
// delivered, nothing after it.
func TestSealTamperingDetected(t *testing.T) {
	msgs := []sealMsg{{1, "one"}, {2, "two"}, {3, "three"}, {4, "four"}}
	frames := sealedFrames(t, sealKey(1), msgs...)
	flip := func(f []byte, at int) []byte {
		f = bytes.Clone(f)
		f[at] ^= 0x10
		return f
	}
	cases := []struct {
		name   string
		stream [][]byte
		key    byte
		good   int // frames delivered before the failure
	}{
		{"bit flipped in a body", [][]byte{frames[0], flip(frames[1], 9), frames[2]}, 1, 1},
		{"bit flipped in the tag", [][]byte{frames[0], flip(frames[1], len(frames[1])-1)}, 1, 1},
		{"replayed", [][]byte{frames[0], frames[1], frames[1], frames[2]}, 1, 2},
		{"dropped", [][]byte{frames[0], frames[2], frames[3]}, 1, 1},
		{"reordered", [][]byte{frames[0], frames[2], frames[1]}, 1, 1},
		{"first one dropped", [][]byte{frames[1]}, 1, 0},
		{"another key", frames, 2, 0},
		{"reflected plain frame", [][]byte{{0, 0, 0, 3, 7, 0x80, 0xc0}}, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(t, sealKey(c.key), bytes.Join(c.stream, nil))
			if !errors.Is(err, ErrAuth) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrAuth", err)
			}
			if len(got) != c.good {
				t.Errorf("%d frames delivered before the failure, want %d", len(got), c.good)
			}
		})
	}
	// A length prefix altered: the frame is cut elsewhere, which fails
	// too (or the stream ends inside a frame).
	bad := bytes.Clone(frames[0])
	bad[3]--
	if _, err := readAll(t, sealKey(1), append(bad, frames[1]...)); err == nil {
		t.Error("altered length prefix accepted")
	}
}

// The cap applies to the frame on the wire, tag included: a plain frame
// may take the cap less the tag, and a sealed frame the cap, no more.
func TestSealCap(t *testing.T) {
	s, _ := NewSealer(sealKey(1))
	var buf bytes.Buffer
	enc := NewEncoder(&buf, 64)
	enc.Seal(s)
	// A plain frame of 5 + 1 + 2 + 1 + 2 + 2 + len(S) - 4 = 9 + len(S)
	// bytes after the length prefix: 39 characters make 48, the cap less
	// the tag.
	if err := enc.Encode(7, &sealMsg{S: string(bytes.Repeat([]byte("x"), 39))}); err != nil {
		t.Fatal(err)
	}
	if n := buf.Len() - 4; n != 64 {
		t.Fatalf("sealed frame of %d bytes, want the cap, 64", n)
	}
	if err := enc.Encode(7, &sealMsg{S: string(bytes.Repeat([]byte("x"), 40))}); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("a plain frame one byte over the cap less the tag: %v", err)
	}
	o, _ := NewOpener(sealKey(1))
	fr := NewReader(bytes.NewReader(buf.Bytes()), 64)
	fr.Open(o)
	if _, _, err := fr.Next(); err != nil {
		t.Fatalf("frame at the cap: %v", err)
	}
	hdr := []byte{0, 0, 0, 64 + 1}
	fr = NewReader(bytes.NewReader(hdr), 64)
	o2, _ := NewOpener(sealKey(1))
	fr.Open(o2)
	if _, _, err := fr.Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("sealed frame over cap + tag: %v", err)
	}
}

// SealFrame and OpenFrame, for frames built without an Encoder.
func TestSealFrameOpenFrame(t *testing.T) {
	plain, err := AppendFrame(nil, 7, &sealMsg{N: 5, S: "five"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSealer(sealKey(3))
	sealed, err := s.SealFrame(bytes.Clone(plain), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != len(plain)+SealOverhead {
		t.Errorf("sealed %d bytes, want %d", len(sealed), len(plain)+SealOverhead)
	}
	o, _ := NewOpener(sealKey(3))
	typ, body, err := o.OpenFrame(sealed)
	if err != nil || typ != 7 || !bytes.Equal(body, plain[5:]) {
		t.Errorf("OpenFrame = %d, %x, %v; want 7, %x", typ, body, err, plain[5:])
	}
	if _, _, err := o.OpenFrame(sealed); !errors.Is(err, ErrAuth) {
		t.Errorf("the same frame opened twice: %v", err)
	}
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Error("a 5-byte key accepted")
	}
}

// Garbage never panics an Opener, whatever its length.
func FuzzOpenFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 17, 1, 2, 3})
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		o, _ := NewOpener(sealKey(9))
		if _, _, err := o.OpenFrame(b); err == nil {
			t.Fatal("garbage opened")
		}
		fr := NewReader(bytes.NewReader(b), 1024)
		fr.Open(o)
		for range 4 {
			if _, _, err := fr.Next(); err != nil {
				return
			}
		}
	})
}

// BenchmarkSealOpen seals and opens one frame of the given size: what
// sealing costs a connection per frame, both ends together.
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range []int{64, 512, 16 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			s, _ := NewSealer(sealKey(1))
			o, _ := NewOpener(sealKey(1))
			frame := make([]byte, 4+size, 4+size+SealOverhead)
			binary.BigEndian.PutUint32(frame, uint32(size))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				f, err := s.SealFrame(frame[:4+size], 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := o.OpenFrame(f); err != nil {
					b.Fatal(err)
				}
				binary.BigEndian.PutUint32(frame, uint32(size))
			}
		})
	}
}
