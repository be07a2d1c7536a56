package flagx

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxList bounds the items of a list flag.
const MaxList = 1000

// IntList is a comma-separated list of ints, each in [Min, Max]; an
// empty item is refused (a value left out: "100,,500"), as the policy
// lists refuse one.
type IntList struct {
	Memo
	p        *[]int
	Min, Max int
}

// IntListVar declares a list flag of ints in [lo, hi] into fs.
func IntListVar(fs *flag.FlagSet, p *[]int, name string, value []int, lo, hi int, text string) *IntList {
	v := &IntList{p: p, Min: lo, Max: hi}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

func (v *IntList) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, n := range *v.p {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// Get returns the []int.
func (v *IntList) Get() any { return *v.p }

// Set parses the list; one item outside the range refuses it whole.
func (v *IntList) Set(s string) error {
	item := Int{p: new(int), Min: v.Min, Max: v.Max}
	var out []int
	for i, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			if strings.Trim(s, ", ") == "" {
				break // no value at all, as said below
			}
			return v.Refuse(s, fmt.Errorf("item %d is empty (a value left out?)", i+1))
		}
		n, err := item.Check(f)
		if err != nil {
			return v.Refuse(s, itemError(s, f, err))
		}
		out = append(out, n)
	}
	if len(out) == 0 || len(out) > MaxList {
		return v.Refuse(s, fmt.Errorf("must be a list of 1 to %d integers between %d and %d", MaxList, v.Min, v.Max))
	}
	*v.p = out
	v.Accept()
	return nil
}

// Range is "a list of lo to hi".
func (v *IntList) Range() string { return fmt.Sprintf("each %d to %d", v.Min, v.Max) }

// Outside lists refused values.
func (v *IntList) Outside() []string {
	item := Int{Min: v.Min, Max: v.Max}
	out := []string{","}
	for _, s := range item.Outside() {
		out = append(out, strconv.Itoa(v.Min)+","+s)
	}
	return out
}

// DurationList is a comma-separated list of durations, each in [Min,
// Max]; with Bare set, a bare number is that many Bare units. An empty
// item is refused, as IntList's.
type DurationList struct {
	Memo
	p        *[]time.Duration
	Min, Max time.Duration
	Bare     time.Duration
}

// DurationListVar declares a list flag of durations in [lo, hi] into fs;
// bare > 0 reads a bare number as that many bare units.
func DurationListVar(fs *flag.FlagSet, p *[]time.Duration, name string, value []time.Duration, lo, hi, bare time.Duration, text string) *DurationList {
	v := &DurationList{p: p, Min: lo, Max: hi, Bare: bare}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

func (v *DurationList) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	s := make([]string, len(*v.p))
	for i, d := range *v.p {
		s[i] = FormatDuration(d)
	}
	return strings.Join(s, ",")
}

// Get returns the []time.Duration.
func (v *DurationList) Get() any { return *v.p }

// Set parses the list; one item outside the range refuses it whole.
func (v *DurationList) Set(s string) error {
	item := Duration{p: new(time.Duration), Min: v.Min, Max: v.Max, Bare: v.Bare}
	var out []time.Duration
	for i, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			if strings.Trim(s, ", ") == "" {
				break // no value at all, as said below
			}
			return v.Refuse(s, fmt.Errorf("item %d is empty (a value left out?)", i+1))
		}
		d, err := item.Check(f)
		if err != nil {
			return v.Refuse(s, itemError(s, f, err))
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > MaxList {
		return v.Refuse(s, fmt.Errorf("must be a list of 1 to %d durations %s", MaxList, item.between()))
	}
	*v.p = out
	v.Accept()
	return nil
}

// Range is "each lo to hi".
func (v *DurationList) Range() string {
	item := Duration{Min: v.Min, Max: v.Max, Bare: v.Bare}
	return "each " + item.Range()
}

// Outside lists refused values.
func (v *DurationList) Outside() []string {
	item := Duration{Min: v.Min, Max: v.Max, Bare: v.Bare}
	out := []string{","}
	for _, s := range item.Outside() {
		out = append(out, FormatDuration(v.Min)+","+s)
	}
	return out
}

// itemError is err about item f of list s: named if s has others.
func itemError(s, f string, err error) error {
	if strings.Contains(s, ",") {
		return fmt.Errorf("item %q %w", f, err)
	}
	return err
}
