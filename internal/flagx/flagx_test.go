package flagx

import (
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseRefusesAndNames(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"-reps", "9223372036854775807"}, "-reps 9223372036854775807: must be an integer between 1 and 1000"},
		{[]string{"-reps", "0"}, "-reps 0: must be an integer between 1 and 1000"},
		{[]string{"-reps", "7"}, ""},
		{[]string{"-noise", "NaN"}, "-noise NaN: must be a number between 0 and 2"},
		{[]string{"-noise", "+Inf"}, "-noise +Inf: must be a number between 0 and 2"},
		{[]string{"-noise", "2"}, ""},
		{[]string{"-target", "-1e300"}, ""},
		{[]string{"-target", "-Inf"}, "-target -Inf: must be a finite number"},
		{[]string{"-wait", "2h"}, "-wait 2h: must be a duration between 1s and 1h"},
		{[]string{"-wait", "1h"}, ""},
		{[]string{"-gran", "500"}, ""},
		{[]string{"-gran", "NaN"}, "-gran NaN: must be a duration between 1µs and 1h"},
		{[]string{"-seed", "18446744073709551615"}, ""},
		{[]string{"-seed", "-1"}, "-seed -1: must be an integer between 0 and 18446744073709551615"},
		{[]string{"-sizes", "50,100"}, ""},
		{[]string{"-sizes", "50,1e9"}, `-sizes 50,1e9: item "1e9" must be an integer between 1 and 4000`},
		{[]string{"-costs", "10us,2h"}, `-costs 10us,2h: item "2h" must be a duration between 0s and 1h`},
		// An empty item is a value left out: the old code skipped it, and
		// ran "100,,500" as "100,500" (and "50," as "50").
		{[]string{"-sizes", "100,,500"}, "-sizes 100,,500: item 2 is empty (a value left out?)"},
		{[]string{"-sizes", "50,"}, "-sizes 50,: item 2 is empty (a value left out?)"},
		{[]string{"-costs", ",10us"}, "-costs ,10us: item 1 is empty (a value left out?)"},
		{[]string{"-costs", ", ,"}, "-costs , ,: must be a list of 1 to 1000 durations between 0s and 1h"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var (
			reps       int
			noise, tgt float64
			wait, gran time.Duration
			seed       uint64
			sizes      []int
			costs      []time.Duration
		)
		IntVar(fs, &reps, "reps", 3, 1, 1000, "`R`")
		FloatVar(fs, &noise, "noise", 0.1, 0, 2, "`S`")
		FloatVar(fs, &tgt, "target", 0, -math.MaxFloat64, math.MaxFloat64, "`F`")
		DurationVar(fs, &wait, "wait", time.Minute, time.Second, time.Hour, "`D`")
		BareDurationVar(fs, &gran, "gran", time.Second, time.Microsecond, time.Hour, time.Millisecond, "`D`")
		Uint64Var(fs, &seed, "seed", 1, 0, math.MaxUint64, "`S`")
		IntListVar(fs, &sizes, "sizes", []int{1}, 1, 4000, "`N,...`")
		DurationListVar(fs, &costs, "costs", nil, 0, time.Hour, 0, "`D,...`")
		err := Parse(fs, tt.args)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: %v", tt.args, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want):
			t.Errorf("%v: got %v, want %s", tt.args, err, tt.want)
		}
	}
}

