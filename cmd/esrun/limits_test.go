package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/problems"
)

// Every numeric flag with a hostile value is a usage error: exit status 2,
// one line on stderr, before any work, and never a Go panic or an
// out-of-memory trace. The sizes asked for here exceed any machine's
// memory, so the test does not depend on this one's.
func TestHostileFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-lu", "4000000000"}, "-lu 4000000000: must be an integer between 0 and 4096"},
		{[]string{"-lu", "100000"}, "-lu 100000: must be an integer between 0 and 4096"},
		{[]string{"-lu", strconv.Itoa(problems.MaxLoadN + 1)}, "-lu 4097: must be an integer between 0 and " + strconv.Itoa(problems.MaxLoadN)},
		{[]string{"-lu", "99999999999999999999"}, "-lu 99999999999999999999: must be an integer between 0 and 4096"},
		{[]string{"-mu", "2000000000"}, "-mu 2000000000: must be an integer between 1 and 1000000"},
		// Within the flags' bounds, the memory a run needs is checked.
		{[]string{"-inprocess", "-mu", "1000000", "-dim", "10000000"}, "a (1000000+70)-ES in 10000000 dimensions"},
		{[]string{"-inprocess", "-lambda", "1000000", "-dim", "10000000"}, "needs about"},
		{[]string{"-inprocess", "-dim", "10000000", "-mu", "100000"}, "needs about"},
		{[]string{"-inprocess", "-problem", "ellipsoid", "-dim", "10000000", "-lambda", "100000"}, "needs about"},
		{[]string{"-mu", "2e9"}, "-mu 2e9: must be an integer between 1 and 1000000"},
		{[]string{"-mu", "-2000000000"}, "-mu -2000000000: must be an integer between 1 and 1000000"},
		{[]string{"-lambda", "2000000000"}, "-lambda 2000000000: must be an integer between 1 and 1000000"},
		{[]string{"-lambda", "9223372036854775807"}, "-lambda 9223372036854775807: must be an integer between 1 and 1000000"},
		{[]string{"-dim", "1000000000"}, "-dim 1000000000: must be an integer between 1 and 10000000"},
		{[]string{"-dim", "9223372036854775807"}, "-dim 9223372036854775807: must be an integer between 1 and 10000000"},
		{[]string{"-dim", "1e9"}, "-dim 1e9: must be an integer between 1 and 10000000"},
		{[]string{"-problem", "ellipsoid", "-dim", "1000000000000"}, "-dim 1000000000000: must be an integer between 1 and 10000000"},
		{[]string{"-inprocess", "-dim", "1000000000"}, "-dim 1000000000: must be an integer between 1 and 10000000"},
		{[]string{"-inprocess", "-slots", "65536", "-lu", "4096"}, "with an LU load of 4096×4096 on 65536 slots needs about"},
		{[]string{"-local", "1024", "-slots", "65536"}, "on 1024 local workers × 65536 slots needs about"},
		{[]string{"-local", "1000000"}, "-local 1000000: must be an integer between 0 and 1024"},
		{[]string{"-slots", "9223372036854775807"}, "-slots 9223372036854775807: must be an integer between 0 and 65536"},
		{[]string{"-min-workers", "1000000000"}, "-min-workers 1000000000: must be an integer between 0 and 65536"},
		{[]string{"-max-workers", "1000000000"}, "-max-workers 1000000000: must be an integer between 0 and 65536"},
		{[]string{"-local", "0", "-min-workers", "8", "-max-workers", "4"}, "-max-workers 4 is fewer than the 8 workers the run waits for"},
		{[]string{"-gens", "-9223372036854775808"}, "-gens -9223372036854775808: must be an integer between 0 and 100000000"},
		{[]string{"-max-evals", "-1"}, "-max-evals -1: must be an integer between 0 and 1000000000000"},
		{[]string{"-seed", "-1"}, "-seed -1: must be an integer between 0 and 18446744073709551615"},
		{[]string{"-sigma", "NaN"}, "-sigma NaN: must be a finite number ≥ 0"},
		{[]string{"-sigma", "Inf"}, "-sigma Inf: must be a finite number ≥ 0"},
		{[]string{"-sigma", "1e308"}, "-sigma must be ≤"},
		{[]string{"-target", "-Inf"}, "-target -Inf: must be a finite number"},
		{[]string{"-target", "NaN"}, "-target NaN: must be a finite number"},
		{[]string{"-load-ms", "NaN"}, "-load-ms NaN: must be a number between 0 and 60000"},
		{[]string{"-load-ms", "Inf"}, "-load-ms Inf: must be a number between 0 and 60000"},
		{[]string{"-load-ms", "-Inf"}, "-load-ms -Inf: must be a number between 0 and 60000"},
		{[]string{"-load-ms", "1e308"}, "-load-ms 1e308: must be a number between 0 and 60000"},
		{[]string{"-load-ms", "1e-300"}, "-load-ms 1e-300"},
		{[]string{"-listen", "127.0.0.1:99999999999999999999"}, "is not a number in [0, 65535]"},
		{[]string{"-gossip", "127.0.0.1:-1"}, "is not a number in [0, 65535]"},
		// A frame cap too small for one task: every generation would fail.
		{[]string{"-dim", "1000000", "-max-frame", "1"}, "-max-frame 1: a task of 1000000 dimensions takes up to 9000064 bytes (64 + 9 per coordinate), over 1 MiB; give -max-frame 9 or more"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := esrun(context.Background(), tt.args...)
			if code != 2 || stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", code, stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "esrun: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q, want one line with %q", stderr, tt.want)
			}
			for _, bad := range []string{"goroutine", "panic", "listening"} {
				if strings.Contains(stderr, bad) {
					t.Errorf("stderr has %q: %q", bad, stderr)
				}
			}
		})
	}
}
