package worker

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/esgrid/esgrid/problems/plugin"
)

// ApplyFlags sets each flag the file gives unless the command line set
// it, numbers through the flag's own parsing; PluginEntries lists the
// file's plugins in name order, less the command line's.
func TestFileConfigApplyFlags(t *testing.T) {
	slots, port, once, share := 4, 7949, true, 0.5
	c := &FileConfig{Join: AddrList{"m1:7946", "m2"}, Master: "m:1", Name: "file-name", Slots: &slots, ChildPort: &port,
		Once: &once, MemShare: &share, IdleTimeout: "5m", Plugins: map[string]string{"b": "/b", "a": "/a", "c": "/c"}}
	fs := flag.NewFlagSet("esworker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	join, master, name, gossip := fs.String("join", "", ""), fs.String("master", "", ""), fs.String("name", "", ""), fs.String("gossip", "", "")
	nslots, nport := fs.Int("slots", 0, ""), fs.Int("child-port", 0, "")
	bonce, mem := fs.Bool("once", false, ""), fs.Float64("mem-share", 0, "")
	idle := fs.Duration("idle-timeout", 0, "")
	if err := fs.Parse([]string{"-name", "cli-name"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyFlags(fs); err != nil {
		t.Fatal(err)
	}
	if *join != "m1:7946,m2" || *master != "m:1" || *name != "cli-name" || *gossip != "" || *nslots != 4 || *nport != 7949 ||
		!*bonce || *mem != 0.5 || idle.String() != "5m0s" {
		t.Errorf("join %q master %q name %q gossip %q slots %d port %d once %v mem %v idle %v",
			*join, *master, *name, *gossip, *nslots, *nport, *bonce, *mem, *idle)
	}
	es, err := c.PluginEntries(func(n string) bool { return n == "b" })
	if err != nil || len(es) != 2 || es[0] != (plugin.Entry{Name: "a", Path: "/a"}) || es[1] != (plugin.Entry{Name: "c", Path: "/c"}) {
		t.Errorf("plugins %v, %v", es, err)
	}
}

// A value its flag refuses is an error naming the file's key and value.
func TestFileConfigApplyFlagsBadValue(t *testing.T) {
	c := &FileConfig{IdleTimeout: "soon"}
	fs := flag.NewFlagSet("esworker", flag.ContinueOnError)
	fs.Duration("idle-timeout", 0, "")
	if err := c.ApplyFlags(fs); err == nil || !strings.HasPrefix(err.Error(), "idle_timeout soon: ") {
		t.Errorf("%v, want idle_timeout soon: …", err)
	}
	if _, err := (&FileConfig{Plugins: map[string]string{"bad name": "/x"}}).PluginEntries(func(string) bool { return false }); err == nil {
		t.Error("an invalid plugin name accepted")
	}
}

// A config file names the programs the agent runs, so whoever may write it
// may run anything as the worker: one that its group or every user may
// write is refused, with the chmod that cures it; one only its owner may
// write is read.
func TestLoadFileConfigRefusesWritableByOthers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "esworker.json")
	if err := os.WriteFile(path, []byte(`{"join": "m"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		want string // "" when the file is read
	}{
		{0o600, ""},
		{0o644, ""},
		{0o620, "is writable by its group (mode -rw--w----; chmod g-w " + path + ")"},
		{0o664, "is writable by its group (mode -rw-rw-r--; chmod g-w " + path + ")"},
		{0o602, "is writable by every user (mode -rw-----w-; chmod o-w " + path + ")"},
		{0o666, "is writable by its group and every user (mode -rw-rw-rw-; chmod go-w " + path + ")"},
	} {
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadFileConfig(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("mode %v: %v", c.mode, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("mode %v: %v, want …%s…", c.mode, err, c.want)
		}
	}
}