func TestOutsideIsRefused(t *testing.T) {
	var (
		i  int
		f  float64
		d  time.Duration
		u  uint64
		l  []int
		dl []time.Duration
	)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	vals := []Bounded{
		IntVar(fs, &i, "i", 0, -5, 5, ""),
		IntVar(fs, &i, "imax", 0, 0, math.MaxInt, ""),
		FloatVar(fs, &f, "f", 0, 0, 1, ""),
		FloatVar(fs, &f, "fopen", 0, -math.MaxFloat64, math.MaxFloat64, ""),
		DurationVar(fs, &d, "d", 0, 0, time.Hour, ""),
		BareDurationVar(fs, &d, "db", 0, 0, time.Hour, time.Millisecond, ""),
		Uint64Var(fs, &u, "u", 0, 0, math.MaxUint64, ""),
		Uint64Var(fs, &u, "u2", 1, 1, 10, ""),
		IntListVar(fs, &l, "l", nil, 1, 10, ""),
		DurationListVar(fs, &dl, "dl", nil, 0, time.Second, time.Millisecond, ""),
	}
	for _, v := range vals {
		for _, s := range v.Outside() {
			if err := v.Set(s); err == nil {
				t.Errorf("%T %s: %q accepted", v, v.Range(), s)
			}
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", 90 * time.Second: "1m30s", 10 * time.Millisecond: "10ms", 0: "0s", 2*time.Hour + time.Second: "2h0m1s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile("a", nil, 0o644))
	must(os.Symlink("a", "link-a"))
	must(os.Link("a", "hard-a"))
	must(os.Symlink("nothing-yet", "dangling"))
	must(os.Mkdir("d", 0o755))
	must(os.Symlink("d", "link-d"))
	w := func(p string) File { return File{What: "-out " + p, Path: p, Write: true} }
	r := func(p string) File { return File{What: "-in " + p, Path: p} }
	tests := []struct {
		files []File
		same  bool
	}{
		{[]File{w("a"), w("b")}, false},
		{[]File{w("a"), w("./a")}, true},
		{[]File{w("a"), w(filepath.Join(dir, "a"))}, true},
		{[]File{w("x.partial"), w("d/../x.partial")}, true},
		{[]File{w("a"), r("link-a")}, true},
		{[]File{r("a"), w("hard-a")}, true},
		{[]File{r("a"), r("a")}, false}, // reading twice harms nothing
		{[]File{w("d/new"), w("link-d/new")}, true},
		{[]File{w("dangling"), w("nothing-yet")}, true},
		{[]File{w("-"), w("-")}, false},
		{[]File{w(""), r("")}, false},
	}
	for _, tt := range tests {
		err := CheckFiles(tt.files...)
		if (err != nil) != tt.same {
			t.Errorf("%v: %v, want same = %v", tt.files, err, tt.same)
		}
	}
	err := CheckFiles(w("a"), r("./a"))
	if want := "-out a and -in ./a are the same file: name another, so that neither overwrites the other"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestAlias(t *testing.T) {
	parse := func(args ...string) (*flag.FlagSet, string, bool, int, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var (
			policy string
			quiet  bool
			reps   int
		)
		fs.StringVar(&policy, "policy", "r3q", "the `POLICY`")
		fs.BoolVar(&quiet, "quiet", false, "quiet")
		IntVar(fs, &reps, "reps", 3, 1, 10, "`R`")
		Alias(fs, "sched", "policy")
		Alias(fs, "q", "quiet")
		Alias(fs, "r", "reps")
		VersionFlag(fs)
		err := Parse(fs, args)
		return fs, policy, quiet, reps, err
	}
	fs, policy, quiet, reps, err := parse("-sched", "wq", "-q", "-r", "7")
	if err != nil || policy != "wq" || !quiet || reps != 7 {
		t.Fatalf("got %q %v %d %v", policy, quiet, reps, err)
	}
	if fs.Lookup("policy") == nil || !given(fs, "policy") || !given(fs, "quiet") {
		t.Error("the new flags do not count as given")
	}
	want := []string{"-q is deprecated, use -quiet", "-r is deprecated, use -reps", "-sched is deprecated, use -policy"}
	if got := Deprecated(fs); !slices.Equal(got, want) {
		t.Errorf("Deprecated = %q, want %q", got, want)
	}
	if _, _, _, _, err := parse("-r", "70"); err == nil || err.Error() != "-r 70: must be an integer between 1 and 10" {
		t.Errorf("-r 70: %v", err)
	}
	if _, _, _, _, err := parse("-reps", "70"); err == nil || err.Error() != "-reps 70: must be an integer between 1 and 10" {
		t.Errorf("-reps 70: %v", err)
	}
	if _, _, _, _, err := parse("-sched", "wq", "-policy", "rr"); err == nil || !strings.Contains(err.Error(), "give -policy") {
		t.Errorf("both names: %v", err)
	}
	if _, _, _, _, err := parse("-q", "-version"); !errors.Is(err, ErrVersion) {
		t.Errorf("-version: %v", err)
	}
	if _, _, _, _, err := parse("-version", "-r", "0"); err == nil || errors.Is(err, ErrVersion) {
		t.Errorf("-version with a bad value: %v", err)
	}
	if c := Canonical("sched"); c != "policy" {
		t.Errorf("Canonical(sched) = %q", c)
	}
}

func given(fs *flag.FlagSet, name string) bool {
	ok := false
	fs.Visit(func(f *flag.Flag) { ok = ok || f.Name == name })
	return ok
}

func TestVersionOf(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/esgrid/esgrid", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4a7781c1d2e3f4a5b6c7"}, {Key: "vcs.time", Value: "2026-11-26T17:02:11Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionOf(info), "github.com/esgrid/esgrid v1.4.0 (revision 4a7781c1d2e3, 2026-11-26T17:02:11Z, modified) go1.26.8"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := versionOf(&debug.BuildInfo{}), "github.com/esgrid/esgrid (devel)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if v := Version("esrun"); !strings.HasPrefix(v, "esrun ") {
		t.Errorf("Version = %q", v)
	}
}
