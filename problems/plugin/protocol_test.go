package plugin

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/grid/wire"
	"github.com/esgrid/esgrid/internal/leaktest"
	"github.com/esgrid/esgrid/problems"
	"github.com/vmihailenco/msgpack/v5"
)

// messages has one filled-in value of each message, by type.
func messages() map[MsgType]any {
	return map[MsgType]any{
		MsgHello:  &Hello{Version: 1, Name: "sim-2.b", MinDim: 2, MaxDim: 40, Lower: -1, Upper: 1e300, Cancel: true, NonFinite: true},
		MsgEval:   &Eval{ID: 1 << 50, X: []float64{0, -0.5, math.MaxFloat64, math.SmallestNonzeroFloat64}},
		MsgResult: &Result{ID: 7, F: -3.25},
		MsgCancel: &Cancel{ID: 9},
	}
}

// newOf returns a fresh pointer of the concrete type of a message.
func newOf(t MsgType) any {
	switch t {
	case MsgHello:
		return new(Hello)
	case MsgEval:
		return new(Eval)
	case MsgResult:
		return new(Result)
	case MsgCancel:
		return new(Cancel)
	}
	return nil
}

func TestMessagesRoundTrip(t *testing.T) {
	var d wire.Decoder
	for typ, m := range messages() {
		b, err := wire.AppendFrame(nil, byte(typ), m, 0)
		if err != nil {
			t.Fatal(err)
		}
		gt, body, _, err := wire.Split(b, 0)
		if err != nil || MsgType(gt) != typ {
			t.Fatalf("%v: split %v", typ, err)
		}
		got := newOf(typ)
		if err := d.Decode(typ.String(), body, got); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: got %+v, want %+v", typ, got, m)
		}
	}
	// An error result, and the error winning over f.
	var r Result
	body, _ := msgpack.Marshal(map[string]any{"id": 3, "f": 1.0, "error": "nope"})
	if err := d.Decode("result", body, &r); err != nil || r.Err != "nope" || r.ID != 3 {
		t.Errorf("error result: %+v, %v", r, err)
	}
}

// What other languages' msgpack libraries write is accepted: ints for
// floats, float32, unknown keys, defaults for absent keys.
func TestLenientWhereHarmless(t *testing.T) {
	var d wire.Decoder
	var h Hello
	body, _ := msgpack.Marshal(map[string]any{"v": 1, "name": "p", "lower": -5, "upper": float32(2.5), "future": []int{1}})
	if err := d.Decode("hello", body, &h); err != nil {
		t.Fatal(err)
	}
	if h != (Hello{Version: 1, Name: "p", MinDim: 1, Lower: -5, Upper: 2.5}) {
		t.Errorf("hello %+v", h)
	}
	var r Result
	body, _ = msgpack.Marshal(map[string]any{"id": uint8(4), "f": 12})
	if err := d.Decode("result", body, &r); err != nil || r.F != 12 || r.ID != 4 {
		t.Errorf("result %+v, %v", r, err)
	}
}

