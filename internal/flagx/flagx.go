// Package flagx gives the commands numeric flags with bounds: an integer,
// float, duration or list flag refuses, as it is parsed, NaN, ±Inf and
// every value outside its range, so that a typing error (-reps 1e9, -noise
// NaN) stops the command with one line before it allocates or runs
// anything. Each flag's help text ends with its range.
//
// Every numeric flag of a command is declared here; a command's test
// checks that with flagxtest, so a flag added later without a bound fails
// it.
package flagx

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Bounded is a flag value that refuses what lies outside its range.
type Bounded interface {
	flag.Value
	// Range says which values Set accepts, as the help text gives it:
	// "1 to 1000", "0s to 1h".
	Range() string
	// Outside lists values Set must refuse: just past each end of the
	// range, and a huge and a negative value where those are outside it
	// (for tests).
	Outside() []string
}

// Memo remembers the last value a flag refused, which Parse reports with
// the flag's name. Every value of this package embeds it, and so can a
// command's own Bounded values.
type Memo struct {
	bad    string
	badErr error
}

// Refuse records that Set refused v for err, and returns err.
func (m *Memo) Refuse(v string, err error) error {
	m.bad, m.badErr = v, err
	return err
}

// Accept records that Set took its value.
func (m *Memo) Accept() { m.bad, m.badErr = "", nil }

// Refused is the value last refused and why, or a nil error.
func (m *Memo) Refused() (string, error) { return m.bad, m.badErr }

// refuser is a value with a Memo.
type refuser interface{ Refused() (string, error) }

// Parse parses args into fs, and words a refused value as one line that
// names the flag, the value and the range: "-reps 1e9: must be an integer
// between 1 and 1000". Other errors (and flag.ErrHelp) are fs.Parse's.
//
// A deprecated name (Alias) sets the flag of its new name once the line
// is parsed; giving both is refused. With -version given (VersionFlag)
// and nothing wrong, Parse returns ErrVersion.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil {
		return afterParse(fs)
	}
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	var named error
	fs.VisitAll(func(f *flag.Flag) {
		if r, ok := f.Value.(refuser); ok && named == nil {
			if v, verr := r.Refused(); verr != nil {
				named = fmt.Errorf("-%s %s: %w", f.Name, v, verr)
			}
		}
	})
	if named != nil {
		return named
	}
	return err
}

// afterParse gives the deprecated names' values to their new flags, and
// says whether -version was asked for.
func afterParse(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.Visit(func(f *flag.Flag) {
		a, ok := f.Value.(*AliasValue)
		if !ok || err != nil {
			return
		}
		if given[a.new] {
			err = fmt.Errorf("-%s and -%s are one flag (-%s is deprecated): give -%s", a.old, a.new, a.old, a.new)
			return
		}
		err = a.apply()
	})
	if err != nil {
		return err
	}
	if f := fs.Lookup("version"); f != nil {
		if v, ok := f.Value.(*versionFlag); ok && bool(*v) {
			return ErrVersion
		}
	}
	return nil
}

// usage appends the range to a flag's help text.
func usage(text string, b Bounded) string {
	return text + " (" + b.Range() + ")"
}

// rangeError says a value is outside [lo, hi].
func rangeError(r string) error {
	return fmt.Errorf("must be %s", r)
}

// Int is an int flag bounded to [Min, Max].
type Int struct {
	Memo
	p        *int
	Min, Max int
}

// IntVar declares an int flag with the range [lo, hi] into fs.
func IntVar(fs *flag.FlagSet, p *int, name string, value, lo, hi int, text string) *Int {
	v := &Int{p: p, Min: lo, Max: hi}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

func (v *Int) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

// Get returns the int.
func (v *Int) Get() any { return *v.p }

// Set parses s and refuses it outside the range.
func (v *Int) Set(s string) error {
	n, err := v.Check(s)
	if err != nil {
		return v.Refuse(s, err)
	}
	*v.p = n
	v.Accept()
	return nil
}

// Check parses s as Set does, without setting the flag: for the same
// setting given in a file.
func (v *Int) Check(s string) (int, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, strconv.IntSize)
	if err != nil || int(n) < v.Min || int(n) > v.Max {
		return 0, rangeError("an integer " + v.between())
	}
	return int(n), nil
}

