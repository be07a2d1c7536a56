package member

// Slots shares a fixed number of places (gossip streams, handshakes in
// progress) among the addresses that ask for them, so that a few
// addresses cannot take them all. A place is given to an address if
//
//   - fewer than Max places are held;
//   - the address holds fewer than PerSource;
//   - the address holds none, or fewer than Max−Reserve places are held:
//     the last Reserve places go only to addresses that hold none.
//
// What this guarantees. Order the places held at any moment by when
// they were given: the k-th was given while at least k−1 were held, so
// each after the (Max−Reserve)-th went to an address that held none
// then, and that address has taken no other since (it could not, with
// Max−Reserve or more held). So the last Reserve places are held by
// Reserve distinct addresses, one each, and the others by other
// addresses, at most PerSource each: to hold every place takes at least
//
//	Lockout() = Reserve + ⌈(Max−Reserve)/PerSource⌉
//
// distinct addresses. An address that holds none is given a place
// whenever fewer than Lockout() other addresses hold places, however
// they open and close them. With more, a freed place goes to whoever
// asks first, and only the callers' deadlines, which bound how long a
// place is held, free them.
//
// Slots is not safe for concurrent use: its callers hold their own lock.
type Slots struct {
	max, perSource, reserve int
	held                    int
	by                      map[string]int
}

// Why Slots.Take refused a place.
const (
	SlotsFull      = "full"       // Max places held
	SlotsPerSource = "per_source" // the address holds PerSource
	SlotsReserved  = "reserved"   // only the reserve is left, and the address holds some
)

// NewSlots returns Slots of places places, at most perSource per
// address, the last reserve of them kept for addresses that hold none.
// perSource is taken as at least 1 and at most places; reserve as at
// most places−1.
func NewSlots(places, perSource, reserve int) *Slots {
	places = max(places, 1)
	return &Slots{
		max:       places,
		perSource: min(max(perSource, 1), places),
		reserve:   min(max(reserve, 0), places-1),
		by:        make(map[string]int),
	}
}

// Take gives src a place, or says why not (one of the Slots* kinds).
func (s *Slots) Take(src string) (refused string) {
	n := s.by[src]
	switch {
	case s.held >= s.max:
		return SlotsFull
	case n >= s.perSource:
		return SlotsPerSource
	case n > 0 && s.held >= s.max-s.reserve:
		return SlotsReserved
	}
	s.held++
	s.by[src] = n + 1
	return ""
}

// Give gives back a place src took.
func (s *Slots) Give(src string) {
	n := s.by[src]
	if n == 0 {
		return
	}
	s.held--
	if n == 1 {
		delete(s.by, src)
	} else {
		s.by[src] = n - 1
	}
}

// Held is the number of places held, in all.
func (s *Slots) Held() int { return s.held }

// HeldBy is the number of places src holds.
func (s *Slots) HeldBy(src string) int { return s.by[src] }

// Lockout is the fewest addresses that can hold every place between
// them (see Slots).
func (s *Slots) Lockout() int {
	rest := s.max - s.reserve
	return s.reserve + (rest+s.perSource-1)/s.perSource
}