func TestBadMessages(t *testing.T) {
	mp := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type kv = map[string]any
	cases := []struct {
		name string
		typ  MsgType
		body []byte
		want string
	}{
		{"hello not a map", MsgHello, mp([]int{1}), "not a map"},
		{"hello without name", MsgHello, mp(kv{"v": 1, "lower": 0, "upper": 1}), `no "name"`},
		{"hello name too long", MsgHello, mp(kv{"v": 1, "name": strings.Repeat("n", 65), "lower": 0, "upper": 1}), "at most 64"},
		{"hello dims string", MsgHello, mp(kv{"v": 1, "name": "n", "lower": 0, "upper": 1, "min_dim": "2"}), "not an integer"},
		{"hello duplicate key", MsgHello, []byte{0x82, 0xa1, 'v', 0x01, 0xa1, 'v', 0x01}, "twice"},
		{"result nil f", MsgResult, mp(kv{"id": 1, "f": nil}), "not a number"},
		{"result string f", MsgResult, mp(kv{"id": 1, "f": "1.0"}), "not a number"},
		// What a plugin author sees: the value sent, and the cure, once.
		{"result decimal comma", MsgResult, mp(kv{"id": 1, "f": "1,5"}),
			`malformed frame: result: f: not a number: a string, "1,5" (code 0xa3) (send f as a msgpack float64, never as text`},
		{"result nan as text", MsgResult, mp(kv{"id": 1, "f": "nan"}), `f: not a number: a string, "nan" (code 0xa3)`},
		{"result float id as JavaScript sends it", MsgResult, mp(kv{"id": 200.0, "f": 1.0}),
			"malformed frame: result: id: not an integer: a float, 200 (code 0xcb) (send it as a msgpack integer, as the eval's id)"},
		{"result no id", MsgResult, mp(kv{"f": 1.0}), "no id"},
		{"result negative id", MsgResult, mp(kv{"id": -1, "f": 1.0}), "negative id"},
		{"result float id", MsgResult, mp(kv{"id": 1.0, "f": 1.0}), "not an integer"},
		{"result neither", MsgResult, mp(kv{"id": 1}), "neither f nor error"},
		{"result fitness for f", MsgResult, []byte{0x82, 0xa2, 'i', 'd', 0x01, 0xa7, 'f', 'i', 't', 'n', 'e', 's', 's', 0x00},
			"result: neither f nor error (its keys: id, fitness)"},
		{"result empty error", MsgResult, mp(kv{"id": 1, "error": ""}), "neither f nor error"},
		{"eval without x", MsgEval, mp(kv{"id": 1}), "needs id and x"},
		{"eval x of strings", MsgEval, mp(kv{"id": 1, "x": []string{"a"}}), "not a number"},
		{"cancel without id", MsgCancel, mp(kv{}), "no id"},
		{"too many keys", MsgCancel, mp(func() kv {
			m := kv{}
			for i := range 65 {
				m[strings.Repeat("k", i+1)] = 1
			}
			return m
		}()), "want 0..64"},
	}
	var d wire.Decoder
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := d.Decode(c.typ.String(), c.body, newOf(c.typ))
			if !errors.Is(err, wire.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrMalformed with %q", err, c.want)
			}
		})
	}
	// Hellos that decode but say something impossible.
	for _, h := range []Hello{
		{Version: 2, Name: "p", MinDim: 1, Lower: 0, Upper: 1},
		{Version: 1, Name: "p q", MinDim: 1, Lower: 0, Upper: 1},
		{Version: 1, Name: "p", MinDim: 0, Lower: 0, Upper: 1},
		{Version: 1, Name: "p", MinDim: 3, MaxDim: 2, Lower: 0, Upper: 1},
		{Version: 1, Name: "p", MinDim: 1, Lower: 1, Upper: 1},
		{Version: 1, Name: "p", MinDim: 1, Lower: math.Inf(-1), Upper: 1},
		{Version: 1, Name: "p", MinDim: 1, Lower: 0, Upper: math.NaN()},
		{Version: 1, Name: "p", MinDim: 1, Lower: -1.7e308, Upper: 1.7e308},
	} {
		if err := h.check(); err == nil {
			t.Errorf("hello %+v accepted", h)
		}
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

// The plugin protocol is decoded with the grid's rules: hostile headers
// are refused before anything is sized from them, whichever side reads.
func TestHostileFramesAllocateLittle(t *testing.T) {
	const limit = 4 << 20
	arr32 := func(n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{0xdd}, n) }
	key := func(k string) []byte { return append([]byte{0xa0 | byte(len(k))}, k...) }
	cases := []struct {
		name string
		typ  MsgType
		body []byte
	}{
		{"hello map32 4Gi", MsgHello, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}},
		{"hello array32 64Mi", MsgHello, []byte{0xdd, 0x04, 0x00, 0x00, 0x00}},
		{"hello name str32 4Gi", MsgHello, append(append([]byte{0x81}, key("name")...), 0xdb, 0xff, 0xff, 0xff, 0xff)},
		{"hello unknown key array32 4Gi", MsgHello, append(append([]byte{0x81}, key("zz")...), arr32(math.MaxUint32)...)},
		{"result error str32 4Gi", MsgResult, append(append([]byte{0x81}, key("error")...), 0xdb, 0xff, 0xff, 0xff, 0xff)},
		{"result key str32 4Gi", MsgResult, []byte{0x81, 0xdb, 0xff, 0xff, 0xff, 0xff}},
		{"eval x array32 4Gi", MsgEval, append(append([]byte{0x82, 0xa2, 'i', 'd', 0x01}, key("x")...), arr32(math.MaxUint32)...)},
		{"eval x array32 at MaxDim", MsgEval, append(append([]byte{0x82, 0xa2, 'i', 'd', 0x01}, key("x")...), arr32(MaxDim)...)},
		{"cancel bin32 4Gi", MsgCancel, []byte{0x81, 0xa2, 'i', 'd', 0xc6, 0xff, 0xff, 0xff, 0xff}},
		{"nested 1M deep", MsgResult, bytes.Repeat([]byte{0x91}, 1<<20)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := binary.BigEndian.AppendUint32(nil, uint32(len(c.body)+1))
			frame = append(append(frame, byte(c.typ)), c.body...)
			var err error
			n := allocated(func() {
				var d wire.Decoder
				_, body, rerr := wire.NewReader(bytes.NewReader(frame), 0).Next()
				if rerr == nil {
					rerr = d.Decode(c.typ.String(), body, newOf(c.typ))
				}
				err = rerr
			})
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v, want ErrMalformed", err)
			}
			if n > limit+3*uint64(len(frame)) {
				t.Errorf("decoding allocated %d bytes", n)
			}
		})
	}
}

