package grid

import (
	"testing"
)

// A cancel's acknowledgement travels as an optional trailing field of a
// Result: an ordinary result is encoded exactly as before (so a master
// that predates acknowledgements reads every result as it always did),
// and an acknowledgement is a Cancelled result with one more field.
func TestResultAckOnTheWire(t *testing.T) {
	plain := Results{Items: []Result{{Gen: 3, ID: 7, F: 1.5, Exec: 42}}}
	acks := Results{Items: []Result{
		{Gen: 3, ID: 8, Cancelled: true, Ack: AckDropped},
		{Gen: 3, ID: 9, Cancelled: true, Ack: AckStopped, Exec: 1000},
		{Gen: 2, ID: 1, Cancelled: true, Ack: AckLate},
	}}
	pf, err := AppendFrame(nil, &plain, 0)
	if err != nil {
		t.Fatal(err)
	}
	af, err := AppendFrame(nil, &acks, 0)
	if err != nil {
		t.Fatal(err)
	}
	// After the length and the type: [[result], queued, running], the
	// plain result a 6-array [gen, id, f, exec, err, cancelled], an
	// acknowledgement a 7-array.
	if len(pf) < 8 || pf[5] != 0x93 || pf[6] != 0x91 || pf[7] != 0x96 {
		t.Errorf("plain result not a 6-array: % x", pf)
	}
	if len(af) < 8 || af[5] != 0x93 || af[6] != 0x93 || af[7] != 0x97 {
		t.Errorf("acknowledgement not a 7-array: % x", af)
	}
	for _, c := range []struct {
		frame []byte
		want  Results
	}{{pf, plain}, {af, acks}} {
		m, _, err := DecodeFrame(c.frame, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := m.(*Results)
		if len(got.Items) != len(c.want.Items) {
			t.Fatalf("got %+v", got)
		}
		for i := range got.Items {
			if got.Items[i] != c.want.Items[i] {
				t.Errorf("item %d: %+v, want %+v", i, got.Items[i], c.want.Items[i])
			}
		}
	}
	// An outcome this version does not know reads as none.
	odd, err := AppendFrame(nil, &Results{Items: []Result{{Gen: 1, ID: 1, Cancelled: true, Ack: 99}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := DecodeFrame(odd, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := m.(*Results).Items[0]; r.Ack != 0 || !r.Cancelled {
		t.Errorf("unknown outcome decoded as %+v", r)
	}
}
