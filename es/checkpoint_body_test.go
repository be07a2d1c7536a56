package es_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/es"
)

// reseal gives body a checkpoint's header and a valid checksum: the
// checksum is not a MAC, so a hostile file has a good one.
func reseal(body []byte) []byte {
	out := make([]byte, 52, 52+len(body))
	copy(out, "esgrid\x00C")
	binary.BigEndian.PutUint32(out[8:], 4)
	binary.BigEndian.PutUint64(out[12:], uint64(len(body)))
	out = append(out, body...)
	h := sha256.New()
	h.Write(out[:20])
	h.Write(body)
	copy(out[20:52], h.Sum(nil))
	return out
}

// A body that does not decode, under a valid checksum, is refused as a
// damaged checkpoint, in a line that says so (not msgpack's bare "EOF"),
// and a few bytes that announce arrays of 2³¹ elements allocate little.
func TestCheckpointBodyThatDoesNotDecode(t *testing.T) {
	huge := []byte{0xdd, 0x7f, 0xff, 0xff, 0xff}
	key := func(k string) []byte { return append([]byte{0xa0 | byte(len(k))}, k...) }
	one := func(parts ...[]byte) []byte { return slices.Concat(append([][]byte{{0x81}}, parts...)...) }
	for _, body := range [][]byte{
		one(key("parents"), huge),
		one(key("notes"), huge),
		one(key("best"), one(key("x"), huge)),
		one(key("cma"), one(key("c"), huge)),
		one(key("config"), []byte{0xdb, 0x7f, 0xff, 0xff, 0xff}),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var e es.Engine
		err := e.UnmarshalBinary(reseal(body))
		runtime.ReadMemStats(&after)
		var ce *es.CheckpointError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "damaged") {
			t.Errorf("body %x: %v, want a *CheckpointError saying the checkpoint is damaged", body, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
			t.Errorf("body %x of %d bytes allocated %d MiB", body, len(body), n>>20)
		}
	}
}