// The host's reader, fed hostile bytes as if from a process, reports an
// error and never panics or allocates much.
func TestHostReaderOnHostileStreams(t *testing.T) {
	leaktest.Check(t)
	for _, stream := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 1},
		append(binary.BigEndian.AppendUint32(nil, wire.DefaultMaxFrame), 1, 0x92),
		[]byte("Segmentation fault\n"),
		{0, 0, 0, 2, byte(MsgResult), 0xc1},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		pr := &proc{stdout: r, frames: make(chan frame, 1), quit: make(chan struct{}), readDone: make(chan struct{})}
		go func() { w.Write(stream); w.Close() }()
		var f frame
		n := allocated(func() {
			go pr.readFrames(wire.DefaultMaxFrame)
			f = <-pr.frames
			<-pr.readDone
		})
		r.Close()
		if f.err == nil {
			t.Errorf("%q: no error", stream)
		}
		if n > 1<<20 {
			t.Errorf("%q: allocated %d bytes", stream, n)
		}
	}
}

// FuzzMessages decodes arbitrary bodies as every message type: no panic,
// and whatever decodes encodes again to the same.
func FuzzMessages(f *testing.F) {
	for typ, m := range messages() {
		b, err := wire.AppendFrame(nil, byte(typ), m, 0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[4:])
	}
	f.Add([]byte{byte(MsgResult), 0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{byte(MsgHello), 0x81, 0xa4, 'n', 'a', 'm', 'e', 0xc0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		typ := MsgType(b[0]%4 + 1)
		var d wire.Decoder
		m := newOf(typ)
		if err := d.Decode(typ.String(), b[1:], m); err != nil {
			if !errors.Is(err, wire.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := wire.AppendFrame(nil, byte(typ), m, 0)
		if err != nil {
			t.Fatalf("re-encode %v: %v", typ, err)
		}
		m2 := newOf(typ)
		if err := d.Decode(typ.String(), again[5:], m2); err != nil {
			t.Fatalf("decode re-encoded %v: %v", typ, err)
		}
		if !reflect.DeepEqual(m, m2) && !hasNaN(m) {
			t.Fatalf("%v changed on re-encoding: %+v, %+v", typ, m, m2)
		}
		// The SDK, fed this body from a host, returns (with or without an
		// error) and never panics.
		in := append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
		Serve(context.Background(), sphere{}, bytes.NewReader(in), io.Discard)
	})
}

func hasNaN(m any) bool {
	switch v := m.(type) {
	case *Hello:
		return v.Lower != v.Lower || v.Upper != v.Upper
	case *Eval:
		for _, x := range v.X {
			if x != x {
				return true
			}
		}
	case *Result:
		return v.F != v.F
	}
	return false
}

// sphere is a dimension-free problem for the SDK tests.
type sphere struct{}

func (sphere) Name() string                   { return "sphere-sdk" }
func (sphere) Bounds() (lower, upper float64) { return -1, 1 }
func (sphere) Eval(ctx context.Context, x []float64) (float64, error) {
	if len(x) > 0 && x[0] == 42 {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	var s float64
	for _, v := range x {
		s += float64(v * v)
	}
	return s, nil
}

// A host speaking to Serve through pipes: the SDK's side of the protocol.
func TestServeSpeaksTheProtocol(t *testing.T) {
	leaktest.Check(t)
	hostR, pluginW := io.Pipe()
	pluginR, hostW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), sphere{}, pluginR, pluginW, Dims(2, 0)) }()
	fr := wire.NewReader(hostR, 0)
	var d wire.Decoder
	read := func(want MsgType, v any) {
		t.Helper()
		typ, body, err := fr.Next()
		if err != nil || MsgType(typ) != want {
			t.Fatalf("read %v: type %v, %v", want, MsgType(typ), err)
		}
		if err := d.Decode(want.String(), body, v); err != nil {
			t.Fatal(err)
		}
	}
	write := func(typ MsgType, v any) {
		t.Helper()
		b, err := wire.AppendFrame(nil, byte(typ), v, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hostW.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	var h Hello
	read(MsgHello, &h)
	if h != (Hello{Version: 1, Name: "sphere-sdk", MinDim: 2, Lower: -1, Upper: 1, Cancel: true}) {
		t.Errorf("hello %+v", h)
	}
	var r Result
	write(MsgEval, &Eval{ID: 1, X: []float64{3, 4}})
	read(MsgResult, &r)
	if r != (Result{ID: 1, F: 25}) {
		t.Errorf("result %+v", r)
	}
	write(MsgCancel, &Cancel{ID: 1}) // already answered: ignored
	write(MsgEval, &Eval{ID: 2, X: []float64{42, 0}})
	write(MsgCancel, &Cancel{ID: 2})
	read(MsgResult, &r)
	if r.ID != 2 || !strings.Contains(r.Err, "canceled") {
		t.Errorf("cancelled result %+v", r)
	}
	write(MsgEval, &Eval{ID: 3, X: []float64{1, 1}})
	read(MsgResult, &r)
	if r != (Result{ID: 3, F: 2}) {
		t.Errorf("result after the cancel %+v", r)
	}
	hostW.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve after EOF: %v", err)
	}
	// A host that sends a hello is broken.
	hostR, pluginW = io.Pipe()
	go io.Copy(io.Discard, hostR)
	b, _ := wire.AppendFrame(nil, byte(MsgHello), &h, 0)
	if err := Serve(context.Background(), sphere{}, bytes.NewReader(b), pluginW); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("Serve on a hello: %v", err)
	}
	pluginW.Close()
}

func TestPerDim(t *testing.T) {
	p, err := PerDim("ridge-any", 1, func(dim int) (problems.Problem, error) { return problems.New("ridge", dim) })
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := p.Bounds(); lo != -100 || hi != 100 || p.Name() != "ridge-any" {
		t.Errorf("%s [%v, %v]", p.Name(), lo, hi)
	}
	for _, x := range [][]float64{{1}, {1, 2}, {1, 2, 3}, {1, 2}} {
		want, _ := problems.New("ridge", len(x))
		f, err := p.Eval(context.Background(), x)
		g, _ := want.Eval(context.Background(), x)
		if err != nil || f != g {
			t.Errorf("x %v: %v, %v; want %v", x, f, err, g)
		}
	}
	if _, err := PerDim("rb", 1, func(dim int) (problems.Problem, error) { return problems.New("rosenbrock", dim) }); err == nil {
		t.Error("PerDim accepted a family that has no member of its minimum dimension")
	}
}

func TestCatalog(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "sim")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("x"), 0o644)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("#!/bin/sh\n"), 0o755)
	os.Chmod(open, 0o777)
	t.Chdir(dir)

	var es Entries
	for _, s := range []string{"sim=./sim", "b.2=" + exe} {
		if err := es.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if es.String() != "sim=./sim,b.2="+exe {
		t.Errorf("flag value %q", es.String())
	}
	c, err := NewCatalog(es...)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Names(); !reflect.DeepEqual(got, []string{"b.2", "sim"}) {
		t.Errorf("names %v", got)
	}
	if e, ok := c.Lookup("sim"); !ok || e.Path != exe {
		t.Errorf("Lookup(sim) = %v, %v; want the absolute path", e, ok)
	}
	for _, name := range []string{"", "/bin/sh", "../sim", "-sim", "SIM", "sphere"} {
		if _, ok := c.Lookup(name); ok {
			t.Errorf("Lookup(%q) found something", name)
		}
	}
	var nilCat *Catalog
	if _, ok := nilCat.Lookup("sim"); ok || nilCat.Len() != 0 || nilCat.Names() != nil {
		t.Error("a nil catalog lists something")
	}

	bad := []struct {
		entries []Entry
		want    string
	}{
		{[]Entry{{"sphere", exe}}, "built-in"},
		{[]Entry{{"a", exe}, {"a", exe}}, "twice"},
		{[]Entry{{"a", plain}}, "not executable"},
		{[]Entry{{"a", open}}, "is writable by its group and every user (mode -rwxrwxrwx; chmod go-w"},
		{[]Entry{{"a", dir}}, "not a regular file"},
		{[]Entry{{"a", dir + "/none"}}, "no such file"},
		{[]Entry{{"a b", exe}}, "letters, digits"},
		{[]Entry{{strings.Repeat("a", 41), exe}}, "1 to 40"},
	}
	for _, b := range bad {
		if _, err := NewCatalog(b.entries...); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("NewCatalog(%v) = %v, want %q", b.entries, err, b.want)
		}
	}
	many := make([]Entry, MaxPlugins+1)
	for i := range many {
		many[i] = Entry{Name: "p" + strings.Repeat("x", i), Path: exe}
	}
	if _, err := NewCatalog(many...); err == nil {
		t.Error("too many plugins accepted")
	}
	for _, s := range []string{"noequals", "=path", "name=", "a b=x"} {
		if _, err := ParseEntry(s); err == nil {
			t.Errorf("ParseEntry(%q) accepted", s)
		}
	}
}

// NonFinite puts "nonfinite" in Serve's hello; without it the hello says
// false.
func TestServeNonFinite(t *testing.T) {
	for _, declare := range []bool{false, true} {
		var opts []Option
		if declare {
			opts = append(opts, NonFinite())
		}
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- Serve(context.Background(), sphere{}, strings.NewReader(""), pw, opts...)
			pw.Close()
		}()
		typ, body, err := wire.NewReader(pr, 0).Next()
		if err != nil || MsgType(typ) != MsgHello {
			t.Fatalf("first message: type %v, %v", MsgType(typ), err)
		}
		var h Hello
		var d wire.Decoder
		if err := d.Decode("hello", body, &h); err != nil {
			t.Fatal(err)
		}
		if h.NonFinite != declare {
			t.Errorf("with NonFinite %v: hello says %v", declare, h.NonFinite)
		}
		io.Copy(io.Discard, pr)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
}
