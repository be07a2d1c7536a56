package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/internal/strictjson"
	"github.com/esgrid/esgrid/problems/plugin"
)

// maxConfigBytes bounds the -config file.
const maxConfigBytes = 1 << 20

// FileConfig is esworker's -config file: a JSON object with the settings a lab
// machine's agent keeps between restarts. Every field is optional; a flag
// given on the command line wins over the file. Relative paths are
// relative to the file's directory. Unknown fields are an error, so a
// misspelt setting is not silently ignored.
//
//	{
//	  "join": "master.lab:7946",          (or a list of addresses)
//	  "master": "",                       (the master's data address, to skip gossip)
//	  "gossip": "0.0.0.0:7946",
//	  "child_port": 7949,                 (the port of a child master, if the master splits: -child-port)
//	  "key_file": "/etc/esgrid/key",
//	  "key_file_insecure": false,         (accept a key file others may read: -key-file-insecure)
//	  "slots": 4,
//	  "name": "lab-pc-12",
//	  "plugins": {"simulator": "/opt/esgrid/plugins/simulator"},
//	  "plugin_start_timeout": "30s",      (how long a plugin has to say hello)
//	  "once": false,                      (exit when a run ends)
//	  "idle_timeout": "0s",               (exit after this long without a working session; 0: never)
//	  "mem_share": 0.5                    (the share of memory a master's problem may need)
//	}
type FileConfig struct {
	Join        AddrList          `json:"join"`
	Master      string            `json:"master"`
	Gossip      string            `json:"gossip"`
	ChildPort   *int              `json:"child_port"`
	KeyFile     string            `json:"key_file"`
	KeyInsecure *bool             `json:"key_file_insecure"`
	Slots       *int              `json:"slots"`
	Name        string            `json:"name"`
	Plugins     map[string]string `json:"plugins"`
	PluginStart string            `json:"plugin_start_timeout"`
	Once        *bool             `json:"once"`
	IdleTimeout string            `json:"idle_timeout"`
	MemShare    *float64          `json:"mem_share"`
}

// AddrList is one address string ("a:1,b:2" as -join takes) or a JSON
// list of them.
type AddrList []string

// UnmarshalJSON reads one address or a list.
func (a *AddrList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = AddrList{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("join: want an address or a list of addresses")
	}
	*a = l
	return nil
}

// Setting is one setting a FileConfig gives, as the esworker flag it
// stands for takes it.
type Setting struct {
	Flag  string // the flag's name
	Key   string // the file's key
	Value string // the value, as the flag's text
}

// Settings returns the settings the file gives (plugins apart), each as
// the value of the flag it stands for, in a fixed order.
func (c *FileConfig) Settings() []Setting {
	var out []Setting
	add := func(flag, key, v string) {
		if v != "" {
			out = append(out, Setting{Flag: flag, Key: key, Value: v})
		}
	}
	add("join", "join", strings.Join(c.Join, ","))
	add("master", "master", c.Master)
	add("gossip", "gossip", c.Gossip)
	add("key-file", "key_file", c.KeyFile)
	add("name", "name", c.Name)
	if c.KeyInsecure != nil {
		add(grid.InsecureKeyFileFlag, "key_file_insecure", strconv.FormatBool(*c.KeyInsecure))
	}
	if c.Slots != nil {
		add("slots", "slots", strconv.Itoa(*c.Slots))
	}
	if c.ChildPort != nil {
		add("child-port", "child_port", strconv.Itoa(*c.ChildPort))
	}
	if c.Once != nil {
		add("once", "once", strconv.FormatBool(*c.Once))
	}
	if c.MemShare != nil {
		add("mem-share", "mem_share", strconv.FormatFloat(*c.MemShare, 'g', -1, 64))
	}
	add("idle-timeout", "idle_timeout", c.IdleTimeout)
	add("plugin-start-timeout", "plugin_start_timeout", c.PluginStart)
	return out
}

// ApplyFlags merges the file under esworker's flags fs: it sets each of
// its settings through its flag (so that a number has the flag's bounds),
// unless the command line set that flag. An error names the file's key
// and value.
func (c *FileConfig) ApplyFlags(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, s := range c.Settings() {
		if set[s.Flag] {
			continue
		}
		f := fs.Lookup(s.Flag)
		if f == nil {
			return fmt.Errorf("%s: no flag -%s", s.Key, s.Flag)
		}
		if err := f.Value.Set(s.Value); err != nil {
			return fmt.Errorf("%s %s: %w", s.Key, s.Value, err)
		}
	}
	return nil
}

// PluginEntries returns the file's plugins in name order, leaving out
// those skip says the command line gives; an invalid name is an error.
func (c *FileConfig) PluginEntries(skip func(name string) bool) ([]plugin.Entry, error) {
	names := make([]string, 0, len(c.Plugins))
	for name := range c.Plugins {
		names = append(names, name)
	}
	slices.Sort(names)
	var entries []plugin.Entry
	for _, name := range names {
		if skip(name) {
			continue
		}
		if err := plugin.CheckName(name); err != nil {
			return nil, err
		}
		entries = append(entries, plugin.Entry{Name: name, Path: c.Plugins[name]})
	}
	return entries, nil
}

// LoadFileConfig reads and checks a -config file: a regular file that no
// one but root and this program's user may change (plugin.CheckWriters:
// the file, its directory and those above), at most 1 MiB, one JSON
// object without unknown fields. Relative paths in it become relative to its directory.
func LoadFileConfig(path string) (*FileConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	// It names the programs this agent runs: whoever may change it may
	// run any program as the worker. The plugins' own rule applies.
	if err := plugin.CheckWriters(path, "the configuration file"); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxConfigBytes)
	}
	if err := strictjson.DuplicateKeys(b); err != nil {
		// encoding/json keeps the last: a second "slots" or "plugins"
		// would win without a word.
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c FileConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", path)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) || !strings.ContainsRune(p, filepath.Separator) && !strings.HasPrefix(p, ".") {
			return p // absolute, or a bare name (a plugin looked up in PATH)
		}
		return filepath.Join(dir, p)
	}
	if c.KeyFile != "" && !filepath.IsAbs(c.KeyFile) {
		c.KeyFile = filepath.Join(dir, c.KeyFile)
	}
	for name, p := range c.Plugins {
		c.Plugins[name] = rel(p)
	}
	return &c, nil
}

// ProbePlugins starts every listed plugin once, reads its hello (within
// hello, as every later start) and stops it, so
// that a plugin that cannot start is reported now, with its stderr,
// rather than when a master needs it. It logs what each plugin says
// about itself.
func ProbePlugins(ctx context.Context, cat *plugin.Catalog, hello time.Duration, log *slog.Logger) error {
	for _, e := range cat.Entries() {
		// Its start counts with the sessions' (the metrics' started).
		h, err := plugin.Probe(ctx, plugin.Config{Name: e.Name, Path: e.Path, Logger: log, StartTimeout: hello, Counters: cat.Counters(e.Name)})
		if err != nil {
			return err
		}
		log.Info("plugin ready", "plugin", e.Name, "path", e.Path, "dims", h.Dims(),
			"lower", h.Lower, "upper", h.Upper, "honours_cancel", h.Cancel)
	}
	return nil
}
