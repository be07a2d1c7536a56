// Package sysmem tells the commands how much memory a run may plan for, so
// that a flag asking for more is refused with one line at start rather than
// ending in an out-of-memory trace halfway through.
//
// The budget is half of the machine's physical memory: MemTotal from
// /proc/meminfo, or the cgroup's memory limit when that is lower (a
// container), or Fallback where neither can be read (not Linux). Half,
// because an estimate made from flags is rough and the machine runs other
// things too (a worker's owner may choose another share: WithShare).
// Available is what the system could give now, for a check made when a
// long-running process takes on more work. Estimates are float64 bytes,
// so that products of hostile flags or messages never overflow.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Fallback is the physical memory assumed where it cannot be read.
const Fallback = 8 << 30

// Budget is the memory a run may plan for.
type Budget struct {
	// Bytes is the budget.
	Bytes float64
	// Physical is the memory it is a share of, and From says where that
	// figure came from ("MemTotal", "cgroup limit", "assumed", or "set"
	// by the caller's configuration).
	Physical float64
	From     string
	// Share is the fraction of Physical that Bytes is; 0 reads as ½
	// (Limit's).
	Share float64
}

// WithShare returns b with Bytes the fraction f of b.Physical: a worker
// whose owner lets a master's problem use more (or less) than half.
func (b Budget) WithShare(f float64) Budget {
	b.Share, b.Bytes = f, f*b.Physical
	return b
}

// Limit returns the budget of this machine: half of its physical memory.
// It is read once per process.
func Limit() Budget {
	limitOnce.Do(func() { limit = budgetOf(readFile) })
	return limit
}

var (
	limitOnce sync.Once
	limit     Budget
)

// readFile reads at most 64 KiB of a small system file.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}

// cgroupFiles hold a memory limit: cgroup v2, then v1 ("max", or a huge
// number, when there is none).
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// budgetOf computes the budget from the system files read by read.
func budgetOf(read func(string) ([]byte, error)) Budget {
	phys, from := float64(0), ""
	if b, err := read("/proc/meminfo"); err == nil {
		if kb, ok := memTotalKB(b); ok {
			phys, from = float64(kb)*1024, "MemTotal"
		}
	}
	for _, name := range cgroupFiles {
		b, err := read(name)
		if err != nil {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n == 0 {
			continue // "max": no limit
		}
		if phys == 0 || float64(n) < phys {
			phys, from = float64(n), "cgroup limit"
		}
		break
	}
	if phys == 0 {
		phys, from = Fallback, "assumed"
	}
	return Budget{Bytes: phys / 2, Physical: phys, From: from, Share: 0.5}
}

// Available is the memory the system could give a process now: the
// MemAvailable of /proc/meminfo, or what is left under the cgroup's
// limit (cgroup v2 memory.max − memory.current) when that is less. It is
// read afresh at every call; ok is false where it cannot be read (not
// Linux), and from says which figure it is.
func Available() (avail float64, from string, ok bool) {
	return availableOf(readFile)
}

// availableOf computes Available from the system files read by read.
func availableOf(read func(string) ([]byte, error)) (float64, string, bool) {
	avail, from := -1.0, ""
	if b, err := read("/proc/meminfo"); err == nil {
		if kb, ok := meminfoKB(b, "MemAvailable"); ok {
			avail, from = float64(kb)*1024, "MemAvailable"
		}
	}
	if lim, err := readUint(read, "/sys/fs/cgroup/memory.max"); err == nil && lim > 0 {
		if cur, err := readUint(read, "/sys/fs/cgroup/memory.current"); err == nil {
			left := max(float64(lim)-float64(cur), 0)
			if avail < 0 || left < avail {
				avail, from = left, "left under the cgroup's limit"
			}
		}
	}
	return max(avail, 0), from, avail >= 0
}

// readUint reads a file holding one unsigned number ("max" is an error).
func readUint(read func(string) ([]byte, error), name string) (uint64, error) {
	b, err := read(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// memTotalKB finds "MemTotal: N kB" in /proc/meminfo's text.
func memTotalKB(b []byte) (uint64, bool) { return meminfoKB(b, "MemTotal") }

// meminfoKB finds "field: N kB" in /proc/meminfo's text.
func meminfoKB(b []byte, field string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		return n, err == nil && n > 0
	}
	return 0, false
}

// Check returns an error when estimate, the bytes that what needs, exceeds
// the budget. The message says both figures and where the budget comes
// from, on one line.
func (b Budget) Check(what string, estimate float64) error {
	if estimate <= b.Bytes {
		return nil
	}
	return fmt.Errorf("%s needs about %s of memory, more than the %s this machine allows (%s of its %s, %s)",
		what, Format(estimate), Format(b.Bytes), b.share(), Format(b.Physical), b.describe())
}

// share says which part of the physical memory the budget is.
func (b Budget) share() string {
	if b.Share == 0 || b.Share == 0.5 {
		return "half"
	}
	return fmt.Sprintf("%.3g %%", 100*b.Share)
}

func (b Budget) describe() string {
	switch b.From {
	case "MemTotal":
		return "MemTotal in /proc/meminfo"
	case "cgroup limit":
		return "the cgroup's memory limit"
	case "set":
		return "as configured"
	}
	return "assumed: physical memory could not be read"
}

// Format writes a byte count with a binary unit: "512 B", "1.5 GiB",
// "2.1e+03 PiB" past the largest unit.
func Format(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f B", b)
	case b >= 10000:
		return fmt.Sprintf("%.2g %s", b, units[i])
	}
	return fmt.Sprintf("%.3g %s", b, units[i])
}
