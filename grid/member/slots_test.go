package member

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestSlotsRules(t *testing.T) {
	s := NewSlots(8, 3, 2) // Lockout = 2 + ⌈6/3⌉ = 4
	if got := s.Lockout(); got != 4 {
		t.Fatalf("Lockout() = %d, want 4", got)
	}
	for range 3 {
		if why := s.Take("a"); why != "" {
			t.Fatalf("a refused: %s", why)
		}
	}
	if why := s.Take("a"); why != SlotsPerSource {
		t.Fatalf("a's fourth: %q, want %q", why, SlotsPerSource)
	}
	for range 3 {
		s.Take("b")
	}
	if why := s.Take("a"); why != SlotsPerSource {
		t.Fatalf("a: %q", why)
	}
	s.Give("b")
	s.Take("b") // 5 held: b may still take its third
	if why := s.Take("c"); why != "" {
		t.Fatalf("c refused: %s", why)
	}
	if why := s.Take("c"); why != SlotsReserved {
		t.Fatalf("c's second: %q, want %q", why, SlotsReserved)
	}
	if why := s.Take("d"); why != "" {
		t.Fatalf("d refused: %s", why)
	}
	// Four addresses hold all eight.
	if why := s.Take("e"); why != SlotsFull {
		t.Fatalf("e: %q, want %q", why, SlotsFull)
	}
	if s.Held() != 8 || s.HeldBy("a") != 3 || s.HeldBy("c") != 1 {
		t.Fatalf("held %d, a %d, c %d", s.Held(), s.HeldBy("a"), s.HeldBy("c"))
	}
	s.Give("zzz") // never took one: nothing changes
	s.Give("d")
	if s.Held() != 7 || s.HeldBy("d") != 0 {
		t.Fatalf("after d gave back: held %d, d %d", s.Held(), s.HeldBy("d"))
	}
}

// Slots' guarantee, against random attacks: fewer than Lockout()
// addresses, however they take and give back places, never leave a new
// address without one; and Lockout() addresses can take them all.
func TestSlotsLockout(t *testing.T) {
	for _, c := range []struct{ max, per, reserve int }{
		{64, 8, 48}, {64, 16, 16}, {16, 8, 4}, {16, 8, 0}, {5, 5, 1}, {7, 2, 3},
	} {
		t.Run(fmt.Sprintf("%d-%d-%d", c.max, c.per, c.reserve), func(t *testing.T) {
			s := NewSlots(c.max, c.per, c.reserve)
			lock := s.Lockout()
			r := rand.New(rand.NewPCG(uint64(c.max), uint64(c.per)))
			attackers := lock - 1
			for step := range 20000 {
				src := fmt.Sprint(r.IntN(attackers))
				if r.IntN(3) == 0 {
					s.Give(src)
				} else {
					s.Take(src)
				}
				if why := s.Take("honest"); why != "" {
					t.Fatalf("step %d: %d addresses kept a new one out (%s): %d held", step, attackers, why, s.Held())
				}
				s.Give("honest")
			}

			// The greedy attack: fill all but the reserve PerSource at a
			// time, then one place per fresh address.
			s = NewSlots(c.max, c.per, c.reserve)
			n := 0
			for s.Held() < c.max-s.reserve {
				src := fmt.Sprint(n)
				for s.Take(src) == "" {
				}
				n++
			}
			for s.Held() < c.max {
				if why := s.Take(fmt.Sprint(n)); why != "" {
					t.Fatalf("fresh address refused: %s", why)
				}
				n++
			}
			if n != lock {
				t.Errorf("%d addresses filled every place, Lockout() says %d", n, lock)
			}
			if why := s.Take("honest"); why != SlotsFull {
				t.Errorf("after the lockout: %q", why)
			}
		})
	}
}
