package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/testplugin"
	"github.com/esgrid/esgrid/problems"
	"github.com/esgrid/esgrid/worker"
)

// text is what was written so far.
func (s *syncBuffer) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// writeFile writes an executable or data file in dir.
func writeFile(t *testing.T, dir, name, text string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	sim := writeFile(t, dir, "sim", "#!/bin/sh\n", 0o755)
	other := writeFile(t, dir, "other", "#!/bin/sh\n", 0o755)
	writeFile(t, dir, "key", "s3cret\n", 0o600)
	cfg := writeFile(t, dir, "esworker.json", `{
		"join": ["m1.lab:7946", "m2.lab"],
		"gossip": "0.0.0.0:7946",
		"key_file": "key",
		"slots": 3,
		"name": "lab-12",
		"plugins": {"sim": "./sim", "other": "`+other+`"}
	}`, 0o644)
	o, err := parseOptions([]string{"-config", cfg})
	if err != nil {
		t.Fatal(err)
	}
	if o.join != "m1.lab:7946,m2.lab" || o.gossip != "0.0.0.0:7946" || o.keyFile != filepath.Join(dir, "key") || o.slots != 3 || o.name != "lab-12" {
		t.Errorf("options from the file: %+v", o)
	}
	if e, ok := o.catalog.Lookup("sim"); !ok || e.Path != sim {
		t.Errorf("plugin sim: %v %v, want %s (relative to the file)", e, ok, sim)
	}
	if got := strings.Join(o.catalog.Names(), ","); got != "other,sim" {
		t.Errorf("plugins %s", got)
	}

	// Flags on the command line win; -plugin replaces the file's entry of
	// the same name and adds to the others.
	o, err = parseOptions([]string{"-config", cfg, "-slots", "1", "-name", "cli", "-join", "x:1", "-plugin", "sim=" + other, "-plugin", "third=" + sim})
	if err != nil {
		t.Fatal(err)
	}
	if o.slots != 1 || o.name != "cli" || o.join != "x:1" || o.keyFile != filepath.Join(dir, "key") {
		t.Errorf("command line did not win: %+v", o)
	}
	if e, _ := o.catalog.Lookup("sim"); e.Path != other || o.catalog.Len() != 3 {
		t.Errorf("plugins %v", o.catalog.Entries())
	}

	// A single join address as a string, and no plugins.
	one := writeFile(t, dir, "one.json", `{"join": "m.lab"}`, 0o600)
	if o, err := parseOptions([]string{"-config", one}); err != nil || o.join != "m.lab" || o.catalog.Len() != 0 || o.once || o.idle != 0 {
		t.Errorf("one address: %+v, %v", o, err)
	}

	// The agent's lifecycle: once, idle_timeout; the command line wins.
	life := writeFile(t, dir, "life.json", `{"join": "m.lab", "once": true, "idle_timeout": "90s"}`, 0o600)
	if o, err := parseOptions([]string{"-config", life}); err != nil || !o.once || o.idle != 90*time.Second {
		t.Errorf("lifecycle from the file: %+v, %v", o, err)
	}
	if o, err := parseOptions([]string{"-config", life, "-once=false", "-idle-timeout", "1m"}); err != nil || o.once || o.idle != time.Minute {
		t.Errorf("lifecycle from the command line: %+v, %v", o, err)
	}

	// The memory share a master's problem may need; the command line wins,
	// and the file's is checked as the flag's.
	mem := writeFile(t, dir, "mem.json", `{"join": "m.lab", "mem_share": 0.8}`, 0o600)
	if o, err := parseOptions([]string{"-config", mem}); err != nil || o.memShare != 0.8 {
		t.Errorf("mem_share from the file: %+v, %v", o, err)
	}
	if o, err := parseOptions([]string{"-config", mem, "-mem-share", "0.25"}); err != nil || o.memShare != 0.25 {
		t.Errorf("mem_share from the command line: %+v, %v", o, err)
	}
	if o, err := parseOptions([]string{"-config", one}); err != nil || o.memShare != worker.DefaultMemShare {
		t.Errorf("default mem_share: %+v, %v", o, err)
	}
	too := writeFile(t, dir, "too.json", `{"join": "m.lab", "mem_share": 1}`, 0o600)
	if _, err := parseOptions([]string{"-config", too}); err == nil || !strings.Contains(err.Error(), "mem_share 1: must be a number between 0.01 and 0.9") {
		t.Errorf("mem_share 1 in the file: %v", err)
	}

	// The child master's port, likewise.
	cp := writeFile(t, dir, "cp.json", `{"join": "m.lab", "child_port": 7949}`, 0o600)
	if o, err := parseOptions([]string{"-config", cp}); err != nil || o.child != 7949 {
		t.Errorf("child_port from the file: %+v, %v", o, err)
	}
	if o, err := parseOptions([]string{"-config", cp, "-child-port", "7950"}); err != nil || o.child != 7950 {
		t.Errorf("child_port from the command line: %+v, %v", o, err)
	}
	bad := writeFile(t, dir, "badport.json", `{"join": "m.lab", "child_port": 70000}`, 0o600)
	if _, err := parseOptions([]string{"-config", bad}); err == nil || !strings.Contains(err.Error(), "child_port 70000") {
		t.Errorf("child_port 70000 in the file: %v", err)
	}
}