func (v *Int) between() string { return fmt.Sprintf("between %d and %d", v.Min, v.Max) }

// Range is "lo to hi".
func (v *Int) Range() string { return fmt.Sprintf("%d to %d", v.Min, v.Max) }

// Outside lists refused values.
func (v *Int) Outside() []string {
	out := []string{"NaN", "Inf", "1.5", outsideInt(int64(v.Max), +1), outsideInt(int64(v.Min), -1)}
	if v.Max < math.MaxInt64 {
		out = append(out, strconv.FormatInt(math.MaxInt64, 10), "1e9")
	}
	if v.Min >= 0 {
		out = append(out, "-1")
	}
	return out
}

// outsideInt is n+d written in decimal, past int64 if need be.
func outsideInt(n int64, d int64) string {
	if d > 0 && n == math.MaxInt64 {
		return "9223372036854775808"
	}
	if d < 0 && n == math.MinInt64 {
		return "-9223372036854775809"
	}
	return strconv.FormatInt(n+d, 10)
}

// Uint64 is a uint64 flag bounded to [Min, Max] (a seed: every uint64).
type Uint64 struct {
	Memo
	p        *uint64
	Min, Max uint64
}

// Uint64Var declares a uint64 flag with the range [lo, hi] into fs.
func Uint64Var(fs *flag.FlagSet, p *uint64, name string, value, lo, hi uint64, text string) *Uint64 {
	v := &Uint64{p: p, Min: lo, Max: hi}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

func (v *Uint64) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p, 10)
}

// Get returns the uint64.
func (v *Uint64) Get() any { return *v.p }

// Set parses s and refuses it outside the range.
func (v *Uint64) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 0, 64)
	if err != nil || n < v.Min || n > v.Max {
		return v.Refuse(s, rangeError(fmt.Sprintf("an integer between %d and %d", v.Min, v.Max)))
	}
	*v.p = n
	v.Accept()
	return nil
}

// Range is "lo to hi".
func (v *Uint64) Range() string { return fmt.Sprintf("%d to %d", v.Min, v.Max) }

// Outside lists refused values.
func (v *Uint64) Outside() []string {
	out := []string{"NaN", "Inf", "-1", "1.5"}
	if v.Max < math.MaxUint64 {
		out = append(out, strconv.FormatUint(v.Max+1, 10))
	} else {
		out = append(out, "18446744073709551616")
	}
	if v.Min > 0 {
		out = append(out, strconv.FormatUint(v.Min-1, 10))
	}
	return out
}

// Float is a float64 flag bounded to [Min, Max]; NaN and ±Inf are always
// refused. Max = math.MaxFloat64 (Min = -math.MaxFloat64) leaves that
// end open: any finite number.
type Float struct {
	Memo
	p        *float64
	Min, Max float64
}

