package sysmem

import (
	"io/fs"
	"math"
	"strings"
	"testing"
)

func TestBudgetOf(t *testing.T) {
	const meminfo = "MemTotal:       24684084 kB\nMemFree:        24565168 kB\n"
	const gib = 1 << 30
	tests := []struct {
		name  string
		files map[string]string
		phys  float64
		from  string
	}{
		{"meminfo", map[string]string{"/proc/meminfo": meminfo}, 24684084 * 1024, "MemTotal"},
		{"cgroup v2 lower", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "4294967296\n"}, 4 * gib, "cgroup limit"},
		{"cgroup v2 max", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 24684084 * 1024, "MemTotal"},
		{"cgroup v1 unlimited", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 24684084 * 1024, "MemTotal"},
		{"cgroup only", map[string]string{"/sys/fs/cgroup/memory.max": "2147483648"}, 2 * gib, "cgroup limit"},
		{"nothing", map[string]string{}, Fallback, "assumed"},
		{"garbage", map[string]string{"/proc/meminfo": "MemTotal: lots\n"}, Fallback, "assumed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := budgetOf(func(name string) ([]byte, error) {
				s, ok := tt.files[name]
				if !ok {
					return nil, fs.ErrNotExist
				}
				return []byte(s), nil
			})
			if b.Physical != tt.phys || b.From != tt.from || b.Bytes != tt.phys/2 {
				t.Errorf("budget %+v, want physical %v from %s, half of it", b, tt.phys, tt.from)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	b := Budget{Bytes: 1 << 30, Physical: 2 << 30, From: "MemTotal"}
	if err := b.Check("the run", 1<<30); err != nil {
		t.Errorf("at the budget: %v", err)
	}
	for _, est := range []float64{1<<30 + 1, 1e30, math.Inf(1)} {
		err := b.Check("the run", est)
		if err == nil {
			t.Fatalf("%g bytes accepted", est)
		}
		msg := err.Error()
		if !strings.Contains(msg, "the run needs about") || !strings.Contains(msg, "1 GiB this machine allows (half of its 2 GiB, MemTotal") || strings.Contains(msg, "\n") {
			t.Errorf("message %q", msg)
		}
	}
	// NaN compares false with everything: it is refused, not waved through.
	if err := b.Check("x", math.NaN()); err == nil {
		t.Error("NaN estimate accepted")
	}
}

func TestFormat(t *testing.T) {
	for _, tt := range []struct {
		b    float64
		want string
	}{
		{0, "0 B"}, {512, "512 B"}, {1536, "1.5 KiB"}, {12 << 30, "12 GiB"}, {3.2e12, "2.91 TiB"}, {1e30, "8.9e+14 PiB"},
	} {
		if got := Format(tt.b); got != tt.want {
			t.Errorf("Format(%g) = %q, want %q", tt.b, got, tt.want)
		}
	}
}

func TestLimitReadsThisMachine(t *testing.T) {
	b := Limit()
	if !(b.Bytes > 0) || b.Bytes != b.Physical/2 || b.From == "" {
		t.Errorf("Limit() = %+v", b)
	}
}

func TestAvailableOf(t *testing.T) {
	const meminfo = "MemTotal:       24684084 kB\nMemAvailable:    1048576 kB\n"
	const gib = 1 << 30
	tests := []struct {
		name  string
		files map[string]string
		avail float64
		from  string
		ok    bool
	}{
		{"meminfo", map[string]string{"/proc/meminfo": meminfo}, gib, "MemAvailable", true},
		{"cgroup tighter", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "536870912\n", "/sys/fs/cgroup/memory.current": "268435456\n"}, gib / 4, "left under the cgroup's limit", true},
		{"cgroup looser", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "4294967296\n", "/sys/fs/cgroup/memory.current": "1\n"}, gib, "MemAvailable", true},
		{"cgroup over its limit", map[string]string{"/sys/fs/cgroup/memory.max": "10\n", "/sys/fs/cgroup/memory.current": "20\n"}, 0, "left under the cgroup's limit", true},
		{"cgroup max", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n", "/sys/fs/cgroup/memory.current": "1\n"}, gib, "MemAvailable", true},
		{"nothing", map[string]string{}, 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			avail, from, ok := availableOf(func(name string) ([]byte, error) {
				s, ok := tt.files[name]
				if !ok {
					return nil, fs.ErrNotExist
				}
				return []byte(s), nil
			})
			if avail != tt.avail || from != tt.from || ok != tt.ok {
				t.Errorf("availableOf = %v, %q, %v; want %v, %q, %v", avail, from, ok, tt.avail, tt.from, tt.ok)
			}
		})
	}
}

func TestWithShare(t *testing.T) {
	b := Budget{Bytes: 1 << 30, Physical: 2 << 30, From: "MemTotal", Share: 0.5}.WithShare(0.75)
	if b.Bytes != 1.5*(1<<30) {
		t.Fatalf("budget %v, want 1.5 GiB", b.Bytes)
	}
	err := b.Check("the problem", 2<<30)
	if err == nil || !strings.Contains(err.Error(), "1.5 GiB this machine allows (75 % of its 2 GiB, MemTotal") {
		t.Errorf("Check: %v", err)
	}
}