func TestBadConfigFiles(t *testing.T) {
	t.Setenv(grid.KeyEnv, "")
	dir := t.TempDir()
	sim := writeFile(t, dir, "sim", "#!/bin/sh\n", 0o755)
	openDir := filepath.Join(dir, "open")
	if err := os.Mkdir(openDir, 0o755); err != nil {
		t.Fatal(err)
	}
	exposed := writeFile(t, openDir, "sim", "#!/bin/sh\n", 0o755)
	if err := os.Chmod(openDir, 0o777); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, text string
		mode       os.FileMode
		want       string
	}{
		{"unknown field", `{"join": "m", "slot": 4}`, 0o644, `unknown field "slot"`},
		{"syntax", `{"join": "m",}`, 0o644, "invalid character"},
		{"two values", `{"join": "m"} {}`, 0o644, "more than one JSON value"},
		{"world-writable", `{"join": "m"}`, 0o646, "writable by every user (mode -rw-r--rw-; chmod o-w "},
		{"group-writable", `{"join": "m"}`, 0o664, "writable by its group (mode -rw-rw-r--; chmod g-w "},
		{"bad join", `{"join": 7}`, 0o644, "join: want an address"},
		{"bad plugin name", `{"join": "m", "plugins": {"a b": "` + sim + `"}}`, 0o644, "letters, digits"},
		{"missing plugin", `{"join": "m", "plugins": {"a": "./none"}}`, 0o644, "no such file"},
		{"plugin in a world-writable directory", `{"join": "m", "plugins": {"sim": "` + exposed + `"}}`, 0o644, "its directory " + openDir + " is writable by its group and every user (mode -rwxrwxrwx; chmod go-w " + openDir + ")"},
		{"built-in name", `{"join": "m", "plugins": {"ridge": "` + sim + `"}}`, 0o644, "built-in"},
		// The file's numbers have the flags' bounds.
		{"slots", `{"join": "m", "slots": -2}`, 0o644, "slots -2: must be an integer between 0 and 65536"},
		{"huge slots", `{"join": "m", "slots": 9223372036854775807}`, 0o644, "slots 9223372036854775807: must be an integer between 0 and 65536"},
		{"idle timeout", `{"join": "m", "idle_timeout": "soon"}`, 0o644, "idle_timeout soon: must be a duration"},
		{"negative idle timeout", `{"join": "m", "idle_timeout": "-1s"}`, 0o644, "idle_timeout -1s: must be a duration between 0s and 168h"},
		{"huge idle timeout", `{"join": "m", "idle_timeout": "2562047h"}`, 0o644, "idle_timeout 2562047h: must be a duration between 0s and 168h"},
		{"no plugin start", `{"join": "m", "plugin_start_timeout": "0s"}`, 0o644, "plugin_start_timeout 0s: must be a duration between 1ms and 10m"},
		// A key given twice: the old esworker took the last one, silently
		// (here the last is refused for itself: "slots 9223372036854775807:
		// must be …", "./none: no such file").
		{"slots twice", `{"join": "m", "slots": 2, "slots": 9223372036854775807}`, 0o644, `key "slots" given twice`},
		{"plugin twice", `{"join": "m", "plugins": {"sim": "` + sim + `", "sim": "./none"}}`, 0o644, `key "sim" given twice, in plugins`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-")+".json", c.text, c.mode)
			var out, errb bytes.Buffer
			code := run(context.Background(), []string{"-config", path, "-key", testSecret}, nil, &out, &errb)
			msg := errb.String()
			if code != exitConfig || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, c.want) {
				t.Errorf("exit %d, stderr %q; want exitConfig (78) and one line with %q", code, msg, c.want)
			}
		})
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-config", dir + "/none.json"}, nil, &out, &errb); code != exitConfig || !strings.Contains(errb.String(), "no such file") {
		t.Errorf("missing file: exit %d, %q", code, errb.String())
	}
	if code := run(context.Background(), []string{"-join", "m", "-key", testSecret, "-plugin", "nonsense"}, nil, &out, &errb); code != exitConfig {
		t.Errorf("-plugin without =: exit %d", code)
	}
}

