package main

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
	"github.com/esgrid/esgrid/problems/plugin"
)

// maxConfigBytes bounds the -config file.
const maxConfigBytes = 1 << 20

// fileConfig is the -config file: a JSON object with the settings a lab
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
type fileConfig struct {
	Join        addrList          `json:"join"`
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

// addrList is one address string ("a:1,b:2" as -join takes) or a JSON
// list of them.
type addrList []string

func (a *addrList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = addrList{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("join: want an address or a list of addresses")
	}
	*a = l
	return nil
}

// loadConfig reads and checks the -config file.
func loadConfig(path string) (*fileConfig, error) {
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
	if fi.Mode().Perm()&0o002 != 0 {
		// Whoever can write it can make this agent run any program.
		return nil, fmt.Errorf("%s is writable by every user (chmod o-w)", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c fileConfig
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

// applyConfig merges the -config file (if any) under the flags given on
// the command line, and checks the plugin list: -plugin entries are added
// to the file's, replacing a file entry of the same name. It fills
// o.catalog.
func (o *options) applyConfig(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var entries []plugin.Entry
	if o.config != "" {
		c, err := loadConfig(o.config)
		if err != nil {
			return usagef("-config: %v", err)
		}
		take := func(flagName string, dst *string, v string) {
			if !set[flagName] && v != "" {
				*dst = v
			}
		}
		take("join", &o.join, strings.Join(c.Join, ","))
		take("master", &o.master, c.Master)
		take("gossip", &o.gossip, c.Gossip)
		take("key-file", &o.keyFile, c.KeyFile)
		take("name", &o.name, c.Name)
		if !set[grid.InsecureKeyFileFlag] && c.KeyInsecure != nil {
			o.keyAny = *c.KeyInsecure
		}
		// A number in the file has the flag's bounds: it is set
		// through the flag.
		number := func(flagName, key, v string) error {
			if set[flagName] || v == "" {
				return nil
			}
			if err := fs.Lookup(flagName).Value.Set(v); err != nil {
				return usagef("-config %s: %s %s: %v", o.config, key, v, err)
			}
			return nil
		}
		if c.Slots != nil {
			if err := number("slots", "slots", strconv.Itoa(*c.Slots)); err != nil {
				return err
			}
		}
		if c.ChildPort != nil {
			if err := number("child-port", "child_port", strconv.Itoa(*c.ChildPort)); err != nil {
				return err
			}
		}
		if !set["once"] && c.Once != nil {
			o.once = *c.Once
		}
		if c.MemShare != nil {
			if err := number("mem-share", "mem_share", strconv.FormatFloat(*c.MemShare, 'g', -1, 64)); err != nil {
				return err
			}
		}
		if err := number("idle-timeout", "idle_timeout", c.IdleTimeout); err != nil {
			return err
		}
		if err := number("plugin-start-timeout", "plugin_start_timeout", c.PluginStart); err != nil {
			return err
		}
		names := make([]string, 0, len(c.Plugins))
		for name := range c.Plugins {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if slices.ContainsFunc(o.plugins, func(e plugin.Entry) bool { return e.Name == name }) {
				continue // the command line's wins
			}
			if err := plugin.CheckName(name); err != nil {
				return usagef("-config %s: %v", o.config, err)
			}
			entries = append(entries, plugin.Entry{Name: name, Path: c.Plugins[name]})
		}
	}
	entries = append(entries, o.plugins...)
	cat, err := plugin.NewCatalog(entries...)
	if err != nil {
		return usagef("-plugin: %v", err)
	}
	o.catalog = cat
	return nil
}

// probePlugins starts every listed plugin once, reads its hello (within
// hello, -plugin-start-timeout, as every later start) and stops it, so
// that a plugin that cannot start is reported now, with its stderr,
// rather than when a master needs it. It logs what each plugin says
// about itself.
func probePlugins(ctx context.Context, cat *plugin.Catalog, hello time.Duration, log *slog.Logger) error {
	for _, e := range cat.Entries() {
		h, err := plugin.Probe(ctx, plugin.Config{Name: e.Name, Path: e.Path, Logger: log, StartTimeout: hello})
		if err != nil {
			return err
		}
		log.Info("plugin ready", "plugin", e.Name, "path", e.Path, "dims", h.Dims(),
			"lower", h.Lower, "upper", h.Upper, "honours_cancel", h.Cancel)
	}
	return nil
}