// FloatVar declares a float64 flag with the range [lo, hi] into fs.
func FloatVar(fs *flag.FlagSet, p *float64, name string, value, lo, hi float64, text string) *Float {
	v := &Float{p: p, Min: lo, Max: hi}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

func (v *Float) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

// Get returns the float64.
func (v *Float) Get() any { return *v.p }

// Set parses s and refuses NaN, ±Inf and values outside the range.
func (v *Float) Set(s string) error {
	f, err := v.Check(s)
	if err != nil {
		return v.Refuse(s, err)
	}
	*v.p = f
	v.Accept()
	return nil
}

// Check parses s as Set does, without setting the flag.
func (v *Float) Check(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(f >= v.Min && f <= v.Max) { // NaN fails both
		return 0, rangeError(v.what())
	}
	return f, nil
}

// what is the error's wording of the range.
func (v *Float) what() string {
	lo, hi := v.Min > -math.MaxFloat64, v.Max < math.MaxFloat64
	switch {
	case lo && hi:
		return fmt.Sprintf("a number between %s and %s", fmtFloat(v.Min), fmtFloat(v.Max))
	case lo:
		return "a finite number ≥ " + fmtFloat(v.Min)
	case hi:
		return "a finite number ≤ " + fmtFloat(v.Max)
	}
	return "a finite number"
}

// Range is "lo to hi", "≥ lo" or "any finite number".
func (v *Float) Range() string {
	lo, hi := v.Min > -math.MaxFloat64, v.Max < math.MaxFloat64
	switch {
	case lo && hi:
		return fmt.Sprintf("%s to %s", fmtFloat(v.Min), fmtFloat(v.Max))
	case lo:
		return "finite, ≥ " + fmtFloat(v.Min)
	case hi:
		return "finite, ≤ " + fmtFloat(v.Max)
	}
	return "finite"
}

// fmtFloat writes f shortest, whole numbers in full (1000000, not 1e+06).
func fmtFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Outside lists refused values.
func (v *Float) Outside() []string {
	out := []string{"NaN", "Inf", "-Inf", "+Inf", "1e309", "-1e309"}
	if v.Max < math.MaxFloat64 {
		out = append(out, fmtFloat(math.Nextafter(v.Max, math.Inf(1))), "1e300")
	}
	if v.Min > -math.MaxFloat64 {
		out = append(out, fmtFloat(math.Nextafter(v.Min, math.Inf(-1))))
	}
	if v.Min >= 0 {
		out = append(out, "-1")
	}
	return out
}

// Duration is a time.Duration flag bounded to [Min, Max]. With Bare set,
// a bare number is that many Bare units (essim: milliseconds).
type Duration struct {
	Memo
	p        *time.Duration
	Min, Max time.Duration
	Bare     time.Duration
}

// DurationVar declares a duration flag with the range [lo, hi] into fs.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value, lo, hi time.Duration, text string) *Duration {
	v := &Duration{p: p, Min: lo, Max: hi}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

// BareDurationVar is DurationVar where a bare number is that many bare
// units (e.g. -gran 500 for 500ms).
func BareDurationVar(fs *flag.FlagSet, p *time.Duration, name string, value, lo, hi, bare time.Duration, text string) *Duration {
	v := &Duration{p: p, Min: lo, Max: hi, Bare: bare}
	*p = value
	fs.Var(v, name, usage(text, v))
	return v
}

func (v *Duration) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return FormatDuration(*v.p)
}

// Get returns the time.Duration.
func (v *Duration) Get() any { return *v.p }

// Set parses s and refuses it outside the range.
func (v *Duration) Set(s string) error {
	d, err := v.Check(s)
	if err != nil {
		return v.Refuse(s, err)
	}
	*v.p = d
	v.Accept()
	return nil
}

// Check parses s as Set does, without setting the flag: for the same
// setting given in a file.
func (v *Duration) Check(s string) (time.Duration, error) {
	d, ok := parseDuration(strings.TrimSpace(s), v.Bare)
	if !ok || d < v.Min || d > v.Max {
		return 0, rangeError("a duration " + v.between())
	}
	return d, nil
}

func (v *Duration) between() string {
	return fmt.Sprintf("between %s and %s", FormatDuration(v.Min), FormatDuration(v.Max))
}

// parseDuration reads a Go duration, or with bare > 0 a number of bare
// units; ok is false for anything else, NaN, ±Inf and overflows.
func parseDuration(s string, bare time.Duration) (time.Duration, bool) {
	if bare > 0 {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			ns := f * float64(bare)
			if !(ns > math.MinInt64 && ns < math.MaxInt64) {
				return 0, false
			}
			return time.Duration(ns), true
		}
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// Range is "lo to hi".
func (v *Duration) Range() string {
	s := FormatDuration(v.Min) + " to " + FormatDuration(v.Max)
	if v.Bare > 0 {
		s += "; a bare number is " + strings.TrimPrefix(FormatDuration(v.Bare), "1")
	}
	return s
}

// Outside lists refused values.
func (v *Duration) Outside() []string {
	out := []string{"NaN", "Inf", "1e300h", "9223372036854775807h"}
	if v.Max < math.MaxInt64 {
		out = append(out, (v.Max + 1).String(), "2562047h")
	}
	if v.Min > math.MinInt64 {
		out = append(out, (v.Min - 1).String())
	}
	if v.Min >= 0 {
		out = append(out, "-1s")
	}
	return out
}

// FormatDuration is d without zero trailing units: 1h, 1m30s, 10ms.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