// A listed plugin that cannot start stops esworker at once, with the
// plugin's own words.
func TestBrokenPluginStopsStartUp(t *testing.T) {
	dir := t.TempDir()
	broken := writeFile(t, dir, "broken", "#!/bin/sh\necho 'ModuleNotFoundError: numpy' >&2\nexit 1\n", 0o755)
	var out, errb syncBuffer
	code := run(context.Background(), []string{"-master", "127.0.0.1:1", "-key", testSecret, "-plugin", "sim=" + broken}, nil, &out, &errb)
	if code != exitFailure || !strings.Contains(errb.text(), "ModuleNotFoundError: numpy") || !strings.Contains(errb.text(), "plugin sim") {
		t.Errorf("exit %d, stderr %q", code, errb.text())
	}
}

// esworker with -plugin offers the plugin, and evaluates a master's tasks
// with it.
func TestWorkerServesPlugin(t *testing.T) {
	dir := t.TempDir()
	testplugin.MustBuild(t, dir)
	key, _ := grid.NewKey(testSecret)
	var mlog syncBuffer
	m, err := grid.NewMaster(context.Background(), grid.MasterConfig{
		Listen: "127.0.0.1:0", Key: key, Problem: grid.ProblemSpec{Name: "rastrigin-go", Dim: 4},
		Logger: slogTo(&mlog),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := writeFile(t, dir, "w.json", `{"master": "`+m.Addr()+`", "name": "lab-1", "slots": 2, "plugins": {"rastrigin-go": "./rastrigin-go"}}`, 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-config", cfg, "-key", testSecret}, nil, &out, &errb) }()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := m.WaitWorkers(wctx, 1); err != nil {
		t.Fatalf("%v; esworker said:\n%s", err, errb.text())
	}
	xs := [][]float64{{1, 2, 3, 4}, {0, 0, 0, 0.5}}
	f, err := m.Evaluate(wctx, 0, xs)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range xs {
		p, _ := problems.New("rastrigin", 4)
		if g, _ := p.Eval(ctx, x); f[i] != g {
			t.Errorf("task %d: %v, built-in %v", i, f[i], g)
		}
	}
	m.Close()
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("esworker did not stop")
	}
	if !strings.Contains(errb.text(), "plugin ready") {
		t.Errorf("esworker did not log the plugin's hello:\n%s", errb.text())
	}
}
